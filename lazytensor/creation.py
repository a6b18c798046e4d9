"""Creating tensors: from data (lt.tensor, lt.from_numpy) and from a recipe (zeros, arange, eye, ...)."""
import math

import numpy as np

from . import dtypes
from .runtime import devices, hostio
from .tensor import Tensor


def _infer_dtype(arr, from_python):
    kind = arr.dtype.kind
    if kind == "b":
        return dtypes.bool_
    if kind in "iu":
        return dtypes.int64 if from_python else dtypes.as_dtype(arr.dtype)
    if kind == "f" or arr.dtype == dtypes.bfloat16.np:
        if from_python:
            return dtypes.DEFAULT_FLOAT
        return dtypes.as_dtype(arr.dtype)
    if kind == "c":
        return dtypes.DEFAULT_COMPLEX if from_python else dtypes.as_dtype(arr.dtype)
    raise TypeError(f"lt.tensor: cannot make a tensor from data of NumPy dtype {arr.dtype} "
                    f"(supported: {', '.join(d.name for d in dtypes.ALL)})")


def _finish(t, device, requires_grad):
    if device is not None:
        t.to(device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, *, device=None, requires_grad=False):
    """A new tensor holding a copy of `data` (nested lists, numbers, NumPy arrays or tensors)."""
    if isinstance(data, Tensor):
        out = data.detach().to(dtype) if dtype is not None else data.detach()
        return _finish(Tensor._from_op("contiguous", (out,), {}, out.shape, out.dtype), device, requires_grad)
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
    return _finish(Tensor(hostio.data_node(arr, exclusive=True)), device, requires_grad)


def from_numpy(array):
    """A tensor that reads `array` without copying it (do not mutate the array while tensors use it)."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected a numpy.ndarray, got {type(array).__name__}")
    dtypes.as_dtype(array.dtype)  # TypeError for unsupported dtypes
    return Tensor(hostio.data_node(array, exclusive=False))


def _shape(op, size, keyword=None):
    """The shape a creation was given: positional sizes, one list or tuple of them, or PyTorch's `size=`."""
    if keyword is not None:
        if size:
            raise TypeError(f"{op}() got sizes both as arguments {tuple(size)} and as size={keyword!r}")
        size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (list, tuple)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"{op}: sizes must be integers, got {s!r}")
        if int(s) < 0:
            raise ValueError(f"{op}: negative size {s} in {tuple(size)}")
    return tuple(int(s) for s in size)


def _size_keyword(op, keyword):
    """`size=` (PyTorch's keyword form of the sizes); any other keyword is a TypeError naming the function."""
    extra = set(keyword) - {"size"}
    if extra:
        raise TypeError(f"{op}() got an unexpected keyword argument {sorted(extra)[0]!r}")
    return keyword.get("size")


def _placed(attrs, device):
    """Record an explicit placement for a creation op (None lets the offload policy decide)."""
    where = devices.resolve_placement(device)
    if where is not None:
        attrs["device"] = where
    return attrs


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """A tensor of `size` filled with `fill_value` (dtype from the value unless given)."""
    shape = _shape("full", size if isinstance(size, (list, tuple)) else (size,))
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.scalar_dtype(fill_value)
    try:
        value = np.array(fill_value, dtype=dt.np).item()
    except (OverflowError, ValueError) as exc:
        raise type(exc)(f"full: {fill_value!r} does not fit in {dt}: {exc}") from None
    attrs = _placed({"shape": shape, "value": value, "dtype": dt.np}, device)
    return _finish(Tensor._from_op("full", (), attrs, shape, dt), None, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False, **keyword):
    shape = _shape("zeros", size, _size_keyword("zeros", keyword))
    return full(shape, 0, dtype=dtype or dtypes.DEFAULT_FLOAT, device=device, requires_grad=requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False, **keyword):
    shape = _shape("ones", size, _size_keyword("ones", keyword))
    return full(shape, 1, dtype=dtype or dtypes.DEFAULT_FLOAT, device=device, requires_grad=requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False, **keyword):
    """Like zeros: a lazy engine has no reason to hand out uninitialized memory."""
    return zeros(_shape("empty", size, _size_keyword("empty", keyword)), dtype=dtype, device=device,
                 requires_grad=requires_grad)


def like_device(x):
    """Where a *_like tensor goes: next to `x` when x's value is on a device, else where the policy says."""
    buf = x._node.buffer
    return buf.backend.name if buf is not None and buf.on_device else None


def zeros_like(x, *, dtype=None, device=None, requires_grad=False):
    return full(x.shape, 0, dtype=dtype or x.dtype, device=device or like_device(x), requires_grad=requires_grad)


def ones_like(x, *, dtype=None, device=None, requires_grad=False):
    return full(x.shape, 1, dtype=dtype or x.dtype, device=device or like_device(x), requires_grad=requires_grad)


def full_like(x, fill_value, *, dtype=None, device=None, requires_grad=False):
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or like_device(x),
                requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None):
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
    attrs = _placed({"shape": (n,), "start": start, "step": step, "dtype": dt.np}, device)
    return Tensor._from_op("arange", (), attrs, (n,), dt)


def linspace(start, end, steps, *, dtype=None, device=None):
    """`steps` evenly spaced values from start to end inclusive."""
    if steps < 0:
        raise ValueError(f"linspace: steps must be non-negative, got {steps}")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    attrs = _placed({"shape": (int(steps),), "start": float(start), "stop": float(end), "dtype": dt.np}, device)
    return Tensor._from_op("linspace", (), attrs, (int(steps),), dt)


def eye(n, m=None, *, dtype=None, device=None):
    """The identity matrix (n x m, ones on the main diagonal)."""
    m = n if m is None else m
    shape = _shape("eye", (n, m))
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    return Tensor._from_op("eye", (), _placed({"shape": shape, "dtype": dt.np}, device), shape, dt)
