"""Layers: Linear, Embedding, LayerNorm, RMSNorm, Dropout, and the containers Sequential, ModuleList,
ModuleDict, ParameterList, ParameterDict (activations: activation_layers.py; losses: loss_layers.py)."""
import math

import numpy as np

from .. import grad_mode
from ..creation import ones, zeros
from ..random import randn, uniform
from . import functional as F
from ..tensor import Tensor
from .module import Module, Parameter


class Linear(Module):
    """y = x @ W.T + b, W of shape (out, in); PyTorch's init: U(-1/sqrt(in), 1/sqrt(in))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        with grad_mode.no_grad():
            self.weight = Parameter(uniform(out_features, in_features, low=-bound, high=bound))
            self.bias = Parameter(uniform(out_features, low=-bound, high=bound)) if bias else None
        self._factory(device, dtype)

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """Row lookup in a (num_embeddings, embedding_dim) table, initialized N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, *, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        with grad_mode.no_grad():
            self.weight = Parameter(randn(num_embeddings, embedding_dim))
        self._factory(device, dtype)

    def forward(self, idx):
        return F.embedding(idx, self.weight)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalize over the last dims to mean 0, variance 1 (biased), then scale and shift."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(ones(*self.normalized_shape)) if elementwise_affine else None
        self.bias = Parameter(zeros(*self.normalized_shape)) if elementwise_affine and bias else None
        self._factory(device, dtype)

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Dropout(Module):
    """Zero each element with probability p in training (scaling the rest by 1/(1-p)); identity in eval."""

    def __init__(self, p=0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class RMSNorm(Module):
    """x / sqrt(mean(x^2 over the trailing dims) + eps) * weight; eps None: the dtype's machine epsilon."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(ones(*self.normalized_shape)) if elementwise_affine else None
        self._factory(device, dtype)

    def forward(self, x):
        dims = tuple(range(x.ndim - len(self.normalized_shape), x.ndim))
        eps = self.eps if self.eps is not None else float(np.finfo(x.dtype.np).eps)
        out = x * ((x * x).mean(dim=dims, keepdim=True) + eps).rsqrt()
        return out * self.weight if self.weight is not None else out

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        for i, m in enumerate(modules):
            setattr(self, str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)


class ModuleDict(Module):
    """Submodules by name, in insertion order (registered, so their parameters are the module's)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def update(self, modules):
        items = modules.items() if isinstance(modules, dict) else modules
        for name, module in items:
            self[name] = module

    def __getitem__(self, name):
        return self._modules[name]

    def __setitem__(self, name, module):
        if not isinstance(name, str):
            raise TypeError(f"ModuleDict: keys must be strings, got {type(name).__name__}")
        setattr(self, name, module)

    def __delitem__(self, name):
        del self._modules[name]

    def __contains__(self, name):
        return name in self._modules

    def __iter__(self):
        return iter(self._modules)

    def __len__(self):
        return len(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


class ModuleList(Module):
    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __iter__(self):
        return iter(self._modules.values())

    def __len__(self):
        return len(self._modules)


def _as_parameter(value, where):
    if isinstance(value, Parameter) or value is None:
        return value
    if isinstance(value, Tensor):
        return Parameter(value)
    raise TypeError(f"{where}: expected a Parameter or a Tensor, got {type(value).__name__}")


class ParameterList(Module):
    """Parameters in a list, registered as "0", "1", ... (a tensor given is made a Parameter)."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value):
        setattr(self, str(len(self._parameters)), _as_parameter(value, "ParameterList"))
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i):
        items = list(self._parameters.values())
        return ParameterList(items[i]) if isinstance(i, slice) else items[i]

    def __setitem__(self, i, value):
        i = range(len(self))[i]
        setattr(self, str(i), _as_parameter(value, "ParameterList"))

    def __iter__(self):
        return iter(self._parameters.values())

    def __len__(self):
        return len(self._parameters)

    def __iadd__(self, values):
        return self.extend(values)

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter of shape {tuple(p.shape)}" for k, p in self._parameters.items())


class ParameterDict(Module):
    """Parameters by string key, in insertion order (a tensor given is made a Parameter)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def update(self, parameters):
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for key, value in items:
            self[key] = value

    def __getitem__(self, key):
        return self._parameters[key]

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(f"ParameterDict: keys must be strings, got {type(key).__name__}")
        setattr(self, key, _as_parameter(value, "ParameterDict"))

    def __delitem__(self, key):
        del self._parameters[key]

    def __contains__(self, key):
        return key in self._parameters

    def __iter__(self):
        return iter(self._parameters)

    def __len__(self):
        return len(self._parameters)

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def get(self, key, default=None):
        return self._parameters.get(key, default)

    def pop(self, key):
        return self._parameters.pop(key)

    def extra_repr(self):
        return "\n".join(f"({k}): Parameter of shape {tuple(p.shape)}" for k, p in self._parameters.items())
