"""Scans and orderings along one axis: running sums and products, and the positions that sort."""
import numpy as np


def _wide(dtype):
    """float64 for floats, complex128 for complex, uint64 for unsigned, int64 for the rest."""
    return {"f": np.float64, "c": np.complex128, "u": np.uint64}.get(np.dtype(dtype).kind, np.int64)


def cumsum(attrs, x):
    """Running sum along `axis`, a left fold in float64 (int64 for integers and bools, complex128 for
    complex), rounded once per element to the result dtype."""
    wide = _wide(attrs["dtype"])
    return np.cumsum(x, axis=attrs["axis"], dtype=wide).astype(attrs["dtype"], copy=False)


def cumprod(attrs, x):
    """Running product along `axis`, a left fold in float64 (int64 for integers and bools), rounded
    once per element to the result dtype."""
    wide = _wide(attrs["dtype"])
    with np.errstate(over="ignore"):  # a product beyond the result dtype's range rounds to infinity
        return np.cumprod(x, axis=attrs["axis"], dtype=wide).astype(attrs["dtype"], copy=False)


def cumprod_grad(attrs, x, g):
    """cumprod's gradient with respect to x, exact where x has zeros: for y_j = x_0 ... x_j,
    dL/dx_i = P_i * S_i with P_i = x_0 ... x_(i-1) and S_i = g_i + x_(i+1) * S_(i+1) (no division), in
    float64, rounded once."""
    axis = attrs["axis"]
    xs = np.moveaxis(x.astype(np.float64), axis, -1)
    gs = np.moveaxis(g.astype(np.float64), axis, -1)
    n = xs.shape[-1]
    prefix = np.ones_like(xs)
    if n > 1:
        prefix[..., 1:] = np.cumprod(xs[..., :-1], axis=-1)
    tail = np.empty_like(gs)
    if n:
        tail[..., n - 1] = gs[..., n - 1]
    for i in range(n - 2, -1, -1):
        tail[..., i] = gs[..., i] + xs[..., i + 1] * tail[..., i + 1]
    return np.moveaxis(prefix * tail, -1, axis).astype(attrs["dtype"], copy=False)


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


SCAN_KERNELS = {"cumsum": cumsum, "cumprod": cumprod, "cumprod_grad": cumprod_grad, "argsort": argsort}
