"""The Array API's creation functions, on lazytensor's creation ops (nothing is computed here: fills
are lazy nodes, data is wrapped as it is)."""
import math
import operator

import numpy as np

from .. import creation, dtypes, indexing, shape_ops
from ..tensor import Tensor
from ._dtypes import astype, copy_of

# The dtype a Python number's kind gives (the namespace's defaults).
_PYTHON_DEFAULTS = {bool: dtypes.bool_, int: dtypes.int64, float: dtypes.DEFAULT_FLOAT,
                    complex: dtypes.DEFAULT_COMPLEX}


def _dtype(dtype):
    return None if dtype is None else dtypes.as_dtype(dtype)


def _shape(shape):
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    return tuple(operator.index(n) for n in shape)


def _placed(t, device):
    return t if device is None else t.to_device(device)


def _python_kind(obj):
    """The widest Python number type in `obj` (bool < int < float < complex; float for an empty
    sequence), or None when it holds anything else (NumPy scalars and arrays keep their dtype)."""
    order = tuple(_PYTHON_DEFAULTS)  # bool < int < float < complex
    widest, stack = -1, [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif type(item) in order:
            widest = max(widest, order.index(type(item)))
        else:
            return None
    return order[widest] if widest >= 0 else (float if isinstance(obj, (list, tuple)) else None)


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    """An array from an array (itself unless a copy or conversion is needed), a Python number, nested
    sequences, or anything with the buffer protocol or DLPack (NumPy arrays: their dtype)."""
    dt = _dtype(dtype)
    if isinstance(obj, Tensor):
        if copy is False and ((dt is not None and dt != obj.dtype) or (device not in (None, obj.device))):
            raise ValueError("asarray: copy=False, but converting the array needs a copy")
        out = obj if dt is None else astype(obj, dt, copy=bool(copy))
        if copy and out is obj:
            out = copy_of(obj)
        return _placed(out, device)
    if copy is False and not isinstance(obj, np.ndarray) and not hasattr(obj, "__dlpack__"):
        raise ValueError("asarray: copy=False needs an object whose memory can be shared (an array)")
    if dt is None:
        kind = _python_kind(obj)
        if kind is not None:
            dt = _PYTHON_DEFAULTS[kind]
    if isinstance(obj, (list, tuple)) and any(isinstance(v, Tensor) for v in obj):
        return _placed(shape_ops.stack([asarray(v, dtype=dt) for v in obj]), device)
    arr = np.asarray(obj) if dt is None else np.asarray(obj, dtype=dt.np)
    if dt is None:
        dtypes.as_dtype(arr.dtype)  # TypeError for dtypes lazytensor does not have
    if copy is False:
        return _placed(creation.from_numpy(arr), device)
    return _placed(creation.tensor(arr, dtype=dt), device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    """Values from start (inclusive) to stop (exclusive) by step; ints give int64, floats the default float."""
    if stop is None:
        start, stop = 0, start
    dt = _dtype(dtype)
    if dt is None:
        dt = dtypes.DEFAULT_FLOAT if any(isinstance(v, float) for v in (start, stop, step)) else dtypes.int64
    if step == 0:
        raise ValueError("arange: step must not be 0")
    n = max(0, math.ceil((stop - start) / step))
    if n == 0:
        return creation.zeros(0, dtype=dt, device=device)
    return creation.arange(start, start + n * step, step, dtype=dt, device=device)[:n]


def empty(shape, *, dtype=None, device=None):
    return creation.zeros(*_shape(shape), dtype=_dtype(dtype), device=device)


def zeros(shape, *, dtype=None, device=None):
    return creation.zeros(*_shape(shape), dtype=_dtype(dtype), device=device)


def ones(shape, *, dtype=None, device=None):
    return creation.ones(*_shape(shape), dtype=_dtype(dtype), device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    dt = _dtype(dtype)
    if dt is None:
        dt = _PYTHON_DEFAULTS.get(type(fill_value), dtypes.DEFAULT_FLOAT)
    return creation.full(_shape(shape), fill_value, dtype=dt, device=device)


def _like(x, dtype, device):
    return _dtype(dtype) or x.dtype, device if device is not None else x.device


def empty_like(x, /, *, dtype=None, device=None):
    return zeros_like(x, dtype=dtype, device=device)


def zeros_like(x, /, *, dtype=None, device=None):
    dt, where = _like(x, dtype, device)
    return creation.zeros(*x.shape, dtype=dt, device=None if where == "cpu" else where)


def ones_like(x, /, *, dtype=None, device=None):
    dt, where = _like(x, dtype, device)
    return creation.ones(*x.shape, dtype=dt, device=None if where == "cpu" else where)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    dt, where = _like(x, dtype, device)
    return creation.full(x.shape, fill_value, dtype=dt, device=None if where == "cpu" else where)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """Ones on the k-th diagonal."""
    n_cols = n_rows if n_cols is None else n_cols
    dt = _dtype(dtype) or dtypes.DEFAULT_FLOAT
    if k == 0:
        return creation.eye(n_rows, n_cols, dtype=dt, device=device)
    return _placed(creation.tensor(np.eye(n_rows, n_cols, k=k, dtype=dt.np)), device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """`num` evenly spaced values from start to stop (stop included unless endpoint=False)."""
    if isinstance(start, complex) or isinstance(stop, complex) or (dtype is not None and dtypes.as_dtype(dtype).is_complex):
        dt = _dtype(dtype) or dtypes.DEFAULT_COMPLEX
        return _placed(creation.tensor(np.linspace(start, stop, num, endpoint=endpoint).astype(dt.np)), device)
    dt = _dtype(dtype) or dtypes.DEFAULT_FLOAT
    if endpoint:
        return creation.linspace(start, stop, num, dtype=dt, device=device)
    if num == 0:
        return creation.zeros(0, dtype=dt, device=device)
    return creation.linspace(start, stop, num + 1, dtype=dt, device=device)[:num]


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    return list(shape_ops.meshgrid(*arrays, indexing=indexing))


def tril(x, /, *, k=0):
    return indexing.tril(x, k)


def triu(x, /, *, k=0):
    return indexing.triu(x, k)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array sharing the memory of a DLPack host object (NumPy, PyTorch CPU, ...) unless copy=True."""
    arr = np.from_dlpack(x, copy=copy) if copy is not None else np.from_dlpack(x)
    out = creation.tensor(arr) if copy else creation.from_numpy(arr)
    return _placed(out, device)
