"""Lowering: a graph node -> the device kernels (KernelSpecs) that compute it, with their operands.

Shared by every kernel-compiling device (CUDA, Metal, the emulated CUDA driver). `lower` returns None
for what has no device kernel here; that node then runs on the next backend of the chain. Operands in
a Launch are OUT (the result block), an input position, a small host array the backend uploads for
this launch only (the scatter grouping), a Scratch block the node's launches share, or STATUS (the
device's status buffer).
"""
import math

import numpy as np

from ...kernels import ops
from ...kernels.gpu import elementwise as ew
from ...kernels.gpu import index as gidx
from ...kernels.gpu import layer_norm as glayer_norm
from ...kernels.gpu import matmul as gmm
from ...kernels.gpu import optim as gopt
from ...kernels.gpu import random as grand
from ...kernels.gpu import reduce as gred
from ...kernels.gpu import softmax as gsoftmax
from ...kernels.gpu.spec import ctype, dtype_name, handles
from ...kernels.reference.indexing import check_bounds
from ..residency import is_param

OUT = "out"
STATUS = "status"  # the device's status buffer, where kernels report out-of-range indices


class Scratch:
    """Device memory a node's launches share while they run (a blocked sum's partials): `nbytes` from
    the memory budget, written and read by the kernels only, so no copy is made or logged."""
    __slots__ = ("nbytes",)

    def __init__(self, nbytes):
        self.nbytes = int(nbytes)


class Launch:
    """One kernel launch: the spec, its buffer operands in spec order, where its runtime scalars come
    from (see `scalar_values`), and for index kernels: `check`, (op, axis, size) when the device checks
    the bounds (to name in the error it may report); `host_check`, the same when the host checked them
    on its copy of the indices (operand 1); `host_group`, the destination count when the host grouped
    them (a scatter's `order` and `starts`, operands 2 and 3). Launches that depend on the host's view of
    the indices are remade for other indices by `for_indices`; otherwise a Launch holds no per-call
    values, so it can be reused for every node of the same structure."""
    __slots__ = ("spec", "operands", "scalars", "check", "host_check", "host_group")

    def __init__(self, spec, operands, scalars=(), check=None, host_check=None, host_group=None):
        self.spec, self.operands, self.scalars, self.check = spec, list(operands), list(scalars), check
        self.host_check, self.host_group = host_check, host_group


def for_indices(launches, index):
    """`launches` made valid for `index` (the Buffer of their operand 1, or None): themselves if none
    depends on the host's view of the indices; else, with the host's copy, after checking the bounds
    again (IndexError) and with a scatter's grouping rebuilt; None when the host has no copy (lowering
    anew would have the device check them)."""
    if all(launch.host_check is None and launch.host_group is None for launch in launches):
        return launches
    if index is None or not index.on_host:
        return None
    remade = []
    for launch in launches:
        if launch.host_check is not None:
            op, axis, size = launch.host_check
            check_bounds(op, index.host, size, axis)
        if launch.host_group is not None:
            launch = _scatter_take_launch(launch.spec, index.host, launch.host_group)
        remade.append(launch)
    return remade


def _scatter_take_launch(spec, index, size):
    order, starts = gidx.group_by_destination(index, size)
    return Launch(spec, [OUT, 0, order, starts], host_group=size)


def scalar_values(launch, node, args, tag=0):
    """The launch's scalar values for `node` now: ("operand", k) is the value of 0-d host operand k,
    ("attr", name) an attribute, ("key", i) word i of the node's RNG key, ("tag",) the status tag."""
    values = []
    for source in launch.scalars:
        kind = source[0]
        if kind == "operand":
            values.append(args[source[1]].item())
        elif kind == "attr":
            values.append(node.attrs[source[1]])
        elif kind == "key":
            values.append(grand.key_scalars(node.attrs["seed"], node.attrs["stream"])[source[1]])
        else:
            values.append(tag)
    return values


def rng_key_patches(launches):
    """(launch index, scalar index, key word) of every RNG key word among `launches`' scalars: what a
    compiled replay changes for a fresh random stream (runtime/replay/device_runner.py)."""
    return [(i, j, source[1]) for i, launch in enumerate(launches)
            for j, source in enumerate(launch.scalars) if source[0] == "key"]


def rng_key_words(seed, stream):
    """The words of the RNG key for (seed, stream), as the launches take them."""
    return grand.key_scalars(seed, stream)


_dt = dtype_name
_KERNEL_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool"))


def _scalar_kind(dtype):
    return "f" if np.dtype(dtype).kind == "f" else "i"


def _copy(node, x_shape, x_dtype, strides, offset, out_strides=None, out_offset=0, shape=None):
    shape = node.shape if shape is None else shape
    out = (_dt(node.dtype), out_strides or ew.contiguous_strides(shape), out_offset)
    value = ew.expression("cast", [x_dtype], node.dtype, ["v0"]) if np.dtype(x_dtype) != node.dtype else "v0"
    return ew.strided_map("copy", shape, out, [(_dt(x_dtype), strides, offset)], value)


def _elementwise(node, operands, has_double):
    dts = [b.dtype for b in operands]
    if not ew.supported(node.op, dts, node.dtype, has_double):
        return None
    ins, args, scalars, sources, positions = [], [], [], [], []
    for k, b in enumerate(operands):
        if is_param(b):
            name = f"s{len(scalars)}"
            scalars.append((name, _scalar_kind(b.dtype)))
            sources.append(("operand", k))
            args.append(f"({ctype(b.dtype)}){name}")
        else:
            args.append(f"v{len(ins)}")
            ins.append((_dt(b.dtype), ew.broadcast_strides(b.shape, node.shape), 0))
            positions.append(k)
    value = ew.expression(node.op, dts, node.dtype, args, has_double)
    out = (_dt(node.dtype), ew.contiguous_strides(node.shape), 0)
    spec = ew.strided_map("ew", node.shape, out, ins, value, scalars)
    return [Launch(spec, [OUT] + positions, sources)]


def _slice_geometry(shape, slices):
    strides = ew.contiguous_strides(shape)
    out_strides, offset = [], 0
    for d, s in enumerate(slices):
        start, _, step = slice(*s).indices(shape[d])
        out_strides.append(strides[d] * step)
        offset += start * strides[d]
    return tuple(out_strides), offset


def _movement(node, operands):
    op, a = node.op, node.attrs
    x = operands[0] if operands else None
    if op in ("reshape", "contiguous"):
        return [Launch(_copy(node, x.shape, x.dtype, ew.contiguous_strides(node.shape), 0), [OUT, 0])]
    if op == "permute":
        st = ew.contiguous_strides(x.shape)
        return [Launch(_copy(node, x.shape, x.dtype, tuple(st[d] for d in a["dims"]), 0), [OUT, 0])]
    if op == "expand":
        return [Launch(_copy(node, x.shape, x.dtype, ew.broadcast_strides(x.shape, node.shape), 0), [OUT, 0])]
    if op == "slice":
        strides, offset = _slice_geometry(x.shape, a["slices"])
        squeeze = a.get("squeeze", ())
        strides = tuple(st for d, st in enumerate(strides) if d not in squeeze)
        return [Launch(_copy(node, x.shape, x.dtype, strides, offset), [OUT, 0])]
    if op == "pad_slice":
        zero = ew.strided_map("fill", node.shape, (_dt(node.dtype), ew.contiguous_strides(node.shape), 0), [],
                              f"({ctype(node.dtype)})0")
        strides, offset = _slice_geometry(node.shape, a["slices"])
        place = _copy(node, x.shape, x.dtype, ew.contiguous_strides(x.shape), 0, strides, offset, x.shape)
        return [Launch(zero, [OUT]), Launch(place, [OUT, 0])]
    if op == "place_slices":
        launches = []
        if sum(math.prod(b.shape) for b in operands) < node.size:  # zeros between pieces
            launches.append(Launch(ew.strided_map("fill", node.shape, (_dt(node.dtype), ew.contiguous_strides(
                node.shape), 0), [], f"({ctype(node.dtype)})0"), [OUT]))
        for k, (b, slices) in enumerate(zip(operands, a["slices"])):
            strides, offset = _slice_geometry(node.shape, slices)
            place = _copy(node, b.shape, b.dtype, ew.contiguous_strides(b.shape), 0, strides, offset, b.shape)
            launches.append(Launch(place, [OUT, k]))
        return launches
    if op == "cat":
        axis, launches, start = a["axis"], [], 0
        full = ew.contiguous_strides(node.shape)
        for k, b in enumerate(operands):
            if math.prod(b.shape):
                spec = _copy(node, b.shape, b.dtype, ew.contiguous_strides(b.shape), 0, full,
                             start * full[axis], b.shape)
                launches.append(Launch(spec, [OUT, k]))
            start += b.shape[axis]
        return launches
    if op in ("tril", "triu"):
        r, c = len(node.shape) - 2, len(node.shape) - 1
        keep = f"(i{c} - i{r}) <= {int(a['k'])}LL" if op == "tril" else f"(i{c} - i{r}) >= {int(a['k'])}LL"
        st = ew.contiguous_strides(node.shape)
        spec = ew.strided_map(op, node.shape, (_dt(node.dtype), st, 0), [(_dt(x.dtype), st, 0)],
                              f"({keep} ? v0 : ({ctype(node.dtype)})0)", keep_dims=True)
        return [Launch(spec, [OUT, 0])]
    if op == "full":
        kind = _scalar_kind(node.dtype)
        spec = ew.strided_map("fill", node.shape, (_dt(node.dtype), ew.contiguous_strides(node.shape), 0), [],
                              f"({ctype(node.dtype)})s0", (("s0", kind),))
        return [Launch(spec, [OUT], [("attr", "value")])]
    return None


def _reduce(node, operands, has_double):
    x = operands[0]
    if not gred.supported(node.op, x.dtype, node.dtype, has_double):
        return None
    axes = node.attrs["axes"]
    if gred.blocked(node.op, x.dtype, math.prod([x.shape[d] for d in axes]), has_double):
        first, second, nbytes = gred.blocked_sum(node.op, x.shape, _dt(x.dtype), axes, _dt(node.dtype))
        part = Scratch(nbytes)
        return [Launch(first, [part, 0]), Launch(second, [OUT, part])]
    spec = gred.axis_reduce(node.op, x.shape, _dt(x.dtype), axes, _dt(node.dtype),
                            node.attrs.get("correction", 0), has_double)
    return [Launch(spec, [OUT, 0])]


def _matmul(node, operands, has_double, tiled=None):
    a, b = operands
    sa = (1,) + tuple(a.shape) if len(a.shape) == 1 else tuple(a.shape)
    sb = tuple(b.shape) + (1,) if len(b.shape) == 1 else tuple(b.shape)
    if a.dtype != node.dtype or b.dtype != node.dtype or node.dtype.kind != "f":
        return None
    if not has_double and node.dtype == np.float64:
        return None
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    n, k, m = sa[-2], sa[-1], sb[-1]
    a_st, b_st = gmm.batch_strides(sa, batch), gmm.batch_strides(sb, batch)
    if tiled is not None:
        spec = tiled(batch, n, k, m, a_st, b_st, _dt(node.dtype))
        if spec is not None:
            return [Launch(spec, [OUT, 0, 1])]
    return [Launch(gmm.matmul(batch, n, k, m, a_st, b_st, _dt(node.dtype), has_double), [OUT, 0, 1])]


def _index(node, operands, has_double, device_checks):
    a = node.attrs
    axis = a["axis"]
    if node.dtype.kind != "f" and node.op.startswith("scatter"):
        return None
    index = operands[1]
    host = index.host if index.on_host else None
    if host is None and (not device_checks or node.op == "scatter_take"):
        return None  # bounds are checked (and scatter destinations grouped) on a host copy
    dev = host is None  # the kernel checks the bounds and reports through the status buffer

    def launch(spec, op, size):
        if dev:
            return [Launch(spec, [OUT, 0, 1, STATUS], [("tag",)], (op, axis, size))]
        check_bounds(op, host, size, axis)
        return [Launch(spec, [OUT, 0, 1], host_check=(op, axis, size))]
    if node.op == "take":
        x = operands[0]
        n_index = math.prod(index.shape)
        return launch(gidx.take(x.shape, _dt(x.dtype), n_index, _dt(index.dtype), axis, dev),
                      "index_select", x.shape[axis])
    if node.op == "take_along":
        x = operands[0]
        return launch(gidx.take_along(x.shape, _dt(x.dtype), index.shape, _dt(index.dtype), node.shape, axis, dev),
                      "gather", x.shape[axis])
    if node.op == "scatter_take":
        spec = gidx.scatter_take(a["shape"], _dt(node.dtype), int(host.size), axis, has_double)
        return [_scatter_take_launch(spec, host, a["shape"][axis])]
    if node.op == "scatter_take_along":
        g = operands[0]
        if any(g.shape[d] != node.shape[d] for d in range(len(node.shape)) if d != axis):
            return None
        spec = gidx.scatter_take_along(node.shape, _dt(node.dtype), g.shape, index.shape, _dt(index.dtype),
                                       axis, has_double, dev)
        return launch(spec, "gather", node.shape[axis])
    return None


def _random(node, has_double):
    a = node.attrs
    key = [("key", i) for i in range(4)]
    n, dt = node.size, _dt(node.dtype)
    if node.op == "uniform":
        if not has_double and (dt != "float32" or (a["low"], a["high"]) != (0.0, 1.0)):
            return None  # lo + (hi - lo) * u is exact in float32 only for [0, 1)
        return [Launch(grand.uniform(n, dt), [OUT], key + [("attr", "low"), ("attr", "high")])]
    if node.op == "normal":
        if not has_double:
            return None
        return [Launch(grand.normal(n, dt), [OUT], key + [("attr", "mean"), ("attr", "std")])]
    if node.op == "randint":
        return [Launch(grand.randint(n, dt, a["low"], a["high"]), [OUT], key)]
    return None


def _row_kernel(node, operands, has_double):
    """The one launch of a softmax or layer-norm row kernel, or None where it does not apply: its
    folds (and softmax's transcendentals) are defined in float64, and its operands share its shape."""
    if not has_double or node.dtype.kind != "f":
        return None
    if any(b.dtype != node.dtype or tuple(b.shape) != node.shape for b in operands):
        return None
    if node.op in gsoftmax.OPS:
        spec = gsoftmax.along_axis(node.op, node.shape, node.attrs["axis"], _dt(node.dtype))
    else:
        n = math.prod([node.shape[d] for d in node.attrs["axes"]])
        if n == 0:
            return None
        spec = glayer_norm.rows(node.op, node.size // n, n, _dt(node.dtype), node.attrs["eps"])
    return [Launch(spec, [OUT] + list(range(len(operands))))]


def _adamw(node, operands, has_double):
    if not has_double or node.dtype.kind != "f":
        return None  # the update is defined in float64
    a = node.attrs
    n = math.prod(operands[0].shape)
    scale = _adamw_scale([is_param(b) for b in operands])
    spec = gopt.adamw(n, _dt(node.dtype), a["beta1"], a["beta2"], a["eps"], a["weight_decay"], scale)
    return [Launch(spec, [OUT, 0, 1, 2, 3] + [7] * (scale == "buffer"),
                   [("operand", k) for k in (4, 5, 6) + (7,) * (scale == "scalar")])]


def _adamw_scale(params):
    """How an AdamW kernel reads the gradient's 0-d factor (its optional operand 7, lazytensor/optim.py),
    from which of its operands are host values (parameters): None without one, "scalar" when it is a
    host value, else "buffer"."""
    return None if len(params) < 8 else "scalar" if params[7] else "buffer"


def adamw_in_place(node, params):
    """The launch of AdamW node `node` that writes p', m', v' to operands 0-2 (which may be p, m, v
    themselves) instead of its stacked result; operands 3-6 are p, g, m, v, 7-9 lr, bias1, bias2 and 10
    the gradient's factor where the node has one (`params`: whether each of the node's own operands is
    a host value). The same bytes as `_adamw`'s result unstacked (runtime/replay/device_runner.py uses it)."""
    a = node.attrs
    scale = _adamw_scale(params)
    spec = gopt.adamw_in_place(node.size // 3, _dt(node.dtype), a["beta1"], a["beta2"], a["eps"],
                               a["weight_decay"], scale)
    return Launch(spec, list(range(7)) + [10] * (scale == "buffer"),
                  [("operand", k) for k in (7, 8, 9) + (10,) * (scale == "scalar")])


_DEVICE_OPS = ops.with_kernel("device")
# A full is a strided map of one value, built like the copies.
_MOVEMENT = (ops.names(family="movement") | {"full"}) & _DEVICE_OPS
_INDEX = ops.names(family="index") & _DEVICE_OPS
_RANDOM = ops.names(family="random") & _DEVICE_OPS


# Attributes that change from call to call without changing the kernels (they reach them as scalars).
_VOLATILE = frozenset({"seed", "stream", "value"})
_cache = {}


def _structure(node, operands, has_double, tiled, device_checks):
    """What the launches depend on besides per-call scalars; None when they depend on more (index
    kernels whose indices are checked or grouped on the host)."""
    if node.op in _INDEX and operands[1].on_host:
        return None
    attrs = node.attrs
    items = tuple((k, v) for k, v in attrs.items() if k not in _VOLATILE) if isinstance(attrs, dict) else attrs
    return (node.op, items, node.shape, node.dtype, has_double, tiled, device_checks,
            tuple((b.shape, b.dtype, is_param(b)) for b in operands))


def lower(node, operands, has_double=True, tiled_matmul=None, device_checks=False):
    """The launches computing `node` from operand buffers, or None when this device has no kernel for it.
    `device_checks`: the device has a status buffer, so index kernels may check bounds themselves.
    Results are cached by structure: a training step lowers the same nodes every step."""
    key = _structure(node, operands, has_double, tiled_matmul is not None, device_checks)
    if key is not None:
        try:
            return _cache[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable attribute: lower without the cache
            key = None
    launches = _lower(node, operands, has_double, tiled_matmul, device_checks)
    if key is not None:
        if len(_cache) > 20000:
            _cache.clear()
        _cache[key] = launches
    return launches


def _lower(node, operands, has_double, tiled_matmul, device_checks):
    if node.op not in _DEVICE_OPS or node.size == 0 or any(b.dtype not in _KERNEL_DTYPES for b in operands):
        return None
    if not has_double and node.dtype == np.float64:
        return None
    op = node.op
    if op not in ew.OPS and op != "adamw" and any(is_param(b) for b in operands):
        return None  # only elementwise kernels and the optimizer step take 0-d host values as scalars
    if op in ew.OPS:
        return _elementwise(node, operands, has_double)
    if op in _MOVEMENT:
        return _movement(node, operands)
    if op in gred.OPS:
        return _reduce(node, operands, has_double)
    if op == "matmul":
        return _matmul(node, operands, has_double, tiled_matmul)
    if op in _INDEX:
        return _index(node, operands, has_double, device_checks)
    if op in _RANDOM:
        return _random(node, has_double)
    if op == "adamw":
        return _adamw(node, operands, has_double)
    if op in gsoftmax.OPS or op in glayer_norm.OPS:
        return _row_kernel(node, operands, has_double)
    if op == "sum_of_squares":
        if not has_double or node.dtype.kind != "f" or any(b.dtype != node.dtype for b in operands):
            return None
        sizes = tuple(math.prod(b.shape) for b in operands)
        first, second, nbytes = gopt.sum_of_squares(sizes, _dt(node.dtype))
        part = Scratch(nbytes)
        return [Launch(first, [part] + list(range(len(operands)))), Launch(second, [OUT, part])]
    return None


class LaunchOperand:
    """Shape/dtype/host facts of a launch argument, for lowering a node that was not planned in accepts."""

    def __init__(self, arg):
        self.shape, self.dtype = tuple(arg.shape), np.dtype(arg.dtype)
        self.host = arg if isinstance(arg, np.ndarray) else None
        self.on_host = self.host is not None
        self.identity = self

    @property
    def size(self):
        return math.prod(self.shape)


class LoweringDevice:
    """The mixin of backends that compile `kernels/gpu/` descriptions (CUDA, Metal): what would compute a
    node here is the launches lowering gives (`kernel_for`); the executor hands the chosen ones back
    (`reuse_launches`) for the launch that follows. The class provides `lower(node, operands)` (the
    launches, or None) and `name`."""

    _planned = None
    _last = None  # the launches the last launch ran, when they may be reused (see last_launches)

    def lower(self, node, operands):
        raise NotImplementedError

    def kernel_for(self, node, operands):
        """The launches computing `node` here, or None: no kernel for it (float16/bfloat16 storage is
        cast on the host)."""
        if not handles(node.dtype) or not all(handles(v.dtype) for v in operands):
            return None
        return self.lower(node, operands)

    def planned_launches(self, node, args):
        """The launches `accepts` planned for `node`, else lowered now from the launch arguments."""
        launches = self._planned.pop(node.id, None) if self._planned else None
        if launches is None:
            launches = self.lower(node, [LaunchOperand(a) for a in args])
        # Index launches that hold what the host saw of the indices (a scatter's order), or rely on a
        # check the host made of them, are reused only as `for_indices` remakes them.
        self._last = launches
        return launches

    def last_launches(self):
        return self._last

    def reuse_launches(self, node, launches):
        # Launches take their scalars (RNG keys included) from the node's attrs when they run.
        self._planned = {node.id: launches}
