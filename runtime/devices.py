"""Device selection: which backends exist here, why the others do not, and the active fallback chain.

LAZYTENSOR_DEVICE=auto|cuda|metal|virtual|cpu (default auto: the first available accelerator, else the
CPU). A requested device that is missing prints one line on stderr and the program runs on the CPU.
"""
import ctypes
import os
import sys
import weakref

from .backends.numpy_backend import NumpyBackend

NAMES = ("auto", "cuda", "metal", "virtual", "cpu")
VIRTUAL_REASON = ("a separate memory arena in host RAM with real copies, a budget and eviction; for testing "
                  "and rehearsing a GPU run's transfers; not acceleration (slower than the CPU path)")


def _host_chain():
    """numba (unless LAZYTENSOR_JIT=0 or numba is missing), then NumPy, which accepts everything."""
    chain = [NumpyBackend()]
    if os.environ.get("LAZYTENSOR_JIT", "1").strip().lower() not in ("0", "false", "no", "off"):
        try:
            from .backends.numba_backend import NumbaBackend
            chain.insert(0, NumbaBackend())
        except ImportError:
            pass
    return tuple(chain)


_HOST_CHAIN = _host_chain()
_state = {"device": None, "name": None, "noticed": set(), "created": []}


def _probe_cuda():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False, "hidden: CUDA_VISIBLE_DEVICES is set to an empty list"
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False, "no NVIDIA driver here (libcuda.so.1 could not be loaded)"
    return False, "an NVIDIA driver is present, but this version of lazytensor has no CUDA backend yet"


def _probe_metal():
    if sys.platform != "darwin":
        return False, "Metal needs macOS on Apple silicon"
    try:
        import metalcompute  # noqa: F401
    except ImportError:
        return False, "metalcompute is not installed (pip install 'lazytensor[metal]')"
    return False, "metalcompute is installed, but this version of lazytensor has no Metal backend yet"


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
    requested = (name or os.environ.get("LAZYTENSOR_DEVICE") or "auto").strip().lower()
    if requested not in NAMES:
        raise ValueError(f"unknown device {requested!r}; choose one of {', '.join(NAMES)}")
    device = None
    if requested == "virtual":
        from .backends.virtual import VirtualDevice
        device = VirtualDevice(**options)
        _state["created"].append(weakref.ref(device))
    elif requested in ("cuda", "metal"):
        ok, reason = (_probe_cuda if requested == "cuda" else _probe_metal)()
        if not ok:
            _notice(requested, reason)
    # "auto" picks the first available accelerator; this version has no accelerator backend, so the CPU.
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
    """The host backend that runs fused elementwise groups, when the chain starts on the host with it
    (fusion is off with a device active, and with LAZYTENSOR_FUSE=0)."""
    if os.environ.get("LAZYTENSOR_FUSE", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    first = chain[0]
    return first if getattr(first, "launch_fused", None) is not None else None
