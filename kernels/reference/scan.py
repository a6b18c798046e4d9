"""Scans and orderings along one axis: running sums, and the positions that sort."""
import numpy as np


def cumsum(attrs, x):
    """Running sum along `axis`, a left fold in float64 (int64 for integers and bools), rounded once per
    element to the result dtype."""
    wide = np.float64 if np.dtype(attrs["dtype"]).kind == "f" else np.int64
    return np.cumsum(x, axis=attrs["axis"], dtype=wide).astype(attrs["dtype"], copy=False)


def argsort(attrs, x):
    """Positions that sort `x` along `axis`, stable: equal values keep their order, ascending or
    descending. NaN counts as the largest value (last ascending, first descending), as in PyTorch."""
    axis = attrs["axis"]
    if not attrs["descending"]:
        return np.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    # Sort the reversed array ascending (stable), map back, reverse: descending with ties in order.
    n = x.shape[axis]
    order = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(n - 1 - order, axis).astype(np.int64, copy=False)


SCAN_KERNELS = {"cumsum": cumsum, "argsort": argsort}
