"""Matrix products: 2-D, batched with broadcasting batch dims, matrix-vector and vector dot products."""
from . import dtypes
from .elementwise import broadcast_shapes
from .tensor import Tensor


def matmul(a, b):
    """NumPy's matmul rules: 1-D operands are promoted to matrices and the added dim is removed."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError("matmul: both operands must be tensors")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(f"matmul: both operands need at least one dimension, got shapes {a.shape} and "
                         f"{b.shape}; use * to multiply by a scalar")
    if dtypes.bool_ in (a.dtype, b.dtype):
        raise TypeError("matmul: not defined for bool tensors; cast to a number type first")
    sa = (1,) + a.shape if a.ndim == 1 else a.shape
    sb = b.shape + (1,) if b.ndim == 1 else b.shape
    if sa[-1] != sb[-2]:
        raise ValueError(f"matmul: shapes {a.shape} and {b.shape} do not match: the inner dimensions "
                         f"{sa[-1]} and {sb[-2]} differ")
    batch = broadcast_shapes("matmul", sa[:-2], sb[:-2])
    shape = batch + (sa[-2], sb[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    dt = dtypes.promote(a.dtype, b.dtype)
    return Tensor._from_op("matmul", (a, b), {"dtype": dt.np}, shape, dt)


def outer(a, b):
    """The outer product of two 1-D tensors: (n,) and (m,) give (n, m)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expected two 1-D tensors, got shapes {a.shape} and {b.shape}")
    return a.reshape(-1, 1) * b.reshape(1, -1)


def bmm(a, b):
    """Batched matrix product of (B, n, k) and (B, k, m) (no broadcasting, as PyTorch's bmm)."""
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm: expected (B, n, k) and (B, k, m), got {a.shape} and {b.shape}")
    return matmul(a, b)
