"""Left-fold reductions in float64, one sequential fold per output.

Same order as the reference (kernels/reference/reduce.py): each output starts from its first element
and adds the rest in row-major order of the reduced positions; no fast-math, so LLVM may not
reassociate. The results are bit-identical to the reference.
"""
import numba as nb
import numpy as np

_BLOCK = 256


@nb.njit(cache=True)
def sum_rows(x, out):
    """out[m] = fold(+) of x[m, :] for x of shape (M, K), K >= 1."""
    M, K = x.shape
    for m in range(M):
        acc = np.float64(x[m, 0])
        for k in range(1, K):
            acc += np.float64(x[m, k])
        out[m] = acc


@nb.njit(cache=True)
def sum_cols(x, out):
    """out[m] = fold(+) of x[:, m] for x of shape (K, M), K >= 1 (in blocks of columns, for the cache)."""
    K, M = x.shape
    for b in range((M + _BLOCK - 1) // _BLOCK):
        lo, hi = b * _BLOCK, min(M, (b + 1) * _BLOCK)
        for m in range(lo, hi):
            out[m] = np.float64(x[0, m])
        for k in range(1, K):
            for m in range(lo, hi):
                out[m] += np.float64(x[k, m])


@nb.njit(cache=True)
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
    k = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    m = int(np.prod([x.shape[d] for d in kept], dtype=np.int64))
    if list(axes) == list(range(x.ndim - len(axes), x.ndim)):
        return "rows", np.ascontiguousarray(x).reshape(m, k)
    if list(axes) == list(range(len(axes))):
        return "cols", np.ascontiguousarray(x).reshape(k, m)
    return "rows", np.ascontiguousarray(np.transpose(x, kept + list(axes))).reshape(m, k)


def fold_sum(x, axes):
    """float64 left-fold sums over `axes` (at least one reduced element), flattened over kept axes."""
    kind, a = layout(x, axes)
    out = np.empty(a.shape[0] if kind == "rows" else a.shape[1], np.float64)
    (sum_rows if kind == "rows" else sum_cols)(a, out)
    return out


def fold_sq_dev(x, axes, mean):
    """float64 left-fold sums of squared deviations from `mean` (one value per output)."""
    kind, a = layout(x, axes)
    if kind == "cols":
        a = np.ascontiguousarray(a.T)
    out = np.empty(a.shape[0], np.float64)
    sq_dev_rows(a, mean, out)
    return out
