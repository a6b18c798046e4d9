"""Devices, memory budgets, the transfer log, residency stats and profiles, for the user."""
import gc

from .runtime import config as _config
from .runtime import device_model as _device_model
from .runtime import devices as _devices
from .runtime import host_malloc as _host_malloc
from .runtime import parallel as _parallel
from .runtime import remat as _remat
from .runtime.config import parse_bytes
from .runtime.memory import set_budget_override
from .runtime.profile import Profile
from .runtime.residency import Residency
from .runtime.transfers import LOG
from .tensor import Tensor


def set_device(name="auto", **options):
    """Run later work on `name` (auto, cuda, metal, virtual, cpu). Returns the device that will run it.

    A missing device prints one line on stderr and the CPU runs instead. Options start a fresh device:
    virtual takes `memory=` (bytes or "256MB") and `offload=` ("policy" or "always": every kernel it
    can run); cuda takes `driver=` ("pycuda", "cuda-bindings", or "emulated": kernels compiled as C on
    the CPU, for tests), `offload=` and, emulated, `memory=`; metal takes `offload=` and `module=` (a
    metalcompute stand-in, for tests on other platforms).
    """
    return _devices.select(name, **options)


def register_device(name, open, probe=None, kind="accelerator", auto=False):
    """Add a device: `open(**options)` returns (backend, description) or (None, why not); the backend
    implements lazytensor.runtime.backends.base.DeviceBackend (or HostBackend). It can then be selected
    by `set_device(name)`, LAZYTENSOR_DEVICE, `Tensor.to(name)` and `device=name`, and is listed by
    `devices()`. `probe()` returns (available, reason); `auto`: whether set_device("auto") may pick it."""
    _devices.register(name, open, probe, kind, auto)


def get_device():
    """The name of the active device ("cpu" when everything runs on the host)."""
    return _devices.active_name()


def devices():
    """Every backend, whether it is available here and why (not), and which one is active."""
    return _devices.describe()


def kernel_cache_dir(kind=None):
    """Where compiled kernels are kept between runs: LAZYTENSOR_CACHE_DIR, else ~/.cache/lazytensor
    (or $XDG_CACHE_HOME/lazytensor); with `kind` ("numba", "fused", "cuda"), that kind's subfolder."""
    return _devices.kernel_cache_dir(kind)


def when_compiling(callback):
    """`with lt.when_compiling(callback):` calls `callback()` once, as the first CPU kernel that is not in
    the disk cache (`kernel_cache_dir()`) starts compiling inside the block: the first run on a machine,
    or after an upgrade, spends seconds there that later runs do not."""
    return _devices.first_compile(callback)


def set_memory_budget(budget, recompute_ratio=1.0):
    """Cap the bytes resident on the device (int, or a string like "512MB"/"2GiB"); evicts down to it
    now. None restores the default (LAZYTENSOR_MEMORY_BUDGET, else a quarter of the device's free
    memory) for this device and the ones started later. Where a realization's values would exceed it,
    a value is made again for its late readers instead of spilled to the host when its kernels would
    take at most `recompute_ratio` times its copies out and back (on the H200 profile; 0: always spill,
    2: fewer bytes copied for more kernel time; docs/RESIDENCY.md). Returns the budget now in force
    (None on the CPU with None given)."""
    nbytes = None if budget is None else parse_bytes(budget)
    _remat.set_recompute_ratio(recompute_ratio)
    memory = _devices.active_memory()
    if budget is None:
        set_budget_override(None)
        return memory.restore_default_budget() if memory is not None else None
    set_budget_override(nbytes)
    if memory is not None:
        memory.set_budget(nbytes)
    return nbytes


def memory_budget():
    """The active device's budget in bytes, or None where nothing stays resident (the CPU, Metal)."""
    memory = _devices.active_memory()
    return None if memory is None else memory.budget


def transfer_log():
    """The copies between host and device so far, oldest first (see runtime.transfers.Transfer): the
    newest `transfer_log_capacity()` of them; `residency_stats()` counts all of them."""
    return list(LOG.records)


def set_transfer_log_capacity(n):
    """Keep the newest `n` copy records (and kernel records while profiling); totals stay exact."""
    LOG.set_capacity(n)


def transfer_log_capacity():
    """How many records of each kind the transfer log keeps (LAZYTENSOR_LOG_RECORDS, default 10000)."""
    return LOG.capacity


def clear_transfer_log():
    """Start a new transfer log (and zero the operand hit/miss counters)."""
    LOG.clear()


def _tensors_by_state():
    counts = {state.value: 0 for state in Residency}
    for obj in gc.get_objects():
        if type(obj) is Tensor:
            counts[obj.residency.value] += 1
    return counts


class ResidencyStats(dict):
    """`lt.residency_stats()`: a dict (its keys as before) that prints as a labelled summary."""

    def __str__(self):
        lines = [f"copies: {self['uploads']} uploads ({_size(self['upload_bytes'])}), {self['downloads']} downloads "
                 f"({_size(self['download_bytes'])}); evictions {self['evictions']}; operands already on the "
                 f"device {self['operand_hits']}, uploaded for a kernel {self['operand_misses']}",
                 "tensors: " + ", ".join(f"{n} {state}" for state, n in self["tensors"].items())]
        for name, d in self["devices"].items():
            budget = "none" if d.get("budget") is None else _size(d["budget"])
            lines.append(f"{name}: {_size(d['bytes_resident'])} resident in {d['buffers_resident']} buffers, peak "
                         f"{_size(d['peak_bytes'])}, budget {budget}, cached blocks {_size(d['cached_bytes'])}, "
                         f"evicted {_size(d['evicted_bytes'])}")
        if self["transfer_records_dropped"]:
            lines.append(f"(the transfer log dropped {self['transfer_records_dropped']} old records; totals are exact)")
        return "\n".join(lines)

    __repr__ = __str__


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes} B"


def residency_stats():
    """Bytes resident now and at peak per device, budget, copies each way, evictions, hits, tensors per
    state: a dict (ResidencyStats) that prints as a labelled summary."""
    stats = ResidencyStats(LOG.totals())
    per_device = {d.name: d.memory.stats() for d in _devices.all_devices()}
    stats.update({
        "devices": per_device,
        "evictions": sum(d["evictions"] for d in per_device.values()),
        "operand_hits": sum(LOG.operand_hits.values()),
        "operand_misses": sum(LOG.operand_misses.values()),
        "transfer_records_dropped": LOG.dropped_transfers,
        "tensors": _tensors_by_state(),
    })
    return stats


def profile(kernels=True, model=None):
    """`with lt.profile() as p:` scopes the transfer log and stats to the block; then p.summary(),
    p.to_json(path), p.to_chrome_trace(path), p.modeled("h200"). `kernels=False` keeps the copies and
    stats but records no kernels (no device events; the block runs at its unprofiled speed). `model`
    names a device profile ("h200", "rtx4060") whose modeled time of the block the summary shows."""
    return Profile(kernels, model)


def device_profiles():
    """{name: what it models} of the device profiles `lt.profile(model=name)` and `p.modeled(name)` use
    (sustained rates of a GPU: runtime/device_model.py states each figure's basis)."""
    return {name: p.title for name, p in _device_model.PROFILES.items()}


def set_num_threads(n):
    """Use `n` CPU threads for host kernels (PyTorch's torch.set_num_threads). With more than one, the
    numba kernels and the matrix products split their rows between threads and OpenBLAS is held to one
    thread while the engine runs kernels (runtime/parallel.py explains why)."""
    _parallel.set_num_threads(n)


def setting(name):
    """The value of the `LAZYTENSOR_*` variable `name` as the engine reads it (parsed; its default
    where it is unset). Raises ValueError naming the variable for a value it cannot use."""
    return _config.get(name)


def check_settings():
    """Raise ValueError now for any `LAZYTENSOR_*` variable whose value the engine cannot use (a program
    can check them at its start instead of at the first computation)."""
    _config.check_all()


def tune_host_malloc():
    """Keep freed arrays in the process for the next step (glibc's mmap and trim thresholds raised). Not
    needed for the speed any more: the CPU kernels keep their results' memory in their own cache
    (`lt.cpu`). It changes malloc for the whole process, so the library never does it by itself.
    Returns whether it applied (False where there is no glibc mallopt)."""
    return _host_malloc.tune()


def get_num_threads():
    """The CPU threads host kernels use (1 without threadpoolctl installed)."""
    return _parallel.num_threads()
