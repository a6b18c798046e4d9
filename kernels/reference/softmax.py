"""Softmax, log-softmax and their gradients along one axis, defined by the reference kernels they are
made of, so each is the same value the composite graph of those ops computes (docs/NUMERICS.md; for
rows over 4096 elements the composite's `sum` blocks, while these keep the left fold):

    softmax(x)          = e / sum(e),                e = exp(x - amax(x))
    log_softmax(x)      = s - log(sum(exp(s))),      s = x - amax(x)
    softmax_grad(y, g)  = y * (g - sum(g * y))       (y = softmax(x), g = dL/dy)
    log_softmax_grad(y, g) = g - exp(y) * sum(g)     (y = log_softmax(x))

Every op rounds to the result dtype as it would as a node; each sum is the float64 left fold along the
axis, rounded once. Not in the bit-identical class (exp and log are transcendentals).
"""
import numpy as np

from .elementwise import ELEMENTWISE_KERNELS as _EW
from .reduce import REDUCE_KERNELS as _RED
from .reduce import left_sum


def _ops(attrs):
    axis, dtype = attrs["axis"], attrs["dtype"]
    ew = {"dtype": dtype}
    red = {"axes": (axis,), "keepdims": True, "dtype": dtype}

    def total(v):
        return left_sum(red, v)
    return ew, red, total


def _shifted(ew, red, x):
    """x - amax(x) along the axis (an empty row has no maximum, and nothing to shift)."""
    if x.shape[red["axes"][0]] == 0:
        return x.astype(ew["dtype"])
    return _EW["sub"](ew, x, _RED["amax"](red, x))


def softmax(attrs, x):
    ew, red, total = _ops(attrs)
    e = _EW["exp"](ew, _shifted(ew, red, x))
    return _EW["div"](ew, e, total(e))


def log_softmax(attrs, x):
    ew, red, total = _ops(attrs)
    shifted = _shifted(ew, red, x)
    return _EW["sub"](ew, shifted, _EW["log"](ew, total(_EW["exp"](ew, shifted))))


def softmax_grad(attrs, y, g):
    ew, _, total = _ops(attrs)
    return _EW["mul"](ew, y, _EW["sub"](ew, g, total(_EW["mul"](ew, g, y))))


def log_softmax_grad(attrs, y, g):
    ew, _, total = _ops(attrs)
    return _EW["sub"](ew, g, _EW["mul"](ew, _EW["exp"](ew, y), total(g)))


SOFTMAX_KERNELS = {"softmax": softmax, "log_softmax": log_softmax, "softmax_grad": softmax_grad,
                   "log_softmax_grad": log_softmax_grad}


def prepared(op, attrs, dtypes):
    """softmax(attrs, x) for x of `dtypes` as a call with fewer NumPy calls, the same bytes: the row
    maximum from `max`, not from the first maximum's position, differs only in which zero (+0.0 or -0.0)
    comes out, and x - 0.0 and x + 0.0 differ only for zero x, whose exp is 1 either way; a row with
    a NaN maximum (whose payload would depend on which NaN) takes the kernel. None for other ops, or
    an input not already of the result dtype."""
    ew, red, total = _ops(attrs)
    out = np.dtype(ew["dtype"])
    if op != "softmax" or dtypes[0] != out or out.kind != "f":
        return None
    axis, kernel = attrs["axis"], SOFTMAX_KERNELS[op]
    exp, wide = np.exp, np.float64

    def call(x):
        if x.shape[axis] == 0:
            return kernel(attrs, x)
        top = x.max(axis=axis, keepdims=True)
        if np.isnan(top).any():
            return kernel(attrs, x)
        e = np.asarray(exp((x - top).astype(wide))).astype(out, copy=False)  # exp's kernel: in float64, rounded
        return np.asarray(e / total(e))
    return call
