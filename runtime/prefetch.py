"""Prefetching under a budget: a spilled value uploaded a few steps before the device step that reads it.

Once a run has evicted (its budget binds), after each step the executor (and a compiled step replayed
through the executors) looks `WINDOW` steps ahead: an operand of a device step there that only the host
holds, 64 KiB or more, is uploaded now if the budget has room for it beside the results of the steps
before its reader, so a prefetch evicts nothing. Each value is prefetched at most once a run (one the
evictor spills again before its reader comes back on demand), so a prefetch adds at most one copy per
value, and usually none: it moves an upload the reader would make anyway to an earlier point.
On the CUDA backend such a copy runs on a copy stream (runtime/backends/cuda_driver.py), beside the
kernels queued before its reader: the reader's kernels are queued after a wait for it (`reading`), and
so is the next user of its block when the value leaves the device first (DeviceMemory releasing a
block waits for its copy). The transfer log's reason "prefetch" and the reader's wait
(`TransferLog.prefetch_wait`) let the modeled timeline overlap it with the kernels the same way
(runtime/device_model.py); the virtual device makes the copy at once. Values are the same either way
(a copy rounds nothing).
"""
import math
import weakref

from . import copies
from .memory import bucket
from .transfers import LOG

WINDOW = 32  # steps: on an H200 up to a few milliseconds of kernels, time to copy tens of MB
# smaller operands are left to their step: a 0-d operand may be read from the host as a kernel parameter
# and never uploaded, and copying a few KB is mostly the link's latency whenever it is made
MIN_BYTES = 64 * 1024


def node_operands(step):
    """The Buffers (None while pending) a schedule's pending step reads."""
    return [n.buffer for n in (step.group.inputs if step.group is not None else step.node.inputs)]


class Prefetcher:
    """The prefetches of one run: `ahead(steps, k)` after step k ran, `reading(step)` before one runs.
    `operands(step)`: the Buffers a step reads (None for one not made yet): `node_operands` for a
    schedule's steps, a capture's slots for its recorded steps (runtime/replay/capture.py)."""

    __slots__ = ("_operands", "_done", "_waits")

    def __init__(self, operands=node_operands):
        self._operands = operands
        self._done = set()      # ids of Buffers prefetched this run (each at most once)
        self._waits = {}        # id(Buffer) -> (weak reference, the prefetch's transfer seq)

    def ahead(self, steps, k):
        """Upload what device steps k+1 .. k+WINDOW of `steps` read and only the host holds, each while
        the budget has room for it beside the results of the device steps before its reader (counted
        as if none of their operands were freed: a prefetch must not push those results' room out)."""
        results = 0
        for step in steps[k + 1:k + 1 + WINDOW]:
            if step is None or step.runs_on is None or step.runs_on.is_host:
                continue
            backend = step.runs_on
            memory = backend.memory
            for buf in self._operands(step):
                if buf is None or buf.on_device or buf.nbytes < MIN_BYTES or id(buf) in self._done:
                    continue
                if memory.resident_bytes + results + bucket(buf.nbytes) > memory.budget:
                    continue
                self._done.add(id(buf))
                if copies.make_resident(buf, backend, "prefetch") and (LOG.profiling or backend.copies_beside):
                    self._waits[id(buf)] = (weakref.ref(buf), LOG.transfer_count - 1 if LOG.profiling else None)
            results += bucket(math.prod(step.shape) * step.dtype.itemsize)
            if memory.resident_bytes + results > memory.budget:
                return  # no room for anything further ahead

    def finish(self):
        """After the run: work queued later (another run, a replay's prepared launches) waits for the
        copies of values prefetched for readers that did not come (a replan moved them)."""
        for ref, _ in self._waits.values():
            buf = ref()
            if buf is not None and buf.on_device:
                buf.backend.wait_for_copy(buf.device)
        self._waits.clear()

    def reading(self, step):
        """Before `step` runs: its kernels wait for the copies (on a copy stream) of the operands
        prefetched for it, and (while profiling) the log notes that its first kernel waits for them."""
        if not self._waits:
            return
        for buf in self._operands(step):
            wait = self._waits.pop(id(buf), None) if buf is not None else None
            if wait is None or wait[0]() is not buf:
                continue
            if wait[1] is not None:
                LOG.prefetch_wait(wait[1])
            if buf.on_device:
                buf.backend.wait_for_copy(buf.device)
