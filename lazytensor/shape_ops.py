"""Shape ops: reshape, permute/transpose, expand, squeeze/unsqueeze, flatten, cat/stack, split/chunk,
flip/roll, repeat/tile, unbind."""
import functools
import math

from . import dtypes
from .creation import arange
from .errors import normalize_axis
from .grad_mode import is_grad_enabled
from .indexing import narrow
from .tensor import Tensor


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    if all(type(s) is int for s in shape):  # Python ints, as a rule: nothing to convert
        return tuple(shape)
    for s in shape:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"sizes must be integers, got {s!r}")
    return tuple(int(s.__index__()) for s in shape)


def reshape(x, *shape):
    """The same elements in row-major order, in a new shape; one size may be -1."""
    shape = _new_shape(_shape_arg(shape), x.shape)
    if shape == x.shape:
        return x
    source = _view_source(x, "reshape")
    if source is not None:
        return reshape(source, shape)
    return Tensor._from_op("reshape", (x,), {"shape": shape}, shape, x.dtype)


@functools.lru_cache(maxsize=512)  # a step reshapes between a few shapes, over and over
def _new_shape(shape, old):
    """`shape` (ints, one may be -1) for the elements of shape `old`; an error naming the sizes otherwise."""
    if shape.count(-1) > 1:
        raise ValueError(f"reshape: only one dimension can be -1, got {shape}")
    if any(s < -1 for s in shape):
        raise ValueError(f"reshape: invalid size in {shape}")
    n = math.prod(old)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or n % known:
            raise ValueError(f"reshape: cannot reshape tensor of shape {old} ({n} elements) into {shape}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    if math.prod(shape) != n:
        raise ValueError(f"reshape: cannot reshape tensor of shape {old} ({n} elements) into {shape} "
                         f"({math.prod(shape)} elements)")
    return shape


def _pending_without_gradient(x, op):
    """`x`'s node when it is a pending `op` node and `x` records no gradient (a rewrite may then build
    the same value another way), else None."""
    node = x._node
    if node.op != op or node.buffer is not None or (x.requires_grad and is_grad_enabled()):
        return None
    return node


def _view_source(x, op):
    """When `x` is a pending `op` view whose result records no gradient, a handle on the value it views:
    a view of a view is then one view of that value (no node for the middle one; the identity, none at
    all). Views copy nothing observable (a host write to `x` copies first), so only the node count changes."""
    node = _pending_without_gradient(x, op)
    return None if node is None else Tensor(node.inputs[0])


def _product_factors(x):
    """When `x` is a pending product of two matrices, one of them a pending transpose, and it records no
    gradient: handles on its two factors. Its transpose is then the product of the factors' transposes,
    one of which cancels: a weight's gradient `(x.T @ g).T` is computed as `g.T @ x`, in the weight's
    own layout as PyTorch does (its consumers would copy a transposed one), with one node less."""
    node = _pending_without_gradient(x, "matmul")
    if (node is None or any(len(f.shape) != 2 for f in node.inputs)
            or not any(f.op == "permute" and f.buffer is None for f in node.inputs)):
        return None
    return Tensor(node.inputs[0]), Tensor(node.inputs[1])


def permute(x, *dims):
    return _permuted(x, _permutation(_shape_arg(dims), x.ndim))


@functools.lru_cache(maxsize=512)  # a step permutes with a few orders, over and over
def _permutation(dims, ndim):
    """`dims` (ints) as a permutation of range(ndim), negative dims counted from the end; an error naming
    what is wrong otherwise."""
    if len(dims) != ndim:
        raise ValueError(f"permute: got {len(dims)} dims {dims} for a tensor of dimension {ndim}")
    dims = tuple(normalize_axis("permute", d, ndim) for d in dims)
    if sorted(dims) != list(range(ndim)):
        raise ValueError(f"permute: {dims} is not a permutation of the dimensions 0..{ndim - 1}")
    return dims


def _permuted(x, dims):
    """`x` permuted by `dims`, a checked permutation of its dims."""
    if dims == tuple(range(len(dims))):
        return x
    source = _view_source(x, "permute")
    if source is not None:
        inner = x._node.attrs["dims"]  # x's axis i is source's axis inner[i]
        return _permuted(source, tuple(inner[d] for d in dims))
    factors = _product_factors(x) if dims == (1, 0) else None
    if factors is not None:
        a, b = factors  # (a @ b).T is b.T @ a.T: the product written in the transposed layout directly
        return b.mT @ a.mT
    _lay_out_for(x, dims)
    shape = x.shape
    return Tensor._from_op("permute", (x,), {"dims": dims}, tuple(shape[d] for d in dims), x.dtype)


def _lay_out_for(x, dims):
    """When `x` is a pending stack of products (3 or more dims) whose permutation by `dims` keeps one of
    its matrices' axes last: ask its kernel to lay its result out in that order (the node's `layout`),
    so the permuted view is dense and a reshape of it copies nothing (attention's heads merged back, a
    head's gradient placed in q/k/v's). The values are the same in any layout; a host kernel that
    writes strided matrices honours it, the others ignore it."""
    node = x._node
    if node.op == "matmul" and node.buffer is None and len(dims) >= 3 and dims[-1] >= len(dims) - 2:
        node.attrs = {**node.attrs, "layout": dims}


def transpose(x, dim0=None, dim1=None):
    """Swap two dims; with none given, reverse all dims (NumPy's transpose)."""
    if dim0 is None and dim1 is None:
        return _permuted(x, tuple(reversed(range(x.ndim))))
    if dim0 is None or dim1 is None:
        raise TypeError("transpose: pass two dims (or none to reverse all)")
    if type(dim0) is int and type(dim1) is int:
        return _permuted(x, _swapped(dim0, dim1, x.ndim))
    return _permuted(x, _swapped.__wrapped__(dim0, dim1, x.ndim))  # not plain ints (a tensor, say): no cache key


@functools.lru_cache(maxsize=512)
def _swapped(dim0, dim1, ndim):
    """range(ndim) with dims `dim0` and `dim1` swapped (each may count from the end)."""
    dims = list(range(ndim))
    a, b = normalize_axis("transpose", dim0, ndim), normalize_axis("transpose", dim1, ndim)
    dims[a], dims[b] = dims[b], dims[a]
    return tuple(dims)


def matrix_transpose(x):
    if x.ndim < 2:
        raise ValueError(f"mT: needs at least 2 dimensions, got shape {x.shape}")
    return transpose(x, -2, -1)


def broadcast_to(x, shape):
    shape = _shape_arg((shape,) if not isinstance(shape, (list, tuple)) else (tuple(shape),))
    if len(shape) < x.ndim:
        raise ValueError(f"expand: cannot expand shape {x.shape} to the shorter shape {shape}")
    lead = len(shape) - x.ndim
    out = []
    for i, s in enumerate(shape):
        own = x.shape[i - lead] if i >= lead else None
        if s == -1:
            if own is None:
                raise ValueError(f"expand: -1 is not allowed for the new leading dimension {i} in {shape}")
            s = own
        if own is not None and own != s and own != 1:
            raise ValueError(f"expand: cannot expand shape {x.shape} to {shape}: size {own} at "
                             f"dimension {i - lead} is neither 1 nor {s}")
        out.append(s)
    out = tuple(out)
    if out == x.shape:
        return x
    return Tensor._from_op("expand", (x,), {"shape": out}, out, x.dtype)


def expand(x, *sizes):
    return broadcast_to(x, _shape_arg(sizes))


def squeeze(x, dim=None):
    if dim is None:
        dims = {d for d, n in enumerate(x.shape) if n == 1}
    else:
        ds = dim if isinstance(dim, (list, tuple)) else (dim,)
        dims = {normalize_axis("squeeze", d, x.ndim) for d in ds}
        dims = {d for d in dims if x.shape[d] == 1}  # PyTorch leaves non-1 dims alone
    return reshape(x, *(n for d, n in enumerate(x.shape) if d not in dims))


def unsqueeze(x, dim):
    d = normalize_axis("unsqueeze", dim, x.ndim + 1)
    return reshape(x, *(x.shape[:d] + (1,) + x.shape[d:]))


def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        return reshape(x, 1)
    a, b = normalize_axis("flatten", start_dim, x.ndim), normalize_axis("flatten", end_dim, x.ndim)
    if a > b:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    return reshape(x, *(x.shape[:a] + (math.prod(x.shape[a:b + 1]),) + x.shape[b + 1:]))


def contiguous(x):
    """A tensor whose value is laid out densely in row-major order (a copy unless already so)."""
    if x._node.op not in ("permute", "expand", "slice"):
        return x
    return Tensor._from_op("contiguous", (x,), {}, x.shape, x.dtype)


def cat(tensors, dim=0, *, axis=None):
    """Join tensors along an existing dim; all other sizes must match. Dtypes promote."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: needs at least one tensor")
    if any(not isinstance(t, Tensor) for t in tensors):
        raise TypeError("cat: every element must be a Tensor")
    d = axis if axis is not None else dim
    ref = tensors[0]
    if ref.ndim == 0:
        raise ValueError("cat: zero-dimensional tensors cannot be concatenated; use lt.stack")
    d = normalize_axis("cat", d, ref.ndim)
    for i, t in enumerate(tensors):
        if t.ndim != ref.ndim or any(a != b for k, (a, b) in enumerate(zip(t.shape, ref.shape)) if k != d):
            raise ValueError(f"cat: tensor {i} has shape {t.shape}, which does not match {ref.shape} "
                             f"outside dimension {d}")
    if len(tensors) == 1:
        return tensors[0]
    dt = dtypes.promote(*(t.dtype for t in tensors))
    shape = ref.shape[:d] + (sum(t.shape[d] for t in tensors),) + ref.shape[d + 1:]
    return Tensor._from_op("cat", tensors, {"axis": d, "dtype": dt.np}, shape, dt)


def stack(tensors, dim=0, *, axis=None):
    """Join equal-shape tensors along a new dim."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: needs at least one tensor")
    ref = tensors[0].shape
    for i, t in enumerate(tensors):
        if t.shape != ref:
            raise ValueError(f"stack: tensor {i} has shape {t.shape}, expected {ref} like tensor 0")
    d = normalize_axis("stack", axis if axis is not None else dim, len(ref) + 1)
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(x, split_size_or_sections, dim=0):
    """PyTorch's split: an int is the size of each piece (the last may be smaller); a list gives sizes."""
    d = normalize_axis("split", dim, x.ndim)
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split: split size must be positive, got {step}")
        sizes = [min(step, n - i) for i in range(0, n, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(f"split: sizes {sizes} do not add up to {n}, the size of dimension {d}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(x, d, start, s))
        start += s
    return tuple(out)


def chunk(x, chunks, dim=0):
    """Split into `chunks` pieces of ceil(size / chunks) (fewer if the size runs out), as PyTorch does."""
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = normalize_axis("chunk", dim, x.ndim)
    step = max(1, -(-x.shape[d] // chunks))
    return split(x, step, d)


def flip(x, dims):
    """The entries of `x` in reverse order along each of `dims` (a copy, as PyTorch's flip is)."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    out = x
    for d in sorted({normalize_axis("flip", d, x.ndim) for d in dims}):
        if x.shape[d] > 1:
            out = out.index_select(d, arange(x.shape[d] - 1, -1, -1))
    return out if out is not x else x.clone()  # a new tensor even where nothing moves, as PyTorch's


def roll(x, shifts, dims=None):
    """Entries shifted by `shifts` along `dims`, wrapping around; without dims, over the flattened tensor."""
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(*x.shape)
    shifts = (shifts,) if isinstance(shifts, int) else tuple(shifts)
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    if len(shifts) != len(dims):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(dims)} dims")
    out = x
    for shift, dim in zip(shifts, dims):
        d = normalize_axis("roll", dim, x.ndim)
        n = x.shape[d]
        s = shift % n if n else 0
        if s:
            out = cat([narrow(out, d, n - s, s), narrow(out, d, 0, n - s)], d)
    return out if out is not x else x.clone()  # a new tensor even where nothing moves, as PyTorch's


def repeat(x, *sizes):
    """PyTorch's repeat: the tensor tiled sizes[i] times along dim i (leading sizes add new dims)."""
    sizes = _shape_arg(sizes)
    if len(sizes) < x.ndim:
        raise ValueError(f"repeat: {len(sizes)} repeat counts for a tensor of {x.ndim} dims; give at least one "
                         f"per dim")
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    interleaved = tuple(v for n in shape for v in (1, n))
    expanded = tuple(v for r, n in zip(sizes, shape) for v in (r, n))
    return x.reshape(*interleaved).expand(*expanded).reshape(*(r * n for r, n in zip(sizes, shape)))


def tile(x, dims):
    """NumPy's and PyTorch's tile: repeat, with missing leading counts taken as 1."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    return repeat(x, *((1,) * (x.ndim - len(dims)) + dims))


def unbind(x, dim=0):
    """The slices of `x` along `dim`, each without that dim."""
    d = normalize_axis("unbind", dim, x.ndim)
    return tuple(narrow(x, d, i, 1).squeeze(d) for i in range(x.shape[d]))


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors: "ij" (PyTorch's default) or "xy" (NumPy's: the first two swap)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if any(t.ndim != 1 for t in tensors):
        raise ValueError(f"meshgrid: expected 1-D tensors, got shapes {[t.shape for t in tensors]}")
    sizes = [t.shape[0] for t in tensors]
    if indexing == "xy" and len(tensors) >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    grids = []
    for i, t in enumerate(tensors):
        axis = {0: 1, 1: 0}.get(i, i) if indexing == "xy" and len(tensors) >= 2 else i
        shape = [1] * len(tensors)
        shape[axis] = t.shape[0]
        grids.append(t.reshape(*shape).expand(*sizes))
    return tuple(grids)
