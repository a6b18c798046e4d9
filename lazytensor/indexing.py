"""Subscripts and index-driven ops: t[...] reads and writes, narrow, index_select, gather, masked_fill, tril."""
import operator

import numpy as np

from . import dtypes, grad_mode
from .creation import full, tensor
from .elementwise import as_tensor_operand, broadcast_shapes, scalar, where
from .errors import normalize_axis
from .runtime import hostio
from .tensor import Tensor


def _check_index_tensor(op, index):
    if index.dtype == dtypes.bool_:
        raise TypeError(f"{op}: boolean mask indexing has a data-dependent shape and is not supported "
                        f"lazily; use lt.where(mask, x, y) or x.masked_fill(mask, value)")
    if index.dtype.is_floating_point:
        raise TypeError(f"{op}: index tensors must be integer tensors, got {index.dtype}")


def _check_known_bounds(op, index, size, axis, negative=True):
    """Check an index tensor whose value is already on the host, so errors appear at the user's line.
    `negative`: whether -size..-1 count from the end (NumPy), or are out of range (embeddings)."""
    arr = hostio.peek_host(index._node)
    if arr is None or arr.size == 0:
        return
    lo, hi = int(arr.min()), int(arr.max())
    for value in (lo, hi):
        if not (-size if negative else 0) <= value < size:
            raise IndexError(f"{op}: index {value} is out of range for dimension {axis} with size {size}")


def _as_index(op, k):
    if isinstance(k, (list, np.ndarray)):
        k = tensor(k, dtype=None if np.asarray(k).size else dtypes.int64)
    _check_index_tensor(op, k)
    return k


def _normalize_key(x, key):
    """Expand `...`, classify items; returns (items, has_advanced). Raises IndexError for bad keys."""
    if not isinstance(key, tuple):
        key = (key,)
    key = _masks_as_positions(x, key)
    items = []
    for k in key:
        if k is None or k is Ellipsis or isinstance(k, slice):
            items.append(k)
        elif isinstance(k, (Tensor, list, np.ndarray)):
            items.append(_as_index("index", k))
        elif isinstance(k, (bool, np.bool_)):
            raise TypeError("index: a Python bool is not a valid index; use an integer or a slice")
        elif hasattr(k, "__index__"):
            items.append(int(k.__index__()))
        else:
            raise TypeError(f"index: invalid index {k!r} of type {type(k).__name__}; use integers, slices, "
                            f"None, ..., or integer tensors")
    if sum(k is Ellipsis for k in items) > 1:
        raise IndexError("index: an index can only have a single ellipsis ('...')")
    consuming = sum(1 for k in items if k is not None and k is not Ellipsis)
    if consuming > x.ndim:
        raise IndexError(f"index: too many indices for a tensor of dimension {x.ndim}: {consuming} given")
    fill = [slice(None)] * (x.ndim - consuming)
    pos = next((i for i, k in enumerate(items) if k is Ellipsis), None)
    if pos is not None:
        items = items[:pos] + fill + items[pos + 1:]
    else:
        items = items + fill
    axis = 0
    for i, k in enumerate(items):
        if k is None:
            continue
        n = x.shape[axis]
        if isinstance(k, int):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of range for dimension {axis} with size {n}")
            items[i] = k % n
        elif isinstance(k, Tensor):
            _check_known_bounds("index", k, n, axis)
        axis += 1
    return items, any(isinstance(k, Tensor) for k in items)


def _mask_value(k):
    """The host value of a boolean mask index (read from the device if need be), or None."""
    if isinstance(k, Tensor) and k.dtype == dtypes.bool_:
        return hostio.host_array(k._node, "mask")
    if isinstance(k, np.ndarray) and k.dtype == np.bool_:
        return k
    if isinstance(k, list) and k and all(isinstance(v, (bool, np.bool_)) for v in k):
        return np.asarray(k)
    return None


def _masks_as_positions(x, key):
    """Boolean masks in a key become the integer positions of their True entries, NumPy's meaning (a
    mask of k dims indexes k dims, whose sizes it must have). The result's shape depends on the mask's
    values, so a mask tensor is read on the host here (a "host-read:mask" download from a device)."""
    masks = [_mask_value(k) for k in key]
    if all(m is None for m in masks):
        return key
    width = [0 if k is None or k is Ellipsis else (m.ndim if m is not None else 1) for k, m in zip(key, masks)]
    ellipsis = next((i for i, k in enumerate(key) if k is Ellipsis), None)
    out = []
    for i, (k, m) in enumerate(zip(key, masks)):
        if m is None:
            out.append(k)
            continue
        if m.ndim == 0:
            raise IndexError("index: a 0-d boolean mask must be the whole index")
        start = sum(width[:i]) if ellipsis is None or i < ellipsis else x.ndim - sum(width[i:])
        dims = tuple(x.shape[start:start + m.ndim])
        # each mask dimension has the size it indexes, or 0 (which selects nothing)
        if len(dims) != m.ndim or not all(size in (n, 0) for n, size in zip(dims, m.shape)):
            raise IndexError(f"index: a boolean mask of shape {m.shape} does not match the dimensions "
                             f"{dims} it indexes (from dimension {start})")
        out.extend(tensor(p) for p in np.nonzero(m))
    return tuple(out)


def _slice_triple(s, n):
    start, stop, step = s.indices(n)
    length = len(range(start, stop, step))
    if length == 0 and step < 0:  # nothing selected, and the start may be -1 here ("the last" to NumPy)
        return (0, 0, 1), 0
    # A negative step that runs to the front yields stop == -1, which NumPy would read as "the last".
    return (start, None if stop < 0 else stop, step), length


def getitem(x, key):
    """t[key]: an element read when every axis gets an integer, else a lazy sub-tensor (a boolean
    mask's positions are read on the host first)."""
    mask = _mask_value(key) if not isinstance(key, tuple) else None
    if mask is not None and mask.ndim == 0:  # x[True] is x[None]; x[False] is x[None][:0]
        out = getitem(x, (None,))
        return out if mask else getitem(out, slice(0, 0))
    items, advanced = _normalize_key(x, key)
    if all(isinstance(k, int) for k in items) and len(items) == x.ndim:
        return _element(x, items)
    if advanced:
        return _advanced(x, items)
    slices, shape, axis = [], [], 0
    for k in items:
        if k is None:
            shape.append(1)
            continue
        n = x.shape[axis]
        if isinstance(k, int):
            slices.append((k, k + 1, 1))
        else:
            triple, length = _slice_triple(k, n)
            slices.append(triple)
            shape.append(length)
        axis += 1
    out = x
    if any(s != (0, n, 1) for s, n in zip(slices, x.shape)):
        sliced = tuple(len(range(s[0], -1 if s[1] is None else s[1], s[2])) for s in slices)
        attrs = {"slices": tuple(slices)}
        squeeze = tuple(d for d, k in enumerate(k for k in items if k is not None) if isinstance(k, int))
        if squeeze and None not in items:  # the integers' axes dropped by the same copy (x[i]: one node)
            attrs["squeeze"] = squeeze
            sliced = tuple(shape)
        out = Tensor._from_op("slice", (x,), attrs, sliced, x.dtype)
    return out.reshape(*shape)


def _element(x, items):
    """x[i, j, ...] with an integer on every axis: a host read (the source is downloaded once) whose 0-d
    result keeps its place in the gradient graph, as the slice that picks it would."""
    value = hostio.host_array(x._node, "getitem")[tuple(items)]
    out = Tensor(hostio.data_node(np.array(value, dtype=x._node.dtype), exclusive=True))
    if x.requires_grad:
        slices = tuple((k, k + 1, 1) for k in items)
        grad_mode.record(out, "slice", (x,), {"slices": slices, "squeeze": tuple(range(x.ndim))})
    return out


def row(x, i):
    """x[i] for an int 0 <= i < x.shape[0] without parsing a key: the slice node `x[i]` builds (one copy
    on a device that drops the axis), lazy for a vector too (where x[i] reads the element). The
    optimizers unpack their fused results with it."""
    slices = ((i, i + 1, 1),) + tuple((0, n, 1) for n in x.shape[1:])
    return Tensor._from_op("slice", (x,), {"slices": slices, "squeeze": (0,)}, x.shape[1:], x.dtype)


def _advanced(x, items):
    """NumPy advanced indexing (integer tensors mixed with ints/slices/None) as one `index` node."""
    inputs, key, dummies = [x], [], []
    for k in items:
        if isinstance(k, Tensor):
            key.append(("input", len(inputs) - 1))
            inputs.append(k)
            dummies.append(np.zeros(k.shape, dtype=np.intp))
        else:
            key.append(k)
    # The result shape is NumPy's own answer on a zero-stride stand-in of the same shape.
    stand_in = np.lib.stride_tricks.as_strided(np.zeros(1, np.bool_), shape=x.shape, strides=(0,) * x.ndim)
    it = iter(dummies)
    try:
        shape = stand_in[tuple(next(it) if isinstance(k, tuple) else k for k in key)].shape
    except IndexError as exc:
        raise IndexError(f"index: {exc}") from None
    return Tensor._from_op("index", inputs, {"key": tuple(key)}, shape, x.dtype)


def setitem(x, key, value):
    """t[key] = value on the host (value semantics: earlier derived tensors keep their old values)."""
    if not isinstance(key, tuple):
        key = (key,)
    host_key = tuple(hostio.host_array(k._node, "setitem") if isinstance(k, Tensor) else k for k in key)
    if isinstance(value, Tensor):
        value = hostio.host_array(value._node, "setitem")
    x._node = hostio.write_items(x._node, host_key, value)


def narrow(x, dim, start, length):
    """The sub-tensor of `length` entries from `start` along `dim` (lazy, no copy)."""
    d = normalize_axis("narrow", dim, x.ndim)
    n = x.shape[d]
    try:
        start, length = operator.index(start), operator.index(length)
    except TypeError:
        raise TypeError(f"narrow: start and length must be integers, got {start!r} and {length!r}") from None
    if start < 0:
        start += n
    if not (0 <= start <= n and 0 <= length and start + length <= n):
        raise IndexError(f"narrow: start {start} and length {length} do not fit dimension {d} of size {n}")
    if start == 0 and length == n:
        return x
    # the node x[..., start:start + length, ...] builds, without parsing a key (split makes one per piece)
    slices = tuple((start, start + length, 1) if i == d else (0, m, 1) for i, m in enumerate(x.shape))
    return Tensor._from_op("slice", (x,), {"slices": slices}, x.shape[:d] + (length,) + x.shape[d + 1:], x.dtype)


def embedding_rows(weight, index):
    """Rows of `weight` at `index`, PyTorch's embedding: a negative index is an error, not a count from
    the end (checked here when the indices' values are on the host, as a batch made from data is)."""
    index = _as_index("embedding", index)
    _check_known_bounds("embedding", index, weight.shape[0], 0, negative=False)
    return index_select(weight, 0, index)


def index_select(x, dim, index):
    """Entries of `x` at `index` along `dim` (any-shape integer index; an embedding lookup for dim 0)."""
    index = _as_index("index_select", index)
    d = normalize_axis("index_select", dim, x.ndim)
    _check_known_bounds("index_select", index, x.shape[d], d)
    shape = x.shape[:d] + index.shape + x.shape[d + 1:]
    return Tensor._from_op("take", (x, index), {"axis": d}, shape, x.dtype)


def take_along_axis(x, indices, axis):
    """NumPy's take_along_axis: same ndim, other dims broadcast."""
    indices = _as_index("take_along_axis", indices)
    d = normalize_axis("take_along_axis", axis, x.ndim)
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices have {indices.ndim} dims {indices.shape} but the "
                         f"tensor has {x.ndim} {x.shape}; they must have the same number")
    a = tuple(1 if i == d else n for i, n in enumerate(x.shape))
    b = tuple(1 if i == d else n for i, n in enumerate(indices.shape))
    shape = list(broadcast_shapes("take_along_axis", a, b))
    shape[d] = indices.shape[d]
    _check_known_bounds("take_along_axis", indices, x.shape[d], d)
    return Tensor._from_op("take_along", (x, indices), {"axis": d}, tuple(shape), x.dtype)


def gather(x, dim, index):
    """PyTorch's gather: out[i][j] = x[index[i][j]][j] for dim 0; index.size(k) <= x.size(k) for k != dim."""
    index = _as_index("gather", index)
    d = normalize_axis("gather", dim, x.ndim)
    if index.ndim != x.ndim:
        raise ValueError(f"gather: index has {index.ndim} dims {index.shape} but the tensor has "
                         f"{x.ndim} {x.shape}; they must have the same number")
    for k, (ni, nx) in enumerate(zip(index.shape, x.shape)):
        if k != d and ni > nx:
            raise ValueError(f"gather: index size {ni} at dimension {k} exceeds the tensor's size {nx} "
                             f"(index shape {index.shape}, tensor shape {x.shape})")
    key = tuple(slice(None) if k == d else slice(0, ni) for k, ni in enumerate(index.shape))
    return take_along_axis(getitem(x, key), index, d)


def masked_fill(x, mask, value):
    """`x` with `value` where `mask` is True; the result keeps x's shape and dtype."""
    mask = as_tensor_operand(mask)
    if mask is None or mask.dtype != dtypes.bool_:
        raise TypeError(f"masked_fill: mask must be a bool tensor, got {getattr(mask, 'dtype', type(mask))}")
    if broadcast_shapes("masked_fill", x.shape, mask.shape) != x.shape:
        raise ValueError(f"masked_fill: mask of shape {mask.shape} does not broadcast to the tensor's "
                         f"shape {x.shape}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise ValueError(f"masked_fill: value must be a number or a 0-d tensor, got shape {value.shape}")
        fill = value.to(x.dtype)
    else:
        fill = scalar(value, x.dtype)
    return where(mask, fill, x)


def _tri(op, x, diagonal):
    if x.ndim < 2:
        raise ValueError(f"{op}: needs at least 2 dimensions, got shape {x.shape}")
    return Tensor._from_op(op, (x,), {"k": int(diagonal)}, x.shape, x.dtype)


def tril(x, diagonal=0):
    """Zero everything above the `diagonal`-th diagonal of the last two dims."""
    return _tri("tril", x, diagonal)


def triu(x, diagonal=0):
    """Zero everything below the `diagonal`-th diagonal of the last two dims."""
    return _tri("triu", x, diagonal)


def index_add(x, dim, index, source, *, alpha=1):
    """PyTorch's index_add: x with source's slices added at the 1-D `index` along `dim` (repeated
    indices add up); differentiable in x and source."""
    index = _as_index("index_add", index)
    d = normalize_axis("index_add", dim, x.ndim)
    if index.ndim != 1:
        raise ValueError(f"index_add: index must be 1-D, got shape {index.shape}")
    want = x.shape[:d] + index.shape + x.shape[d + 1:]
    if source.shape != want:
        raise ValueError(f"index_add: source must have shape {want} (x's, with {index.shape[0]} along dim {d}), "
                         f"got {source.shape}")
    _check_known_bounds("index_add", index, x.shape[d], d, negative=False)
    added = Tensor._from_op("scatter_take", (source, index), {"axis": d, "shape": x.shape}, x.shape, source.dtype)
    return x + (added if alpha == 1 else added * alpha)


def _scatter_source(op, x, d, index, src):
    """The part of `src` a scatter along dim `d` reads (index's shape), after PyTorch's checks: index
    has x's dims, is no larger than src (nor than x off `d`), and its known values are in range."""
    if not index.ndim == src.ndim == x.ndim or any(
            index.shape[k] > src.shape[k] or (k != d and index.shape[k] > x.shape[k]) for k in range(x.ndim)):
        raise ValueError(f"{op}: index {index.shape} must have the dims of x {x.shape} and src "
                         f"{src.shape} and be no larger than src (nor than x off dim {d})")
    _check_known_bounds(op, index, x.shape[d], d, negative=False)
    return src if src.shape == index.shape else src[tuple(slice(0, n) for n in index.shape)]


def scatter(x, dim, index, src=None, *, value=None, reduce=None):
    """PyTorch's scatter: x with `src` (a tensor of x's dtype, or a Python number `value`) written at
    `index` along `dim`; for dim 0, out[index[i][j]][j] = src[i][j]. Where positions repeat, the last
    in index's row-major order wins (PyTorch leaves it unspecified). Differentiable in x and src."""
    if reduce is not None:
        if reduce == "add":
            return scatter_add(x, dim, index, src if isinstance(src, Tensor) else full(index.shape, src, dtype=x.dtype))
        raise NotImplementedError(f"scatter: reduce={reduce!r} is not supported; use reduce='add' "
                                  f"(or scatter_add), or compute the products explicitly")
    if src is None and value is None:
        raise TypeError("scatter: give src (a tensor) or value (a number)")
    index = _as_index("scatter", index)
    d = normalize_axis("scatter", dim, x.ndim)
    if not isinstance(src, Tensor):
        src = full(index.shape, value if src is None else src, dtype=x.dtype)
    elif src.dtype != x.dtype:
        raise TypeError(f"scatter: src has dtype {src.dtype} but x has {x.dtype}; cast it with src.to(x.dtype)")
    src = _scatter_source("scatter", x, d, index, src)
    return Tensor._from_op("scatter_along", (x, src, index), {"axis": d}, x.shape, x.dtype)


def scatter_add(x, dim, index, src):
    """PyTorch's scatter_add: for dim 0, out[index[i][j]][j] += src[i][j] (repeated indices add up);
    index has x's number of dims and is no larger than src (or than x off `dim`)."""
    index = _as_index("scatter_add", index)
    d = normalize_axis("scatter_add", dim, x.ndim)
    src = _scatter_source("scatter_add", x, d, index, src)
    added = Tensor._from_op("scatter_take_along", (src, index), {"axis": d, "shape": x.shape}, x.shape, src.dtype)
    return x + added
