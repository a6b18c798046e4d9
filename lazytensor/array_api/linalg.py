"""The Array API's linalg extension. Products (matmul, tensordot, vecdot, outer, norms, trace) are
lazytensor ops that any backend runs; the factorizations and solvers (cholesky, inv, solve, det, eigh,
svd, qr, pinv, ...) are lazy nodes computed by NumPy's LAPACK on the host when read, so on a device
their operands are downloaded, which the transfer log shows."""
import collections
import math

import numpy as np

from .. import dtypes, linalg as _lt_linalg, reductions, shape_ops
from ..elementwise import binary, cast, unary
from ..errors import normalize_axis
from ._host import host_call

EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
QRResult = collections.namedtuple("QRResult", ["Q", "R"])
SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
SVDResult = collections.namedtuple("SVDResult", ["U", "S", "Vh"])


def _floating(x, op):
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise TypeError(f"linalg.{op}: needs a floating-point array, got {x.dtype}")
    if x.ndim < 2:
        raise ValueError(f"linalg.{op}: needs an array of at least 2 dims, got shape {x.shape}")
    return x


def _square(x, op):
    _floating(x, op)
    if x.shape[-1] != x.shape[-2]:
        raise ValueError(f"linalg.{op}: needs square matrices, got shape {x.shape}")
    return x


def _real(dt):
    return dtypes.REAL_OF.get(dt, dt)


def cholesky(x, /, *, upper=False):
    return host_call(np.linalg.cholesky, (_square(x, "cholesky"),), x.shape, x.dtype, upper=upper)


def cross(x1, x2, /, *, axis=-1):
    shape = np.broadcast_shapes(x1.shape, x2.shape)
    if shape[axis] != 3:
        raise ValueError(f"linalg.cross: axis {axis} must have size 3, got shapes {x1.shape} and {x2.shape}")
    return host_call(np.cross, (x1, x2), shape, dtypes.promote(x1.dtype, x2.dtype), axis=axis)


def det(x, /):
    return host_call(np.linalg.det, (_square(x, "det"),), x.shape[:-2], x.dtype)


def diagonal(x, /, *, offset=0):
    m, n = x.shape[-2], x.shape[-1]
    k = max(0, min(m, n - offset) if offset >= 0 else min(m + offset, n))
    return host_call(np.diagonal, (x,), x.shape[:-2] + (k,), x.dtype, offset=offset, axis1=-2, axis2=-1)


def eigh(x, /):
    _square(x, "eigh")
    return EighResult(host_call(np.linalg.eigh, (x,), x.shape[:-1], _real(x.dtype), output=0),
                      host_call(np.linalg.eigh, (x,), x.shape, x.dtype, output=1))


def eigvalsh(x, /):
    return host_call(np.linalg.eigvalsh, (_square(x, "eigvalsh"),), x.shape[:-1], _real(x.dtype))


def inv(x, /):
    return host_call(np.linalg.inv, (_square(x, "inv"),), x.shape, x.dtype)


def matmul(x1, x2, /):
    return _lt_linalg.matmul(x1, x2)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    shape = x.shape[:-2] + ((1, 1) if keepdims else ())
    return host_call(np.linalg.matrix_norm, (_floating(x, "matrix_norm"),), shape, _real(x.dtype),
                     keepdims=keepdims, ord=ord)


def matrix_power(x, n, /):
    return host_call(np.linalg.matrix_power, (_square(x, "matrix_power"),), x.shape, x.dtype, n=n)


def _with_rtol(fn, x, rtol, shape, dtype):
    """fn(x, rtol=rtol) as a lazy host call; an array rtol is an operand of the node, a number an attr."""
    if hasattr(rtol, "shape"):
        return host_call(_call_with_rtol, (x, rtol), shape, dtype, fn=fn)
    return host_call(fn, (x,), shape, dtype, **({} if rtol is None else {"rtol": rtol}))


def _call_with_rtol(x, rtol, fn):
    return fn(x, rtol=rtol)


def matrix_rank(x, /, *, rtol=None):
    return _with_rtol(np.linalg.matrix_rank, _floating(x, "matrix_rank"), rtol, x.shape[:-2], dtypes.int64)


def matrix_transpose(x, /):
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: needs at least 2 dims, got shape {x.shape}")
    return shape_ops.matrix_transpose(x)


def outer(x1, x2, /):
    return _lt_linalg.outer(x1, x2)


def pinv(x, /, *, rtol=None):
    shape = x.shape[:-2] + (x.shape[-1], x.shape[-2])
    return _with_rtol(np.linalg.pinv, _floating(x, "pinv"), rtol, shape, x.dtype)


def qr(x, /, *, mode="reduced"):
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    _floating(x, "qr")
    m, n = x.shape[-2:]
    k = m if mode == "complete" else min(m, n)
    batch = x.shape[:-2]
    return QRResult(host_call(np.linalg.qr, (x,), batch + (m, k), x.dtype, output=0, mode=mode),
                    host_call(np.linalg.qr, (x,), batch + (k, n), x.dtype, output=1, mode=mode))


def slogdet(x, /):
    _square(x, "slogdet")
    return SlogdetResult(host_call(np.linalg.slogdet, (x,), x.shape[:-2], x.dtype, output=0),
                         host_call(np.linalg.slogdet, (x,), x.shape[:-2], _real(x.dtype), output=1))


def solve(x1, x2, /):
    """x such that x1 @ x = x2; x2 is (..., M, K), or (M,) for one right-hand side vector."""
    _square(x1, "solve")
    dt = dtypes.promote(x1.dtype, x2.dtype)
    if x2.ndim == 1:
        shape = x1.shape[:-1]
    else:
        shape = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + x2.shape[-2:]
    return host_call(np.linalg.solve, (cast(x1, dt), cast(x2, dt)), shape, dt)


def svd(x, /, *, full_matrices=True):
    _floating(x, "svd")
    m, n = x.shape[-2:]
    k = min(m, n)
    batch = x.shape[:-2]
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    return SVDResult(host_call(np.linalg.svd, (x,), batch + u, x.dtype, output=0, full_matrices=full_matrices),
                     host_call(np.linalg.svd, (x,), batch + (k,), _real(x.dtype), output=1,
                               full_matrices=full_matrices),
                     host_call(np.linalg.svd, (x,), batch + vh, x.dtype, output=2, full_matrices=full_matrices))


def svdvals(x, /):
    _floating(x, "svdvals")
    return host_call(np.linalg.svdvals, (x,), x.shape[:-2] + (min(x.shape[-2:]),), _real(x.dtype))


def tensordot(x1, x2, /, *, axes=2):
    """Sums of products over the last `axes` axes of x1 and the first of x2 (or two axis lists), as one
    matrix product of reshaped operands."""
    if isinstance(axes, int):
        if axes < 0:
            raise ValueError(f"tensordot: axes must be non-negative, got {axes}")
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1 = [normalize_axis("tensordot", a, x1.ndim) for a in axes[0]]
        a2 = [normalize_axis("tensordot", a, x2.ndim) for a in axes[1]]
    if [x1.shape[a] for a in a1] != [x2.shape[a] for a in a2]:
        raise ValueError(f"tensordot: contracted axes of shapes {x1.shape} and {x2.shape} differ in size")
    free1 = [a for a in range(x1.ndim) if a not in a1]
    free2 = [a for a in range(x2.ndim) if a not in a2]
    k = math.prod(x1.shape[a] for a in a1)
    left = shape_ops.permute(x1, *(free1 + a1)).reshape(math.prod(x1.shape[a] for a in free1), k)
    right = shape_ops.permute(x2, *(a2 + free2)).reshape(k, math.prod(x2.shape[a] for a in free2))
    return _lt_linalg.matmul(left, right).reshape(*[x1.shape[a] for a in free1], *[x2.shape[a] for a in free2])


def trace(x, /, *, offset=0, dtype=None):
    d = diagonal(x, offset=offset)
    if dtype is not None:
        d = cast(d, dtypes.as_dtype(dtype))
    return reductions.sum(d, dim=-1)


def vecdot(x1, x2, /, *, axis=-1):
    """Sum over `axis` of conj(x1) * x2 (broadcast first)."""
    shape = np.broadcast_shapes(x1.shape, x2.shape)
    if x1.dtype.is_complex:
        x1 = unary("conj", x1)
    ax = normalize_axis("vecdot", axis, len(shape))
    if x1.shape[ax - len(shape) + x1.ndim] != x2.shape[ax - len(shape) + x2.ndim]:
        raise ValueError(f"vecdot: axis {axis} differs in size between {x1.shape} and {x2.shape}")
    product = binary("mul", x1, x2)
    return cast(reductions.sum(product, dim=ax), product.dtype)  # in the operands' dtype, not widened


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise TypeError(f"linalg.vector_norm: needs a floating-point array, got {x.dtype}")
    axes = None if axis is None else (axis if isinstance(axis, tuple) else (axis,))
    if axes is None:
        shape = (1,) * x.ndim if keepdims else ()
    else:
        norm = {normalize_axis("vector_norm", a, x.ndim) for a in axes}
        shape = tuple(1 if d in norm else n for d, n in enumerate(x.shape) if keepdims or d not in norm)
    return host_call(np.linalg.vector_norm, (x,), shape, _real(x.dtype), axis=axes, keepdims=keepdims, ord=ord)
