"""The dtypes and the promotion rules (NumPy's table, Python scalars weak, default float32).

Five compute dtypes every backend runs (float32, float64, int32, int64, bool); the other integer
widths and complex64/complex128, which the host computes (devices and numba decline them); and two
storage dtypes (float16, bfloat16: 2 bytes per element; every op that computes on them widens to
float32 first and rounds its result back once, see docs/NUMERICS.md). bfloat16 is ml_dtypes' NumPy
dtype, as in JAX.
"""
import ml_dtypes
import numpy as np


class DType:
    """A tensor element type: a thin, printable wrapper around a NumPy dtype."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex")

    def __init__(self, name, np_dtype, floating=None):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f" if floating is None else floating
        self.is_complex = self.np.kind == "c"

    @property
    def itemsize(self):
        return self.np.itemsize

    def __repr__(self):
        return f"lt.{self.name}"

    def __eq__(self, other):
        if isinstance(other, DType):
            return other is self
        if other is None:
            return False  # np.dtype(None) is float64, but no dtype equals "no dtype"
        try:
            return as_dtype(other) is self
        except (TypeError, ValueError):  # np.dtype() raises either for things that are not dtypes
            return NotImplemented

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (as_dtype, (self.name,))


float32 = DType("float32", np.float32)
float64 = DType("float64", np.float64)
int32 = DType("int32", np.int32)
int64 = DType("int64", np.int64)
bool_ = DType("bool", np.bool_)
int8 = DType("int8", np.int8)
int16 = DType("int16", np.int16)
uint8 = DType("uint8", np.uint8)
uint16 = DType("uint16", np.uint16)
uint32 = DType("uint32", np.uint32)
uint64 = DType("uint64", np.uint64)
complex64 = DType("complex64", np.complex64)
complex128 = DType("complex128", np.complex128)
float16 = DType("float16", np.float16)
bfloat16 = DType("bfloat16", ml_dtypes.bfloat16, floating=True)

COMPUTE = (float32, float64, int32, int64, bool_)
HOST_COMPUTE = (int8, int16, uint8, uint16, uint32, uint64, complex64, complex128)
STORAGE = (float16, bfloat16)
ALL = COMPUTE + HOST_COMPUTE + STORAGE
STORAGE_NP = frozenset(d.np for d in STORAGE)
DEFAULT_FLOAT = float32
DEFAULT_INT = int64
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "int": int32, "long": int64, "half": float16,
                 "cfloat": complex64, "cdouble": complex128, "short": int16})
_BY_PY = {float: float32, int: int64, bool: bool_, complex: complex64}
DEFAULT_COMPLEX = complex64
_COMPLEX_OF = {float32: complex64, float64: complex128}
REAL_OF = {complex64: float32, complex128: float64}


# Set once a storage dtype is first asked for: until then Tensor._from_op skips checking for them
# (a check per op, a third of building a node's time).
storage_in_use = False


def _note_storage(dt):
    global storage_in_use
    if dt.np in STORAGE_NP:
        storage_in_use = True
    return dt


def as_dtype(spec):
    """Turn lt/NumPy dtypes, names and Python types into a DType; TypeError for anything else."""
    if isinstance(spec, DType):
        return _note_storage(spec)
    if isinstance(spec, type) and spec in _BY_PY:
        return _BY_PY[spec]
    if isinstance(spec, str) and spec in _BY_NAME:
        return _note_storage(_BY_NAME[spec])
    try:
        np_dtype = np.dtype(spec)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NP:
        return _note_storage(_BY_NP[np_dtype])
    supported = ", ".join(d.name for d in ALL)
    raise TypeError(f"unsupported dtype {spec!r}: lazytensor supports {supported}")


def from_np(np_dtype):
    """The DType for a NumPy dtype the engine produced (always one of ALL)."""
    dt = _BY_NP.get(np_dtype)  # a np.dtype (what nodes hold) hits at once; a scalar type is converted
    if dt is None:
        dt = _BY_NP[np.dtype(np_dtype)]
    return dt if dt.np not in STORAGE_NP else _note_storage(dt)


def category(dtype):
    """0 for bool, 1 for integers, 2 for floats, 3 for complex."""
    return 2 if dtype.is_floating_point else {"b": 0, "i": 1, "u": 1, "c": 3}[dtype.np.kind]


def promote(*dtypes):
    """The result dtype of combining tensors: NumPy's promotion table, with bfloat16 promoting as
    float16 does and float16 with bfloat16 giving float32 (PyTorch's rule; NumPy has no common type)."""
    try:
        return _PROMOTED[dtypes]
    except KeyError:
        out = _PROMOTED[dtypes] = _promote(dtypes)
        return out


_PROMOTED = {}  # a step combines a few pairs of dtypes, over and over (np.result_type is slow to call)


def _promote(dtypes):
    if not any(d.np in STORAGE_NP for d in dtypes):
        return from_np(np.result_type(*(d.np for d in dtypes)))
    storage = {d for d in dtypes if d.np in STORAGE_NP}
    if len(storage) > 1:
        dtypes = [float32 if d in storage else d for d in dtypes]
    else:
        (kind,) = storage
        dtypes = [float16 if d is kind else d for d in dtypes]
    out = from_np(np.result_type(*(d.np for d in dtypes)))
    return kind if len(storage) == 1 and out is float16 else out


def scalar_dtype(value):
    """The dtype a lone Python scalar gets (bool, int64, float32)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return DEFAULT_FLOAT
    if isinstance(value, (complex, np.complexfloating)):
        return DEFAULT_COMPLEX
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def promote_with_scalar(dtype, value):
    """Python scalars are weak: they only lift the tensor's category (bool < int < float), never its width."""
    s = scalar_dtype(value)
    if category(s) <= category(dtype):
        return dtype
    if s is DEFAULT_COMPLEX and dtype in _COMPLEX_OF:  # float64 tensor + 1j is complex128
        return _COMPLEX_OF[dtype]
    return s
