"""Device selection: which backends exist here, why the others do not, and the active fallback chain.

LAZYTENSOR_DEVICE=auto|cuda|metal|virtual|cpu (default auto: the first available accelerator, else the
CPU). A requested device that is missing prints one line on stderr and the program runs on the CPU.
"""
import ctypes
import os
import sys
import weakref

from ..kernels.cache import cache_path
from . import config
from .backends.numba_backend import NumbaBackend
from .backends.numpy_backend import NumpyBackend

NAMES = ("auto", "cuda", "metal", "virtual", "cpu")
VIRTUAL_REASON = ("a separate memory arena in host RAM with real copies, a budget and eviction; for testing "
                  "and rehearsing a GPU run's transfers; not acceleration (slower than the CPU path)")


def kernel_cache_dir(kind="numba"):
    """The folder where compiled kernels of `kind` (numba, fused, cuda) are kept between processes."""
    return cache_path(kind)


def _host_chain():
    """numba (unless LAZYTENSOR_JIT=0), then NumPy, which accepts everything. numba is a hard
    dependency (the fused kernels and the runtime's fusion planner import it), so it is never missing."""
    chain = [NumpyBackend()]
    if config.get("LAZYTENSOR_JIT"):
        chain.insert(0, NumbaBackend())
    return tuple(chain)


_HOST_CHAIN = _host_chain()
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
            from .backends.cuda_driver import open_driver
            from .backends.kernel_device import KernelDevice
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
            from .backends.metal import MetalBackend, unavailable_reason
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


def describe():
    """One entry per backend: name, kind, available, why (not), and whether it is the active one."""
    cuda_ok, cuda_why = _probe_cuda()
    metal_ok, metal_why = _probe_metal()
    active = active_name()
    entries = [
        {"name": "cuda", "kind": "accelerator", "available": cuda_ok, "reason": cuda_why},
        {"name": "metal", "kind": "accelerator", "available": metal_ok, "reason": metal_why},
        {"name": "virtual", "kind": "simulated device", "available": True, "reason": VIRTUAL_REASON},
        {"name": "cpu", "kind": "host", "available": True,
         "reason": " + ".join(b.name for b in _HOST_CHAIN) + " kernels"},
    ]
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
    if requested not in NAMES:
        raise ValueError(f"unknown device {requested!r}; choose one of {', '.join(NAMES)}")
    device = None
    if requested == "virtual":
        from .backends.virtual import VirtualDevice
        device = VirtualDevice(**options)
        _state["created"].append(weakref.ref(device))
    elif requested in ("cuda", "metal"):
        device, reason = _open_cuda(**options) if requested == "cuda" else _open_metal(**options)
        if device is None:
            _notice(requested, reason)
    elif requested == "auto":
        # The first available accelerator (the emulated CUDA driver only when asked for by name).
        if config.get("LAZYTENSOR_CUDA_DRIVER") != "emulated":
            device = _open_cuda()[0]
        if device is None and sys.platform == "darwin":
            device = _open_metal()[0]
    if device is not None and device.name == "cuda":
        _state["created"].append(weakref.ref(device))
    _state["device"], _state["name"] = device, (device.name if device else "cpu")
    return _state["name"]


def active_device():
    """The active device backend, or None when everything runs on the host."""
    if _state["name"] is None:
        select()
    return _state["device"]


def active_name():
    if _state["name"] is None:
        select()
    return _state["name"]


def chain():
    """Backends tried in order for each kernel: the active device (if any), then the host backends."""
    device = active_device()
    return ((device,) if device is not None else ()) + _HOST_CHAIN


def all_devices():
    """Every device backend started in this process (the active one and earlier ones)."""
    alive = [ref() for ref in _state["created"]]
    _state["created"] = [weakref.ref(d) for d in alive if d is not None]
    return [d for d in alive if d is not None]


def resolve_placement(name):
    """Normalize a tensor placement ("cuda:0" -> "cuda"); a device that is not active gets a notice
    and "cpu" (the value stays on the host)."""
    if name is None:
        return None
    base = str(name).split(":")[0].strip().lower()
    if base not in NAMES or base == "auto":
        raise ValueError(f"unknown device {name!r}; choose one of cpu, virtual, cuda, metal")
    if base == "cpu" or base == active_name():
        return base
    why = "it is not the active device; select it with lt.set_device() or LAZYTENSOR_DEVICE"
    if base in ("cuda", "metal"):
        ok, reason = (_probe_cuda if base == "cuda" else _probe_metal)()
        why = reason if not ok else why
    _notice(base, why)
    return "cpu"


def fusing_backend(chain):
    """The backend that runs fused elementwise groups: the first of the chain when it compiles them
    (numba on the host, a kernel-compiling device); None with LAZYTENSOR_FUSE=0."""
    if not config.get("LAZYTENSOR_FUSE"):
        return None
    first = chain[0]
    fuses = getattr(first, "launch_fused" if first.is_host else "launch_group", None) is not None
    return first if fuses else None
