"""`lt.cuda`: what PyTorch programs ask of CUDA before placing work. `is_available()` says whether work
placed on "cuda" runs there: CUDA is the active device (lt.set_device("cuda") or LAZYTENSOR_DEVICE=cuda)."""
from .random import manual_seed as _manual_seed
from .runtime import devices as _devices


def is_available():
    return _devices.active_name() == "cuda"


def device_count():
    return 1 if is_available() else 0


def manual_seed(seed):
    """Seeds the one generator every device draws from (as lt.manual_seed)."""
    _manual_seed(seed)


manual_seed_all = manual_seed


def synchronize(device=None):
    """Nothing to wait for: host reads wait for the values they need."""


def is_bf16_supported():
    return True
