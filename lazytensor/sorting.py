"""Scans and orderings along one axis, with PyTorch's signatures: cumsum, cumprod, sort, argsort, topk, and
multinomial sampling built on them."""
import collections

import numpy as np

from . import dtypes
from .errors import normalize_axis
from .indexing import gather, narrow
from .random import DEFAULT, rand
from .runtime import hostio, sampling
from .tensor import Tensor

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopKResult = collections.namedtuple("topk", ["values", "indices"])


def _scan(op, x, dim, dtype):
    if dtype is not None:
        dt = dtypes.as_dtype(dtype)
    elif x.dtype.is_floating_point:
        dt = x.dtype
    else:
        dt = dtypes.int64
    if x.ndim == 0:
        normalize_axis(op, dim, 1)
        return x.to(dt).contiguous()
    d = normalize_axis(op, dim, x.ndim)
    return Tensor._from_op(op, (x,), {"axis": d, "dtype": dt.np}, x.shape, dt)


def cumsum(x, dim, *, dtype=None):
    """Running sum along `dim` (a float64 left fold, rounded once per element). Integer and bool inputs
    give int64, as in PyTorch; `dtype` chooses the result's dtype."""
    return _scan("cumsum", x, dim, dtype)


def cumprod(x, dim, *, dtype=None):
    """Running product along `dim` (a float64 left fold, rounded once per element); dtypes as cumsum.
    Its gradient is exact where x has zeros (no division by x)."""
    return _scan("cumprod", x, dim, dtype)


def argsort(x, dim=-1, descending=False, stable=False):
    """Positions that sort `x` along `dim`. Always stable (equal values keep their order, whichever
    direction; `stable` is accepted for PyTorch's signature); NaN sorts as the largest value."""
    if x.dtype == dtypes.bool_:
        x = x.to(dtypes.int64)
    if x.ndim == 0:
        normalize_axis("argsort", dim, 1)
        return x.to(dtypes.int64) * 0
    d = normalize_axis("argsort", dim, x.ndim)
    return Tensor._from_op("argsort", (x,), {"axis": d, "descending": bool(descending)}, x.shape, dtypes.int64)


def sort(x, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along `dim`; the values carry gradients (through a gather)."""
    indices = argsort(x, dim, descending, stable)
    return SortResult(x if x.ndim == 0 else gather(x, dim, indices), indices)


def topk(x, k, dim=-1, largest=True, sorted=True):
    """The `k` largest (or smallest) entries along `dim`, in order, and their positions (ties: the
    earlier position first)."""
    d = normalize_axis("topk", dim, max(x.ndim, 1))
    n = x.shape[d] if x.ndim else 1
    if not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"topk: k must be an integer in [0, {n}] for dimension {d} of size {n}, got {k!r}")
    if x.ndim == 0:
        return TopKResult(x, x.to(dtypes.int64) * 0)
    indices = narrow(argsort(x, d, descending=largest), d, 0, k)
    return TopKResult(gather(x, d, indices), indices)


def multinomial(probs, num_samples, replacement=False):
    """Category indices drawn with probability proportional to each row of `probs` (1-d or 2-d, weights
    need not sum to one). With replacement: by inverting the cumulative weights with one uniform draw
    per sample; without: the `num_samples` smallest of -log(u) / p over the categories (an exponential
    race: the same law as drawing one by one and removing each). The weights are read on the host first
    (a "host-read:multinomial"), so that negative, NaN or infinite weights, a row without a positive
    weight, or too few positive weights to draw without replacement raise ValueError here, as PyTorch's
    checks do. On the CPU a draw with replacement (or of one sample) is then made on the host at once,
    with the kernels and the random stream the graph would use (runtime/sampling.py)."""
    if probs.ndim not in (1, 2) or not probs.dtype.is_floating_point:
        raise ValueError(f"multinomial: probs must be a 1-d or 2-d float tensor, got {probs.ndim}-d {probs.dtype}")
    n = probs.shape[-1]
    if not isinstance(num_samples, int) or num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    if not replacement and num_samples > n:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from {n} categories")
    w = _check_weights(probs, num_samples, replacement)
    if (replacement or num_samples == 1) and sampling.now(probs._node):
        # the CPU, the weights just read: the draw the graph below would make, made now (runtime/sampling.py)
        seed, stream = DEFAULT.take_stream()
        out = Tensor(hostio.data_node(sampling.categories(w, num_samples, seed, stream), exclusive=True))
    elif replacement or num_samples == 1:
        rows = probs if probs.ndim == 2 else probs.reshape(1, n)
        cdf = cumsum(rows, -1)
        cdf = cdf / narrow(cdf, 1, n - 1, 1)  # the last entry becomes exactly 1, so u < 1 stays in range
        u = rand(rows.shape[0], num_samples, 1, dtype=rows.dtype)
        out = (cdf.reshape(rows.shape[0], 1, n) <= u).to(dtypes.int64).sum(-1)
    else:
        rows = probs if probs.ndim == 2 else probs.reshape(1, n)
        race = -rand(rows.shape[0], n, dtype=rows.dtype).log() / rows
        out = narrow(argsort(race, -1), 1, 0, num_samples)
    return out if probs.ndim == 2 else out.reshape(num_samples)


def _check_weights(probs, num_samples, replacement):
    """Raise ValueError unless every row of `probs` is a distribution one can draw `num_samples` from;
    returns the weights' host array, as rows (internal: not to be written)."""
    w = hostio.host_array(probs._node, "multinomial")
    w = w.reshape(-1, w.shape[-1])  # 1-d or 2-d, checked by the caller
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("multinomial: the probability tensor contains inf, nan or an element < 0")
    positive = (w > 0).sum(axis=-1)
    if (positive == 0).any():
        raise ValueError("multinomial: a row's probabilities sum to 0 (invalid distribution)")
    if not replacement and (positive < num_samples).any():
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from a row "
                         f"with only {int(positive.min())} nonzero probabilities")
    return w
