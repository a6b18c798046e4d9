"""Layer normalization and its gradient over the rows of a C-contiguous (M, K) array: the steps,
roundings and float64 left folds of kernels/reference/layer_norm.py, so the results are
bit-identical to the reference (no transcendental: rsqrt is 1 / sqrt in float64).

Arithmetic runs in the array's dtype (each float32 operation is correctly rounded, as the
reference's per-op rounding); a mean is the float64 fold divided by K, rounded once.
"""
import math

import numba as nb
import numpy as np

from .common import rounded, serial


@nb.njit(cache=True, inline="always")
def _mean(v, cell):
    acc = np.float64(v[0])
    for k in range(1, v.shape[0]):
        acc += np.float64(v[k])
    return rounded(acc / v.shape[0], cell)


@nb.njit(cache=True, inline="always")
def _centered_and_scale(xr, c, eps, cell):
    """c = xr - mean(xr); returns r = rsqrt(mean(c * c) + eps) in the row's dtype. `c` is scratch for
    c * c first (the fold reads it), then holds c."""
    mu = _mean(xr, cell)
    for k in range(xr.shape[0]):
        d = xr[k] - mu
        c[k] = d * d
    var = _mean(c, cell)
    for k in range(xr.shape[0]):
        c[k] = xr[k] - mu
    v = var + eps
    return rounded(1.0 / math.sqrt(np.float64(v)), cell)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_rows(x, out, eps_cell):
    """out = layer_norm of each row of x; eps_cell: eps as a one-element array of x's dtype."""
    cell = np.empty(1, x.dtype)
    eps = eps_cell[0]
    for m in range(x.shape[0]):
        row = out[m]
        r = _centered_and_scale(x[m], row, eps, cell)
        for k in range(x.shape[1]):
            row[k] = row[k] * r


@nb.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_grad_rows(x, g, out, eps_cell):
    """out = ((g - mean(g)) - xhat * mean(g * xhat)) * r per row (g = dL/dxhat)."""
    cell = np.empty(1, x.dtype)
    eps = eps_cell[0]
    xhat = np.empty(x.shape[1], x.dtype)
    for m in range(x.shape[0]):
        row, gr = out[m], g[m]
        r = _centered_and_scale(x[m], xhat, eps, cell)
        for k in range(x.shape[1]):
            xhat[k] = xhat[k] * r
            row[k] = gr[k] * xhat[k]
        b = _mean(row, cell)
        a = _mean(gr, cell)
        for k in range(x.shape[1]):
            row[k] = ((gr[k] - a) - xhat[k] * b) * r


def run(op, axes, eps, arrays, dtype, split=serial):
    """The op over trailing `axes` of same-shape `arrays`, rows in pieces by `split(fn, rows, work)`."""
    shape = arrays[0].shape
    k = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    rows = [np.ascontiguousarray(a, dtype=dtype).reshape(-1, k) for a in arrays]
    out = np.empty(shape, dtype)
    flat = out.reshape(-1, k)
    eps_cell = np.array([eps], dtype)
    kernel = layer_norm_rows if op == "layer_norm" else layer_norm_grad_rows

    def part(lo, hi):
        kernel(*(r[lo:hi] for r in rows), flat[lo:hi], eps_cell)
    split(part, flat.shape[0], 8 * k)
    return out
