"""Module and Parameter: the PyTorch-shaped container for layers, their parameters and buffers."""
import collections

import numpy as np

from .. import dtypes, grad_mode
from ..compiled import note_module
from ..runtime import hostio
from ..tensor import Tensor
from . import value_names


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


class IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns (PyTorch's shape): the keys the state lacked and the ones it had extra."""


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
        is_buffer = name in self._buffers and (value is None or (isinstance(value, Tensor)
                                                                and not isinstance(value, Parameter)))
        for table in (self._parameters, self._modules) if is_buffer else (self._parameters, self._buffers,
                                                                           self._modules):
            table.pop(name, None)
        self.__dict__.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            value_names.note(value, name)
        elif isinstance(value, Module):
            self._modules[name] = value
        elif is_buffer:
            self._buffers[name] = value  # a buffer stays a buffer when given a new tensor (PyTorch's rule)
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

    def register_buffer(self, name, tensor, persistent=True):
        """A tensor (or None) that belongs to the module (moved by .to()) but is not trained; saved in
        state_dict unless `persistent` is False."""
        if not isinstance(name, str) or "." in name or not name:
            raise KeyError(f"register_buffer: the name must be a non-empty string without '.', got {name!r}")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: {name!r} must be a Tensor or None, got {type(tensor).__name__}")
        if name in self._parameters or name in self._modules:
            raise KeyError(f"register_buffer: {name!r} is already a parameter or submodule")
        self.__dict__.pop(name, None)
        self._buffers[name] = tensor
        self.__dict__.setdefault("_non_persistent", set())
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def register_parameter(self, name, param):
        """Add `param` (a Parameter, or None) under `name`."""
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: {name!r} must be a Parameter or None, got {type(param).__name__}")
        if param is None:
            self.__dict__.pop(name, None)
            self._parameters[name] = None
        else:
            setattr(self, name, param)

    def add_module(self, name, module):
        """Add `module` (a Module, or None) as the submodule `name`."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {name!r} must be a Module or None, got {type(module).__name__}")
        if module is None:
            self._modules[name] = None
        else:
            setattr(self, name, module)

    register_module = add_module

    def get_submodule(self, target):
        mod = self
        for part in target.split(".") if target else ():
            if part not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule {part!r}")
            mod = mod._modules[part]
        return mod

    def apply(self, fn):
        """Call `fn(module)` on every submodule (children first) and on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

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
            stack[0:0] = [(f"{name}.{k}" if name else k, m) for k, m in mod._modules.items() if m is not None]

    def modules(self):
        return (m for _, m in self.named_modules())

    def children(self):
        return (m for m in self._modules.values() if m is not None)

    def named_children(self):
        return ((k, m) for k, m in self._modules.items() if m is not None)

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(name, Parameter) pairs, each parameter once (a tied weight under its first name)."""
        seen = set()
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_name, mod in mods:
            for name, p in mod._parameters.items():
                if p is not None and (id(p) not in seen or not remove_duplicate):
                    seen.add(id(p))
                    full = f"{mod_name}.{name}" if mod_name else name
                    value_names.note(p, full)
                    yield full, p

    def parameters(self, recurse=True):
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix="", recurse=True):
        mods = self.named_modules(prefix) if recurse else [(prefix, self)]
        for mod_name, mod in mods:
            for name, b in mod._buffers.items():
                if b is not None:
                    full = f"{mod_name}.{name}" if mod_name else name
                    value_names.note(b, full)
                    yield full, b

    def buffers(self, recurse=True):
        return (b for _, b in self.named_buffers(recurse=recurse))

    # ---- modes and placement ---------------------------------------------------------------------------
    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", bool(mode))
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, device=None, dtype=None, non_blocking=False):
        """PyTorch's forms `to(device)`, `to(dtype)`, `to(device, dtype)`, `to(tensor)` and keywords: every
        parameter and buffer copied to the device now (as Tensor.to does), the floating-point ones
        converted to a float dtype in place (the same Tensor objects, so an optimizer made before still
        holds them; their gradients are dropped); returns self."""
        for arg in args:
            if isinstance(arg, Tensor):
                device, dtype = device or arg.device, dtype or arg.dtype
            elif arg is not None and _is_dtype(arg):
                dtype = arg
            else:
                device = arg
        if dtype is not None:
            self._cast(dtypes.as_dtype(dtype))
        if device is not None:
            for _, t in list(self.named_parameters()) + list(self.named_buffers()):
                t.to(device)
        return self

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda")

    def type(self, dst_type):
        return self.to(dtype=dst_type)

    def _cast(self, dtype):
        if not dtype.is_floating_point:
            raise TypeError(f"Module.to: parameters can only be converted to a floating-point dtype, not {dtype}")
        with grad_mode.no_grad():
            for _, t in list(self.named_parameters()) + list(self.named_buffers()):
                if t.dtype.is_floating_point and t.dtype != dtype:
                    t._node = t.detach().to(dtype)._node
                    t.grad = None
        return self

    def _factory(self, device=None, dtype=None):
        """PyTorch's factory arguments of a module's constructor: the parameters and buffers it made,
        converted to `dtype` (a float dtype) and copied to `device`, when given."""
        if dtype is not None and not dtypes.as_dtype(dtype).is_floating_point:
            raise TypeError(f"{type(self).__name__}: dtype must be a floating-point dtype, got {dtype}")
        if device is not None or dtype is not None:
            self.to(device=device, dtype=dtype)

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
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Name -> tensor (detached unless keep_vars) for every parameter and persistent buffer, in
        registration order."""
        out = collections.OrderedDict() if destination is None else destination
        for name, mod in self.named_modules():
            skip = mod.__dict__.get("_non_persistent", ())
            for table in (mod._parameters, mod._buffers):
                for k, t in table.items():
                    if t is not None and not (table is mod._buffers and k in skip):
                        out[prefix + (f"{name}.{k}" if name else k)] = t if keep_vars else t.detach()
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
            skip = mod.__dict__.get("_non_persistent", ())
            for table in (mod._parameters, mod._buffers):
                for k, t in table.items():
                    if t is not None and not (table is mod._buffers and k in skip):
                        targets[f"{name}.{k}" if name else k] = t
        for key, value in state.items():
            if key not in targets:
                continue
            target = targets[key]
            if not isinstance(value, (Tensor, np.ndarray)):
                value = np.asarray(value)  # another framework's tensor (its __array__) or nested lists
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
        return IncompatibleKeys(missing, unexpected)

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"  ({name}): {sub}")
        return lines[0] + ")" if len(lines) == 1 else "\n".join(lines) + "\n)"

    def extra_repr(self):
        return ""
