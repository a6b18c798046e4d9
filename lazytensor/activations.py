"""Composite functions built from the core ops: softmax, log_softmax, relu-family helpers."""
from .elementwise import binary, unary
from .reductions import amax, sum as sum_


def softmax(x, dim=-1, *, axis=None):
    """exp(x - max) / sum(exp(x - max)) along `dim`: stable for large inputs."""
    d = axis if axis is not None else dim
    if not x.dtype.is_floating_point:
        x = x.float()
    shifted = binary("sub", x, amax(x.detach(), d, keepdim=True))  # shift-invariant: no gradient via max
    e = unary("exp", shifted)
    return binary("div", e, sum_(e, d, keepdim=True))


def log_softmax(x, dim=-1, *, axis=None):
    """(x - max) - log(sum(exp(x - max))) along `dim`: stable for large inputs."""
    d = axis if axis is not None else dim
    if not x.dtype.is_floating_point:
        x = x.float()
    shifted = binary("sub", x, amax(x.detach(), d, keepdim=True))  # shift-invariant: no gradient via max
    return binary("sub", shifted, unary("log", sum_(unary("exp", shifted), d, keepdim=True)))
