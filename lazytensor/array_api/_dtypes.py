"""The Array API's data type functions: astype, can_cast, finfo, iinfo, isdtype, result_type."""
import dataclasses

import numpy as np

from .. import dtypes
from ..elementwise import cast
from ..tensor import Tensor

BOOL = (dtypes.bool_,)
SIGNED = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
UNSIGNED = (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
REAL_FLOATING = (dtypes.float32, dtypes.float64)
COMPLEX_FLOATING = (dtypes.complex64, dtypes.complex128)
# The standard's dtypes; float16 and bfloat16 are lazytensor's storage dtypes, outside it.
STANDARD = BOOL + SIGNED + UNSIGNED + REAL_FLOATING + COMPLEX_FLOATING
KINDS = {"bool": BOOL, "signed integer": SIGNED, "unsigned integer": UNSIGNED, "integral": SIGNED + UNSIGNED,
         "real floating": REAL_FLOATING, "complex floating": COMPLEX_FLOATING,
         "numeric": SIGNED + UNSIGNED + REAL_FLOATING + COMPLEX_FLOATING}


def as_dtype(dtype):
    """A DType of the standard's set, or TypeError."""
    dt = dtypes.as_dtype(dtype)
    if dt not in STANDARD:
        raise TypeError(f"{dt} is not an Array API dtype (lazytensor's storage dtypes float16 and bfloat16 are "
                        f"outside the standard); use one of {', '.join(d.name for d in STANDARD)}")
    return dt


def astype(x, dtype, /, *, copy=True, device=None):
    """x converted to `dtype` (a copy unless copy=False and x already has it)."""
    if device is not None and device != x.device:
        x = x.to_device(device)
    dt = dtypes.as_dtype(dtype)
    if dt == x.dtype:
        return copy_of(x) if copy else x
    if x.dtype.is_complex and not dt.is_complex:
        raise TypeError(f"astype: casting {x.dtype} to {dt} would discard the imaginary part; take xp.real(x) first")
    return cast(x, dt)


def copy_of(x):
    """A new array with x's value (a node of its own: writing to one never shows in the other)."""
    return Tensor._from_op("contiguous", (x,), {}, x.shape, x.dtype)


def _np_dtype(x):
    if isinstance(x, Tensor):
        return x.dtype.np
    return dtypes.as_dtype(x).np


def can_cast(from_, to, /):
    """Whether `from_` (a dtype or an array) casts to `to` without changing values, by the standard's
    promotion rules (NumPy's "safe" casting on these dtypes)."""
    return bool(np.can_cast(_np_dtype(from_), _np_dtype(to), casting="safe"))


@dataclasses.dataclass(frozen=True)
class finfo_object:
    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: dtypes.DType


@dataclasses.dataclass(frozen=True)
class iinfo_object:
    bits: int
    max: int
    min: int
    dtype: dtypes.DType


def finfo(type, /):  # noqa: A002  (the standard's name)
    """Machine limits of a floating dtype (complex: of its real part)."""
    dt = dtypes.as_dtype(type.dtype if isinstance(type, Tensor) else type)
    real = dtypes.REAL_OF.get(dt, dt)
    if not real.is_floating_point:
        raise TypeError(f"finfo: {dt} is not a floating-point dtype; use iinfo")
    info = np.finfo(real.np)
    return finfo_object(info.bits, float(info.eps), float(info.max), float(info.min),
                        float(info.smallest_normal), real)


def iinfo(type, /):  # noqa: A002
    """Machine limits of an integer dtype."""
    dt = dtypes.as_dtype(type.dtype if isinstance(type, Tensor) else type)
    if dt.np.kind not in "iu":
        raise TypeError(f"iinfo: {dt} is not an integer dtype; use finfo")
    info = np.iinfo(dt.np)
    return iinfo_object(info.bits, int(info.max), int(info.min), dt)


def isdtype(dtype, kind):
    """Whether `dtype` is of `kind`: a dtype, a kind name ("bool", "signed integer", "unsigned integer",
    "integral", "real floating", "complex floating", "numeric") or a tuple of them."""
    dt = dtypes.as_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dt, k) for k in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; use one of {sorted(KINDS)}")
        return dt in KINDS[kind]
    return dt == dtypes.as_dtype(kind)


def result_type(*arrays_and_dtypes):
    """The dtype of combining arrays, dtypes and Python scalars (scalars are weak: they only lift the
    kind, bool < integer < real < complex)."""
    found, scalars = [], []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            found.append(a.dtype)
        elif isinstance(a, (bool, int, float, complex)):
            scalars.append(a)
        else:
            found.append(dtypes.as_dtype(a))
    if not found:
        raise ValueError("result_type: needs at least one array or dtype")
    out = dtypes.promote(*found)
    for value in scalars:
        out = dtypes.promote_with_scalar(out, value)
    return out
