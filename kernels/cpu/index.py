"""The scatter-add behind index_select/embedding gradients, compiled with numba.

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
