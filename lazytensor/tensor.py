"""Tensor: the user's handle on a lazy value (a graph node), with PyTorch/NumPy-style methods."""
import numpy as np

from . import dtypes, grad_mode
from .device_spec import device
from .errors import normalize_axis
from .kernels.ops import OPS
from .runtime import devices, hostio, scheduler
from .runtime.graph import Node
from .runtime.residency import Residency


# Ops that move or pick float16/bfloat16 values without arithmetic run on them as they are stored.
_STORED_AS_IS = frozenset(n for n, op in OPS.items() if op.family == "movement") | {
    "take", "take_along", "index", "full", "cast"}


LEGACY_CONSTRUCTOR = None  # set by lazytensor/legacy.py: Tensor(*sizes or data) -> a float32 tensor


class Size(int):
    """An int (a tensor's number of elements) that, called, answers PyTorch's size(): the shape, or
    with a dim that dimension's length; so both `x.size` (the Array API) and `x.size()` work."""

    def __new__(cls, shape):
        n = 1
        for d in shape:
            n *= d
        out = super().__new__(cls, n)
        out.shape = tuple(shape)
        return out

    def __call__(self, dim=None):
        if dim is None:
            return self.shape
        return self.shape[normalize_axis("size", dim, len(self.shape))]


class Tensor:
    """A lazy n-dimensional array. Operations build graph nodes; host reads compute and download."""

    # _version counts in-place changes that autograd must see; _history keeps the tensors that stood for
    # the earlier versions (lazytensor/inplace.py), which records made before a change still name
    __slots__ = ("_node", "requires_grad", "grad", "_grad_fn", "_placed", "_version", "_history", "__weakref__")

    def __init__(self, node=None, *legacy, requires_grad=False):
        if not isinstance(node, Node) or legacy:
            # PyTorch's legacy constructor: Tensor(2, 3) (float32, of that shape), Tensor([1, 2]) (that data)
            if LEGACY_CONSTRUCTOR is None:
                raise TypeError("Tensor(...) wraps a graph node; create tensors with lt.tensor(data)")
            node = LEGACY_CONSTRUCTOR(() if node is None else (node, *legacy))._node
        self._node = node
        self._placed = None
        self._version, self._history = 0, None
        self.grad = None
        self._grad_fn = None
        self.requires_grad = False
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _from_op(cls, op, inputs, attrs, shape, dtype):
        """Build a new pending node from Tensor inputs (used by every op module); records autograd."""
        dt = dtype.np if type(dtype) is dtypes.DType else dtypes.as_dtype(dtype).np
        if dtypes.storage_in_use and op not in _STORED_AS_IS and (dt in dtypes.STORAGE_NP or any(
                t._node.dtype in dtypes.STORAGE_NP for t in inputs)):
            return cls._widened(op, inputs, attrs, shape, dt)
        out = cls(Node(op, [t._node for t in inputs], attrs, shape, dt))
        if inputs:
            grad_mode.record(out, op, inputs, attrs)
        return out

    @classmethod
    def _widened(cls, op, inputs, attrs, shape, dt):
        """An op on float16/bfloat16 values: computed in float32 from the exactly widened operands, and
        a result of a storage dtype rounded back to it once (the kernels never see those dtypes)."""
        f32 = dtypes.float32
        widened, wide = {}, []  # one cast per operand node (x * x widens x once)
        for t in inputs:
            if t._node.dtype in dtypes.STORAGE_NP:
                if t._node not in widened:
                    widened[t._node] = cls._from_op("cast", (t,), {"dtype": f32.np}, t.shape, f32)
                t = widened[t._node]
            wide.append(t)
        if dt not in dtypes.STORAGE_NP:
            return cls._from_op(op, wide, attrs, shape, dt)
        if isinstance(attrs, dict) and attrs.get("dtype") is not None and np.dtype(attrs["dtype"]) == dt:
            attrs = {**attrs, "dtype": f32.np}
        out = cls._from_op(op, wide, attrs, shape, f32)
        return cls._from_op("cast", (out,), {"dtype": dt}, shape, dt)

    # ---- autograd ------------------------------------------------------------------------------------
    def requires_grad_(self, requires_grad=True):
        """Mark this tensor as a leaf whose gradient backward() accumulates into .grad."""
        if requires_grad and not self.dtype.is_floating_point:
            raise RuntimeError(f"only floating-point tensors can require gradients, this one is {self.dtype}")
        if not requires_grad and self._grad_fn is not None:
            raise RuntimeError("requires_grad_(False) is only for leaves; use .detach() on computed tensors")
        self.requires_grad = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._grad_fn is None

    @property
    def grad_fn(self):
        return self._grad_fn

    def detach(self):
        """The same value, cut off from gradient recording (shares the node; writes still copy)."""
        self._node.used = True
        return Tensor(self._node)

    def __deepcopy__(self, memo):
        """A new handle on the same value (values are never written over, so sharing one is a copy), of
        the same class (a Parameter stays one), with its requires_grad; the gradient is copied too."""
        out = type(self).__new__(type(self))
        self._node.used = True
        Tensor.__init__(out, self._node, requires_grad=self.requires_grad and self._grad_fn is None)
        out._placed = self._placed
        if self.grad is not None:
            out.grad = self.grad.__deepcopy__(memo)
        memo[id(self)] = out
        return out

    # ---- metadata -------------------------------------------------------------------------
    @property
    def shape(self):
        return self._node.shape

    @property
    def dtype(self):
        return dtypes.from_np(self._node.dtype)

    @property
    def ndim(self):
        return len(self._node.shape)

    def dim(self):
        return self.ndim

    @property
    def size(self):
        """The number of elements (the Array API's `x.size`), also callable as PyTorch's `x.size()`
        (the shape) and `x.size(dim)` (one dimension's length)."""
        return Size(self.shape)

    def numel(self):
        return self._node.size

    @property
    def nbytes(self):
        return self._node.nbytes

    @property
    def itemsize(self):
        return self._node.dtype.itemsize

    def element_size(self):
        return self.itemsize

    def is_floating_point(self):
        return self.dtype.is_floating_point

    @property
    def residency(self):
        """Where the value lives now: Residency.PENDING, HOST, DEVICE or BOTH."""
        buf = self._node.buffer
        return Residency.PENDING if buf is None else buf.state

    @property
    def device(self):
        """The device this tensor belongs to (an `lt.device`: a name with `.type`): where `.to()` (or a
        creation's `device=`) put it, else the active device ("cpu" when none is selected). It does not
        change as the engine moves the value; where copies of the value are held right now is `residency`."""
        if self._placed is not None:
            return device(self._placed)
        attrs = self._node.attrs
        forced = attrs.get("device") if isinstance(attrs, dict) else None
        return device(forced if forced is not None else devices.active_name())

    @property
    def is_realized(self):
        return self._node.buffer is not None

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    __hash__ = object.__hash__

    # ---- realization and host reads ------------------------------------------------------------
    def realize(self):
        """Compute this tensor now (no download); returns self."""
        scheduler.realize([self._node])
        return self

    def numpy(self):
        """The value as a read-only NumPy array (a host read)."""
        return hostio.export_array(self._node, "numpy")

    def __array__(self, dtype=None, copy=None):
        arr = hostio.export_array(self._node, "numpy")
        if copy:
            arr = np.array(arr, copy=True)
        return arr if dtype is None else arr.astype(dtype, copy=bool(copy))

    def item(self):
        """The single element as a Python number (a host read)."""
        if self.numel() != 1:
            raise ValueError(f"item(): only a tensor with one element can be converted to a Python "
                             f"number, this one has shape {self.shape}")
        return hostio.host_array(self._node, "item").reshape(()).item()

    def tolist(self):
        return hostio.host_array(self._node, "tolist").tolist()

    def _scalar(self, trigger):
        if self.numel() != 1:
            raise ValueError(f"{trigger}(): the truth value or number of a tensor with "
                             f"{self.numel()} elements is ambiguous (shape {self.shape}); "
                             f"use .any(), .all() or index one element")
        return hostio.host_array(self._node, trigger).reshape(()).item()

    def __bool__(self):
        return bool(self._scalar("bool"))

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __index__(self):
        if self.dtype.is_floating_point or self.dtype == dtypes.bool_:
            raise TypeError(f"only integer tensors can be used as an index, not {self.dtype}")
        return int(self._scalar("index"))

    def __repr__(self):
        arr = hostio.host_array(self._node, "print")
        if arr.dtype == dtypes.bfloat16.np:
            arr = arr.astype(np.float32)  # exact; NumPy prints ml_dtypes' bfloat16 as integers
        body = np.array2string(arr, separator=", ", prefix="tensor(",
                               floatmode="maxprec", threshold=1000)
        default = {dtypes.float32, dtypes.int64, dtypes.bool_}
        suffix = "" if self.dtype in default else f", dtype={self.dtype!r}"
        if arr.size == 0:
            suffix = f", size={self.shape}" + (f", dtype={self.dtype!r}" if self.dtype != dtypes.float32 else "")
        if self._grad_fn is not None:
            suffix += f", grad_fn=<{self._grad_fn.name}>"
        elif self.requires_grad:
            suffix += ", requires_grad=True"
        return f"tensor({body}{suffix})"

    __str__ = __repr__

    def __format__(self, spec):
        if self.ndim == 0:
            return format(hostio.host_array(self._node, "print").item(), spec)
        if spec:
            raise TypeError(f"format spec {spec!r} needs a 0-d tensor; this one has shape {self.shape}")
        return repr(self)

    # ---- host writes (t[key] = value is bound in lazytensor/methods.py) -----------------------------
    def _check_writable(self, op):
        if self.requires_grad and grad_mode.is_grad_enabled():
            raise RuntimeError(f"{op}: this tensor requires grad; write to it inside `with lt.no_grad():` "
                               f"(or write to a .detach()ed copy)")

    def fill_(self, value):
        """Overwrite every element with `value` on the host; returns self."""
        self._check_writable("fill_")
        arr = np.full(self.shape, value, dtype=self._node.dtype)
        self._node = hostio.replace_value(arr, "fill_")
        return self

    def copy_(self, src, non_blocking=False):
        """Overwrite this tensor with `src` (array-like or Tensor), broadcast and cast to this dtype
        (`non_blocking` is accepted: copies never block the program; reads wait for what they need)."""
        self._check_writable("copy_")
        if isinstance(src, Tensor):
            node = src.astype(self.dtype).broadcast_to(self.shape).contiguous()._node
            if node is src._node:
                node.used = True  # the two tensors share a value now: a host write to either must copy
            self._node = node
            return self
        arr = np.asarray(src)
        try:
            arr = np.array(np.broadcast_to(arr, self.shape), dtype=self._node.dtype, copy=True)
        except ValueError:
            raise ValueError(f"copy_: source of shape {np.shape(src)} cannot be broadcast to {self.shape}") from None
        self._node = hostio.replace_value(arr, "copy_")
        return self
