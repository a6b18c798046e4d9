"""The Array API's searching, sorting, set and indexing functions. nonzero and the unique_* functions
give shapes that depend on the values, so they read their input on the host (listed in the docs);
the others stay lazy."""
import collections

import numpy as np

from .. import creation, dtypes, indexing, reductions, sorting
from ..errors import normalize_axis
from ..runtime import hostio
from ._host import host_call

UniqueAll = collections.namedtuple("UniqueAll", ["values", "indices", "inverse_indices", "counts"])
UniqueCounts = collections.namedtuple("UniqueCounts", ["values", "counts"])
UniqueInverse = collections.namedtuple("UniqueInverse", ["values", "inverse_indices"])


def argmax(x, /, *, axis=None, keepdims=False):
    out = reductions.argmax(x, dim=axis)
    return _kept(out, x, axis) if keepdims else out


def argmin(x, /, *, axis=None, keepdims=False):
    out = reductions.argmin(x, dim=axis)
    return _kept(out, x, axis) if keepdims else out


def _kept(out, x, axis):
    if axis is None:
        return out.reshape(*(1,) * x.ndim)
    axis = normalize_axis("argmax", axis, x.ndim)
    return out.reshape(*x.shape[:axis], 1, *x.shape[axis + 1:])


def _host(x, why):
    return hostio.host_array(x._node, why)


def nonzero(x, /):
    """The positions of the nonzero elements, one int64 array per axis (reads x on the host)."""
    if x.ndim == 0:
        raise ValueError("nonzero: not defined for a 0-d array; reshape it to 1-d first")
    return tuple(creation.tensor(p.astype(np.int64)) for p in np.nonzero(_host(x, "nonzero")))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Where each value of x2 would go in the sorted 1-d x1 (lazy; computed by NumPy on the host)."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if x1.ndim != 1:
        raise ValueError(f"searchsorted: x1 must be 1-d, got shape {x1.shape}")
    if sorter is not None:
        x1 = x1[sorter]
    common = dtypes.promote(x1.dtype, x2.dtype)
    return host_call(np.searchsorted, (x1.to(common), x2.to(common)), x2.shape, dtypes.int64, side=side)


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return sorting.argsort(x, dim=axis, descending=descending, stable=stable)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    return sorting.sort(x, dim=axis, descending=descending, stable=stable).values


def _unique(x):
    return np.unique_all(_host(x, "unique"))


def unique_all(x, /):
    """Distinct values (sorted; every NaN distinct), first positions, inverse indices, counts."""
    u = _unique(x)
    return UniqueAll(creation.tensor(u.values), creation.tensor(u.indices.astype(np.int64)),
                     creation.tensor(u.inverse_indices.astype(np.int64).reshape(x.shape)),
                     creation.tensor(u.counts.astype(np.int64)))


def unique_counts(x, /):
    u = _unique(x)
    return UniqueCounts(creation.tensor(u.values), creation.tensor(u.counts.astype(np.int64)))


def unique_inverse(x, /):
    u = _unique(x)
    return UniqueInverse(creation.tensor(u.values), creation.tensor(u.inverse_indices.astype(np.int64)
                                                                    .reshape(x.shape)))


def unique_values(x, /):
    return creation.tensor(_unique(x).values)


def isin(x1, x2, /, *, invert=False):
    """Whether each element of x1 is among x2's (a later revision's function; lazy, NumPy on the host)."""
    x1 = x1 if hasattr(x1, "_node") else creation.tensor(x1)
    x2 = x2 if hasattr(x2, "_node") else creation.tensor(x2)
    return host_call(np.isin, (x1, x2), x1.shape, dtypes.bool_, invert=invert)


def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for an array of {x.ndim} dims")
        axis = 0
    return indexing.index_select(x, axis, indices)


def take_along_axis(x, indices, /, *, axis=-1):
    return indexing.take_along_axis(x, indices, axis)
