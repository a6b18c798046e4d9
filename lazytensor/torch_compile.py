"""`lt.compile`, PyTorch's `torch.compile` backed by `lt.jit`: `model = torch.compile(model)` and
`@torch.compile` work as written, PyTorch's keyword arguments accepted.

A compiled function is `lt.jit` of it. A compiled module is an `OptimizedModule` holding the original as
`_orig_mod` (so its state dict's keys carry PyTorch's `_orig_mod.` prefix, which programs strip): its
calls replay a capture where a replay can stand for the call (grad mode off, or nothing in it needs a
gradient: evaluation, generation) and run the module itself where the result will be differentiated
after the call (a training forward; the engine still sees and plans the whole step then, and repeats of
it replay their realizations).
"""
from . import grad_mode
from .compiled import jit
from .nn.module import Module
from .tensor import Tensor


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,  # noqa: A001
            disable=False):
    """PyTorch's torch.compile: a module becomes an OptimizedModule, a function `lt.jit` of it; called
    without a model, a decorator. `disable=True` returns the model as it is; the other arguments choose
    among PyTorch's compilers and are accepted (lazytensor has one)."""
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                  options=options, disable=disable)
    if disable:
        return model
    if isinstance(model, Module):
        return OptimizedModule(model)
    if not callable(model):
        raise TypeError(f"compile: expected a module or a function, got {type(model).__name__}")
    return jit(model)


class OptimizedModule(Module):
    """A compiled module (see the module docstring): the original under `_orig_mod`, its attributes
    reachable through this one."""

    def __init__(self, mod):
        super().__init__()
        self._orig_mod = mod
        object.__setattr__(self, "_replayed", jit(lambda *args, **kwargs: mod(*args, **kwargs)))

    def forward(self, *args, **kwargs):
        if grad_mode.is_grad_enabled() and (any(p.requires_grad for p in self._orig_mod.parameters())
                                            or any(isinstance(a, Tensor) and a.requires_grad
                                                   for a in (*args, *kwargs.values()))):
            return self._orig_mod(*args, **kwargs)
        return self._replayed(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["_orig_mod"], name)
