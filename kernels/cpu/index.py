"""The scatter-adds behind index_select/embedding and gather (take_along) gradients, compiled with numba.

Same definition as kernels/reference/indexing.py (`np.add.at` into float64 zeros, rounded once): each
destination receives its contributions in index order, so the result is bit-identical.
"""
import numba as nb
import numpy as np


@nb.njit(cache=True)
def scatter_rows_into(acc, g, index):
    """acc[i, index[p], j] += g[i, p, j] for p in order; acc is (pre, n, post) float64, g (pre, k, post).
    Indices are in [-n, n) (negative ones count from the end); anything else raises IndexError."""
    n = acc.shape[1]
    for p in range(index.shape[0]):
        r = index[p]
        if r < -n or r >= n:
            raise IndexError("scatter-add: index out of range")
    for i in range(acc.shape[0]):
        for p in range(index.shape[0]):
            r = index[p]
            if r < 0:
                r += n
            for j in range(acc.shape[2]):
                acc[i, r, j] += g[i, p, j]


@nb.njit(cache=True)
def scatter_along_into(out, g, index):
    """out[i, r, j] = the float64 sum of the g[i, p, j] with index[i, p, j] == r, over p in order, rounded
    once to out's dtype; out is (pre, n, post) and holds zeros, g and index are (pre, k, post). Only the
    destinations some index names are written (a column of n float64 sums, reset where it is used), so
    the work is in g's size, not out's. Indices are in [-n, n) (negative ones count from the end);
    anything else raises IndexError."""
    n = out.shape[1]
    column = np.empty(n, np.float64)
    for i in range(out.shape[0]):
        for j in range(out.shape[2]):
            for p in range(g.shape[1]):
                r = index[i, p, j]
                if r < -n or r >= n:
                    raise IndexError("scatter-add: index out of range")
                column[r if r >= 0 else r + n] = 0.0
            for p in range(g.shape[1]):
                r = index[i, p, j]
                column[r if r >= 0 else r + n] += g[i, p, j]
            for p in range(g.shape[1]):
                r = index[i, p, j]
                r = r if r >= 0 else r + n
                out[i, r, j] = column[r]
