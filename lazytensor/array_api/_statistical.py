"""The Array API's statistical and utility functions, on lazytensor's reductions and scans."""
from .. import creation, dtypes, reductions, shape_ops, sorting
from ..elementwise import binary, cast
from ..errors import normalize_axis
from ._dtypes import as_dtype


def _axis(axis):
    return list(axis) if isinstance(axis, tuple) else axis


def _accumulated(x, dtype):
    """x cast to the accumulation dtype the standard names (dtype=, else integers widen to the default
    integer of their signedness and floats keep theirs)."""
    if dtype is not None:
        dt = as_dtype(dtype)
        return x if dt == x.dtype else cast(x, dt)
    return x


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001  (the standard's names)
    return reductions.amax(x, dim=_axis(axis), keepdim=keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return reductions.amin(x, dim=_axis(axis), keepdim=keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    return reductions.mean(x, dim=_axis(axis), keepdim=keepdims)


def _in_dtype(out, dtype):
    return out if dtype is None or out.dtype == as_dtype(dtype) else cast(out, as_dtype(dtype))


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _in_dtype(reductions.sum(_accumulated(x, dtype), dim=_axis(axis), keepdim=keepdims), dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _in_dtype(reductions.prod(_accumulated(x, dtype), dim=_axis(axis), keepdim=keepdims), dtype)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    return reductions.var(x, dim=_axis(axis), correction=correction, keepdim=keepdims)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return reductions.std(x, dim=_axis(axis), correction=correction, keepdim=keepdims)


def _cumulative(op, x, axis, dtype, include_initial):
    if axis is None:
        if x.ndim > 1:
            raise ValueError(f"cumulative_{op}: axis is required for an array of {x.ndim} dims")
        axis = 0
    if x.ndim == 0:
        raise ValueError(f"cumulative_{op}: needs an array of at least one dimension")
    axis = normalize_axis(f"cumulative_{op}", axis, x.ndim)
    dt = as_dtype(dtype) if dtype is not None else reductions.accumulating_dtype(x)
    scan = sorting.cumsum if op == "sum" else sorting.cumprod
    out = scan(x, axis, dtype=dt)
    if include_initial:
        shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
        out = shape_ops.cat([creation.full(shape, 0 if op == "sum" else 1, dtype=dt), out], dim=axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative("sum", x, axis, dtype, include_initial)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative("prod", x, axis, dtype, include_initial)


def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return reductions.all(x, dim=_axis(axis), keepdim=keepdims)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return reductions.any(x, dim=_axis(axis), keepdim=keepdims)


def diff(x, /, *, axis=-1, n=1, prepend=None, append=None):
    """The n-th forward difference along `axis` (prepend/append joined first)."""
    axis = normalize_axis("diff", axis, x.ndim)
    parts = [p for p in (prepend, x, append) if p is not None]
    if len(parts) > 1:
        x = shape_ops.cat(parts, dim=axis)
    for _ in range(n):
        hi = x[(slice(None),) * axis + (slice(1, None),)]
        lo = x[(slice(None),) * axis + (slice(None, -1),)]
        x = binary("ne", hi, lo) if x.dtype == dtypes.bool_ else hi - lo
    return x


def count_nonzero(x, /, *, axis=None, keepdims=False):
    return reductions.sum(binary("ne", x, 0), dim=_axis(axis), keepdim=keepdims)

