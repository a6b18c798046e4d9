"""Axis reductions: sum prod mean var std amax amin argmax argmin, and PyTorch's max/min forms."""
import builtins
import collections

from . import dtypes
from .elementwise import binary
from .errors import normalize_axes, normalize_axis
from .tensor import Tensor

MaxMin = collections.namedtuple("MaxMin", ["values", "indices"])


def _pick(op, dim, axis, keepdim, keepdims):
    if dim is not None and axis is not None:
        raise TypeError(f"{op}: pass either dim or axis, not both")
    if keepdim is not None and keepdims is not None:
        raise TypeError(f"{op}: pass either keepdim or keepdims, not both")
    return (dim if dim is not None else axis), bool(keepdim or keepdims)


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes)


def reduce(op, x, axes, keepdims, out_dtype, **extra):
    """Build a reduction node over normalized `axes`."""
    shape = _reduced_shape(x.shape, axes, keepdims)
    attrs = {"axes": axes, "keepdims": keepdims, "dtype": out_dtype.np, **extra}
    return Tensor._from_op(op, (x,), attrs, shape, out_dtype)


def accumulating_dtype(x):
    """Floats and complex keep their dtype; signed integers and bools give int64 (PyTorch's rule),
    unsigned ones uint64."""
    if x.dtype.is_floating_point or x.dtype.is_complex:
        return x.dtype
    return dtypes.uint64 if x.dtype.np.kind == "u" else dtypes.int64


def _mean_dtype(x):
    return x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else dtypes.DEFAULT_FLOAT


def sum(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """Sum over `dim` (all if None); floats fold left to right in float64; ints and bools give int64."""
    d, k = _pick("sum", dim, axis, keepdim, keepdims)
    return reduce("sum", x, normalize_axes("sum", d, x.ndim), k, accumulating_dtype(x))


def prod(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    d, k = _pick("prod", dim, axis, keepdim, keepdims)
    return reduce("prod", x, normalize_axes("prod", d, x.ndim), k, accumulating_dtype(x))


def mean(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    d, k = _pick("mean", dim, axis, keepdim, keepdims)
    return reduce("mean", x, normalize_axes("mean", d, x.ndim), k, _mean_dtype(x))


def _correction(op, unbiased, correction, ddof):
    given = [v is not None for v in (unbiased, correction, ddof)]
    if builtins.sum(given) > 1:
        raise TypeError(f"{op}: pass only one of unbiased, correction, ddof")
    if unbiased is not None:
        return 1 if unbiased else 0
    if correction is not None:
        return int(correction)
    if ddof is not None:
        return int(ddof)
    return 1  # PyTorch's default (Bessel's correction); NumPy users pass ddof=0


def var(x, dim=None, unbiased=None, keepdim=None, *, correction=None, ddof=None, axis=None,
        keepdims=None):
    """Variance with PyTorch's default correction=1 (`ddof=0` gives NumPy's default)."""
    d, k = _pick("var", dim, axis, keepdim, keepdims)
    c = _correction("var", unbiased, correction, ddof)
    return reduce("var", x, normalize_axes("var", d, x.ndim), k, _mean_dtype(x), correction=c)


def std(x, dim=None, unbiased=None, keepdim=None, *, correction=None, ddof=None, axis=None,
        keepdims=None):
    """Standard deviation with PyTorch's default correction=1 (`ddof=0` gives NumPy's default)."""
    d, k = _pick("std", dim, axis, keepdim, keepdims)
    c = _correction("std", unbiased, correction, ddof)
    return reduce("std", x, normalize_axes("std", d, x.ndim), k, _mean_dtype(x), correction=c)


def _extreme(op, x, d, k):
    axes = normalize_axes(op, d, x.ndim)
    for a in axes:
        if x.shape[a] == 0:
            raise ValueError(f"{op}: cannot reduce over dimension {a} of size 0 (shape {x.shape}): "
                             f"a maximum or minimum of nothing has no value")
    return reduce(op, x, axes, k, x.dtype)


def amax(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    d, k = _pick("amax", dim, axis, keepdim, keepdims)
    return _extreme("amax", x, d, k)


def amin(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    d, k = _pick("amin", dim, axis, keepdim, keepdims)
    return _extreme("amin", x, d, k)


def _arg(op, x, d, k):
    if isinstance(d, (list, tuple)):
        raise TypeError(f"{op}: takes a single dim (or None for the flattened tensor), got {d}")
    if x.numel() == 0:
        raise ValueError(f"{op}: the tensor of shape {x.shape} is empty; there is no position to return")
    axes = tuple(range(x.ndim)) if d is None else (normalize_axis(op, d, x.ndim),)
    if d is not None and x.shape[axes[0]] == 0:
        raise ValueError(f"{op}: cannot reduce over dimension {axes[0]} of size 0")
    return reduce(op, x, axes, k, dtypes.int64)


def argmax(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """Index of the first maximum along `dim` (of the flattened tensor if None)."""
    d, k = _pick("argmax", dim, axis, keepdim, keepdims)
    return _arg("argmax", x, d, k)


def argmin(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    d, k = _pick("argmin", dim, axis, keepdim, keepdims)
    return _arg("argmin", x, d, k)


def _max_min(op, arg_op, pair_op, x, dim, keepdim, axis, keepdims):
    if isinstance(dim, Tensor):  # torch.max(a, b): elementwise
        return binary(pair_op, x, dim)
    d, k = _pick(op, dim, axis, keepdim, keepdims)
    values = _extreme("a" + op, x, d, k)
    if dim is None or isinstance(dim, (list, tuple)):
        return values  # NumPy style (axis=...), or the maximum of everything
    return MaxMin(values, _arg(arg_op, x, d, k))


def max(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """PyTorch's max: no dim -> the maximum; an int dim -> (values, indices); a tensor -> maximum."""
    return _max_min("max", "argmax", "maximum", x, dim, keepdim, axis, keepdims)


def min(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """PyTorch's min: no dim -> the minimum; an int dim -> (values, indices); a tensor -> minimum."""
    return _max_min("min", "argmin", "minimum", x, dim, keepdim, axis, keepdims)


def any(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """True where any element along `dim` is nonzero."""
    return binary("gt", sum(binary("ne", x, 0), dim, keepdim, axis=axis, keepdims=keepdims), 0)


def all(x, dim=None, keepdim=None, *, axis=None, keepdims=None):
    """True where every element along `dim` is nonzero."""
    return binary("eq", sum(binary("eq", x, 0), dim, keepdim, axis=axis, keepdims=keepdims), 0)


def logsumexp(x, dim, keepdim=False):
    """log(sum(exp(x))) along `dim`, computed as m + log(sum(exp(x - m))) with m the (detached) max, so
    large values do not overflow; a slice of all -inf gives -inf. The gradient is softmax(x)."""
    dims = normalize_axes("logsumexp", dim, x.ndim)
    m = amax(x, dim=dims, keepdim=True).detach()
    m = m.where(m.abs() != float("inf"), 0.0)
    out = (x - m).exp().sum(dim=dims, keepdim=True).log() + m
    return out if keepdim else out.reshape(*(n for d, n in enumerate(x.shape) if d not in dims))
