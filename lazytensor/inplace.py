"""PyTorch's in-place methods (`add_`, `mul_`, `zero_`, `clamp_`, `masked_fill_`, ...), `t[key] = v` on
tensors computed with gradients, and `Tensor.data`.

An in-place method gives the same Tensor object a new value (a new graph node; values are never written
over). Under autograd it is recorded as PyTorch records it: the tensor's value and gradient record are
rebound to the operation's, and its version goes up; records made before the change keep naming the
tensor as it was (a stand-in kept in `_history`), so gradients flow through the old value to where it
came from. As in PyTorch, a change is refused on a leaf that requires grad while gradients are recorded,
and backward raises PyTorch's error when a value some record saved for its gradient was changed in place
after (lazytensor/autograd.py `check_saved`). Under no_grad a change is invisible to autograd, as in
PyTorch: the tensor keeps its gradient record.

`t.data` is the value without gradient tracking that writes through: `p.data.add_(g, alpha=-lr)` and
`p.data = v` change `p` itself, as in PyTorch.
"""
import numpy as np

from . import elementwise, grad_mode, torch_methods
from . import random as _random
from .creation import from_numpy, full, like_device, zeros_like
from .elementwise import binary, unary
from .tensor import Tensor

# Ops whose gradient rule reads their output (PyTorch saves the result): changing it in place afterwards
# makes backward raise PyTorch's error (autograd.check_saved).
_SAVES_OUTPUT = frozenset({"exp", "tanh", "sigmoid", "relu", "sqrt", "rsqrt", "softmax", "log_softmax"})


def _conformed(self, result, name):
    """`result` in self's dtype (a cast recorded like any op), checked to have self's shape."""
    if result.shape != self.shape:
        raise ValueError(f"{name}: the result's shape {result.shape} is not the tensor's {self.shape} "
                         f"(an in-place result cannot broadcast the tensor itself)")
    if result.dtype != self.dtype:
        if self.dtype.is_floating_point is False and result.dtype.is_floating_point:
            raise TypeError(f"{name}: a {result.dtype} result cannot be stored in this {self.dtype} tensor")
        result = elementwise.cast(result, self.dtype)
    return result


def _new_version(self):
    """Before `self` changes: a stand-in for its present value and record goes to `_history` (records that
    named it keep meaning it) and the version goes up. Leaves that require grad keep no history (their
    gradient goes to the leaf itself), nor do tensors no record can have seen with gradients. Returns the
    stand-in, or None."""
    if self._grad_fn is None:
        return None
    stand_in = Tensor(self._node)
    stand_in._grad_fn, stand_in.requires_grad = self._grad_fn, self.requires_grad
    if self._grad_fn.op in _SAVES_OUTPUT:
        self._grad_fn.output_changed = self._version + 1
    _keep(self, stand_in)
    return stand_in


def _keep(self, stand_in):
    """`stand_in` stands for `self`'s present version from now on; the version goes up."""
    if self._history is None:
        self._history = {}
    self._history[self._version] = stand_in
    self._version += 1


def _settle(self, result, name):
    """Give `self` the value `result` without gradient recording (no_grad, or nothing needs gradients);
    a tensor computed with gradients keeps its record, as in PyTorch. Returns self."""
    result = _conformed(self, result, name)
    _new_version(self)
    self._node = result._node
    return self


def rebind(self, result, name):
    """Give `self` the value and the gradient record of `result` (computed from `self` with gradients
    recorded), PyTorch's in-place under autograd. Returns self."""
    result = _conformed(self, result, name)
    if self._grad_fn is None and not self.requires_grad:  # a plain tensor becomes a computed one
        stand_in = Tensor(self._node)
        _keep(self, stand_in)
    else:
        stand_in = _new_version(self)
    fn = result._grad_fn
    if fn is not None and stand_in is not None:  # the op read the value as it was: its record names that
        fn.parents = tuple(stand_in if p is self else p for p in fn.parents)
    self._node, self._grad_fn, self.requires_grad = result._node, fn, result.requires_grad
    return self


def _check(self, name):
    """Refuse a change of a leaf that requires grad while gradients are recorded (PyTorch refuses it too)."""
    if self.requires_grad and self._grad_fn is None and grad_mode.is_grad_enabled():
        raise RuntimeError(f"{name}: this tensor is a leaf that requires grad; update it inside "
                           f"`with lt.no_grad():` (or through .data)")


def _records(self, args, kwargs):
    """Whether the change is recorded: gradients on and the tensor or a tensor argument requires them."""
    if not grad_mode.is_grad_enabled():
        return False
    return self.requires_grad or any(isinstance(a, Tensor) and a.requires_grad for a in (*args, *kwargs.values()))


def _inplace(name, compute):
    def method(self, *args, **kwargs):
        _check(self, name)
        if _records(self, args, kwargs):
            return rebind(self, compute(self, *args, **kwargs), name)
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
    """Every element set to zero; returns this tensor (with no gradient through the old value)."""
    _check(self, "zero_")
    zeros = full(self.shape, 0, dtype=self.dtype, device=like_device(self))
    if grad_mode.is_grad_enabled() and self.requires_grad:
        return rebind(self, zeros, "zero_")
    return _settle(self, zeros, "zero_")


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Uniform values on [a, b) from the seeded generator (PyTorch's argument names)."""
    _check(self, "uniform_")
    return _random.uniform_(self, a, b, generator)


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    _check(self, "normal_")
    return _random.normal_(self, mean, std, generator)


def setitem_recorded(self, key, value):
    """`t[key] = value` on a tensor computed with gradients, recorded as PyTorch records it: the written
    positions take `value` (no gradient reaches the old value there), the others keep the tensor's value
    and its gradient path. The positions are worked out on the host (an index tensor is read there, as
    every setitem reads it)."""
    if isinstance(value, Tensor) and value.requires_grad:
        raise NotImplementedError("setitem: assigning a tensor that requires grad into another tensor with "
                                  "gradients is not supported; build the result with lt.where or cat")
    keys = key if isinstance(key, tuple) else (key,)
    host_key = tuple(k.numpy() if isinstance(k, Tensor) else k for k in keys)
    mask = np.zeros(self.shape, np.bool_)
    values = np.zeros(self.shape, self.dtype.np)
    try:
        mask[host_key] = True
        values[host_key] = value.numpy() if isinstance(value, Tensor) else value
    except (IndexError, ValueError) as exc:
        raise type(exc)(f"setitem: {exc}") from None
    return rebind(self, elementwise.where(from_numpy(mask), from_numpy(values), self), "setitem")


def fill_(self, value):
    """Every element set to `value`; under autograd a change of a computed tensor is recorded (no gradient
    reaches the old value). Returns self."""
    if grad_mode.is_grad_enabled() and self._grad_fn is not None:
        return rebind(self, full(self.shape, value, dtype=self.dtype, device=like_device(self)), "fill_")
    return _HOST_FILL(self, value)


def copy_(self, src, non_blocking=False):
    """This tensor gets `src` (broadcast, cast); under autograd the change is recorded and the gradient
    goes to `src` (and none to the old value), as in PyTorch. Returns self."""
    if grad_mode.is_grad_enabled() and (self._grad_fn is not None or (isinstance(src, Tensor) and src.requires_grad)):
        _check(self, "copy_")
        src = src if isinstance(src, Tensor) else from_numpy(np.asarray(src, self.dtype.np))
        return rebind(self, elementwise.cast(src, self.dtype).broadcast_to(self.shape) + zeros_like(self), "copy_")
    return _HOST_COPY(self, src, non_blocking)


_HOST_FILL, _HOST_COPY = Tensor.fill_, Tensor.copy_  # the host writes, for everything not recorded


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
    Tensor.fill_ = fill_
    Tensor.copy_ = copy_
    Tensor.uniform_ = uniform_
    Tensor.normal_ = normal_
    Tensor.data = property(_get_data, _set_data, doc="The value without gradient tracking; writes go to this "
                                                     "tensor (PyTorch's `.data`).")
