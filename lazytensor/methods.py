"""Binds the op modules onto Tensor as operators and methods: tensor.py defines the class, the op modules
build nodes from it, and this module (imported last by the package) joins the two."""
import numpy as np

from . import dtypes
from . import (activations, autograd, elementwise, grad_mode, indexing, inplace, linalg, reductions, shape_ops,
               sorting)
from .elementwise import BINARY_FUNCTIONS, UNARY_FUNCTIONS, binary, unary
from .runtime import hostio
from .tensor import Tensor


_OPERAND_TYPES = (Tensor, int, float, bool, complex, np.number, np.bool_, np.ndarray, list, tuple)


def _reflected(op):
    def method(self, other):
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return binary(op, other, self)
    return method


def _forward(op):
    def method(self, other):
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        return binary(op, self, other)
    return method


_OPERATORS = {
    "add": ("__add__", "__radd__"), "sub": ("__sub__", "__rsub__"), "mul": ("__mul__", "__rmul__"),
    "div": ("__truediv__", "__rtruediv__"), "floordiv": ("__floordiv__", "__rfloordiv__"),
    "mod": ("__mod__", "__rmod__"), "pow": ("__pow__", "__rpow__"),
    "bitwise_left_shift": ("__lshift__", "__rlshift__"), "bitwise_right_shift": ("__rshift__", "__rrshift__"),
}
for _op, (_fwd, _rev) in _OPERATORS.items():
    setattr(Tensor, _fwd, _forward(_op))
    setattr(Tensor, _rev, _reflected(_op))


def _bitwise(logical, bitwise, reflected):
    """&, |, ^: the logical op (which devices run) on two bools, else the bitwise one (integers)."""
    def method(self, other):
        if not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        both_bool = self.dtype == dtypes.bool_ and (
            other.dtype == dtypes.bool_ if isinstance(other, Tensor) else isinstance(other, (bool, np.bool_)))
        op = logical if both_bool else bitwise
        return binary(op, other, self) if reflected else binary(op, self, other)
    return method


for _kind, (_fwd, _rev) in {"and": ("__and__", "__rand__"), "or": ("__or__", "__ror__"),
                            "xor": ("__xor__", "__rxor__")}.items():
    setattr(Tensor, _fwd, _bitwise("logical_" + _kind, "bitwise_" + _kind, False))
    setattr(Tensor, _rev, _bitwise("logical_" + _kind, "bitwise_" + _kind, True))
for _op, _name in {"eq": "__eq__", "ne": "__ne__", "lt": "__lt__", "le": "__le__",
                   "gt": "__gt__", "ge": "__ge__"}.items():
    setattr(Tensor, _name, _forward(_op))

Tensor.__array_ufunc__ = None  # NumPy defers to Tensor's reflected operators (ndarray + Tensor -> Tensor)
Tensor.__neg__ = lambda self: unary("neg", self)
Tensor.__pos__ = lambda self: self
Tensor.__abs__ = lambda self: unary("abs", self)
Tensor.__invert__ = lambda self: (elementwise.logical_not(self) if self.dtype == dtypes.bool_
                                  else unary("bitwise_invert", self))
Tensor.__matmul__ = lambda self, other: linalg.matmul(self, other)
Tensor.__rmatmul__ = lambda self, other: linalg.matmul(other, self)
Tensor.__getitem__ = lambda self, key: indexing.getitem(self, key)


def _setitem(self, key, value):
    if grad_mode.is_grad_enabled() and (self._grad_fn is not None or (isinstance(value, Tensor)
                                                                      and value.requires_grad)):
        if self._grad_fn is None:
            self._check_writable("setitem")  # a leaf that requires grad: refused, as in PyTorch
        inplace.setitem_recorded(self, key, value)
        return
    self._check_writable("setitem")
    indexing.setitem(self, key, value)


def _backward(self, gradient=None, retain_graph=None, create_graph=False):
    """Build lazy gradients of this tensor into every leaf's .grad (computes and downloads nothing)."""
    autograd.backward(self, gradient, retain_graph, create_graph)


Tensor.__setitem__ = _setitem
Tensor.backward = _backward

for _name, _fn in {**UNARY_FUNCTIONS, **BINARY_FUNCTIONS}.items():  # every elementwise record, aliases too
    setattr(Tensor, _name, _fn)
Tensor.real = property(UNARY_FUNCTIONS["real"], doc="The real part (PyTorch's attribute; lt.real(x) too).")
Tensor.imag = property(UNARY_FUNCTIONS["imag"], doc="The imaginary part (PyTorch's attribute; lt.imag(x) too).")
Tensor.clip = Tensor.clamp = elementwise.clip
Tensor.where = lambda self, condition, other: elementwise.where(condition, self, other)

for _name in ("sum", "prod", "mean", "var", "std", "amax", "amin", "argmax", "argmin", "max", "min",
              "any", "all"):
    setattr(Tensor, _name, getattr(reductions, _name))

Tensor.matmul = linalg.matmul
Tensor.reshape = shape_ops.reshape
Tensor.view = shape_ops.reshape
Tensor.permute = shape_ops.permute
Tensor.transpose = shape_ops.transpose
Tensor.swapaxes = shape_ops.transpose
Tensor.expand = shape_ops.expand
Tensor.broadcast_to = shape_ops.broadcast_to
Tensor.expand_as = lambda self, other: shape_ops.broadcast_to(self, other.shape)
Tensor.squeeze = shape_ops.squeeze
Tensor.unsqueeze = shape_ops.unsqueeze
Tensor.flatten = shape_ops.flatten
Tensor.contiguous = shape_ops.contiguous
Tensor.split = shape_ops.split
Tensor.chunk = shape_ops.chunk
Tensor.flip = shape_ops.flip
Tensor.roll = shape_ops.roll
Tensor.repeat = shape_ops.repeat
Tensor.tile = shape_ops.tile
Tensor.unbind = shape_ops.unbind
Tensor.outer = linalg.outer
Tensor.bmm = linalg.bmm
Tensor.isnan = elementwise.isnan
Tensor.isinf = elementwise.isinf
Tensor.isfinite = elementwise.isfinite
Tensor.nan_to_num = elementwise.nan_to_num
Tensor.lerp = elementwise.lerp
Tensor.logsumexp = reductions.logsumexp
Tensor.cumsum = sorting.cumsum
Tensor.cumprod = sorting.cumprod
Tensor.index_add = indexing.index_add
Tensor.scatter_add = indexing.scatter_add
Tensor.scatter = indexing.scatter
Tensor.norm = linalg.norm
Tensor.diag = linalg.diag
Tensor.addmm = linalg.addmm
Tensor.baddbmm = linalg.baddbmm
Tensor.argsort = sorting.argsort
Tensor.sort = sorting.sort
Tensor.topk = sorting.topk
Tensor.multinomial = sorting.multinomial
Tensor.T = property(lambda self: shape_ops.transpose(self))
Tensor.mT = property(shape_ops.matrix_transpose)

Tensor.narrow = indexing.narrow
Tensor.index_select = indexing.index_select
Tensor.gather = indexing.gather
Tensor.take_along_axis = indexing.take_along_axis
Tensor.masked_fill = indexing.masked_fill
Tensor.tril = indexing.tril
Tensor.triu = indexing.triu

Tensor.softmax = activations.softmax
Tensor.log_softmax = activations.log_softmax


def _to_device(self, device, /, *, stream=None):
    """The Array API's to_device: this array, copied to `device` now (see Tensor.to, lazytensor/torch_methods.py)."""
    if stream is not None:
        raise ValueError("to_device: streams are not supported; pass stream=None")
    return self.to(device)


def _dlpack(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
    """DLPack export of the value on the host (downloaded first if it lives on a device only): the
    consumer shares the host memory, so NumPy and PyTorch read it without a copy."""
    if dl_device not in (None, (1, 0)):
        raise BufferError(f"__dlpack__: lazytensor exports host memory (device (1, 0)), not {dl_device}")
    arr = hostio.host_array(self._node, "dlpack")
    kwargs = {} if max_version is None else {"max_version": max_version}
    if copy:
        arr = arr.copy()
    try:
        return arr.__dlpack__(stream=stream, **kwargs)
    except BufferError:  # a read-only host value cannot be signalled as such to an old consumer
        return arr.copy().__dlpack__(stream=stream, **kwargs)


def _recorded(self):
    """Whether x takes part in gradient recording now: then `x op= y` rebinds the name to a new tensor
    (Python's fallback), since rewriting x in place would corrupt the recorded graph."""
    return grad_mode.is_grad_enabled() and (self.requires_grad or self._grad_fn is not None)


def _inplace(op):
    """x op= y: the result written into x itself (the same Tensor object, as in PyTorch and the Array
    API), in x's dtype and shape."""
    def method(self, other):
        if _recorded(self) or not isinstance(other, _OPERAND_TYPES):
            return NotImplemented
        result = binary(op, self, other)
        if result.shape != self.shape:
            raise ValueError(f"in-place {op}: the result's shape {result.shape} is not x's {self.shape}")
        if result.dtype != self.dtype:
            if not np.can_cast(result.dtype.np, self.dtype.np, casting="same_kind"):
                raise TypeError(f"in-place {op}: the result's dtype {result.dtype} cannot be stored in x's "
                                f"{self.dtype}")
            result = elementwise.cast(result, self.dtype)
        self._node = result._node
        return self
    return method


Tensor.to_device = _to_device
Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = lambda self: (1, 0)
Tensor.__complex__ = lambda self: complex(self._scalar("complex"))
for _op, _name in {"add": "__iadd__", "sub": "__isub__", "mul": "__imul__", "div": "__itruediv__",
                   "floordiv": "__ifloordiv__", "mod": "__imod__", "pow": "__ipow__",
                   "bitwise_left_shift": "__ilshift__", "bitwise_right_shift": "__irshift__"}.items():
    setattr(Tensor, _name, _inplace(_op))


def _inplace_bitwise(kind):
    def method(self, other):
        if _recorded(self):
            return NotImplemented
        result = getattr(Tensor, f"__{kind}__")(self, other)
        if result is NotImplemented:
            return result
        if result.shape != self.shape or result.dtype != self.dtype:
            raise TypeError(f"in-place {kind}: the result ({result.dtype}, {result.shape}) does not fit x "
                            f"({self.dtype}, {self.shape})")
        self._node = result._node
        return self
    return method


for _kind in ("and", "or", "xor"):
    setattr(Tensor, f"__i{_kind}__", _inplace_bitwise(_kind))
Tensor.__imatmul__ = lambda self, other: _assign_matmul(self, other)


def _assign_matmul(self, other):
    if _recorded(self):
        return NotImplemented
    result = linalg.matmul(self, other)
    if result.shape != self.shape or result.dtype != self.dtype:
        raise ValueError(f"in-place matmul: the result ({result.dtype}, {result.shape}) does not fit x "
                         f"({self.dtype}, {self.shape})")
    self._node = result._node
    return self
Tensor.astype = elementwise.cast
Tensor.type = elementwise.cast
Tensor.float = lambda self: elementwise.cast(self, dtypes.float32)
Tensor.double = lambda self: elementwise.cast(self, dtypes.float64)
Tensor.half = lambda self: elementwise.cast(self, dtypes.float16)
Tensor.bfloat16 = lambda self: elementwise.cast(self, dtypes.bfloat16)
Tensor.int = lambda self: elementwise.cast(self, dtypes.int32)
Tensor.long = lambda self: elementwise.cast(self, dtypes.int64)
Tensor.bool = lambda self: elementwise.cast(self, dtypes.bool_)
Tensor.clone = lambda self: Tensor._from_op("contiguous", (self,), {}, self.shape, self.dtype)
