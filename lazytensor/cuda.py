"""`lt.cuda`: what PyTorch programs ask of CUDA before placing work. `is_available()` says whether work
placed on "cuda" runs there: CUDA is the active device (lt.set_device("cuda") or LAZYTENSOR_DEVICE=cuda)."""
from .random import manual_seed as _manual_seed
from .runtime import devices as _devices


def is_available():
    return _devices.active_name() == "cuda"


def device_count():
    return 1 if is_available() else 0


_CURRENT = {"index": 0}


def set_device(device):
    """Which CUDA device this process uses: an index, "cuda:N" or an lt.device. lazytensor drives one device
    per process (under mpiexec, one per rank), so the index a rank names is recorded for current_device()
    and the work goes to this process's device."""
    if isinstance(device, int):
        index = device
    else:
        name = str(device)
        if not name.startswith("cuda"):
            raise ValueError(f"lt.cuda.set_device({device!r}): expected an index or 'cuda:N'")
        index = int(name.split(":", 1)[1]) if ":" in name else 0
    if index < 0:
        raise ValueError(f"lt.cuda.set_device({device!r}): a device index is 0 or more")
    _CURRENT["index"] = index


def current_device():
    """The index set_device() recorded (0 until then)."""
    return _CURRENT["index"]


def manual_seed(seed):
    """Seeds the one generator every device draws from (as lt.manual_seed)."""
    _manual_seed(seed)


manual_seed_all = manual_seed


def synchronize(device=None):
    """Nothing to wait for: host reads wait for the values they need."""


def is_bf16_supported():
    return True


def _memory():
    return _devices.active_memory() if is_available() else None


def memory_allocated(device=None):
    """Bytes the CUDA device holds for tensors now (its memory accounting; 0 when CUDA is not in use)."""
    memory = _memory()
    return 0 if memory is None else memory.resident_bytes


def max_memory_allocated(device=None):
    """The most bytes the CUDA device held for tensors since it started or since reset_peak_memory_stats()."""
    memory = _memory()
    return 0 if memory is None else memory.peak_bytes


def memory_reserved(device=None):
    """Bytes the CUDA device holds: for tensors, and blocks kept for reuse."""
    memory = _memory()
    return 0 if memory is None else memory.resident_bytes + memory.cached_bytes


def reset_peak_memory_stats(device=None):
    """Start max_memory_allocated() again from the bytes held now."""
    memory = _memory()
    if memory is not None:
        memory.reset_peak()


def empty_cache():
    """Give the blocks kept for reuse back to the device."""
    memory = _memory()
    if memory is not None:
        memory.free_cache()
