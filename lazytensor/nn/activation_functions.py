"""Activation functions in PyTorch's shape beyond relu/gelu/silu/softplus (functional.py): each is built
from differentiable elementwise ops, so it fuses with its neighbours and has PyTorch's gradient."""
from ..activations import softmax
from ..elementwise import where


def leaky_relu(x, negative_slope=0.01, inplace=False):
    return where(x > 0, x, x * negative_slope)


def elu(x, alpha=1.0, inplace=False):
    return where(x > 0, x, (x.clip(max=0.0).expm1()) * alpha)


def celu(x, alpha=1.0, inplace=False):
    return where(x > 0, x, ((x / alpha).clip(max=0.0).expm1()) * alpha)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805


def selu(x, inplace=False):
    return elu(x, _SELU_ALPHA) * _SELU_SCALE


def hardtanh(x, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val {min_val} is above max_val {max_val}")
    return x.clip(min_val, max_val)


def relu6(x, inplace=False):
    return x.clip(0.0, 6.0)


def hardsigmoid(x, inplace=False):
    return (x / 6.0 + 0.5).clip(0.0, 1.0)


def hardswish(x, inplace=False):
    return x * (x + 3.0).clip(0.0, 6.0) / 6.0


def logsigmoid(x):
    """log(sigmoid(x)), computed stably as min(x, 0) - log1p(exp(-|x|))."""
    return x.clip(max=0.0) - (-x.abs()).exp().log1p()


def softsign(x):
    return x / (x.abs() + 1.0)


def tanhshrink(x):
    return x - x.tanh()


def mish(x, inplace=False):
    """x * tanh(softplus(x))."""
    return x * softplus(x).tanh()


def softplus(x, beta=1.0, threshold=20.0):
    """log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold (as PyTorch)."""
    bx = x * beta
    return where(bx > threshold, x, bx.clip(max=threshold).exp().log1p() / beta)



def threshold(x, threshold, value, inplace=False):  # noqa: A002  (PyTorch's names)
    return where(x > threshold, x, value)


def glu(x, dim=-1):
    """a * sigmoid(b), a and b the two halves of x along `dim`."""
    if x.shape[dim] % 2:
        raise ValueError(f"glu: dim {dim} has odd size {x.shape[dim]}; it must split in halves")
    a, b = x.chunk(2, dim)
    return a * b.sigmoid()


def softmin(x, dim=None, dtype=None):
    if dim is None:
        raise TypeError("softmin: pass dim (PyTorch's implicit choice is deprecated)")
    return softmax(-x if dtype is None else -x.to(dtype), dim=dim)
