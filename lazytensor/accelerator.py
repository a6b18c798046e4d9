"""`lt.accelerator`: PyTorch's device-agnostic questions (`torch.accelerator`). The accelerator is the active
device when it is not the host: "cuda", "metal" or "virtual" (lt.set_device or LAZYTENSOR_DEVICE)."""
from . import cuda as _cuda
from .device_spec import device as _device
from .runtime import devices as _devices


def is_available():
    """Whether work placed on current_accelerator() runs on a device other than the host."""
    return _devices.active_name() != "cpu"


def current_accelerator(check_available=False):
    """The active accelerator as an `lt.device`, or None when the host is the active device."""
    return _device(_devices.active_name()) if is_available() else None


def device_count():
    return 1 if is_available() else 0


def current_device_index():
    return _cuda.current_device()


def set_device_index(index):
    """As lt.cuda.set_device: the index is recorded; the process's one device does the work."""
    _cuda.set_device(int(index))


set_device_idx = set_device_index


def synchronize(device=None):
    """Nothing to wait for: host reads wait for the values they need."""
