"""Adagrad, RMSprop and Adadelta with PyTorch's algorithms, defaults and state names. Each step builds
the updates lazily and realizes the parameters and state together; the state tensors keep their
objects (lt.jit follows them), the learning rate is re-read at each replay."""
from .. import compiled
from ..creation import full, zeros_like
from ..elementwise import scalar
from .optimizer import ElementwiseOptimizer, implementation_flags


def _check(name, **values):
    for key, value in values.items():
        if value < 0:
            raise ValueError(f"{name}: invalid {key}={value} (must be non-negative)")


class Adagrad(ElementwiseOptimizer):
    """sum += g^2; p -= clr * g / (sqrt(sum) + eps), clr = lr / (1 + (step - 1) * lr_decay)."""

    STATE_TENSORS, STATE_COUNTS = ("sum",), ("step",)

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 foreach=None, *, maximize=False, differentiable=False, fused=None):
        implementation_flags("Adagrad", foreach, fused, differentiable=differentiable)
        _check("Adagrad", lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps,
               initial_accumulator_value=initial_accumulator_value)
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value, "eps": eps,
                                  "maximize": maximize})

    def _initial_state(self, p, group):
        return {"step": 0, "sum": full(p.shape, group["initial_accumulator_value"], dtype=p.dtype)}

    def _update(self, p, g, st, group, lr):
        st["step"] += 1
        if group["lr_decay"]:
            lr = scalar(group["lr"] / (1 + (st["step"] - 1) * group["lr_decay"]), p.dtype)
            compiled.dynamic(lr, lambda: group["lr"] / (1 + (st["step"] - 1) * group["lr_decay"]))
        total = st["sum"] + g * g
        self._set(st, "sum", total)
        return p - lr * g / (total.sqrt() + group["eps"])


class RMSprop(ElementwiseOptimizer):
    """square_avg = alpha sq + (1 - alpha) g^2; avg = sqrt(square_avg (- grad_avg^2 when centered)) + eps;
    p -= lr * g / avg (through a momentum buffer when momentum > 0)."""

    STATE_TENSORS, STATE_COUNTS = ("square_avg", "momentum_buffer", "grad_avg"), ("step",)

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        implementation_flags("RMSprop", foreach, None, capturable, differentiable)
        _check("RMSprop", lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps, "weight_decay": weight_decay,
                                  "momentum": momentum, "centered": centered, "maximize": maximize})

    def _initial_state(self, p, group):
        st = {"step": 0, "square_avg": zeros_like(p)}
        if group["momentum"] > 0:
            st["momentum_buffer"] = zeros_like(p)
        if group["centered"]:
            st["grad_avg"] = zeros_like(p)
        return st

    def _expected_state(self, p):
        group = next(g for g in self.param_groups if any(q is p for q in g["params"]))
        return set(self._initial_state(p, group))

    def _update(self, p, g, st, group, lr):
        st["step"] += 1
        alpha = group["alpha"]
        square_avg = st["square_avg"] * alpha + g * g * (1.0 - alpha)
        self._set(st, "square_avg", square_avg)
        if group["centered"]:
            grad_avg = st["grad_avg"] * alpha + g * (1.0 - alpha)
            self._set(st, "grad_avg", grad_avg)
            avg = (square_avg - grad_avg * grad_avg).sqrt() + group["eps"]
        else:
            avg = square_avg.sqrt() + group["eps"]
        if group["momentum"] > 0:
            buf = st["momentum_buffer"] * group["momentum"] + g / avg
            self._set(st, "momentum_buffer", buf)
            return p - lr * buf
        return p - lr * g / avg


class Adadelta(ElementwiseOptimizer):
    """square_avg = rho sq + (1 - rho) g^2; delta = sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g;
    acc_delta = rho acc + (1 - rho) delta^2; p -= lr * delta."""

    STATE_TENSORS, STATE_COUNTS = ("square_avg", "acc_delta"), ("step",)

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *, capturable=False,
                 maximize=False, differentiable=False):
        implementation_flags("Adadelta", foreach, None, capturable, differentiable)
        _check("Adadelta", lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        if rho > 1:
            raise ValueError(f"Adadelta: invalid rho={rho} (must be in [0, 1])")
        super().__init__(params, {"lr": lr, "rho": rho, "eps": eps, "weight_decay": weight_decay,
                                  "maximize": maximize})

    def _initial_state(self, p, group):
        return {"step": 0, "square_avg": zeros_like(p), "acc_delta": zeros_like(p)}

    def _update(self, p, g, st, group, lr):
        st["step"] += 1
        rho, eps = group["rho"], group["eps"]
        square_avg = st["square_avg"] * rho + g * g * (1.0 - rho)
        delta = (st["acc_delta"] + eps).sqrt() / (square_avg + eps).sqrt() * g
        self._set(st, "square_avg", square_avg)
        self._set(st, "acc_delta", st["acc_delta"] * rho + delta * delta * (1.0 - rho))
        return p - lr * delta
