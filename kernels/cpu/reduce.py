"""Reductions in float64 in the reference's orders, one sequential fold per output or per partial.

Same order as the reference (kernels/reference/reduce.py): each output (or each strided partial of a
blocked sum) starts from its first element and adds the rest in row-major order of the reduced
positions; no fast-math, so LLVM may not reassociate. The results are bit-identical to the reference.
A blocked sum's partials are independent, so their loops vectorize where a left fold cannot; left folds
of rows go eight rows side by side in one vector, two such vectors at a time (kernels/cpu/lanes.py),
each row in order.
"""
import math

import numba as nb
import numpy as np

from ..reference.reduce import partials
from .common import one_piece
from .lanes import fold_8_rows, fold_16_rows

_ROWS = 8  # rows folded side by side: independent additions in flight, each row still in order
# Columns of a column sum per thread, at least: each thread streams its part of every row, and parts shorter
# than this ran slower side by side than one thread's whole rows (bench/RESULTS.md, 'Figures behind the
# code's choices').
COLS_PER_PIECE = 1024


@nb.njit(nogil=True, cache=True)
def sum_rows(x, out):
    """out[m] = fold(+) of x[m, :] for x of shape (M, K), K >= 1."""
    M, K = x.shape
    m = 0
    if K > _ROWS and x.strides[1] == x.itemsize:  # rows long enough to be read eight columns at a time
        while m + 2 * _ROWS <= M:
            fold_16_rows(x, m, out)
            m += 2 * _ROWS
        if m + _ROWS <= M:
            fold_8_rows(x, m, out)
            m += _ROWS
    while m + _ROWS <= M:  # eight running sums in registers
        a0, a1, a2, a3 = np.float64(x[m, 0]), np.float64(x[m + 1, 0]), np.float64(x[m + 2, 0]), \
            np.float64(x[m + 3, 0])
        a4, a5, a6, a7 = np.float64(x[m + 4, 0]), np.float64(x[m + 5, 0]), np.float64(x[m + 6, 0]), \
            np.float64(x[m + 7, 0])
        for k in range(1, K):
            a0 += np.float64(x[m, k])
            a1 += np.float64(x[m + 1, k])
            a2 += np.float64(x[m + 2, k])
            a3 += np.float64(x[m + 3, k])
            a4 += np.float64(x[m + 4, k])
            a5 += np.float64(x[m + 5, k])
            a6 += np.float64(x[m + 6, k])
            a7 += np.float64(x[m + 7, k])
        out[m], out[m + 1], out[m + 2], out[m + 3] = a0, a1, a2, a3
        out[m + 4], out[m + 5], out[m + 6], out[m + 7] = a4, a5, a6, a7
        m += _ROWS
    for r in range(m, M):
        a = np.float64(x[r, 0])
        for k in range(1, K):
            a += np.float64(x[r, k])
        out[r] = a


@nb.njit(nogil=True, cache=True)
def sum_cols(x, out, lo, hi):
    """out[m] = fold(+) of x[:, m] for x of shape (K, M), K >= 1, lo <= m < hi: row k is added to every
    running column value before row k + 1 (a loop over one row slice, which LLVM vectorizes; indexing
    out[m] with m from lo does not vectorize, slices do)."""
    o = out[lo:hi]
    first = x[0, lo:hi]
    for m in range(hi - lo):
        o[m] = np.float64(first[m])
    for k in range(1, x.shape[0]):
        row = x[k, lo:hi]
        for m in range(hi - lo):
            o[m] += np.float64(row[m])


@nb.njit(nogil=True, cache=True)
def sum_rows_blocked(x, p, out):
    """out[m] = the blocked sum with `p` partials of x[m, :] for x of shape (M, K), K >= p >= 2."""
    M, K = x.shape
    full = K // p
    parts = np.empty(p, np.float64)
    for m in range(M):
        row = x[m]
        first = row[:p]
        for j in range(p):
            parts[j] = np.float64(first[j])
        for q in range(1, full):
            seg = row[q * p:(q + 1) * p]
            for j in range(p):
                parts[j] += np.float64(seg[j])
        tail = row[full * p:]
        for j in range(tail.shape[0]):
            parts[j] += np.float64(tail[j])
        acc = parts[0]
        for j in range(1, p):
            acc += parts[j]
        out[m] = acc


@nb.njit(parallel=True, nogil=True, cache=True)
def sum_cols_in_pieces(x, out, bounds):
    """sum_cols over the column pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        sum_cols(x, out, bounds[p], bounds[p + 1])


@nb.njit(parallel=True, nogil=True, cache=True)
def sum_rows_in_pieces(x, out, bounds):
    """sum_rows over the row pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        sum_rows(x[lo:hi], out[lo:hi])


@nb.njit(parallel=True, nogil=True, cache=True)
def sum_rows_blocked_in_pieces(x, parts, out, bounds):
    """sum_rows_blocked (`parts` partials) over the row pieces of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        sum_rows_blocked(x[lo:hi], parts, out[lo:hi])


def _sum_cols(a, out, pieces, work_per_col):
    """sum_cols of every column of `a`, in pieces of at least COLS_PER_PIECE columns side by side."""
    blocks = a.shape[1] // COLS_PER_PIECE
    bounds = pieces(blocks, work_per_col * COLS_PER_PIECE) if blocks > 1 else None
    if bounds is None:
        sum_cols(a, out, 0, a.shape[1])
    else:
        bounds = bounds * COLS_PER_PIECE  # a new array: `pieces` shares its bounds between callers
        bounds[-1] = a.shape[1]
        sum_cols_in_pieces(a, out, bounds)


def _sum_cols_blocked(a, p, pieces):
    """The blocked sums with `p` partials of the columns of contiguous (K, M) `a`: the (K // P, P * M)
    view's column folds are the partials, then the tail rows, then a column fold of the partials."""
    k, m = a.shape
    full = k // p
    head = a[:full * p].reshape(full, p * m)
    parts = np.empty(p * m, np.float64)
    _sum_cols(head, parts, pieces, full // 4)
    parts = parts.reshape(p, m)
    tail = a[full * p:]
    parts[:tail.shape[0]] += tail  # each partial's last element
    out = np.empty(m, np.float64)
    _sum_cols(parts, out, pieces, p // 4)
    return out


@nb.njit(nogil=True, cache=True)
def extreme_rows(x, out, largest):
    """out[m] = max (or min) of x[m, :] for x of shape (M, K), K >= 1, or NaN if the row holds a NaN.
    Returns how many rows came out zero or NaN: for those the caller takes the reference's value (the
    first such element by position; this loop, vectorized, may combine its lanes in another order)."""
    M, K = x.shape
    unsure = 0
    for m in range(M):
        best = x[m, 0]
        nan = best != best
        for k in range(1, K):  # selects, not branches: LLVM vectorizes this loop
            v = x[m, k]
            if largest:
                best = v if v > best else best
            else:
                best = v if v < best else best
            nan |= v != v
        if nan:
            best = np.nan
        out[m] = best
        if best == 0 or nan:
            unsure += 1
    return unsure


@nb.njit(nogil=True, cache=True)
def sum_squares(x, p, cell):
    """The blocked sum with `p` partials (p = 1: the left fold) of x[i] * x[i] (each square in x's
    dtype) over flat x, in float64, rounded to cell's dtype."""
    K = x.shape[0]
    if p == 1:
        acc = np.float64(x[0] * x[0])
        for i in range(1, K):
            acc += np.float64(x[i] * x[i])
        cell[0] = acc
        return cell[0]
    full = K // p
    parts = np.empty(p, np.float64)
    for j in range(p):
        parts[j] = np.float64(x[j] * x[j])
    for q in range(1, full):
        seg = x[q * p:(q + 1) * p]
        for j in range(p):
            parts[j] += np.float64(seg[j] * seg[j])
    for j in range(K - full * p):
        v = x[full * p + j]
        parts[j] += np.float64(v * v)
    acc = parts[0]
    for j in range(1, p):
        acc += parts[j]
    cell[0] = acc
    return cell[0]


@nb.njit(nogil=True, cache=True)
def sq_dev_rows(x, mean, out):
    """out[m] = fold(+) of (x[m, k] - mean[m])^2 over k, in float64."""
    M, K = x.shape
    for m in range(M):
        d = np.float64(x[m, 0]) - mean[m]
        acc = d * d
        for k in range(1, K):
            d = np.float64(x[m, k]) - mean[m]
            acc += d * d
        out[m] = acc


def layout(x, axes):
    """(kind, 2-D array): "rows" (M, K) when the reduced positions of an output are contiguous,
    "cols" (K, M) when the reduced axes lead, with K in row-major order of the reduced axes either way."""
    kept = [d for d in range(x.ndim) if d not in axes]
    k = math.prod([x.shape[d] for d in axes])
    m = math.prod([x.shape[d] for d in kept])
    if list(axes) == list(range(x.ndim - len(axes), x.ndim)):
        return "rows", _as_2d(x, (m, k))
    if list(axes) == list(range(len(axes))):
        return "cols", _as_2d(x, (k, m))
    return "rows", _as_2d(np.transpose(x, kept + list(axes)), (m, k))


def _as_2d(x, shape):
    """`x` reshaped to `shape`: contiguous, except that a broadcast view (a stride of 0: `expand`) stays
    a view when the reshape allows, so a sum over a billion broadcast elements reads one."""
    if 0 in x.strides and x.size > 1:
        try:
            return np.reshape(x, shape, copy=False)
        except ValueError:
            pass
    return np.ascontiguousarray(x).reshape(shape)


@nb.njit(parallel=True, nogil=True, cache=True)
def extreme_rows_in_pieces(x, out, largest, bounds):
    """extreme_rows over the row pieces of `bounds`, side by side: the pieces' counts added."""
    unsure = 0
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        unsure += extreme_rows(x[lo:hi], out[lo:hi], largest)
    return unsure


def fold_sum(x, axes, pieces=one_piece, blocked=False):
    """float64 sums over `axes` (at least one reduced element), flattened over kept axes: left folds,
    or with `blocked` the reference's blocked order; outputs in the pieces `pieces(n, work_per_item)`
    gives, side by side on numba's threads."""
    kind, a = layout(x, axes)
    p = partials(a.shape[1] if kind == "rows" else a.shape[0]) if blocked else 1
    if kind == "rows":
        out = np.empty(a.shape[0], np.float64)
        bounds = pieces(a.shape[0], a.shape[1])
        if p > 1 and bounds is None:
            sum_rows_blocked(a, p, out)
        elif p > 1:
            sum_rows_blocked_in_pieces(a, p, out, bounds)
        elif bounds is None:
            sum_rows(a, out)
        else:
            sum_rows_in_pieces(a, out, bounds)
    elif p > 1:
        out = _sum_cols_blocked(a, p, pieces)
    else:
        out = np.empty(a.shape[1], np.float64)
        # a quarter of the rows as the work per column: the loop vectorizes, so elements are cheap
        _sum_cols(a, out, pieces, a.shape[0] // 4)
    return out


def extreme(x, axes, largest, pieces=one_piece):
    """max (or min) over `axes` (at least one reduced element), flattened over kept axes, or None when a
    result is a zero or NaN: which signed zero or NaN payload comes out is fixed by position (the
    first), so the caller asks the reference for the whole reduction then."""
    kind, a = layout(x, axes)
    if kind == "cols":
        a = np.ascontiguousarray(a.T)
    out = np.empty(a.shape[0], a.dtype)
    bounds = pieces(a.shape[0], a.shape[1])
    if bounds is None:
        unsure = extreme_rows(a, out, largest)
    else:
        unsure = extreme_rows_in_pieces(a, out, largest, bounds)
    return None if unsure else out


def sum_of_squares(grads, dtype):
    """kernels/reference/optim.py's sum_of_squares: per-array folds, partial totals added in `dtype`."""
    cell = np.empty(1, dtype)
    total = None
    for g in grads:
        flat = np.ascontiguousarray(g, dtype=dtype).reshape(-1)
        s = sum_squares(flat, partials(flat.shape[0]), cell) if flat.shape[0] else dtype.type(0)
        total = s if total is None else dtype.type(total + s)
    return np.asarray(total, dtype)


def fold_sq_dev(x, axes, mean):
    """float64 left-fold sums of squared deviations from `mean` (one value per output)."""
    kind, a = layout(x, axes)
    if kind == "cols":
        a = np.ascontiguousarray(a.T)
    out = np.empty(a.shape[0], np.float64)
    sq_dev_rows(a, mean, out)
    return out
