"""Creating tensors: from data (lt.tensor, lt.from_numpy) and from a recipe (zeros, arange, eye, ...)."""
import math

import numpy as np

from . import dtypes
from .runtime import hostio
from .tensor import Tensor


def _infer_dtype(arr, from_python):
    kind = arr.dtype.kind
    if kind == "b":
        return dtypes.bool_
    if kind in "iu":
        return dtypes.int64 if from_python else dtypes.as_dtype(arr.dtype)
    if kind == "f":
        if from_python:
            return dtypes.DEFAULT_FLOAT
        return dtypes.as_dtype(arr.dtype)
    raise TypeError(f"lt.tensor: cannot make a tensor from data of NumPy dtype {arr.dtype} "
                    f"(supported: {', '.join(d.name for d in dtypes.ALL)})")


def tensor(data, dtype=None):
    """A new tensor holding a copy of `data` (nested lists, numbers, NumPy arrays or tensors)."""
    if isinstance(data, Tensor):
        out = data.to(dtype) if dtype is not None else data
        return Tensor._from_op("contiguous", (out,), {}, out.shape, out.dtype)
    from_python = not isinstance(data, np.ndarray)
    try:
        arr = np.array(data)
    except ValueError as exc:
        raise ValueError(f"lt.tensor: the nested sequences are ragged (every sublist at the same depth "
                         f"must have the same length): {exc}") from None
    if arr.dtype == object:
        raise TypeError("lt.tensor: data must be numbers or equal-length nested lists of numbers")
    dt = dtypes.as_dtype(dtype) if dtype is not None else _infer_dtype(arr, from_python)
    arr = np.array(arr, dtype=dt.np, copy=True)
    return Tensor(hostio.data_node(arr, exclusive=True))


def from_numpy(array):
    """A tensor that reads `array` without copying it (do not mutate the array while tensors use it)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dtypes.as_dtype(array.dtype)  # TypeError for unsupported dtypes
    return Tensor(hostio.data_node(array, exclusive=False))


def _shape(op, size):
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: sizes must be integers, got {s!r}")
        if int(s) < 0:
            raise ValueError(f"{op}: negative size {s} in {tuple(size)}")
    return tuple(int(s) for s in size)


def _default_dtype(value):
    return dtypes.scalar_dtype(value)


def full(size, fill_value, *, dtype=None):
    """A tensor of `size` filled with `fill_value` (dtype from the value unless given)."""
    shape = _shape("full", size if isinstance(size, (list, tuple)) else (size,))
    dt = dtypes.as_dtype(dtype) if dtype is not None else _default_dtype(fill_value)
    try:
        value = np.array(fill_value, dtype=dt.np).item()
    except (OverflowError, ValueError) as exc:
        raise type(exc)(f"full: {fill_value!r} does not fit in {dt}: {exc}") from None
    return Tensor._from_op("full", (), {"shape": shape, "value": value, "dtype": dt.np}, shape, dt)


def zeros(*size, dtype=None):
    return full(_shape("zeros", size), 0, dtype=dtype or dtypes.DEFAULT_FLOAT)


def ones(*size, dtype=None):
    return full(_shape("ones", size), 1, dtype=dtype or dtypes.DEFAULT_FLOAT)


def empty(*size, dtype=None):
    """Like zeros: a lazy engine has no reason to hand out uninitialized memory."""
    return zeros(*size, dtype=dtype)


def zeros_like(x, *, dtype=None):
    return full(x.shape, 0, dtype=dtype or x.dtype)


def ones_like(x, *, dtype=None):
    return full(x.shape, 1, dtype=dtype or x.dtype)


def full_like(x, fill_value, *, dtype=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype)


def arange(start, end=None, step=1, *, dtype=None):
    """start, start+step, ... up to but excluding `end`; each value computed as start + i*step."""
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    if dtype is None:
        is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
        dt = dtypes.DEFAULT_FLOAT if is_float else dtypes.int64
    else:
        dt = dtypes.as_dtype(dtype)
    n = max(0, math.ceil((end - start) / step))
    attrs = {"shape": (n,), "start": start, "step": step, "dtype": dt.np}
    return Tensor._from_op("arange", (), attrs, (n,), dt)


def linspace(start, end, steps, *, dtype=None):
    """`steps` evenly spaced values from start to end inclusive."""
    if steps < 0:
        raise ValueError(f"linspace: steps must be non-negative, got {steps}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    attrs = {"shape": (int(steps),), "start": float(start), "stop": float(end), "dtype": dt.np}
    return Tensor._from_op("linspace", (), attrs, (int(steps),), dt)


def eye(n, m=None, *, dtype=None):
    """The identity matrix (n x m, ones on the main diagonal)."""
    m = n if m is None else m
    shape = _shape("eye", (n, m))
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    return Tensor._from_op("eye", (), {"shape": shape, "dtype": dt.np}, shape, dt)
