"""Checkpoints: model and optimizer state in one .npz, written atomically, verified when read back."""
import hashlib
import json
import os

import numpy as np

from lazytensor import Tensor, host_copy
from lazytensor.npz_archive import ARCHIVE_ERRORS, read_archive

FORMAT = "lazytensor-checkpoint-1"


class CheckpointError(ValueError):
    """A checkpoint that is corrupt, not a checkpoint, or does not match the model."""


class NonFiniteError(ValueError):
    """A save asked for finite values found a NaN or an infinity (the file on disk is left as it was)."""


_ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip archive


def _temp_prefix(path):
    return f".{os.path.basename(path)}."


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def remove_stale_temps(path):
    """Delete temporary files a killed writer of `path` left (named for their writer's process id)."""
    folder = os.path.dirname(os.path.abspath(path))
    prefix = _temp_prefix(path)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        pid = name[len(prefix):-len(".tmp")]
        if name.startswith(prefix) and name.endswith(".tmp") and pid.isdigit() and not _pid_alive(int(pid)):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass


def _host(t):
    return host_copy(t, "checkpoint", reason="checkpoint")


def _digest(arr):
    return hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()


def save(path, model, optimizer=None, meta=None, require_finite=False):
    """Write `model` (and `optimizer`) state to `path` via a temporary file and an atomic rename.

    With `require_finite`, a NaN or infinity in any float array raises NonFiniteError and `path` keeps
    what it held. Temporary files of writers that were killed mid-write are removed first.
    """
    arrays = {f"model/{k}": _host(v) for k, v in model.state_dict().items()}
    opt_meta = None
    if optimizer is not None:
        sd = optimizer.state_dict()
        state_meta = {}
        for i, st in sd["state"].items():
            state_meta[str(i)] = {}
            for k, v in st.items():
                if isinstance(v, Tensor):
                    arrays[f"optim/{i}/{k}"] = _host(v)
                    state_meta[str(i)][k] = "array"
                else:
                    state_meta[str(i)][k] = v
        opt_meta = {"param_groups": sd["param_groups"], "state": state_meta}
    if require_finite:
        bad = [k for k, a in arrays.items() if a.dtype.kind == "f" and not np.isfinite(a).all()]
        if bad:
            raise NonFiniteError(f"{path}: not written: {bad[0]} holds a NaN or an infinity")
    manifest = {k: {"shape": list(a.shape), "dtype": str(a.dtype), "sha256": _digest(a)} for k, a in arrays.items()}
    header = {"format": FORMAT, "arrays": manifest, "optimizer": opt_meta, "meta": meta or {}}
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    directory = os.path.dirname(os.path.abspath(path))
    remove_stale_temps(path)
    tmp = os.path.join(directory, f"{_temp_prefix(path)}{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read(path):
    """(arrays, header) from `path`, with every array checked against its recorded SHA-256."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such file" + (" (it is a directory)" if os.path.isdir(path) else ""))
    with open(path, "rb") as f:
        if f.read(4) != _ZIP_MAGIC:
            raise CheckpointError(f"{path}: not a lazytensor checkpoint (not an .npz archive)")
    try:
        header, arrays = read_archive(path, "__header__")
    except ARCHIVE_ERRORS as exc:
        raise CheckpointError(f"{path}: cannot be read as a checkpoint ({type(exc).__name__}: {exc}); "
                              f"the file is corrupt or truncated") from None
    if header is None:
        raise CheckpointError(f"{path}: not a lazytensor checkpoint (no header)")
    if not isinstance(header, dict):
        raise CheckpointError(f"{path}: corrupt checkpoint header (a {type(header).__name__}, not an object)")
    if header.get("format") != FORMAT:
        raise CheckpointError(f"{path}: unknown checkpoint format {str(header.get('format'))[:40]!r}")
    problem = _header_problem(header)
    if problem is not None:
        raise CheckpointError(f"{path}: corrupt checkpoint header ({problem})")
    for k, info in header["arrays"].items():
        if k not in arrays or _digest(arrays[k]) != info["sha256"]:
            raise CheckpointError(f"{path}: array {k!r} is missing or its checksum does not match (corrupt file)")
    return arrays, header


def _header_problem(header):
    """What in a checkpoint header has a shape `save` never writes, or None: the arrays' manifest, the
    optimizer's state and groups, and the meta object (whose fields the training job checks itself)."""
    manifest = header.get("arrays")
    if not isinstance(manifest, dict):
        return "'arrays' is not an object"
    for k, info in manifest.items():
        if not (isinstance(info, dict) and isinstance(info.get("sha256"), str)):
            return f"the manifest entry of {k[:40]!r} has no checksum"
    opt = header.get("optimizer")
    if opt is not None:
        if not (isinstance(opt, dict) and isinstance(opt.get("state"), dict)
                and isinstance(opt.get("param_groups"), list)):
            return "'optimizer' has no 'state' object and 'param_groups' list"
        if not all(isinstance(st, dict) for st in opt["state"].values()):
            return "an optimizer state entry is not an object"
        if not all(isinstance(g, dict) for g in opt["param_groups"]):
            return "an optimizer parameter group is not an object"
        if not all(isinstance(i, str) and i.isdigit() for i in opt["state"]):
            return "an optimizer state key is not a parameter number"
    if not isinstance(header.get("meta", {}), dict):
        return "'meta' is not an object"
    return None


def load(path, model, optimizer=None):
    """Restore `model` (and `optimizer`) from `path`; returns the saved meta dict."""
    arrays, header = read(path)
    state = {k[len("model/"):]: v for k, v in arrays.items() if k.startswith("model/")}
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise CheckpointError(f"{path}: does not match the model: missing {missing}, unexpected {unexpected}")
    for k, t in own.items():
        if tuple(state[k].shape) != t.shape or state[k].dtype != t.dtype.np:
            raise CheckpointError(f"{path}: {k} is {state[k].dtype}{list(state[k].shape)} in the checkpoint but "
                                  f"{t.dtype.name}{list(t.shape)} in the model")
    model.load_state_dict(state)
    if optimizer is not None:
        opt = header.get("optimizer")
        if opt is None:
            raise CheckpointError(f"{path}: holds no optimizer state")
        restored = {}
        for i, st in opt["state"].items():
            if any(v == "array" and f"optim/{i}/{k}" not in arrays for k, v in st.items()):
                raise CheckpointError(f"{path}: optimizer state of parameter {i} names an array the file lacks")
            restored[int(i)] = {k: (arrays[f"optim/{i}/{k}"] if v == "array" else v) for k, v in st.items()}
        try:
            optimizer.load_state_dict({"state": restored, "param_groups": opt["param_groups"]})
        except (ValueError, IndexError, KeyError) as exc:
            raise CheckpointError(f"{path}: optimizer state does not match: {exc}") from None
    return header.get("meta", {})
