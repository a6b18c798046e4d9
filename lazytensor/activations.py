"""softmax and log_softmax along one axis: one node each (and one for each gradient); the definition,
in terms of the ops they are made of, is kernels/reference/softmax.py."""
from . import amp as _amp
from .errors import normalize_axis
from .tensor import Tensor


def _along(op, x, dim, axis):
    d = axis if axis is not None else dim
    if _amp._REGIONS:  # autocast on CUDA keeps softmax in float32, as PyTorch does
        (x,) = _amp.widen(x, kind="softmax")
    if not x.dtype.is_floating_point:
        x = x.float()
    if x.ndim == 0:  # like PyTorch: a 0-d tensor is one row of one element (dim -1 or 0)
        normalize_axis(op, d, 1)
        return _along(op, x.reshape(1), 0, None).reshape(())
    a = normalize_axis(op, d, x.ndim)
    return Tensor._from_op(op, (x,), {"axis": a, "dtype": x.dtype.np}, x.shape, x.dtype)


def softmax(x, dim=-1, *, axis=None):
    """exp(x - max) / sum(exp(x - max)) along `dim`: stable for large inputs."""
    return _along("softmax", x, dim, axis)


def log_softmax(x, dim=-1, *, axis=None):
    """(x - max) - log(sum(exp(x - max))) along `dim`: stable for large inputs."""
    return _along("log_softmax", x, dim, axis)
