"""Column sums folded as a fused kernel makes its rows: the reference's float sum over every axis but the
last (kernels/reference/reduce.py), without the summed value ever stored whole.

A fused kernel whose value only such a sum reads (a layer norm's weight gradient, `sum(xhat * dy, (0, 1))`)
computes a few slices of it at a time into a scratch block that stays in cache, and `fold_rows` adds
that block's rows to the running column values in row order: the same float64 additions in the same
order as the sum of the stored value, so the same bits. Over more than BLOCK_SPAN rows the reference
folds strided partials (row r into partial r mod P); `acc` holds one row of running values per partial
and `finish` folds them in order. Every running value starts from +0.0 where the reference starts from
the first element and adds +0.0 last: the two differ at most in the sign of a zero, which that last
+0.0 makes positive.
"""
import math

import numba as nb
import numpy as np

from ..reference.reduce import partials

# Elements of the summed value computed per scratch block: 256 KB of float32, within a core's L2 cache
# beside the block's operands.
BLOCK_ELEMENTS = 1 << 16


def column_sum_recipe(recipe):
    """Whether a fused recipe (kernels/cpu/fused.py) ends in the column sums of its tree's value: a last
    instruction ("colsum", dtype, index of that value)."""
    return recipe[1][-1][0] == "colsum"


def accumulators(rows, cols):
    """The running values of the column sums over `rows` rows of `cols` columns: one row per partial."""
    return np.zeros((partials(rows), cols), np.float64)


def slices_per_block(shape):
    """How many slices along the first dim of a value of `shape` one scratch block holds (at least one)."""
    return max(1, BLOCK_ELEMENTS // max(math.prod(shape[1:]), 1))


@nb.njit(nogil=True, cache=True)
def fold_rows(values, acc, first):
    """Add the rows of `values` (C-contiguous, rows along its last axis) to the running column values
    `acc` in order, row r (counted from `first` over the whole value) into partial r mod P."""
    cols = values.shape[-1]
    flat = values.reshape(-1, cols)
    p = acc.shape[0]
    for r in range(flat.shape[0]):
        row = flat[r]
        running = acc[(first + r) % p]
        for j in range(cols):
            running[j] += np.float64(row[j])


@nb.njit(nogil=True, cache=True)
def finish(acc, out):
    """out[j] = the partials of column j folded in order from +0.0, rounded to out's dtype."""
    for j in range(out.shape[0]):
        total = 0.0
        for q in range(acc.shape[0]):
            total += acc[q, j]
        out[j] = total


@nb.njit(parallel=True, nogil=True, cache=True)
def fold_rows_in_columns(values, acc, first, pieces):
    """fold_rows with the columns cut into `pieces` ranges folded side by side on numba's threads: each
    column still gets its rows in order, so the same bits (a kernel's rows made in pieces, folded after)."""
    cols = values.shape[-1]
    flat = values.reshape(-1, cols)
    p = acc.shape[0]
    width = -(-cols // (pieces * 16)) * 16  # whole vectors of float64 per piece
    for piece in nb.prange(pieces):
        lo, hi = piece * width, min((piece + 1) * width, cols)
        for r in range(flat.shape[0]):
            row = flat[r, lo:hi]
            running = acc[(first + r) % p, lo:hi]
            for j in range(hi - lo):
                running[j] += np.float64(row[j])
