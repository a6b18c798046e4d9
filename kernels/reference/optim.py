"""The fused AdamW update: one kernel reads (param, grad, m, v) and writes (param', m', v') stacked."""
import numpy as np

from .elementwise import ELEMENTWISE_KERNELS
from .reduce import REDUCE_KERNELS


def adamw(attrs, p, g, m, v, lr, bias1, bias2, scale=None):
    """PyTorch's AdamW step in float64, each output rounded once:
    p <- p * (1 - lr * wd); m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2;
    p <- p - (lr / bias1) * m / (sqrt(v) / sqrt(bias2) + eps).
    With a 0-d `scale` (clip_grad_norm_'s factor), g is first `g * scale` rounded to the dtype: the
    bytes of a `mul` node feeding the update."""
    b1, b2, eps, wd = attrs["beta1"], attrs["beta2"], attrs["eps"], attrs["weight_decay"]
    lr, bias1, bias2 = float(lr), float(bias1), float(bias2)
    if scale is not None:
        g = ELEMENTWISE_KERNELS["mul"]({"dtype": p.dtype}, g, scale)
    g64 = g.astype(np.float64)
    m64 = b1 * m.astype(np.float64) + (1.0 - b1) * g64
    v64 = b2 * v.astype(np.float64) + (1.0 - b2) * (g64 * g64)
    p64 = p.astype(np.float64) * (1.0 - lr * wd)
    p64 = p64 - (lr / bias1) * (m64 / (np.sqrt(v64) / np.sqrt(bias2) + eps))
    return np.stack([p64, m64, v64]).astype(p.dtype)


def adamw_many(attrs, *arrays):
    """adamw over several parameters at once: `arrays` are the parameters, then their gradients, their
    first and their second moments (`attrs["count"]` of each), then lr, bias1, bias2 and the optional
    scale shared by all; the result is (3, total elements) with each parameter's flattened (p', m', v')
    in its columns, in order: every element gets `adamw`'s arithmetic, so the same bytes."""
    k = attrs["count"]
    return adamw(attrs, *side_by_side(arrays[:4 * k], k), *arrays[4 * k:])


def side_by_side(arrays, count):
    """`arrays` in runs of `count`, each run flattened and concatenated: adamw_many's p, g, m and v."""
    return [np.concatenate([a.reshape(-1) for a in arrays[i:i + count]]) for i in range(0, len(arrays), count)]


def sum_of_squares(attrs, *grads):
    """sum(g0 * g0) + sum(g1 * g1) + ... as the composite of those ops computes it: each square rounded
    to the dtype, each sum the float64 left fold rounded once, the partial totals added left to right
    in the dtype. One node for clip_grad_norm_'s total instead of three per gradient."""
    ew, red = ELEMENTWISE_KERNELS, REDUCE_KERNELS
    dtype = np.dtype(attrs["dtype"])
    total = None
    for g in grads:
        square = ew["mul"]({"dtype": dtype}, g, g)
        s = red["sum"]({"axes": tuple(range(g.ndim)), "keepdims": False, "dtype": dtype}, square)
        total = s if total is None else ew["add"]({"dtype": dtype}, total, s)
    return np.asarray(total, dtype)


OPTIM_KERNELS = {"adamw": adamw, "adamw_many": adamw_many, "sum_of_squares": sum_of_squares}
