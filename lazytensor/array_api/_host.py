"""Lazy nodes for functions with no kernel of their own: a NumPy function run by the host when the
value is needed (kernels/reference/host_call.py), so laziness and the transfer log still hold."""
from .. import dtypes
from ..tensor import Tensor


def host_call(fn, arrays, shape, dtype, output=None, **kwargs):
    """A pending array of `shape` and `dtype`: `fn(*arrays, **kwargs)` (its `output`-th result if it
    returns several), computed by NumPy on the host when read."""
    dt = dtypes.as_dtype(dtype)
    attrs = {"fn": fn, "kwargs": tuple(sorted(kwargs.items())), "output": output, "dtype": dt.np}
    return Tensor._from_op("host_call", tuple(arrays), attrs, tuple(shape), dt)
