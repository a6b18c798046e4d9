"""The five dtypes and the promotion rules (NumPy's table, Python scalars weak, default float32)."""
import numpy as np


class DType:
    """A tensor element type: a thin, printable wrapper around a NumPy dtype."""

    __slots__ = ("name", "np")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)

    @property
    def itemsize(self):
        return self.np.itemsize

    @property
    def is_floating_point(self):
        return self.np.kind == "f"

    def __repr__(self):
        return f"lt.{self.name}"

    def __eq__(self, other):
        try:
            return as_dtype(other) is self
        except TypeError:
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

ALL = (float32, float64, int32, int64, bool_)
DEFAULT_FLOAT = float32
DEFAULT_INT = int64
_BY_NP = {d.np: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "int": int32, "long": int64})
_BY_PY = {float: float32, int: int64, bool: bool_}


def as_dtype(spec):
    """Turn lt/NumPy dtypes, names and Python types into a DType; TypeError for anything else."""
    if isinstance(spec, DType):
        return spec
    if isinstance(spec, type) and spec in _BY_PY:
        return _BY_PY[spec]
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]
    try:
        np_dtype = np.dtype(spec)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NP:
        return _BY_NP[np_dtype]
    supported = ", ".join(d.name for d in ALL)
    raise TypeError(f"unsupported dtype {spec!r}: lazytensor supports {supported}")


def from_np(np_dtype):
    """The DType for a NumPy dtype the engine produced (always one of the five)."""
    return _BY_NP[np.dtype(np_dtype)]


def category(dtype):
    """0 for bool, 1 for integers, 2 for floats."""
    return {"b": 0, "i": 1, "u": 1, "f": 2}[dtype.np.kind]


def promote(*dtypes):
    """The result dtype of combining tensors: NumPy's promotion table over the five dtypes."""
    return from_np(np.result_type(*(d.np for d in dtypes)))


def scalar_dtype(value):
    """The dtype a lone Python scalar gets (bool, int64, float32)."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return DEFAULT_FLOAT
    raise TypeError(f"expected a tensor or a Python number, got {type(value).__name__}")


def promote_with_scalar(dtype, value):
    """Python scalars are weak: they only lift the tensor's category (bool < int < float), never its width."""
    s = scalar_dtype(value)
    if category(s) <= category(dtype):
        return dtype
    return s
