"""Softmax, log-softmax and their gradients over the rows of a C-contiguous (M, K) array, one pass
structure per row: the same steps, roundings and float64 left folds as kernels/reference/softmax.py,
but for float32 softmax and log-softmax rows of 16 or more, whose maximum and Σ run in lanes
(kernels/cpu/lanes.py).

Arithmetic runs in the array's dtype (each float32 operation is correctly rounded, as the reference's
per-op rounding); exp of float32 values is `exp_in_float32` (computed in float32, within one float32
unit of the reference; its loop runs eight lanes wide), of float64 values libm's; log is libm's. So
results are within a few units of the reference, not bit-identical (docs/NUMERICS.md).
"""
import math

import numba as nb
import numpy as np

from . import host_cache
from .common import one_piece, rounded
from .lanes import LANES, lane_max, lane_sum
from .reduce import sum_rows
from .special32 import exp_in_float32


@nb.njit(cache=True, inline="always")
def _row_max(x, m, cell):
    """The row's maximum as the reference's amax has it (NaN if the row holds a NaN)."""
    best = x[m, 0]
    nan = False
    for k in range(1, x.shape[1]):  # selects, not branches: LLVM vectorizes this loop
        v = x[m, k]
        best = v if v > best else best
        nan |= v != v
    nan |= best != best
    return best if not nan else rounded(np.nan, cell)


@nb.njit(cache=True, inline="always")
def _exp_into(src, shift, dst, f32):
    """dst = exp(src - shift), the difference rounded to the dtype first (as a shifted row would be):
    one loop from src, faster than a shifted row then its exp (bench/RESULTS.md, 'Figures behind the code's
    choices')."""
    # Its own loop, not the fold's: the exp loop vectorizes; the fold after it must stay in order.
    if f32:
        for k in range(src.shape[0]):
            dst[k] = exp_in_float32(np.float32(src[k] - shift))
    else:
        for k in range(src.shape[0]):
            dst[k] = math.exp(src[k] - shift)


_BLOCK = 16  # rows per block: reduce.sum_rows folds them side by side (each still in order)


@nb.njit(cache=True, inline="always")
def _softmax_rows_in_lanes(x, out):
    """softmax_rows for float32 rows of at least LANES elements: the maximum and the Σ in lanes (the
    Σ's order is not the left fold's; the float64 sum of these float32 terms is exact but for terms
    2^29 times below the row's largest, so the rounded total almost always matches)."""
    cell = np.empty(1, out.dtype)
    for m in range(x.shape[0]):
        src, dst = x[m], out[m]
        best = lane_max(src)  # a NaN it skips turns the Σ, and so the row, NaN
        for k in range(src.shape[0]):
            dst[k] = exp_in_float32(np.float32(src[k] - best))
        total = rounded(lane_sum(dst), cell)
        for k in range(src.shape[0]):
            dst[k] = dst[k] / total


@nb.njit(nogil=True, cache=True, error_model="numpy")
def softmax_rows(x, out, f32):
    """out = softmax of each row of x (K >= 1)."""
    if f32 and x.shape[1] >= LANES:  # shorter rows: the blocked folds below cost less per row
        _softmax_rows_in_lanes(x, out)
        return
    totals = np.empty(_BLOCK, np.float64)
    cell = np.empty(1, out.dtype)
    for lo in range(0, x.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, x.shape[0])
        for m in range(lo, hi):
            _exp_into(x[m], _row_max(x, m, cell), out[m], f32)
        sum_rows(out[lo:hi], totals)
        for m in range(lo, hi):
            total = rounded(totals[m - lo], cell)
            row = out[m]
            for k in range(x.shape[1]):
                row[k] = row[k] / total


@nb.njit(cache=True, inline="always")
def _log_softmax_rows_in_lanes(x, out):
    """log_softmax_rows for float32 rows of at least LANES elements, the maximum and the Σ of the
    exponentials in lanes as `_softmax_rows_in_lanes` takes them (bench/RESULTS.md, 'Figures behind the
    code's choices')."""
    cell = np.empty(1, out.dtype)
    e = np.empty(x.shape[1], x.dtype)
    for m in range(x.shape[0]):
        src, dst = x[m], out[m]
        best = lane_max(src)
        for k in range(src.shape[0]):
            e[k] = exp_in_float32(np.float32(src[k] - best))
        lse = rounded(math.log(np.float64(rounded(lane_sum(e), cell))), cell)
        for k in range(src.shape[0]):
            dst[k] = np.float32(src[k] - best) - lse


@nb.njit(nogil=True, cache=True, error_model="numpy")
def log_softmax_rows(x, out, f32):
    """out = log_softmax of each row of x (K >= 1)."""
    if f32 and x.shape[1] >= LANES:
        _log_softmax_rows_in_lanes(x, out)
        return
    totals = np.empty(_BLOCK, np.float64)
    cell = np.empty(1, out.dtype)
    e = np.empty((_BLOCK, x.shape[1]), x.dtype)
    for lo in range(0, x.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, x.shape[0])
        for m in range(lo, hi):
            best = _row_max(x, m, cell)
            row = out[m]
            for k in range(x.shape[1]):
                row[k] = x[m, k] - best
            _exp_into(x[m], best, e[m - lo], f32)
        sum_rows(e[:hi - lo], totals)
        for m in range(lo, hi):
            lse = rounded(math.log(np.float64(rounded(totals[m - lo], cell))), cell)
            row = out[m]
            for k in range(x.shape[1]):
                row[k] = row[k] - lse


@nb.njit(nogil=True, cache=True, error_model="numpy")
def softmax_grad_rows(y, g, out):
    """out = y * (g - sum(g * y)) per row."""
    totals = np.empty(_BLOCK, np.float64)
    cell = np.empty(1, out.dtype)
    for lo in range(0, y.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, y.shape[0])
        for m in range(lo, hi):
            row = out[m]
            for k in range(y.shape[1]):
                row[k] = g[m, k] * y[m, k]
        sum_rows(out[lo:hi], totals)
        for m in range(lo, hi):
            s = rounded(totals[m - lo], cell)
            row = out[m]
            for k in range(y.shape[1]):
                row[k] = y[m, k] * (g[m, k] - s)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def log_softmax_grad_rows(y, g, out, f32):
    """out = g - exp(y) * sum(g) per row."""
    totals = np.empty(_BLOCK, np.float64)
    cell = np.empty(1, out.dtype)
    zero = rounded(0.0, cell)  # y - 0 is y exactly
    for lo in range(0, y.shape[0], _BLOCK):
        hi = min(lo + _BLOCK, y.shape[0])
        sum_rows(g[lo:hi], totals)
        for m in range(lo, hi):
            s = rounded(totals[m - lo], cell)
            row = out[m]
            _exp_into(y[m], zero, row, f32)
            for k in range(y.shape[1]):
                row[k] = g[m, k] - row[k] * s


@nb.njit(parallel=True, nogil=True, cache=True)
def softmax_rows_in_pieces(x, out, f32, bounds):
    """softmax_rows over the pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        softmax_rows(x[lo:hi], out[lo:hi], f32)


@nb.njit(parallel=True, nogil=True, cache=True)
def log_softmax_rows_in_pieces(x, out, f32, bounds):
    """log_softmax_rows over the pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        log_softmax_rows(x[lo:hi], out[lo:hi], f32)


@nb.njit(parallel=True, nogil=True, cache=True)
def softmax_grad_rows_in_pieces(y, g, out, bounds):
    """softmax_grad_rows over the pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        softmax_grad_rows(y[lo:hi], g[lo:hi], out[lo:hi])


@nb.njit(parallel=True, nogil=True, cache=True)
def log_softmax_grad_rows_in_pieces(y, g, out, f32, bounds):
    """log_softmax_grad_rows over the pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        log_softmax_grad_rows(y[lo:hi], g[lo:hi], out[lo:hi], f32)


# op -> (the kernel, its parallel form)
KERNELS = {"softmax": (softmax_rows, softmax_rows_in_pieces),
           "log_softmax": (log_softmax_rows, log_softmax_rows_in_pieces),
           "softmax_grad": (softmax_grad_rows, softmax_grad_rows_in_pieces),
           "log_softmax_grad": (log_softmax_grad_rows, log_softmax_grad_rows_in_pieces)}


def run(op, axis, arrays, dtype, pieces=one_piece):
    """The op along `axis` of same-shape `arrays`: the axis moved last, rows computed (in the pieces
    `pieces(rows, work_per_row)` gives, side by side on numba's threads), moved back."""
    rows = [np.ascontiguousarray(np.moveaxis(a, axis, -1), dtype=dtype) for a in arrays]
    moved = rows[0].shape
    out = host_cache.empty(moved, dtype)
    k = moved[-1]
    rows = [r.reshape(-1, k) for r in rows]
    flat = out.reshape(-1, k)
    extra = () if op == "softmax_grad" else (np.dtype(dtype) == np.float32,)
    whole, in_pieces = KERNELS[op]
    bounds = pieces(flat.shape[0], 8 * k)
    if bounds is None:
        whole(*rows, flat, *extra)
    else:
        in_pieces(*rows, flat, *extra, bounds)
    return out if axis == len(moved) - 1 else np.ascontiguousarray(np.moveaxis(out, -1, axis))
