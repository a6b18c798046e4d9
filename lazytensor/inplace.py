"""PyTorch's in-place methods (`add_`, `mul_`, `zero_`, `clamp_`, `addcmul_`, ...) and `Tensor.data`.

An in-place method gives the same Tensor object a new value (a new graph node; values are never written
over, so a gradient record that saw the old value keeps it). As in PyTorch it is refused on a leaf that
requires grad while gradients are recorded; on a tensor computed with gradients it is refused too (even
under no_grad), with a message: rebinding (`x = x + y`) keeps the recorded graph right.

`t.data` is the value without gradient tracking that writes through: `p.data.add_(g, alpha=-lr)` and
`p.data = v` change `p` itself, as in PyTorch.
"""
from . import elementwise, grad_mode, torch_methods
from . import random as _random
from .creation import full, like_device
from .elementwise import binary, unary
from .tensor import Tensor


def _settle(self, result, name):
    """Give `self` the value `result` in self's dtype and shape; returns self."""
    if result.shape != self.shape:
        raise ValueError(f"{name}: the result's shape {result.shape} is not the tensor's {self.shape} "
                         f"(an in-place result cannot broadcast the tensor itself)")
    if result.dtype != self.dtype:
        if self.dtype.is_floating_point is False and result.dtype.is_floating_point:
            raise TypeError(f"{name}: a {result.dtype} result cannot be stored in this {self.dtype} tensor")
        result = elementwise.cast(result, self.dtype)
    self._node = result._node
    return self


def _check(self, name):
    """Refuse what would make the recorded graph disagree with the value: any in-place change of a tensor
    computed with gradients (PyTorch detects it at backward; here the value and its record would part
    silently), and one of a leaf that requires grad while gradients are recorded."""
    if self._grad_fn is not None:
        raise RuntimeError(f"{name}: this tensor was computed with gradients; write `x = x.{name[:-1]}(...)` "
                           f"instead (an in-place change would corrupt the recorded graph)")
    if self.requires_grad and grad_mode.is_grad_enabled():
        raise RuntimeError(f"{name}: this tensor is a leaf that requires grad; update it inside "
                           f"`with lt.no_grad():` (or through .data)")


def _inplace(name, compute):
    def method(self, *args, **kwargs):
        _check(self, name)
        with grad_mode.no_grad():
            return _settle(self, compute(self, *args, **kwargs), name)
    method.__name__ = name
    method.__doc__ = f"The in-place form of `{name[:-1]}`: this tensor gets the result (same object); returns it."
    return method


def _div(self, other, *, rounding_mode=None):
    if rounding_mode is None:
        return binary("div", self, other)
    if rounding_mode == "floor":
        return binary("floordiv", self, other)
    if rounding_mode == "trunc":
        return binary("div", self, other).trunc()
    raise ValueError(f"div_: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")


_METHODS = {
    "add_": torch_methods.add,
    "sub_": torch_methods.sub,
    "mul_": lambda self, other: binary("mul", self, other),
    "div_": _div,
    "pow_": lambda self, exponent: binary("pow", self, exponent),
    "neg_": lambda self: unary("neg", self),
    "abs_": lambda self: unary("abs", self),
    "sqrt_": lambda self: unary("sqrt", self),
    "exp_": lambda self: unary("exp", self),
    "log_": lambda self: unary("log", self),
    "sigmoid_": lambda self: unary("sigmoid", self),
    "tanh_": lambda self: unary("tanh", self),
    "relu_": lambda self: unary("relu", self),
    "clamp_": lambda self, min=None, max=None: elementwise.clip(self, min, max),
    "clip_": lambda self, min=None, max=None: elementwise.clip(self, min, max),
    "lerp_": lambda self, end, weight: elementwise.lerp(self, end, weight),
    "addcmul_": torch_methods.addcmul,
    "addcdiv_": torch_methods.addcdiv,
    "masked_fill_": lambda self, mask, value: self.masked_fill(mask, value),
}


def zero_(self):
    """Every element set to zero; returns this tensor."""
    _check(self, "zero_")
    return _settle(self, full(self.shape, 0, dtype=self.dtype, device=like_device(self)), "zero_")


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Uniform values on [a, b) from the seeded generator (PyTorch's argument names)."""
    _check(self, "uniform_")
    return _random.uniform_(self, a, b, generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    _check(self, "normal_")
    return _random.normal_(self, mean, std, generator)


class _Data(Tensor):
    """What `t.data` gives: t's value, not tracked by autograd, and every new value it is given (an
    in-place method, a host write) becomes t's value too."""

    __slots__ = ("_owner",)

    def __init__(self, owner):
        owner._node.used = True  # the two handles share a value: host writes must copy
        object.__setattr__(self, "_owner", owner)
        Tensor.__init__(self, owner._node)

    @property
    def _node(self):
        return self._owner._node

    @_node.setter
    def _node(self, node):
        self._owner._node = node


def _get_data(self):
    return _Data(self)


def _set_data(self, value):
    if not isinstance(value, Tensor):
        raise TypeError(f"data: assign a Tensor, got {type(value).__name__}")
    value._node.used = True
    self._node = value._node


def bind():
    for name, compute in _METHODS.items():
        setattr(Tensor, name, _inplace(name, compute))
    Tensor.zero_ = zero_
    Tensor.uniform_ = uniform_
    Tensor.normal_ = normal_
    Tensor.data = property(_get_data, _set_data, doc="The value without gradient tracking; writes go to this "
                                                     "tensor (PyTorch's `.data`).")
