"""Binds the op modules onto Tensor as operators and methods: tensor.py defines the class, the op modules
build nodes from it, and this module (imported last by the package) joins the two."""
import numpy as np

from . import dtypes
from . import activations, autograd, elementwise, indexing, linalg, reductions, shape_ops, sorting
from .elementwise import BINARY_FUNCTIONS, UNARY_FUNCTIONS, binary, unary
from .runtime import devices as _devices, hostio
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


def _to(self, target):
    """A dtype: this tensor converted to it. A device name ("cpu", "virtual", "cuda", any registered
    device): this tensor, realized and copied there now (self is returned; its value is unchanged)."""
    if _devices.is_device_name(target):
        where = _devices.resolve_placement(target)
        if where == "cpu":
            hostio.place_on_host(self._node)
        else:
            hostio.place_on_device(self._node, _devices.active_device())
        return self
    return elementwise.cast(self, target)


Tensor.to = _to
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
