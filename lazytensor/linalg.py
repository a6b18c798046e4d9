"""Matrix products (2-D, batched with broadcasting batch dims, matrix-vector, vector dot products, addmm),
vector norms and diagonals."""
from . import dtypes
from .creation import arange, zeros
from .elementwise import broadcast_shapes, where
from .shape_ops import cat
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


def addmm(input, mat1, mat2, *, beta=1, alpha=1):  # noqa: A002  (PyTorch's name)
    """beta * input + alpha * (mat1 @ mat2), for 2-D mat1 and mat2 (input broadcasts to the product)."""
    if mat1.ndim != 2 or mat2.ndim != 2:
        raise ValueError(f"addmm: expected 2-D matrices, got {mat1.shape} and {mat2.shape}")
    return _scaled_sum(input, matmul(mat1, mat2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    """beta * input + alpha * bmm(batch1, batch2)."""
    return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)


def _scaled_sum(input, product, beta, alpha):  # noqa: A002
    product = product if alpha == 1 else product * alpha
    if beta == 0:  # as PyTorch: input is ignored (its NaN or inf does not propagate)
        return product
    return product + (input if beta == 1 else input * beta)


def vector_norm(x, ord=2, dim=None, keepdim=False):  # noqa: A002
    """The p-norm of `x` over `dim` (all dims if None): ord 2 (default), 1, inf, -inf, 0 (the count of
    nonzeros), or any other float (sum |x|^ord)^(1/ord). Float inputs only."""
    if not x.dtype.is_floating_point:
        raise TypeError(f"vector_norm: expected a float tensor, got {x.dtype}")
    a = x.abs()
    if ord == float("inf"):
        return a.amax(dim=dim, keepdim=keepdim)
    if ord == float("-inf"):
        return a.amin(dim=dim, keepdim=keepdim)
    if ord == 0:
        return (x != 0).to(x.dtype).sum(dim=dim, keepdim=keepdim)
    if ord == 1:
        return a.sum(dim=dim, keepdim=keepdim)
    if ord == 2:
        return (x * x).sum(dim=dim, keepdim=keepdim).sqrt()
    return (a ** ord).sum(dim=dim, keepdim=keepdim) ** (1.0 / ord)


def norm(x, p="fro", dim=None, keepdim=False):
    """PyTorch's Tensor.norm: the vector p-norm over `dim` ("fro" is 2 over the given dims)."""
    return vector_norm(x, 2 if p == "fro" else p, dim, keepdim)


def diag(x, diagonal=0):
    """A 1-D tensor's diagonal matrix (the values on the `diagonal`-th diagonal), or a 2-D tensor's
    `diagonal`-th diagonal as a 1-D tensor, as PyTorch's diag."""
    k = int(diagonal)
    if x.ndim == 1:
        n = x.shape[0]
        m = n + abs(k)
        rows = arange(m).reshape(m, 1)
        cols = arange(m).reshape(1, m)
        padded = cat([x, zeros(abs(k), dtype=x.dtype)]) if k else x
        values = padded.reshape(m, 1) if k >= 0 else padded.reshape(1, m)
        return where(cols - rows == k, values, zeros((), dtype=x.dtype))
    if x.ndim == 2:
        n = max(0, min(x.shape[0], x.shape[1] - k) if k >= 0 else min(x.shape[0] + k, x.shape[1]))
        i = arange(n)
        return x[i, i + k] if k >= 0 else x[i - k, i]
    raise ValueError(f"diag: expected a 1-D or 2-D tensor, got shape {x.shape}")
