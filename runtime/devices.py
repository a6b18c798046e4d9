"""Device selection: the registry of devices, which exist here and why the others do not, and the
active fallback chain.

A device is registered once (`register`: name, open, probe); selection, `lt.devices()`, `Tensor.to`,
`device=` placements and LAZYTENSOR_DEVICE all read the registry. LAZYTENSOR_DEVICE=auto|cuda|metal|
virtual|cpu (default auto: the first available accelerator, else the CPU). A requested device that is
missing prints one line on stderr and the program runs on the CPU.
"""
import contextlib
import ctypes
import os
import sys
import weakref

from ..kernels.cache import cache_path, kept_between_runs
from ..kernels.cpu.numba_cache import announce_first_compile as numba_announce_first_compile
from ..kernels.cpu.numba_cache import first_compile as numba_first_compile
from . import config, host_malloc
from .backends.cuda_driver import open_driver
from .backends.kernel_device import KernelDevice
from .backends.metal import MetalBackend, unavailable_reason
from .backends.numba_backend import NumbaBackend
from .backends.numpy_backend import NumpyBackend
from .backends.virtual import VirtualDevice

VIRTUAL_REASON = ("a separate memory arena in host RAM with real copies, a budget and eviction; for testing "
                  "and rehearsing a GPU run's transfers; not acceleration (slower than the CPU path)")


class DeviceEntry:
    """A device lazytensor can select: its name, kind, how to open one and how to tell whether it can.

    `open(**options)` returns (backend, description) or (None, the reason it cannot); `probe()` returns
    (available, reason) without side effects beyond starting the default instance once; `auto`: whether
    `auto` selection may pick it (True, False, or a function deciding when asked)."""

    __slots__ = ("name", "kind", "open", "probe", "auto")

    def __init__(self, name, kind, open, probe, auto):
        self.name, self.kind, self.open, self.probe, self.auto = name, kind, open, probe, auto


_REGISTRY = {}


def register(name, open, probe=None, kind="accelerator", auto=False):
    """Make a device selectable by `name` (lt.set_device, LAZYTENSOR_DEVICE, Tensor.to, device=) and
    listed by lt.devices(). `open` and `probe` as DeviceEntry says; without `probe`, opening decides."""
    name = name.strip().lower()
    if name in ("auto", "cpu"):
        raise ValueError(f"{name!r} is reserved: it is not a device that can be registered")
    if probe is None:
        def probe():
            device, reason = open()
            return device is not None, reason
    _REGISTRY[name] = DeviceEntry(name, kind, open, probe, auto)
    config.allow_device(name)


def unregister(name):
    """Forget a registered device (the active one stays active until the next selection)."""
    _REGISTRY.pop(name, None)
    config.forbid_device(name)


def names():
    """Every name a device can be selected by: auto, the registered devices, cpu."""
    return ("auto",) + tuple(_REGISTRY) + ("cpu",)


def first_compile(callback):
    """A context manager: within it, `callback()` once, as the first CPU kernel that the disk cache did
    not hold starts compiling (never with numba off)."""
    if not any(b.name == "numba" for b in host_chain()):
        return contextlib.nullcontext()
    return numba_first_compile(callback)


def _compile_notice():
    """One line on stderr as this process first compiles CPU kernels: the wait that follows is once per
    machine and version, not every run (none where the cache cannot be written: that line said so)."""
    if not kept_between_runs():
        return
    print(f"lazytensor: compiling CPU kernels not in the cache yet (once per machine and version; tens of "
          f"seconds on the first run); they are kept in {kernel_cache_dir()}", file=sys.stderr,
          flush=True)


def kernel_cache_dir(kind=None):
    """The folder where compiled kernels are kept between processes, or its subfolder for one `kind`
    (numba, fused, cuda)."""
    return os.path.dirname(cache_path("numba")) if kind is None else cache_path(kind)


def _host_chain():
    """numba (unless LAZYTENSOR_JIT=0), then NumPy, which accepts everything. numba is a hard
    dependency (the fused kernels and the runtime's fusion planner import it), so it is never missing."""
    chain = [NumpyBackend()]
    if config.get("LAZYTENSOR_JIT"):
        chain.insert(0, NumbaBackend())
    return tuple(chain)


_HOST_CHAIN = None  # host_chain(), built at first use: LAZYTENSOR_JIT is read then, not at import


def host_chain():
    """The host backends tried in order (see _host_chain), the same tuple for the whole process."""
    global _HOST_CHAIN
    if _HOST_CHAIN is None:
        config.check_at_start()  # a bad or misspelt LAZYTENSOR_* variable is said at the first computation
        host_malloc.apply_if_asked()  # the engine starts: LAZYTENSOR_MALLOC=tuned applies now
        _HOST_CHAIN = _host_chain()
        if any(b.name == "numba" for b in _HOST_CHAIN):
            numba_announce_first_compile(_compile_notice)
    return _HOST_CHAIN


_state = {"device": None, "name": None, "noticed": set(), "created": []}


_cuda = {"device": None, "reason": None}


def _cuda_hidden():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() in ("", "-1")


def _started(slot, fresh, start):
    """(device, reason) from `slot`, started once by `start()`; a fresh start when options ask for one."""
    if not fresh and (slot["device"] is not None or slot["reason"] is not None):
        return slot["device"], slot["reason"]
    device, reason = start()
    if not fresh:
        slot["device"], slot["reason"] = device, reason
    return device, reason


def _open_cuda(driver=None, offload=None, memory=None):
    """The CUDA backend, or None and the reason. The default one starts once per process; naming a
    driver, offload mode or (emulated) memory size starts a fresh one."""
    if _cuda_hidden():
        return None, "hidden: CUDA_VISIBLE_DEVICES is set to an empty list"

    def start():
        kind = (driver or config.get("LAZYTENSOR_CUDA_DRIVER")).strip().lower()
        mode = config.offload_mode("cuda", offload or config.get("LAZYTENSOR_CUDA_OFFLOAD"))
        if kind != "emulated":
            try:
                ctypes.CDLL("libcuda.so.1")
            except OSError:
                return None, "no NVIDIA driver here (libcuda.so.1 could not be loaded)"
        try:
            device = KernelDevice(open_driver(kind, memory), mode)
            return device, device.driver.description
        except (ImportError, RuntimeError, OSError) as exc:
            return None, str(exc)
    return _started(_cuda, driver is not None or offload is not None or memory is not None, start)


def _probe_cuda():
    device, reason = _open_cuda()
    return device is not None, reason


_metal = {"device": None, "reason": None}


def _open_metal(module=None, offload=None):
    """The Metal backend (the default one starts once per process), or None with the reason. `module`
    stands in for metalcompute (a test double on other platforms); it and `offload` start a fresh one."""
    def start():
        try:
            reason = None if module is not None else unavailable_reason()
            if reason is not None:
                return None, reason
            device = MetalBackend(module, offload or config.get("LAZYTENSOR_METAL_OFFLOAD"))
            return device, device.description
        except (ImportError, RuntimeError, OSError) as exc:
            return None, f"Metal could not start: {exc}"
    return _started(_metal, module is not None or offload is not None, start)


def _probe_metal():
    device, reason = _open_metal()
    return device is not None, reason


def _open_virtual(**options):
    return VirtualDevice(**options), VIRTUAL_REASON


# auto never picks the emulated CUDA driver (it is for tests and is slower than the CPU).
register("cuda", _open_cuda, _probe_cuda, auto=lambda: config.get("LAZYTENSOR_CUDA_DRIVER") != "emulated")
register("metal", _open_metal, _probe_metal, auto=True)
register("virtual", _open_virtual, lambda: (True, VIRTUAL_REASON), kind="simulated device")


def describe():
    """One entry per device and the host: name, kind, available, why (not), and whether it is active."""
    active = active_name()
    entries = []
    for entry in _REGISTRY.values():
        ok, why = entry.probe()
        entries.append({"name": entry.name, "kind": entry.kind, "available": ok, "reason": why})
    entries.append({"name": "cpu", "kind": "host", "available": True,
                    "reason": " + ".join(b.name for b in host_chain()) + " kernels"})
    for e in entries:
        e["active"] = e["name"] == active
    return entries


def _notice(requested, reason):
    key = (requested, reason)
    if key not in _state["noticed"]:
        _state["noticed"].add(key)
        print(f"lazytensor: device '{requested}' is not available ({reason}); running on the CPU instead",
              file=sys.stderr)


def select(name=None, **options):
    """Make `name` (or LAZYTENSOR_DEVICE, or auto) the active device; returns the name that runs."""
    requested = (name or config.get("LAZYTENSOR_DEVICE")).strip().lower()
    if requested not in names():
        raise ValueError(f"unknown device {requested!r}; choose one of {', '.join(names())}")
    device = None
    if requested == "auto":
        # The first available device that auto may pick, in registration order.
        for entry in _REGISTRY.values():
            if entry.auto() if callable(entry.auto) else entry.auto:
                device = entry.open()[0]
                if device is not None:
                    break
    elif requested != "cpu":
        device, reason = _REGISTRY[requested].open(**options)
        if device is None:
            _notice(requested, reason)
    if device is not None and not device.is_host:
        _state["created"].append(weakref.ref(device))
    _state["device"], _state["name"] = device, (device.name if device else "cpu")
    return _state["name"]


def active_device():
    """The active device backend, or None when everything runs on the host."""
    if _state["name"] is None:
        select()
    return _state["device"]


def active_memory():
    """The active device's DeviceMemory, or None where nothing stays resident (the CPU, Metal)."""
    device = active_device()
    return device.memory if device is not None and not device.is_host else None


def active_name():
    if _state["name"] is None:
        select()
    return _state["name"]


def chain():
    """Backends tried in order for each kernel: the active device (if any), then the host backends."""
    device = active_device()
    return ((device,) if device is not None else ()) + (_HOST_CHAIN or host_chain())


def all_devices():
    """Every device backend started in this process (the active one and earlier ones)."""
    alive = [ref() for ref in _state["created"]]
    _state["created"] = [weakref.ref(d) for d in alive if d is not None]
    return [d for d in alive if d is not None]


def is_device_name(name):
    """Whether `name` ("cuda", "cuda:0", "cpu", ...) names a placement: the host or a registered device."""
    return isinstance(name, str) and name.split(":")[0].strip().lower() in names()[1:]


def resolve_placement(name):
    """Normalize a tensor placement ("cuda:0" -> "cuda"); a device that is not active gets a notice
    and "cpu" (the value stays on the host)."""
    if name is None:
        return None
    base = str(name).split(":")[0].strip().lower()
    if not is_device_name(base):
        raise ValueError(f"unknown device {name!r}; choose one of {', '.join(names()[1:])}")
    if base == "cpu" or base == active_name():
        return base
    ok, reason = _REGISTRY[base].probe()
    if ok:
        key = (base, "inactive")
        if key not in _state["noticed"]:
            _state["noticed"].add(key)
            print(f"lazytensor: device '{base}' is available but not the active device (select it with "
                  f"lt.set_device('{base}') or LAZYTENSOR_DEVICE={base}); the value stays on the CPU", file=sys.stderr)
    else:
        _notice(base, reason)
    return "cpu"


def fusing_backend(chain):
    """The backend that runs fused elementwise groups: the first of the chain when it compiles them
    (numba on the host, a kernel-compiling device); None with LAZYTENSOR_FUSE=0."""
    if not config.get("LAZYTENSOR_FUSE"):
        return None
    return chain[0] if chain[0].fuses else None


def host_fusers(fuser, chain):
    """The host backends that may run a fused group the device `fuser` declined (or `fuser` itself
    when it is a host backend), in the order they are tried."""
    return ([fuser] if fuser.is_host else []) + [b for b in chain[1:] if b.is_host and b.fuses]
