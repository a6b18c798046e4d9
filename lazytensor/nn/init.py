"""In-place initializers (as torch.nn.init): each gives the tensor a new seeded value without recording
gradients and returns it. Fans, gains and laws are PyTorch's."""
import math

import numpy as np

from .. import grad_mode
from .. import random as _random
from ..creation import eye, full, tensor


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for a nonlinearity (PyTorch's table)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
              "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _calculate_fan_in_and_fan_out(t):
    if t.ndim < 2:
        raise ValueError(f"fans need a tensor with at least 2 dimensions, got shape {t.shape}")
    receptive = math.prod(t.shape[2:])
    return t.shape[1] * receptive, t.shape[0] * receptive


def _fan(t, mode):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    return fan_in if mode == "fan_in" else fan_out


def uniform_(t, a=0.0, b=1.0, generator=None):
    with grad_mode.no_grad():
        return _random.uniform_(t, a, b, generator)


def normal_(t, mean=0.0, std=1.0, generator=None):
    with grad_mode.no_grad():
        return _random.normal_(t, mean, std, generator)


def constant_(t, val):
    with grad_mode.no_grad():
        t._node = full(t.shape, val, dtype=t.dtype)._node
    return t


def zeros_(t):
    return constant_(t, 0)


def ones_(t):
    return constant_(t, 1)


def eye_(t):
    if t.ndim != 2:
        raise ValueError(f"eye_: needs a 2-D tensor, got shape {t.shape}")
    with grad_mode.no_grad():
        t._node = eye(*t.shape, dtype=t.dtype)._node
    return t


def xavier_uniform_(t, gain=1.0, generator=None):
    """U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    a = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(t, -a, a, generator)


def xavier_normal_(t, gain=1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(t)
    return normal_(t, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)), generator)


def kaiming_uniform_(t, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b), b = gain * sqrt(3 / fan) (PyTorch's defaults: leaky_relu with slope a, fan_in)."""
    bound = calculate_gain(nonlinearity, a) * math.sqrt(3.0 / _fan(t, mode))
    return uniform_(t, -bound, bound, generator)


def kaiming_normal_(t, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    return normal_(t, 0.0, calculate_gain(nonlinearity, a) / math.sqrt(_fan(t, mode)), generator)


def trunc_normal_(t, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) restricted to [a, b]: values outside are drawn again until none is (each round
    reads on the host whether any is left), so the law is exactly the truncated normal."""
    if not a < b:
        raise ValueError(f"trunc_normal_: needs a < b, got [{a}, {b}]")
    with grad_mode.no_grad():
        x = _random.normal(mean, std, t.shape, dtype=t.dtype, generator=generator)
        for _ in range(1000):
            outside = (x < a) | (x > b)
            if not bool(outside.any()):
                break
            x = _random.normal(mean, std, t.shape, dtype=t.dtype, generator=generator).where(outside, x)
        else:
            raise ValueError(f"trunc_normal_: [{a}, {b}] holds almost none of Normal({mean}, {std})")
        t._node = x.realize()._node
    return t


def orthogonal_(t, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a normal one (on the host), times gain."""
    if t.ndim < 2:
        raise ValueError(f"orthogonal_: needs at least 2 dimensions, got shape {t.shape}")
    rows, cols = t.shape[0], math.prod(t.shape[1:])
    flat = _random.normal(0.0, 1.0, (rows, cols), dtype=t.dtype, generator=generator).numpy().astype(np.float64)
    q, r = np.linalg.qr(flat.T if rows < cols else flat)
    q = q * np.sign(np.diag(r))
    q = q.T if rows < cols else q
    with grad_mode.no_grad():
        t._node = (tensor(q.reshape(t.shape), dtype=t.dtype) * gain)._node
    return t


# PyTorch's old names (without the underscore)
uniform, normal, constant, xavier_uniform, xavier_normal = uniform_, normal_, constant_, xavier_uniform_, xavier_normal_
kaiming_uniform, kaiming_normal = kaiming_uniform_, kaiming_normal_
