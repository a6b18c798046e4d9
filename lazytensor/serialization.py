"""`lt.save` / `lt.load`: PyTorch-style saving of tensors and nested containers of them (state dicts,
optimizer state), as an .npz archive: the arrays, plus the structure as JSON. Loading never runs code
from the file (no pickle: NumPy loads with allow_pickle=False), like `torch.load(weights_only=True)`."""
import json
import os

import numpy as np

from .checkpoint import ARCHIVE_ERRORS, read_archive
from .runtime import hostio
from .tensor import Tensor

FORMAT = "lazytensor-save-1"


class LoadError(ValueError):
    """The file is not something `lt.save` wrote, or it is corrupt."""


def save(obj, f):
    """Write `obj` to the path `f`: tensors, NumPy arrays, numbers, strings, bools, None, and dicts (string
    or integer keys), lists and tuples of them. Tensors are read to the host (a host read)."""
    arrays = {}
    structure = _encode(obj, arrays)
    header = np.frombuffer(json.dumps({"format": FORMAT, "structure": structure}).encode(), dtype=np.uint8)
    with open(os.fspath(f), "wb") as out:
        np.savez(out, __structure__=header, **arrays)


def load(f, weights_only=True):
    """What `save` wrote, with tensors as host tensors. `weights_only` is accepted for PyTorch's
    signature; only data is ever loaded."""
    path = os.fspath(f)
    try:
        header, arrays = read_archive(path, "__structure__")
    except ARCHIVE_ERRORS as exc:
        raise LoadError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc}); lt.load reads only what "
                        f"lt.save wrote, and never unpickles") from None
    if header is None:
        raise LoadError(f"{path}: not a file lt.save wrote (no structure record)")
    if not isinstance(header, dict) or "structure" not in header:
        raise LoadError(f"{path}: corrupt structure record (not an object with a structure)")
    if header.get("format") != FORMAT:
        raise LoadError(f"{path}: unknown format {header.get('format')!r}")
    try:
        return _decode(header["structure"], arrays, path)
    except RecursionError:
        raise LoadError(f"{path}: corrupt structure record (nested too deeply)") from None


def _encode(obj, arrays):
    if isinstance(obj, Tensor):
        key = f"a{len(arrays)}"
        arrays[key] = np.array(hostio.host_array(obj._node, "save", reason="save"), copy=True)
        return {"tensor": key}
    if isinstance(obj, np.ndarray):
        if obj.dtype == object:
            raise TypeError("save: object arrays cannot be saved (they would need pickle)")
        key = f"a{len(arrays)}"
        arrays[key] = obj
        return {"ndarray": key}
    if isinstance(obj, dict):
        if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in obj):
            raise TypeError("save: dict keys must be strings or integers")
        return {"dict": [[k, _encode(v, arrays)] for k, v in obj.items()]}
    if isinstance(obj, (list, tuple)):
        return {"list" if isinstance(obj, list) else "tuple": [_encode(v, arrays) for v in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"value": obj}
    if isinstance(obj, np.generic):
        return {"value": obj.item()}
    raise TypeError(f"save: cannot save a {type(obj).__name__}; save tensors, arrays, numbers, strings and "
                    f"dicts, lists or tuples of them (a model: model.state_dict())")


def _corrupt(path, what):
    return LoadError(f"{path}: corrupt structure record ({what})")


def _decode(node, arrays, path):
    """The object a structure record entry stands for; LoadError for any entry `_encode` never writes."""
    if not isinstance(node, dict) or len(node) != 1:
        raise _corrupt(path, f"an entry is {type(node).__name__} {_short(node)}, not a one-key object")
    (kind, value), = node.items()
    if kind in ("tensor", "ndarray"):
        if not isinstance(value, str) or value not in arrays:
            raise LoadError(f"{path}: array {_short(value)} is missing (corrupt file)")
        return Tensor(hostio.data_node(arrays[value], exclusive=True)) if kind == "tensor" else arrays[value]
    if kind in ("dict", "list", "tuple") and not isinstance(value, list):
        raise _corrupt(path, f"a {kind} entry holds {type(value).__name__} {_short(value)}, not a list")
    if kind == "dict":
        out = {}
        for pair in value:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], (str, int))
                    and not isinstance(pair[0], bool)):
                raise _corrupt(path, f"a dict item is {_short(pair)}, not a [key, entry] pair")
            out[pair[0]] = _decode(pair[1], arrays, path)
        return out
    if kind == "list":
        return [_decode(v, arrays, path) for v in value]
    if kind == "tuple":
        return tuple(_decode(v, arrays, path) for v in value)
    if kind == "value":
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise _corrupt(path, f"a value entry holds {type(value).__name__} {_short(value)}")
        return value
    raise LoadError(f"{path}: unknown entry {_short(kind)} in the structure record")


def _short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
