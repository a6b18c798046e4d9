"""PyTorch's checkpoint format (what `torch.save` writes since 1.6: a zip of `data.pkl` and one file per
storage), read and written without PyTorch and without running code from the file.

Reading unpickles with an allow-list, as `torch.load(weights_only=True)` does: tensors (rebuilt from
their storage bytes, strides and offsets), Parameters (as tensors), OrderedDict, dtypes and the builtin
containers and numbers. Any other global (a class, `os.system`) raises LoadError before anything is
called. Writing produces an archive `torch.load(weights_only=True)` reads: tensors with their dtype,
shape and bytes; dicts, lists, tuples, numbers, strings, bools and None as themselves.
"""
import collections
import io
import pickle
import weakref
import zipfile

import numpy as np

from . import dtypes
from .runtime import hostio
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


def is_torch_archive(f):
    """Whether the file (path or binary file object at its start) is a zip holding a `data.pkl` record."""
    try:
        with zipfile.ZipFile(f) as z:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return False
    finally:
        if hasattr(f, "seek"):
            f.seek(0)


_SAVED_AT = {}  # id(loaded tensor) -> the location its storage was saved from ("cuda:0"), while it lives


class _Storage:
    """A storage's bytes as a flat NumPy array, as the pickle's persistent id named it."""

    def __init__(self, array, location):
        self.array, self.location = array, location


def _rebuild_tensor(storage, offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None):
    flat = storage.array
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or any(s < 0 for s in size + stride) or offset < 0:
        raise LoadError(f"a tensor record has size {size}, stride {stride} and offset {offset}")
    if all(size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= flat.size:
            raise LoadError(f"a tensor of size {size} reads past the end of its storage ({flat.size} elements)")
        view = np.lib.stride_tricks.as_strided(flat[offset:], size, tuple(s * flat.itemsize for s in stride),
                                               writeable=False)
    else:
        view = np.zeros(size, flat.dtype)
    out = Tensor(hostio.data_node(np.array(view, copy=True), exclusive=True))
    _SAVED_AT[id(out)] = storage.location
    weakref.finalize(out, _SAVED_AT.pop, id(out), None)
    return out


def _rebuild_parameter(data, requires_grad, backward_hooks, *state):
    return data


class _Unpickler(pickle.Unpickler):
    """Unpickles only the allow-listed globals; storages are read from the archive."""

    def __init__(self, file, archive, prefix, path):
        super().__init__(file)
        self.archive, self.prefix, self.path = archive, prefix, path
        self.byteorder = "little"
        if f"{prefix}byteorder" in archive.namelist():
            self.byteorder = archive.read(f"{prefix}byteorder").decode().strip()
        self.storages = {}

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module == "torch._utils" and name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
            return _rebuild_tensor
        if module == "torch._utils" and name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
            return _rebuild_parameter
        if module == "torch" and name in _STORAGES:
            return _STORAGES[name]
        if module == "torch" and name in _DTYPE_NAMES:
            return dtypes.as_dtype(_DTYPE_NAMES[name])
        if module == "builtins" and name in ("set", "frozenset", "complex", "slice"):
            return {"set": set, "frozenset": frozenset, "complex": complex, "slice": slice}[name]
        if module == "torch" and name == "device":
            return str
        raise LoadError(f"{self.path}: refuses to unpickle {module}.{name}: loading it could run code. "
                        f"lazytensor loads tensors and containers of them (a state dict: save "
                        f"model.state_dict(), not the model)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise LoadError(f"{self.path}: unknown persistent record {str(pid)[:60]}")
        _, dtype, key, location, numel = pid
        if isinstance(dtype, dtypes.DType):
            dtype = dtype.np
        if not isinstance(dtype, (type, np.dtype)) or np.dtype(dtype) not in _STORAGE_OF:
            raise LoadError(f"{self.path}: storage {str(key)[:20]!r} has an unknown element type {str(dtype)[:40]}")
        dtype = np.dtype(dtype)
        if key not in self.storages:
            name = f"{self.prefix}data/{key}"
            try:
                raw = self.archive.read(name)
            except KeyError:
                raise LoadError(f"{self.path}: storage {key!r} is missing from the archive") from None
            if len(raw) < numel * dtype.itemsize:
                raise LoadError(f"{self.path}: storage {key!r} holds {len(raw)} bytes, {numel} elements of "
                                f"{dtype} need {numel * dtype.itemsize}")
            arr = np.frombuffer(raw, dtype=dtype.newbyteorder("<" if self.byteorder == "little" else ">"),
                                count=numel)
            self.storages[key] = _Storage(arr.astype(dtype, copy=False), str(location))
        return self.storages[key]


def load(f, path, map_location=None):
    """The object in the PyTorch archive `f` (a path or binary file), tensors on the host (or where
    `map_location` says)."""
    with zipfile.ZipFile(f) as archive:
        names = [n for n in archive.namelist() if n.endswith("data.pkl")]
        if len(names) != 1:
            raise LoadError(f"{path}: expected one data.pkl record in the archive, found {len(names)}")
        prefix = names[0][:-len("data.pkl")]
        try:
            obj = _Unpickler(io.BytesIO(archive.read(names[0])), archive, prefix, path).load()
        except LoadError as exc:
            if str(exc).startswith(f"{path}:"):
                raise
            raise LoadError(f"{path}: {exc}") from None
        except (pickle.UnpicklingError, EOFError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise LoadError(f"{path}: corrupt data.pkl ({type(exc).__name__}: {exc})") from None
    return placed(obj, map_location) if map_location is not None else obj


def placed(obj, where):
    """Tensors of `obj` moved as map_location says (a device, a {saved: device} dict, or a function
    of (tensor, saved location))."""
    if isinstance(obj, Tensor):
        saved = _SAVED_AT.get(id(obj), "cpu")
        target = where(obj, saved) if callable(where) else where.get(saved, saved) if isinstance(where, dict) \
            else where
        return target if isinstance(target, Tensor) else obj.to(str(target))
    if isinstance(obj, dict):
        out = type(obj)() if isinstance(obj, collections.OrderedDict) else {}
        out.update((k, placed(v, where)) for k, v in obj.items())
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(placed(v, where) for v in obj)
    return obj


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
        if isinstance(obj, Tensor):
            arr = np.ascontiguousarray(hostio.host_array(obj._node, "save", reason="save"))
        elif isinstance(obj, np.ndarray):
            arr = np.ascontiguousarray(obj)
        else:
            return NotImplemented
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
        if isinstance(obj, np.ndarray) and obj.dtype == object:
            raise TypeError("save: object arrays cannot be saved (they would need pickle)")
        return obj
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
