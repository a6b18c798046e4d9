"""Module and Parameter: the PyTorch-shaped container for layers, their parameters and buffers."""
import collections

import numpy as np

from .. import dtypes, grad_mode
from ..compiled import note_module
from ..runtime import hostio
from ..tensor import Tensor


def _is_dtype(spec):
    try:
        dtypes.as_dtype(spec)
    except TypeError:
        return False
    return True


class Parameter(Tensor):
    """A tensor that a Module registers as trainable (requires_grad by default)."""

    __slots__ = ()

    def __init__(self, data, requires_grad=True):
        node = data._node if isinstance(data, Tensor) else None
        if node is None:
            raise TypeError(f"Parameter(...) takes a Tensor, got {type(data).__name__}")
        node.used = True  # the parameter and `data` share a value: host writes must copy
        super().__init__(node, requires_grad=requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Layers hold Parameters, buffers and sub-Modules as attributes; calling a module runs forward()."""

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError("call super().__init__() before assigning attributes in a Module")
        for table in (self._parameters, self._buffers, self._modules):
            table.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for table in ("_parameters", "_buffers", "_modules"):
            if table in d and name in d[table]:
                return d[table][name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._buffers, self._modules):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def register_buffer(self, name, tensor):
        """A tensor that belongs to the module's state (moved by .to(), saved in state_dict) but is not trained."""
        self._buffers[name] = tensor

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        note_module(self)  # while lt.jit captures a call, this module's train/eval mode is a guard
        return self.forward(*args, **kwargs)

    # ---- traversal ----------------------------------------------------------------------------------
    def named_modules(self, prefix=""):
        stack, seen = [(prefix, self)], set()
        while stack:
            name, mod = stack.pop(0)
            if id(mod) in seen:
                continue
            seen.add(id(mod))
            yield name, mod
            stack[0:0] = [(f"{name}.{k}" if name else k, m) for k, m in mod._modules.items()]

    def modules(self):
        return (m for _, m in self.named_modules())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix=""):
        """(name, Parameter) pairs, each parameter once (a tied weight under its first name)."""
        seen = set()
        for mod_name, mod in self.named_modules(prefix):
            for name, p in mod._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mod_name}.{name}" if mod_name else name), p

    def parameters(self):
        return (p for _, p in self.named_parameters())

    def named_buffers(self):
        for mod_name, mod in self.named_modules():
            for name, b in mod._buffers.items():
                yield (f"{mod_name}.{name}" if mod_name else name), b

    # ---- modes and placement ---------------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def to(self, device_or_dtype):
        """Copy every parameter and buffer to a device now (as Tensor.to does), or convert the
        floating-point ones to a float dtype in place (the same Tensor objects, so an optimizer made
        before still holds them; their gradients are dropped); returns self."""
        if device_or_dtype is not None and _is_dtype(device_or_dtype):
            return self._cast(dtypes.as_dtype(device_or_dtype))
        for _, t in list(self.named_parameters()) + list(self.named_buffers()):
            t.to(device_or_dtype)
        return self

    def _cast(self, dtype):
        if not dtype.is_floating_point:
            raise TypeError(f"Module.to: parameters can only be converted to a floating-point dtype, not {dtype}")
        with grad_mode.no_grad():
            for _, t in list(self.named_parameters()) + list(self.named_buffers()):
                if t.dtype.is_floating_point and t.dtype != dtype:
                    t._node = t.detach().to(dtype)._node
                    t.grad = None
        return self

    def half(self):
        return self._cast(dtypes.float16)

    def bfloat16(self):
        return self._cast(dtypes.bfloat16)

    def float(self):
        return self._cast(dtypes.float32)

    def double(self):
        return self._cast(dtypes.float64)

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            p.grad = None

    def num_parameters(self):
        return sum(p.numel() for p in self.parameters())

    # ---- state -------------------------------------------------------------------------------------------
    def state_dict(self):
        """Name -> tensor (detached) for every parameter and buffer, in registration order."""
        out = collections.OrderedDict()
        for name, mod in self.named_modules():
            for k, p in mod._parameters.items():
                out[f"{name}.{k}" if name else k] = p.detach()
            for k, b in mod._buffers.items():
                out[f"{name}.{k}" if name else k] = b.detach()
        return out

    def load_state_dict(self, state, strict=True):
        """Copy values into the parameters and buffers; KeyError/ValueError name what does not match."""
        own = self.state_dict()
        missing = [k for k in own if k not in state]
        unexpected = [k for k in state if k not in own]
        if strict and (missing or unexpected):
            raise KeyError(f"load_state_dict: missing keys {missing}, unexpected keys {unexpected}")
        targets = {}
        for name, mod in self.named_modules():
            for table in (mod._parameters, mod._buffers):
                for k, t in table.items():
                    targets[f"{name}.{k}" if name else k] = t
        for key, value in state.items():
            if key not in targets:
                continue
            target = targets[key]
            arr = value if isinstance(value, np.ndarray) else None
            shape = value.shape if arr is None else arr.shape
            if tuple(shape) != target.shape:
                raise ValueError(f"load_state_dict: {key} has shape {tuple(shape)} in the state but "
                                 f"{target.shape} in the model")
            with grad_mode.no_grad():
                if arr is not None:
                    target._node = hostio.replace_value(arr.astype(target._node.dtype, copy=True), "load")
                else:
                    target._node = value.detach().to(target.dtype)._node
                    target._node.used = True
        return self

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""
