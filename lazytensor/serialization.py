"""`lt.save` / `lt.load`, PyTorch's `torch.save` / `torch.load`: tensors and nested containers of them
(state dicts, optimizer state), to a path or a binary file object.

`save` writes PyTorch's archive format (torch_archive.py), so `torch.load(f, weights_only=True)` reads
what lazytensor saved and lazytensor reads what PyTorch saved. `load` also reads the .npz format of
earlier lazytensor versions (the arrays, plus the structure as JSON). Loading never runs code from the
file: PyTorch archives are unpickled through an allow-list, .npz files with allow_pickle=False.
"""
import errno
import os
import stat

from . import torch_archive
from .npz_archive import ARCHIVE_ERRORS, read_archive
from .runtime import hostio
from .tensor import Tensor
from .torch_archive import LoadError

FORMAT = "lazytensor-save-1"
__all__ = ["save", "load", "LoadError"]


def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True):
    """Write `obj` to `f` (a path or a binary file object): tensors, NumPy arrays (loaded back as arrays),
    numbers, strings, bools, None, and dicts (string or integer keys), lists and tuples of them, in
    PyTorch's archive format. Tensors are read to the host (a host read)."""
    if pickle_module is not None:
        raise ValueError("save: pickle_module is not supported (lazytensor writes only data)")
    torch_archive.save(obj, f if hasattr(f, "write") else os.fspath(f))


def load(f, map_location=None, pickle_module=None, *, weights_only=True, mmap=None, **pickle_load_args):
    """What `save` (or PyTorch's torch.save) wrote, from a path or a binary file object: tensors as host
    tensors, or moved as `map_location` says (a device name, a {saved location: device} dict, or a
    function of (tensor, saved location)). Only data is ever loaded, whatever `weights_only` says: a
    pickled class or function raises LoadError before anything runs."""
    if pickle_module is not None:
        raise ValueError("load: pickle_module is not supported (lazytensor loads only data)")
    path = getattr(f, "name", "<file>") if hasattr(f, "read") else os.fspath(f)
    source = f if hasattr(f, "read") else path
    if source is path:
        _check_regular_file(path)
    if torch_archive.is_torch_archive(source):
        return torch_archive.load(source, path, map_location)
    if not _starts_as_zip(source):
        raise LoadError(f"{path}: cannot be loaded: not a file lt.save or torch.save wrote (not a zip archive); "
                        f"lt.load reads PyTorch's checkpoint format and lt.save's earlier .npz files")
    try:
        header, arrays = read_archive(source, "__structure__")
    except ARCHIVE_ERRORS as exc:
        raise LoadError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc}); the file is damaged, or "
                        f"not one lt.save or torch.save wrote (lt.load never unpickles)") from None
    if header is None:
        raise LoadError(f"{path}: not a file lt.save wrote (no structure record)")
    if not isinstance(header, dict) or "structure" not in header:
        raise LoadError(f"{path}: corrupt structure record (not an object with a structure)")
    if header.get("format") != FORMAT:
        raise LoadError(f"{path}: unknown format {header.get('format')!r}")
    try:
        return _decode(header["structure"], arrays, path, map_location)
    except RecursionError:
        raise LoadError(f"{path}: corrupt structure record (nested too deeply)") from None


def _check_regular_file(path):
    """FileNotFoundError for a missing path (as torch.load raises), LoadError for a device, pipe or folder
    (reading one may never end)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "lt.load: no such file", path) from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file"
        raise LoadError(f"{path}: {kind}; lt.load reads a file lt.save or torch.save wrote")


def _starts_as_zip(source):
    """Whether the file (path or binary file object, left at its start) begins with a zip record."""
    if hasattr(source, "read"):
        head = source.read(4)
        source.seek(0)
    else:
        with open(source, "rb") as f:
            head = f.read(4)
    return head in (b"PK\x03\x04", b"PK\x05\x06")


def _corrupt(path, what):
    return LoadError(f"{path}: corrupt structure record ({what})")


def _decode(node, arrays, path, where):
    """The object a structure record entry stands for; LoadError for any entry `_encode` never writes."""
    if not isinstance(node, dict) or len(node) != 1:
        raise _corrupt(path, f"an entry is {type(node).__name__} {_short(node)}, not a one-key object")
    (kind, value), = node.items()
    if kind in ("tensor", "ndarray"):
        if not isinstance(value, str) or value not in arrays:
            raise LoadError(f"{path}: array {_short(value)} is missing (corrupt file)")
        if kind == "ndarray":
            return arrays[value]
        out = Tensor(hostio.data_node(arrays[value], exclusive=True))
        return out if where is None else torch_archive.placed(out, "cpu", where)
    if kind in ("dict", "list", "tuple") and not isinstance(value, list):
        raise _corrupt(path, f"a {kind} entry holds {type(value).__name__} {_short(value)}, not a list")
    if kind == "dict":
        out = {}
        for pair in value:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], (str, int))
                    and not isinstance(pair[0], bool)):
                raise _corrupt(path, f"a dict item is {_short(pair)}, not a [key, entry] pair")
            out[pair[0]] = _decode(pair[1], arrays, path, where)
        return out
    if kind == "list":
        return [_decode(v, arrays, path, where) for v in value]
    if kind == "tuple":
        return tuple(_decode(v, arrays, path, where) for v in value)
    if kind == "value":
        if value is not None and not isinstance(value, (bool, int, float, str)):
            raise _corrupt(path, f"a value entry holds {type(value).__name__} {_short(value)}")
        return value
    raise LoadError(f"{path}: unknown entry {_short(kind)} in the structure record")


def _short(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
