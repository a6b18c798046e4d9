"""PyTorch's checkpoint format (what `torch.save` writes since 1.6: a zip of `data.pkl` and one file per
storage), read and written without PyTorch and without running code from the file.

Reading unpickles with an allow-list through a reader that builds only data (safe_pickle.py), as
`torch.load(weights_only=True)` does: tensors (rebuilt from
their storage bytes, strides and offsets), Parameters (as tensors), OrderedDict, dtypes, NumPy arrays and
scalars of plain dtypes (numpy_pickles.py) and the builtin containers and numbers. Any other global (a
class, `os.system`) raises LoadError before anything is called. Writing produces an archive `torch.load`
reads: tensors with their dtype, shape and bytes; NumPy arrays as NumPy pickles them (as `torch.save`
does: `torch.load(weights_only=True)` wants them allow-listed); dicts, lists, tuples, numbers, strings,
bools and None as themselves.
"""
import collections
import io
import pickle
import zipfile
import zlib

import numpy as np

from . import dtypes, safe_pickle
from .numpy_pickles import NumpyRecords
from .runtime import hostio
from .safe_pickle import PickleRefused
from .tensor import Tensor

# Storage class names of torch's pickles -> NumPy dtypes (and back).
_STORAGES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
             "BFloat16Storage": dtypes.bfloat16.np, "LongStorage": np.int64, "IntStorage": np.int32,
             "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
             "ComplexFloatStorage": np.complex64, "ComplexDoubleStorage": np.complex128}
_STORAGE_OF = {np.dtype(v): k for k, v in _STORAGES.items()}
_DTYPE_NAMES = {"float32": np.float32, "float": np.float32, "float64": np.float64, "double": np.float64,
                "float16": np.float16, "half": np.float16, "bfloat16": dtypes.bfloat16.np, "int64": np.int64,
                "long": np.int64, "int32": np.int32, "int": np.int32, "int16": np.int16, "int8": np.int8,
                "uint8": np.uint8, "bool": np.bool_, "complex64": np.complex64, "complex128": np.complex128}


class LoadError(ValueError):
    """The file is not something lazytensor can load safely, or it is corrupt."""


# Deflate's largest ratio is 1032:1; an entry declaring more than this many bytes per stored byte lies.
_MAX_RATIO = 1100
_READABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)
# What reading a damaged zip raises besides BadZipFile (a bad deflate stream, a cut file).
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, RuntimeError, NotImplementedError)


def is_torch_archive(f):
    """Whether the file (path or binary file object at its start) is a zip holding a `data.pkl` record."""
    try:
        with zipfile.ZipFile(f) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except _ZIP_ERRORS:
        return False
    finally:
        if hasattr(f, "seek"):
            f.seek(0)


class _Storage:
    """A storage's elements as a flat read-only NumPy array and the device it was saved from."""

    __slots__ = ("array", "location")

    def __init__(self, array, location):
        self.array, self.location = array, location


def _int(value, what):
    if type(value) is not int:
        raise PickleRefused(f"a tensor record's {what} is {type(value).__name__} {str(value)[:20]}, not an integer")
    return value


def _ints(values, what):
    if type(values) not in (tuple, list) or len(values) > 64:
        raise PickleRefused(f"a tensor record's {what} is not a tuple of at most 64 integers")
    return tuple(_int(v, what) for v in values)


class _Reader:
    """Unpickles one archive's data.pkl through the allow-list; storages come from the archive, tensors
    are read-only views of them (as PyTorch's share their storage), placed as `map_location` says."""

    def __init__(self, archive, prefix, path, map_location):
        self.archive, self.prefix, self.path, self.where = archive, prefix, path, map_location
        self.byteorder = "little"
        if f"{prefix}byteorder" in archive.namelist():
            self.byteorder = _entry(archive, f"{prefix}byteorder", 16, path).decode("ascii", "replace").strip()
            if self.byteorder not in ("little", "big"):
                raise LoadError(f"{path}: byteorder record says {self.byteorder[:16]!r}, not little or big")
        self.storages = {}
        self.numpy = NumpyRecords()

    def load(self, data):
        return safe_pickle.Reader(data, self.find_class, self.persistent_load, self.numpy.build).load()

    def find_class(self, module, name):
        found = self.numpy.find_class(module, name)
        if found is not None:
            return found
        if (module, name) == ("collections", "OrderedDict"):
            return safe_pickle.Callable(collections.OrderedDict, "OrderedDict")
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return safe_pickle.Callable(self.rebuild_tensor, name)
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return safe_pickle.Callable(_rebuild_parameter, name)
        if module == "torch" and name in _STORAGES:
            return safe_pickle.Tag(np.dtype(_STORAGES[name]), f"torch.{name}")
        if module == "torch" and name in _DTYPE_NAMES:
            return dtypes.as_dtype(_DTYPE_NAMES[name])
        if module == "builtins" and name in ("set", "frozenset", "complex", "slice"):
            return safe_pickle.Callable({"set": set, "frozenset": frozenset, "complex": complex,
                                         "slice": slice}[name], name)
        if module == "torch" and name == "device":
            return safe_pickle.Callable(_device_name, "torch.device")
        raise LoadError(f"{self.path}: refuses to unpickle {module[:80]}.{name[:80]}: loading it could run code. "
                        f"lazytensor loads tensors and containers of them (a state dict: save "
                        f"model.state_dict(), not the model)")

    def persistent_load(self, pid):
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise LoadError(f"{self.path}: unknown persistent record (a {type(pid).__name__})")
        _, kind, key, location, numel = pid
        dtype = kind.value if isinstance(kind, safe_pickle.Tag) else kind.np if isinstance(kind, dtypes.DType) \
            else None
        if dtype is None or np.dtype(dtype) not in _STORAGE_OF:
            raise LoadError(f"{self.path}: a storage record has an unknown element type ({type(kind).__name__})")
        dtype = np.dtype(dtype)
        if not isinstance(key, str) or not isinstance(location, str):
            raise LoadError(f"{self.path}: a storage record's key and location are not strings")
        numel = _int(numel, "storage size")
        if numel < 0:
            raise LoadError(f"{self.path}: storage {key[:20]!r} has {numel} elements")
        stored = self.storages.get(key)
        if stored is None:
            need = numel * dtype.itemsize
            raw = _entry(self.archive, f"{self.prefix}data/{key}", need, self.path, exact=False)
            if len(raw) < need:
                raise LoadError(f"{self.path}: storage {key[:20]!r} holds {len(raw)} bytes, {numel} elements of "
                                f"{dtype} need {need}")
            arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<" if self.byteorder == "little" else ">"),
                                count=numel)
            arr = arr.astype(dtype, copy=False)
            arr.flags.writeable = False
            stored = self.storages[key] = _Storage(arr, location)
        elif stored.array.dtype != dtype or stored.array.size < numel:
            raise LoadError(f"{self.path}: storage {key[:20]!r} is named twice with different types or sizes")
        return stored

    def rebuild_tensor(self, storage, offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
        """A read-only view of the storage (no copy: tensors over one storage share it, and a write
        copies first), placed as map_location says."""
        if not isinstance(storage, _Storage):
            raise PickleRefused(f"a tensor record's storage is a {type(storage).__name__}, not a storage")
        flat = storage.array
        offset, size, stride = _int(offset, "offset"), _ints(size, "size"), _ints(stride, "stride")
        if len(size) != len(stride) or any(s < 0 for s in size + stride) or offset < 0:
            raise PickleRefused(f"a tensor record has size {size}, stride {stride} and offset {offset}")
        if all(size):
            last = offset + sum((n - 1) * s for n, s in zip(size, stride))
            if last >= flat.size:
                raise PickleRefused(f"a tensor of size {size} reads past the end of its storage ({flat.size} "
                                    f"elements)")
            view = np.lib.stride_tricks.as_strided(flat[offset:], size, tuple(s * flat.itemsize for s in stride),
                                                   writeable=False)
        else:
            view = np.zeros(size, flat.dtype)
        out = Tensor(hostio.data_node(view, exclusive=False))
        if self.where is None:
            return out
        try:
            return placed(out, storage.location, self.where)
        except Exception as exc:  # the caller's map_location failed: theirs to see as it is, not a bad file
            raise _PlacementFailed(exc) from None


class _PlacementFailed(Exception):
    """Carries an exception map_location raised past the reader's handling of damaged files."""


def _device_name(*args):
    if not args or not all(isinstance(a, (str, int)) for a in args):
        raise PickleRefused("torch.device takes a name and an index")
    return ":".join(str(a) for a in args)


def _entry(archive, name, limit, path, exact=True):
    """Up to `limit` bytes of archive entry `name` (all of them when `exact`), without reading more;
    LoadError for a missing, encrypted or oddly compressed entry, or one that declares more than it
    could hold."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise LoadError(f"{path}: {name} is missing from the archive") from None
    if info.flag_bits & 0x1:
        raise LoadError(f"{path}: {name} is encrypted")
    if info.compress_type not in _READABLE:
        raise LoadError(f"{path}: {name} is compressed with method {info.compress_type}; archives use none or "
                        f"deflate")
    if info.file_size > max(info.compress_size, 1) * _MAX_RATIO:
        raise LoadError(f"{path}: {name} declares {info.file_size} bytes from {info.compress_size} (corrupt)")
    if exact and info.file_size > limit:
        raise LoadError(f"{path}: {name} holds {info.file_size} bytes, more than the {limit} it may")
    with archive.open(info) as entry:
        return entry.read(min(limit, info.file_size))


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    if not isinstance(data, Tensor):
        raise PickleRefused(f"a parameter record holds a {type(data).__name__}, not a tensor")
    return data


# The pickle of an archive is read whole; a state dict's takes ~100 bytes a tensor.
_MAX_PICKLE = 1 << 30


def load(f, path, map_location=None):
    """The object in the PyTorch archive `f` (a path or binary file), tensors on the host (or where
    `map_location` says)."""
    try:
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
            if len(set(names)) != len(names):
                twice = sorted({n for n in names if names.count(n) > 1})
                raise LoadError(f"{path}: the archive holds {twice[0][:80]!r} twice (corrupt)")
            records = [n for n in names if n.endswith("data.pkl")]
            if len(records) != 1:
                raise LoadError(f"{path}: expected one data.pkl record in the archive, found {len(records)}")
            prefix = records[0][:-len("data.pkl")]
            reader = _Reader(archive, prefix, path, map_location)
            data = _entry(archive, records[0], _MAX_PICKLE, path)
            return reader.load(data)
    except _PlacementFailed as failed:
        raise failed.args[0]
    except LoadError as exc:
        if str(exc).startswith(f"{path}:"):
            raise
        raise LoadError(f"{path}: {exc}") from None
    except PickleRefused as exc:
        raise LoadError(f"{path}: corrupt or unsafe data.pkl ({exc})") from None
    except _ZIP_ERRORS as exc:
        raise LoadError(f"{path}: a damaged archive ({type(exc).__name__}: {exc})") from None
    except MemoryError:
        raise LoadError(f"{path}: the archive asks for more memory than this machine has (corrupt?)") from None


def placed(tensor, location, where):
    """`tensor` (saved from `location`, "cpu" or "cuda:0") moved as map_location `where` says: a device,
    a {saved location: device} dict, or a function of (tensor, saved location) returning a tensor or a
    device."""
    target = where(tensor, location) if callable(where) else where.get(location, location) \
        if isinstance(where, dict) else where
    return target if isinstance(target, Tensor) else tensor.to(str(target))


class _Global:
    """A reference to `module.name` written into the pickle by name (the object itself is not needed)."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):
        raise TypeError("a pickle reference, not a function")


_REBUILD = _Global("torch._utils", "_rebuild_tensor_v2")


class _StorageRef:
    def __init__(self, key, array):
        self.key, self.array = key, array


class _Pickler(pickle._Pickler):  # the Python implementation: its dispatch table can be extended
    dispatch = pickle._Pickler.dispatch.copy()

    def __init__(self, file, storages):
        super().__init__(file, protocol=2)
        self.storages = storages

    def save_global_ref(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = save_global_ref

    def persistent_id(self, obj):
        if isinstance(obj, _StorageRef):
            storage = _STORAGE_OF.get(obj.array.dtype)
            return ("storage", _Global("torch", storage), obj.key, "cpu", obj.array.size)
        return None

    def reducer_override(self, obj):
        # NumPy arrays go as NumPy pickles them (lazytensor/numpy_pickles.py reads them back as arrays)
        if not isinstance(obj, Tensor):
            return NotImplemented
        arr = np.ascontiguousarray(hostio.host_array(obj._node, "save", reason="save"))
        if arr.dtype not in _STORAGE_OF:
            raise TypeError(f"save: PyTorch's format has no storage for {arr.dtype}; convert the tensor first")
        ref = _StorageRef(str(len(self.storages)), arr.reshape(-1))
        self.storages.append(ref)
        strides = tuple(s // arr.itemsize for s in arr.strides) if arr.size else (1,) * arr.ndim
        return _REBUILD, (ref, 0, tuple(arr.shape), strides, False, collections.OrderedDict())


_ALLOWED_LEAVES = (type(None), bool, int, float, str, complex)


def _savable(obj, depth=0):
    """`obj` with NumPy scalars as Python numbers; TypeError for anything but tensors, arrays, numbers,
    strings, bools, None and dicts (string or integer keys), lists and tuples of them."""
    if depth > 200:
        raise ValueError("save: the object is nested too deeply")
    if isinstance(obj, (Tensor, np.ndarray)):
        if isinstance(obj, np.ndarray) and (obj.dtype.kind not in "biufc" or obj.dtype.fields is not None):
            raise TypeError(f"save: a NumPy array of dtype {obj.dtype} cannot be saved as an array (only booleans, "
                            f"integers, floats and complex numbers; object arrays would need pickle); convert it "
                            f"to a tensor with lt.from_numpy")
        return np.asarray(obj) if isinstance(obj, np.ndarray) else obj  # a subclass (memmap) as a plain array
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise TypeError("save: dict keys must be strings or integers")
        out = collections.OrderedDict() if isinstance(obj, collections.OrderedDict) else {}
        out.update((k, _savable(v, depth + 1)) for k, v in obj.items())
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(_savable(v, depth + 1) for v in obj) if type(obj) in (list, tuple) else \
            [_savable(v, depth + 1) for v in obj]
    if not isinstance(obj, _ALLOWED_LEAVES):
        raise TypeError(f"save: cannot save a {type(obj).__name__}; save tensors, arrays, numbers, strings and "
                        f"dicts, lists or tuples of them (a model: model.state_dict())")
    return obj


def save(obj, f, name="archive"):
    """Write `obj` to `f` (a path or binary file) as PyTorch's archive."""
    body, storages = io.BytesIO(), []
    _Pickler(body, storages).dump(_savable(obj))
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
        z.writestr(f"{name}/data.pkl", body.getvalue())
        z.writestr(f"{name}/.format_version", "1")
        z.writestr(f"{name}/.storage_alignment", "64")
        z.writestr(f"{name}/byteorder", "little")
        for ref in storages:
            z.writestr(f"{name}/data/{ref.key}", ref.array.tobytes())
        z.writestr(f"{name}/version", "3\n")
