"""Explicit evaluation and the engine's counters."""
import numpy as np

from .runtime import hostio
from .runtime.counters import COUNTERS
from .runtime.planner import plan as _plan
from .runtime.scheduler import realize as _realize


def realize(*tensors):
    """Compute the given tensors now (no download); returns them (a single one unwrapped)."""
    _realize([t._node for t in tensors])
    return tensors[0] if len(tensors) == 1 else tensors


def plan(*tensors):
    """What `realize(*tensors)` (or reading them) would run, before anything runs: each kernel in order
    with its backend, shape and dtype, and the copies it needs. `print(lt.plan(loss))` shows it;
    `.items` and `.copies` hold it. Computes nothing, moves nothing (see runtime/planner.py)."""
    return _plan([t._node for t in tensors])


def host_copy(tensor, trigger, reason=None):
    """A NumPy copy of `tensor`'s value, read for a purpose the caller names: counted under `trigger` in
    lt.counters()'s host reads, and a download it needs logged with `reason` (default "host-read:" +
    trigger), as a checkpoint writer or a data loader labels its reads."""
    return np.array(hostio.host_array(tensor._node, trigger, reason=reason), copy=True)


def counters():
    """What the engine has done: realizations, kernels run, host reads and writes (by trigger)."""
    return COUNTERS.snapshot()


def reset_counters():
    COUNTERS.reset()
