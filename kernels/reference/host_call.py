"""Functions with no kernel of their own (the Array API's linalg and fft, searchsorted): a NumPy
function called on the host arrays, its result (one output of it) cast to the node's dtype."""
import numpy as np


def host_call(attrs, *arrays):
    """attrs: `fn` (a NumPy function), `kwargs` (pairs), `output` (an index into a tuple result, or
    None), `dtype` (the result's)."""
    with np.errstate(all="ignore"):
        result = attrs["fn"](*arrays, **dict(attrs["kwargs"]))
    if attrs["output"] is not None:
        result = result[attrs["output"]]
    return np.asarray(result).astype(attrs["dtype"], copy=False)


HOST_CALL_KERNELS = {"host_call": host_call}
