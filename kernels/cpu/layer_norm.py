"""Layer normalization and its gradient over the rows of a C-contiguous (M, K) array: the steps,
roundings and float64 left folds of kernels/reference/layer_norm.py, so the results are
bit-identical to the reference (no transcendental: rsqrt is 1 / sqrt in float64).

Arithmetic runs in the array's dtype (each float32 operation is correctly rounded, as the
reference's per-op rounding); a mean is the float64 fold divided by K, rounded once. Rows go in blocks
of sixteen whose folds run side by side (each row's still in order): one fold alone waits on the
latency of every addition.
"""
import math

import numba as nb
import numpy as np

from . import host_cache
from .common import one_piece, rounded
from .reduce import sum_rows


_BLOCK = 16  # rows per block: reduce.sum_rows folds them side by side (each still in order)


@nb.njit(cache=True, inline="always")
def _means(rows, totals, means, cell):
    """means[i] = the float64 left fold of rows[i] divided by K, rounded to the rows' dtype."""
    sum_rows(rows, totals)
    for i in range(rows.shape[0]):
        means[i] = rounded(totals[i] / rows.shape[1], cell)


@nb.njit(cache=True, inline="always")
def _scales(x, squares, totals, mu, r, eps, cell):
    """mu = the rows' means, r = rsqrt(mean((x - mu)^2) + eps) in the rows' dtype; `squares` is scratch."""
    _means(x, totals, mu, cell)
    for i in range(x.shape[0]):
        for k in range(x.shape[1]):
            d = x[i, k] - mu[i]
            squares[i, k] = d * d
    _means(squares, totals, r, cell)
    for i in range(x.shape[0]):
        v = r[i] + eps
        r[i] = rounded(1.0 / math.sqrt(np.float64(v)), cell)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_rows(x, out, eps_cell):
    """out = layer_norm of each row of x; eps_cell: eps as a one-element array of x's dtype."""
    cell = np.empty(1, x.dtype)
    eps = eps_cell[0]
    totals = np.empty(_BLOCK, np.float64)
    mu, r = np.empty(_BLOCK, x.dtype), np.empty(_BLOCK, x.dtype)
    for lo in range(0, x.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, x.shape[0])
        xb, ob = x[lo:hi], out[lo:hi]
        _scales(xb, ob, totals, mu, r, eps, cell)
        for i in range(hi - lo):
            for k in range(x.shape[1]):
                ob[i, k] = (xb[i, k] - mu[i]) * r[i]


@nb.njit(nogil=True, cache=True, error_model="numpy")
def layer_norm_grad_rows(x, g, out, eps_cell):
    """out = ((g - mean(g)) - xhat * mean(g * xhat)) * r per row (g = dL/dxhat)."""
    cell = np.empty(1, x.dtype)
    eps = eps_cell[0]
    totals = np.empty(_BLOCK, np.float64)
    mu, r = np.empty(_BLOCK, x.dtype), np.empty(_BLOCK, x.dtype)
    a, b = np.empty(_BLOCK, x.dtype), np.empty(_BLOCK, x.dtype)
    xhat = np.empty((_BLOCK, x.shape[1]), x.dtype)
    for lo in range(0, x.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, x.shape[0])
        xb, gb, ob, xh = x[lo:hi], g[lo:hi], out[lo:hi], xhat[:hi - lo]
        _scales(xb, xh, totals, mu, r, eps, cell)
        for i in range(hi - lo):
            for k in range(x.shape[1]):
                xh[i, k] = (xb[i, k] - mu[i]) * r[i]
                ob[i, k] = gb[i, k] * xh[i, k]
        _means(ob, totals, b, cell)
        _means(gb, totals, a, cell)
        for i in range(hi - lo):
            for k in range(x.shape[1]):
                ob[i, k] = ((gb[i, k] - a[i]) - xh[i, k] * b[i]) * r[i]


@nb.njit(parallel=True, nogil=True, cache=True)
def layer_norm_rows_in_pieces(x, out, eps_cell, bounds):
    """layer_norm_rows over the pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        layer_norm_rows(x[lo:hi], out[lo:hi], eps_cell)


@nb.njit(parallel=True, nogil=True, cache=True)
def layer_norm_grad_rows_in_pieces(x, g, out, eps_cell, bounds):
    """layer_norm_grad_rows over the pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        layer_norm_grad_rows(x[lo:hi], g[lo:hi], out[lo:hi], eps_cell)


# op -> (the kernel, its parallel form)
KERNELS = {"layer_norm": (layer_norm_rows, layer_norm_rows_in_pieces),
           "layer_norm_grad": (layer_norm_grad_rows, layer_norm_grad_rows_in_pieces)}


def run(op, axes, eps, arrays, dtype, pieces=one_piece):
    """The op over trailing `axes` of same-shape `arrays`, rows in the pieces `pieces(rows, work)` gives."""
    shape = arrays[0].shape
    k = math.prod([shape[d] for d in axes])
    rows = [np.ascontiguousarray(a, dtype=dtype).reshape(-1, k) for a in arrays]
    out = host_cache.empty(shape, dtype)
    flat = out.reshape(-1, k)
    eps_cell = np.array([eps], dtype)
    whole, in_pieces = KERNELS[op]
    bounds = pieces(flat.shape[0], 8 * k)
    if bounds is None:
        whole(*rows, flat, eps_cell)
    else:
        in_pieces(*rows, flat, eps_cell, bounds)
    return out
