"""NumPy arrays and scalars inside PyTorch archives (what `torch.save` writes for an `np.ndarray`), read
without NumPy's own unpickling: the few globals its pickles name, each checked before it is used.

An array is its shape, a plain dtype (booleans, integers, floats, complex; no objects, no fields) and
exactly the bytes those need; anything else in such a record is refused. `NumpyRecords` hands the
reader its callables and builds the arrays the file's own `_reconstruct` calls made.
"""
import math

import numpy as np

from .safe_pickle import Callable, PickleRefused, Tag

_MULTIARRAY = ("numpy.core.multiarray", "numpy._core.multiarray")
_PLAIN_KINDS = "biufc"


def _plain(dtype, what):
    if not isinstance(dtype, np.dtype) or dtype.kind not in _PLAIN_KINDS or dtype.fields is not None \
            or dtype.subdtype is not None:
        raise PickleRefused(f"{what} has a dtype that is not a plain number type ({str(dtype)[:40]})")
    return dtype


def _dtype(spec, align=False, copy=True):
    """numpy.dtype(spec) for a plain type code ('f4', 'i8', '?', 'c16', ...)."""
    if not isinstance(spec, str) or len(spec) > 8:
        raise PickleRefused("numpy.dtype needs a short type code")
    try:
        dtype = np.dtype(spec)
    except TypeError:
        raise PickleRefused(f"numpy.dtype({spec!r}) is not a dtype") from None
    return _plain(dtype, f"numpy.dtype({spec!r})")


def _latin1(text, encoding):
    """_codecs.encode(text, 'latin1'): how protocol-2 pickles carry bytes."""
    if not isinstance(text, str) or encoding != "latin1":
        raise PickleRefused("_codecs.encode is allowed only to turn a string into latin-1 bytes")
    try:
        return text.encode("latin1")
    except UnicodeEncodeError:
        raise PickleRefused("a latin-1 byte string holds a character beyond latin-1") from None


def _scalar(dtype, raw):
    """numpy's scalar(dtype, bytes): one number of a plain dtype."""
    _plain(dtype, "a NumPy scalar")
    if not isinstance(raw, bytes) or len(raw) != dtype.itemsize:
        raise PickleRefused(f"a NumPy {dtype} scalar needs {dtype.itemsize} bytes")
    return np.frombuffer(raw, dtype)[0]


class NumpyRecords:
    """The globals NumPy's pickles name, for one load; `build` fills the arrays `_reconstruct` made."""

    def __init__(self):
        self._fresh = {}  # id -> an empty array this load's _reconstruct made, not yet built

    def find_class(self, module, name):
        """The allowed object for `module.name`, or None when it is not one of NumPy's."""
        if module in _MULTIARRAY and name == "_reconstruct":
            return Callable(self._reconstruct, "numpy._reconstruct")
        if module in _MULTIARRAY and name == "scalar":
            return Callable(_scalar, "numpy.scalar")
        if (module, name) == ("numpy", "ndarray"):
            return Tag(np.ndarray, "numpy.ndarray")
        if (module, name) == ("numpy", "dtype"):
            return Callable(_dtype, "numpy.dtype")
        if (module, name) == ("_codecs", "encode"):
            return Callable(_latin1, "_codecs.encode")
        return None

    def _reconstruct(self, cls, shape, typecode):
        if not (isinstance(cls, Tag) and cls.value is np.ndarray and shape == (0,) and typecode in (b"b", "b")):
            raise PickleRefused("numpy._reconstruct is allowed only for a plain ndarray")
        out = np.ndarray((0,), np.uint8)
        self._fresh[id(out)] = out
        return out

    def build(self, inst, state):
        """Set the state of an array this load made, or accept a dtype's byte-order record when it changes
        nothing; False for any other object."""
        if isinstance(inst, np.dtype):
            if not (isinstance(state, tuple) and len(state) == 8 and state[1] in ("<", ">", "|", "=")):
                raise PickleRefused("a NumPy dtype record is malformed")
            if inst.newbyteorder(state[1]) != inst:
                raise PickleRefused(f"a NumPy array of byte order {state[1]!r} (not this machine's) is not read")
            return True
        if self._fresh.pop(id(inst), None) is not inst:
            return False
        if not (isinstance(state, tuple) and len(state) == 5):
            raise PickleRefused("a NumPy array record is malformed")
        version, shape, dtype, fortran, raw = state
        _plain(dtype, "a NumPy array")
        if not (type(shape) is tuple and len(shape) <= 32 and all(type(n) is int and n >= 0 for n in shape)):
            raise PickleRefused("a NumPy array's shape is not a tuple of non-negative integers")
        if version != 1 or not isinstance(fortran, bool) or not isinstance(raw, bytes):
            raise PickleRefused("a NumPy array record is malformed")
        if len(raw) != math.prod(shape) * dtype.itemsize:
            raise PickleRefused(f"a NumPy array of shape {shape} and {dtype} needs {math.prod(shape) * dtype.itemsize}"
                                f" bytes, the record holds {len(raw)}")
        inst.__setstate__((1, shape, dtype, fortran, raw))
        return True
