"""The Array API's fft extension: lazy nodes computed by NumPy's pocketfft on the host when read
(complex64 results for float32/complex64 inputs, complex128 for float64/complex128)."""
import numpy as np

from .. import dtypes
from ..errors import normalize_axis
from ._host import host_call

_NORMS = ("backward", "ortho", "forward")


def _complex(dt):
    return dtypes.complex128 if dt in (dtypes.float64, dtypes.complex128) else dtypes.complex64


def _real(dt):
    return dtypes.float64 if dt in (dtypes.float64, dtypes.complex128) else dtypes.float32


def _check(x, norm, op):
    if norm not in _NORMS:
        raise ValueError(f"fft.{op}: norm must be one of {_NORMS}, got {norm!r}")
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise TypeError(f"fft.{op}: needs a floating-point or complex array, got {x.dtype}")


def _one(fn, out_len, out_kind):
    def transform(x, /, *, n=None, axis=-1, norm="backward"):
        _check(x, norm, fn.__name__)
        ax = normalize_axis(fn.__name__, axis, x.ndim)
        shape = list(x.shape)
        shape[ax] = out_len(x.shape[ax], n)
        dt = _complex(x.dtype) if out_kind == "complex" else _real(x.dtype)
        return host_call(fn, (x,), tuple(shape), dt, n=n, axis=ax, norm=norm)
    transform.__name__ = fn.__name__
    transform.__doc__ = f"NumPy's fft.{fn.__name__}, lazily, in the Array API's dtypes."
    return transform


def _many(fn, out_last, out_kind):
    def transform(x, /, *, s=None, axes=None, norm="backward"):
        _check(x, norm, fn.__name__)
        if axes is None:
            axes = tuple(range(x.ndim)) if s is None else tuple(range(x.ndim - len(s), x.ndim))
        axes = tuple(normalize_axis(fn.__name__, a, x.ndim) for a in axes)
        shape = list(x.shape)
        for k, a in enumerate(axes):
            size = None if s is None else s[k]
            shape[a] = out_last(x.shape[a], size) if k == len(axes) - 1 else (x.shape[a] if size is None else size)
        dt = _complex(x.dtype) if out_kind == "complex" else _real(x.dtype)
        return host_call(fn, (x,), tuple(shape), dt, s=None if s is None else tuple(s), axes=axes, norm=norm)
    transform.__name__ = fn.__name__
    transform.__doc__ = f"NumPy's fft.{fn.__name__}, lazily, in the Array API's dtypes."
    return transform


def _same(m, n):
    return m if n is None else n


def _half(m, n):
    return (m if n is None else n) // 2 + 1


def _full(m, n):
    return 2 * (m - 1) if n is None else n


fft = _one(np.fft.fft, _same, "complex")
ifft = _one(np.fft.ifft, _same, "complex")
rfft = _one(np.fft.rfft, _half, "complex")
irfft = _one(np.fft.irfft, _full, "real")
hfft = _one(np.fft.hfft, _full, "real")
ihfft = _one(np.fft.ihfft, _half, "complex")
fftn = _many(np.fft.fftn, _same, "complex")
ifftn = _many(np.fft.ifftn, _same, "complex")
rfftn = _many(np.fft.rfftn, _half, "complex")
irfftn = _many(np.fft.irfftn, _full, "real")


def fftfreq(n, /, *, d=1.0, dtype=None, device=None):
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    return host_call(_freq, (), (n,), dt, n=n, d=d, real=False)


def rfftfreq(n, /, *, d=1.0, dtype=None, device=None):
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    return host_call(_freq, (), (n // 2 + 1,), dt, n=n, d=d, real=True)


def _freq(n, d, real):
    return (np.fft.rfftfreq if real else np.fft.fftfreq)(n, d)


def fftshift(x, /, *, axes=None):
    return host_call(np.fft.fftshift, (x,), x.shape, x.dtype, axes=axes)


def ifftshift(x, /, *, axes=None):
    return host_call(np.fft.ifftshift, (x,), x.shape, x.dtype, axes=axes)
