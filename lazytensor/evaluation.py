"""Explicit evaluation and the engine's counters."""
from .runtime.counters import COUNTERS
from .runtime.scheduler import realize as _realize


def realize(*tensors):
    """Compute the given tensors now (no download); returns them (a single one unwrapped)."""
    _realize([t._node for t in tensors])
    return tensors[0] if len(tensors) == 1 else tensors


def counters():
    """What the engine has done: realizations, kernels run, host reads and writes (by trigger)."""
    return COUNTERS.snapshot()


def reset_counters():
    COUNTERS.reset()
