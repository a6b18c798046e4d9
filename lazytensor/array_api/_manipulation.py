"""The Array API's manipulation functions, on lazytensor's shape ops."""
import operator

import numpy as np

from .. import creation, shape_ops
from ..errors import normalize_axis
from ..tensor import Tensor
from ._dtypes import copy_of


def _axes(axis, ndim, op):
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (int, np.integer)):
        axis = (axis,)
    out = tuple(normalize_axis(op, a, ndim) for a in axis)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {axis}")
    return out


def broadcast_arrays(*arrays):
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return [a if a.shape == shape else shape_ops.broadcast_to(a, shape) for a in arrays]


def broadcast_to(x, /, shape):
    return shape_ops.broadcast_to(x, tuple(shape))


def concat(arrays, /, *, axis=0):
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    return shape_ops.cat(arrays, dim=axis)


def expand_dims(x, /, axis=0):
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} is out of range for an array of {x.ndim} dims")
    return shape_ops.unsqueeze(x, axis if axis >= 0 else axis + x.ndim + 1)


def flip(x, /, *, axis=None):
    return shape_ops.flip(x, _axes(axis, x.ndim, "flip"))


def moveaxis(x, source, destination, /):
    src = _axes(source, x.ndim, "moveaxis")
    dst = _axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return shape_ops.permute(x, *order)


def permute_dims(x, /, axes):
    axes = tuple(operator.index(a) for a in axes)
    if sorted(normalize_axis("permute_dims", a, x.ndim) for a in axes) != list(range(x.ndim)):
        raise ValueError(f"permute_dims: {axes} is not a permutation of the {x.ndim} axes")
    return shape_ops.permute(x, *axes)


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated `repeats` times along `axis` (all elements flattened when None); an
    array of repeats gives a shape that depends on its values, so it is read on the host."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis("repeat", axis, x.ndim)
    if isinstance(repeats, Tensor):
        counts = repeats.numpy().astype(np.int64).reshape(-1)
        if counts.size == 1:
            repeats = int(counts[0])
        else:
            if counts.size != x.shape[axis] or (counts < 0).any():
                raise ValueError(f"repeat: repeats must be {x.shape[axis]} non-negative counts")
            index = creation.tensor(np.repeat(np.arange(x.shape[axis]), counts))
            return x.index_select(axis, index)
    if repeats < 0:
        raise ValueError(f"repeat: repeats must be non-negative, got {repeats}")
    shape = x.shape
    out = shape_ops.unsqueeze(x, axis + 1)
    out = shape_ops.broadcast_to(out, shape[:axis + 1] + (repeats,) + shape[axis + 1:])
    return out.reshape(*shape[:axis], shape[axis] * repeats, *shape[axis + 1:])


def reshape(x, /, shape, *, copy=None):
    out = x.reshape(*tuple(shape)) if len(tuple(shape)) else x.reshape(())
    return copy_of(out) if copy and out is x else out


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return shape_ops.roll(x.reshape(-1), shift, 0).reshape(*x.shape) if x.ndim else x
    return shape_ops.roll(x, shift, axis)


def squeeze(x, /, axis):
    axes = _axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    return x.reshape(*(n for d, n in enumerate(x.shape) if d not in axes))


def stack(arrays, /, *, axis=0):
    return shape_ops.stack(list(arrays), dim=axis)


def tile(x, repetitions, /):
    return shape_ops.tile(x, tuple(repetitions))


def unstack(x, /, *, axis=0):
    return tuple(shape_ops.unbind(x, normalize_axis("unstack", axis, x.ndim)))
