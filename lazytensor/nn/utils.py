"""Gradient utilities."""
from .. import grad_mode
from ..tensor import Tensor


def clip_grad_norm_(parameters, max_norm, eps=1e-6):
    """Scale all gradients so their global L2 norm is at most max_norm; returns the norm (a lazy scalar)."""
    # a generator (model.parameters()) is read once here: the total and the scaling both need it
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        raise ValueError("clip_grad_norm_: no parameter has a gradient; call backward() first")
    with grad_mode.no_grad():
        if all(g.dtype == grads[0].dtype and g.dtype.is_floating_point for g in grads):
            # one node for the whole total (kernels/reference/optim.py), not three per gradient
            total = Tensor._from_op("sum_of_squares", grads, {"dtype": grads[0].dtype.np}, (), grads[0].dtype)
        else:
            total = None
            for g in grads:
                sq = (g * g).sum()
                total = sq if total is None else total + sq
        norm = total.sqrt()
        coef = (max_norm / (norm + eps)).clip(max=1.0)
        for p in parameters:
            if p.grad is not None:
                p.grad = p.grad * coef
    return norm


def clip_grad_value_(parameters, clip_value):
    """Clamp every gradient elementwise to [-clip_value, clip_value] (lazily); `parameters` may be a
    generator (read once)."""
    parameters = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    value = float(clip_value)
    with grad_mode.no_grad():
        for p in parameters:
            if p.grad is not None:
                p.grad = p.grad.clip(-value, value)
