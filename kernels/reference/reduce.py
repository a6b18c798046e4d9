"""Axis reductions. Products, variances and short sums fold left to right in float64 (int64 for
integers); float sums and means over more than BLOCK_SPAN elements fold in strided partials.

The blocked order: a sum over K > BLOCK_SPAN elements v_0..v_{K-1} (row-major order of the reduced
positions) takes P = partials(K) partial sums; partial j is the float64 left fold of v_j, v_{j+P},
v_{j+2P}, ..., and the result is the left fold of the partials in order. P depends on K alone, so
every backend (and a GPU, one thread per partial) computes the same bytes; K <= BLOCK_SPAN gives P = 1,
the plain left fold. A float sum is never -0.0 (it starts from +0.0, as NumPy's and PyTorch's); a mean
of integers folds in float64; amax/amin give the first extreme element in that order (docs/NUMERICS.md).
"""
import math

import numpy as np

BLOCK_SPAN = 4096     # a float sum over more elements than this folds in strided partials
MAX_PARTIALS = 1024


def partials(k):
    """How many strided partial sums a blocked float sum over `k` elements takes (1: the left fold)."""
    return max(1, min(MAX_PARTIALS, -(-int(k) // BLOCK_SPAN)))


def fold(ufunc, x, axes, identity, wide=np.float64, blocked=False):
    """Left fold of `ufunc` over `axes`, in `wide`, one fold per output element; with `blocked` (sums
    only), the blocked order of the module docstring.

    The reduced axes go first and the rest are flattened into columns: (K, M) in row-major order. For
    M >= 2, NumPy's reduce over axis 0 of a C-contiguous array walks the rows in order and adds each
    into the running column values (a sequential fold, checked against a loop in the tests); a single
    column uses accumulate, which is sequential by definition.
    """
    kept = [d for d in range(x.ndim) if d not in axes]
    kept_shape = tuple(x.shape[d] for d in kept)
    k = math.prod([x.shape[d] for d in axes])
    m = math.prod(kept_shape)
    if k == 0 or m == 0:
        return np.full(kept_shape, identity, dtype=wide)
    rows = np.ascontiguousarray(np.transpose(x, list(axes) + kept), dtype=wide).reshape(k, m)
    p = partials(k) if blocked else 1
    if p > 1:
        # Row q of the (K // P, P * M) view holds v_{qP}..v_{qP+P-1} of every column: folding its
        # rows in order folds each partial's elements in order.
        full = k // p
        parts = ufunc.reduce(rows[:full * p].reshape(full, p * m), axis=0).reshape(p, m)
        tail = rows[full * p:]
        parts[:tail.shape[0]] = ufunc(parts[:tail.shape[0]], tail)  # each partial's last element
        rows, k = parts, p
    if m >= 2:
        return ufunc.reduce(rows, axis=0).reshape(kept_shape)
    return ufunc.accumulate(rows.reshape(k))[-1:].reshape(kept_shape)


def _restore(result, x_shape, axes, keepdims):
    if keepdims:
        return result.reshape(tuple(1 if d in axes else n for d, n in enumerate(x_shape)))
    return result


def _wide(dtype):
    """float64 for floats, int64 for signed integers and bools (so a bool sum counts), uint64 for
    unsigned ones, complex128 for complex (whose sums and products use NumPy's order, not a fold)."""
    return np.dtype({"f": np.float64, "c": np.complex128, "u": np.uint64}.get(dtype.kind, np.int64))


def _real_or_complex(x):
    return np.complex128 if x.dtype.kind == "c" else np.float64


def _sum_wide(x, axes, blocked=True):
    wide = _wide(x.dtype)
    if wide.kind != "f":
        return np.sum(x, axis=axes, dtype=wide)  # exact in integers: the order does not matter
    # + 0.0: the fold as if started from +0.0, so that a float sum is never -0.0 (NumPy's and PyTorch's
    # sums start there); it changes nothing else, and needs no change to the order.
    return fold(np.add, x, axes, 0.0, blocked=blocked) + 0.0


def _mean_sum(x, axes, blocked):
    """The sum a mean divides: for integers and bools the float64 left fold (NumPy's accumulator,
    which cannot overflow as an int64 sum would), else the float sum."""
    if x.dtype.kind in "iub":
        return fold(np.add, x, axes, 0.0) + 0.0
    return _sum_wide(x, axes, blocked).astype(_real_or_complex(x))


def _out(result, attrs, x_shape):
    axes = attrs["axes"]
    return _restore(np.asarray(result).astype(np.dtype(attrs["dtype"]), copy=False),
                    x_shape, axes, attrs["keepdims"])


def sum_(attrs, x):
    return _out(_sum_wide(x, attrs["axes"]), attrs, x.shape)


def prod(attrs, x):
    wide = _wide(x.dtype)
    if wide.kind != "f":
        return _out(np.prod(x, axis=attrs["axes"], dtype=wide), attrs, x.shape)
    return _out(fold(np.multiply, x, attrs["axes"], 1.0), attrs, x.shape)


def _count(x, axes):
    return math.prod([x.shape[d] for d in axes])


def mean(attrs, x):
    axes = attrs["axes"]
    with np.errstate(all="ignore"):
        return _out(_mean_sum(x, axes, True) / _count(x, axes), attrs, x.shape)


def left_sum(attrs, x):
    """`sum` with the plain left fold at any length: the Σ inside the row ops (softmax, layer norm)."""
    return _out(_sum_wide(x, attrs["axes"], blocked=False), attrs, x.shape)


def left_mean(attrs, x):
    """`mean` with the plain left fold at any length (see left_sum)."""
    axes = attrs["axes"]
    with np.errstate(all="ignore"):
        return _out(_mean_sum(x, axes, False) / _count(x, axes), attrs, x.shape)


def _var_wide(x, axes, correction):
    n = _count(x, axes)
    with np.errstate(all="ignore"):
        mu = fold(np.add, x, axes, 0.0) / n
        dev = x.astype(np.float64) - mu.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape)))
        return fold(np.add, dev * dev, axes, 0.0) / max(n - correction, 0)


def var(attrs, x):
    return _out(_var_wide(x, attrs["axes"], attrs["correction"]), attrs, x.shape)


def std(attrs, x):
    with np.errstate(all="ignore"):
        return _out(np.sqrt(_var_wide(x, attrs["axes"], attrs["correction"])), attrs, x.shape)


def _picked(pick, x, axes):
    """The element `pick` (np.argmax or np.argmin) chooses among each output's reduced elements, in
    row-major order of the reduced positions: the first largest (smallest), or the first NaN. So the
    order alone decides which of two equal values (+0.0, -0.0) comes out, on every backend."""
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + list(axes)).reshape(tuple(x.shape[d] for d in kept) + (_count(x, axes),))
    at = pick(rows, axis=-1)[..., None]
    return np.take_along_axis(rows, at, axis=-1)[..., 0]


def amax(attrs, x):
    return _out(_picked(np.argmax, x, attrs["axes"]), attrs, x.shape)


def amin(attrs, x):
    return _out(_picked(np.argmin, x, attrs["axes"]), attrs, x.shape)


def _arg(fn, attrs, x):
    axes = attrs["axes"]
    if len(axes) == x.ndim:  # over everything: index into the flattened tensor
        result = fn(x.reshape(-1))
    else:
        result = fn(x, axis=axes[0])
    return _out(result, attrs, x.shape)


def argmax(attrs, x):
    return _arg(np.argmax, attrs, x)


def argmin(attrs, x):
    return _arg(np.argmin, attrs, x)


REDUCE_KERNELS = {"sum": sum_, "prod": prod, "mean": mean, "var": var, "std": std,
                  "amax": amax, "amin": amin, "argmax": argmax, "argmin": argmin}
