"""Tensor methods PyTorch programs call beyond the op modules: `to(...)` in all its forms, `cpu()`/`cuda()`,
`new_zeros` and its family, `type_as`, `view_as`, `t`, `mm`, `equal`/`allclose`, `add(alpha=)`, and
NumPy's functions (`np.mean(t)`) on tensors. Bound onto Tensor when the package loads."""
import numpy as np

from . import dtypes, elementwise, linalg, shape_ops
from .creation import empty, full, tensor as _tensor
from .device_spec import device as _device
from .elementwise import binary
from .runtime import devices as _devices, hostio
from .tensor import Tensor


def _dtype_or_none(spec):
    try:
        return dtypes.as_dtype(spec)
    except TypeError:
        return None


def _is_device(spec):
    return _devices.is_device_name(spec) if isinstance(spec, str) else False


def _move(self, where):
    """This tensor, its value copied to `where` now (see Tensor.to)."""
    where = _devices.resolve_placement(where)
    if where == "cpu":
        hostio.place_on_host(self._node)
    else:
        hostio.place_on_device(self._node, _devices.active_device())
    self._placed = where
    return self


def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False, memory_format=None):
    """PyTorch's forms: `to(dtype)`, `to(device)`, `to(device, dtype)`, `to(other)` (other's dtype and
    device) and the keywords. A device move copies the value there now and returns this tensor (its
    value unchanged); a dtype gives a converted tensor. `non_blocking` is accepted: copies never block
    the program here, host reads wait for what they need. `copy=True` always gives a new tensor."""
    del non_blocking, memory_format
    if len(args) > 2:
        raise TypeError(f"to() takes at most 2 positional arguments, got {len(args)}")
    for arg in args:
        if isinstance(arg, Tensor):
            dtype, device = dtype or arg.dtype, device or arg.device
        elif _is_device(arg):
            device = arg
        elif _dtype_or_none(arg) is not None:
            dtype = arg
        else:
            raise ValueError(f"to({arg!r}): not a dtype ({', '.join(d.name for d in dtypes.ALL)}) nor a device "
                             f"({', '.join(_devices.names()[1:])})")
    out = self
    if dtype is not None:
        out = elementwise.cast(out, dtypes.as_dtype(dtype))
    if copy and out is self:
        out = self.clone()
    if device is not None:
        if not _is_device(device):
            raise ValueError(f"to(device={device!r}): unknown device; choose one of {', '.join(_devices.names()[1:])}")
        out = _move(out, str(device))
    return out


def cpu(self):
    """This tensor with its value on the host (downloaded now if a device holds the only copy: the
    transfer log shows it); PyTorch's `.cpu()`."""
    return _move(self, "cpu")


def cuda(self, device=None, non_blocking=False):
    """`.to("cuda")`: the value copied to the CUDA device when it is the active one (else a notice and
    the value stays on the host)."""
    return _move(self, "cuda" if device is None else str(_device("cuda", device) if isinstance(device, int)
                                                         else device))


def _size(size):
    return tuple(size[0]) if len(size) == 1 and isinstance(size[0], (list, tuple)) else tuple(size)


def _new(fill):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        dt = self.dtype if dtype is None else dtypes.as_dtype(dtype)
        out = full(_size(size), fill, dtype=dt, device=device)
        return out.requires_grad_(True) if requires_grad else out
    return method


def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    out = full(tuple(size), fill_value, dtype=self.dtype if dtype is None else dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
    out = empty(*_size(size), dtype=self.dtype if dtype is None else dtype, device=device)
    return out.requires_grad_(True) if requires_grad else out


def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False):
    """A new tensor of `data` (copied), in this tensor's dtype unless given."""
    if isinstance(data, Tensor):
        data = data.detach().numpy()
    return _tensor(data, dtype=self.dtype if dtype is None else dtype, device=device, requires_grad=requires_grad)


def type_as(self, other):
    return elementwise.cast(self, other.dtype)


def view_as(self, other):
    return shape_ops.reshape(self, other.shape)


def t(self):
    """The transpose of a matrix (a 0-d or 1-d tensor is returned as it is), PyTorch's `t()`."""
    if self.ndim > 2:
        raise ValueError(f"t() expects a tensor with at most 2 dimensions, got {self.ndim}; use transpose(a, b) "
                         f"or .mT")
    return self if self.ndim < 2 else shape_ops.transpose(self, 0, 1)


def mm(self, other):
    """The product of two matrices (no broadcasting), PyTorch's `mm`."""
    if not isinstance(other, Tensor):
        raise TypeError(f"mm: expected a Tensor, got {type(other).__name__}")
    if self.ndim != 2 or other.ndim != 2:
        raise ValueError(f"mm: both operands must be matrices, got shapes {self.shape} and {other.shape}")
    return linalg.matmul(self, other)


def equal(a, b):
    """True when the two tensors have the same shape and equal elements (one bool: a host read);
    elementwise equality is `a == b`."""
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"equal: expected two Tensors, got {type(a).__name__} and {type(b).__name__}")
    return a.shape == b.shape and bool((a == b).all())


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise (bool), as torch.isclose and np.isclose; infinities are
    close to equal infinities."""
    a, b = (x if isinstance(x, Tensor) else _tensor(x) for x in (a, b))
    if a.dtype != b.dtype and not (a.dtype.is_floating_point and b.dtype.is_floating_point):
        raise TypeError(f"isclose: {a.dtype} and {b.dtype} differ; convert one first")
    wide = dtypes.float64
    fa, fb = elementwise.cast(a, wide), elementwise.cast(b, wide)
    close = ((fa - fb).abs() <= atol + rtol * fb.abs()) | (fa == fb)
    if equal_nan:
        close = close | (fa.isnan() & fb.isnan())
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Whether every element of `a` is close to the one of `b` (isclose, broadcast): one bool."""
    return bool(isclose(a, b, rtol, atol, equal_nan).all())


def _with_alpha(op):
    def method(self, other, *, alpha=1):
        if alpha != 1:
            other = binary("mul", other, alpha) if isinstance(other, Tensor) else other * alpha
        return binary(op, self, other)
    method.__name__ = op
    method.__doc__ = f"self {'+' if op == 'add' else '-'} alpha * other (PyTorch's `{op}` with `alpha=`)."
    return method


add = _with_alpha("add")
sub = _with_alpha("sub")


def addcmul(self, tensor1, tensor2, *, value=1):
    """self + value * tensor1 * tensor2."""
    return self + tensor1 * tensor2 * value if value != 1 else self + tensor1 * tensor2


def addcdiv(self, tensor1, tensor2, *, value=1):
    """self + value * tensor1 / tensor2."""
    return self + tensor1 / tensor2 * value if value != 1 else self + tensor1 / tensor2


# NumPy functions called on a tensor (np.mean(t), np.sum(t, axis=0)): computed by lazytensor and returned
# as NumPy gives them for an array (a host read), so NumPy code keeps working with tensors in it.
_NUMPY_REDUCTIONS = {np.sum: "sum", np.mean: "mean", np.max: "amax", np.min: "amin", np.amax: "amax",
                     np.amin: "amin", np.prod: "prod", np.std: "std", np.var: "var", np.any: "any",
                     np.all: "all", np.argmax: "argmax", np.argmin: "argmin"}


def _plain(value):
    """`value` with every tensor in it (also inside lists and tuples) as a NumPy array (a host read)."""
    if isinstance(value, Tensor):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def _array_function(self, func, types, args, kwargs):
    name = _NUMPY_REDUCTIONS.get(func)
    if name is None or not args or args[0] is not self or any(isinstance(a, Tensor) for a in args[1:]):
        return func(*_plain(tuple(args)), **{k: _plain(v) for k, v in kwargs.items()})
    if set(kwargs) - {"axis", "dtype", "keepdims", "ddof", "out"} or len(args) > 2 or kwargs.get("out") is not None:
        return func(*_plain(tuple(args)), **{k: _plain(v) for k, v in kwargs.items()})
    axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
    dtype, keepdims, ddof = kwargs.get("dtype"), kwargs.get("keepdims", False), kwargs.get("ddof", 0)
    if dtype is None and name in ("mean", "std", "var") and not self.dtype.is_floating_point:
        dtype = dtypes.float64  # NumPy's mean of integers
    x = self if dtype is None else elementwise.cast(self, dtype)
    method = getattr(x, name)
    if name in ("argmax", "argmin"):
        result = method(axis, keepdim=keepdims)
    elif name in ("std", "var"):
        result = method(dim=axis, correction=ddof, keepdim=keepdims)
    else:
        result = method(dim=axis, keepdim=keepdims)
    value = np.asarray(result)
    return value[()] if value.ndim == 0 else value


def pin_memory(self, device=None):
    """This tensor: host values already reach a device through a pinned staging buffer."""
    return self


def _on(kind):
    """PyTorch's `is_cuda`/`is_cpu`/...: whether the tensor's device (see Tensor.device) is of that kind."""
    return property(lambda self: self.device.type == kind, doc=f"Whether this tensor's device is {kind!r}.")


def bind():
    """Put the methods above on Tensor."""
    for kind in ("cpu", "cuda", "xpu", "mps", "meta"):
        setattr(Tensor, f"is_{kind}", _on(kind))
    for name, fn in {"to": to, "cpu": cpu, "cuda": cuda, "new_zeros": _new(0), "new_ones": _new(1),
                     "new_full": new_full, "new_empty": new_empty, "new_tensor": new_tensor, "type_as": type_as,
                     "view_as": view_as, "t": t, "mm": mm, "equal": equal, "isclose": isclose,
                     "allclose": allclose, "add": add, "sub": sub, "subtract": sub, "addcmul": addcmul,
                     "addcdiv": addcdiv, "pin_memory": pin_memory, "__array_function__": _array_function}.items():
        setattr(Tensor, name, fn)
