"""PyTorch's older spellings that programs still use: the typed tensor classes (`FloatTensor`,
`LongTensor`, ... as constructors, as `isinstance` checks and as `.type()` arguments), the legacy
`Tensor(2, 3)` / `Tensor([1, 2])` constructor, `Tensor.type()`, `Tensor.view(dtype)` (the same bytes
read as another dtype) and `autograd.Variable`. Bound when the package loads."""
import importlib

import numpy as np

from . import dtypes
from .array_api._host import host_call
from .creation import tensor, zeros
from .elementwise import cast
from .shape_ops import reshape
from .tensor import Tensor


class _TypedTensor(type):
    """The metaclass of FloatTensor and its kin: calling one makes a tensor of its dtype, isinstance
    checks a tensor's dtype."""

    def __call__(cls, *args, device=None):
        return legacy_new(cls.dtype, args, device)

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype

    def __repr__(cls):
        return f"<class 'torch.{cls.__name__}'>"


def _typed(name, dtype):
    return _TypedTensor(name, (), {"dtype": dtype, "__doc__": f"PyTorch's legacy {name}: a {dtype.name} tensor."})


TYPED = {d: _typed(n, d) for n, d in (
    ("FloatTensor", dtypes.float32), ("DoubleTensor", dtypes.float64), ("HalfTensor", dtypes.float16),
    ("BFloat16Tensor", dtypes.bfloat16), ("LongTensor", dtypes.int64), ("IntTensor", dtypes.int32),
    ("ShortTensor", dtypes.int16), ("CharTensor", dtypes.int8), ("ByteTensor", dtypes.uint8),
    ("BoolTensor", dtypes.bool_))}
_BY_NAME = {cls.__name__: cls for cls in TYPED.values()}


def legacy_new(dtype, args, device=None):
    """PyTorch's legacy constructors: no arguments (an empty tensor), sizes (zeros of that shape: PyTorch
    leaves them uninitialized), a shape (a tuple of ints: what `x.size()` gives here, a torch.Size in
    PyTorch), or data (a list, array or tensor)."""
    if len(args) == 1 and isinstance(args[0], tuple) and args[0] and all(_is_size(a) for a in args[0]):
        args = args[0]  # Tensor(x.size())
    if all(_is_size(a) for a in args):
        return zeros(*args, dtype=dtype, device=device) if args else zeros(0, dtype=dtype, device=device)
    if len(args) == 1:
        data = args[0]
        if isinstance(data, Tensor):
            return cast(data, dtype)
        return tensor(data, dtype=dtype, device=device)
    raise TypeError(f"{TYPED[dtype].__name__}(...) takes sizes (ints) or one sequence of data, got "
                    f"{', '.join(type(a).__name__ for a in args)}")


def _is_size(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def type_(self, dtype=None, non_blocking=False, **kwargs):
    """PyTorch's `type()`: with no argument the type's name ("torch.FloatTensor"); given a typed class
    (`torch.LongTensor`), its name as a string, or a dtype, this tensor converted to it."""
    if dtype is None:
        return f"torch.{TYPED[self.dtype].__name__}" if self.dtype in TYPED else f"torch.{self.dtype.name}"
    if isinstance(dtype, _TypedTensor):
        target = dtype.dtype
    elif isinstance(dtype, str) and dtype.rsplit(".", 1)[-1] in _BY_NAME:
        target = _BY_NAME[dtype.rsplit(".", 1)[-1]].dtype
    else:
        target = dtypes.as_dtype(dtype)
    return self if target is self.dtype else cast(self, target)


def _reinterpret(array, to):
    return np.ascontiguousarray(array).view(np.dtype(to))


def view(self, *shape, dtype=None):
    """PyTorch's `view`: a new shape (as reshape), or given a dtype the same bytes read as that dtype
    (the last dimension scaled by the ratio of the element sizes)."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)) and dtype is None:
        dtype = shape[0]
        shape = ()
    if dtype is None:
        return reshape(self, *shape)
    target = dtypes.as_dtype(dtype)
    old, new = self.dtype.itemsize, target.itemsize
    if old == new:
        out_shape = self.shape
    else:
        if self.ndim == 0 or (self.shape[-1] * old) % new:
            raise ValueError(f"view({target}): the last dimension ({self.shape[-1] if self.ndim else 'none'}) of "
                             f"{self.dtype.name} elements does not hold a whole number of {target.name} elements")
        out_shape = self.shape[:-1] + (self.shape[-1] * old // new,)
    return host_call(_reinterpret, (self,), out_shape, target, to=target.np.str)


def Variable(data, requires_grad=False, volatile=False):  # noqa: N802 (PyTorch's name)
    """PyTorch's legacy `autograd.Variable`: since PyTorch 0.4 a Variable is a tensor; this gives a new
    leaf holding `data`'s value, recording gradients when `requires_grad`."""
    out = data.detach() if isinstance(data, Tensor) else tensor(data)
    return out.requires_grad_(True) if requires_grad else out


def bind():
    """Tensor(...) takes the legacy forms; Tensor.type and Tensor.view(dtype)."""
    # the module, not the package's `tensor` function of the same name
    importlib.import_module(".tensor", __package__).LEGACY_CONSTRUCTOR = lambda args: legacy_new(dtypes.float32, args)
    Tensor.type = type_
    Tensor.view = view
