"""The transfer log: one record per copy between host and device, plus operand hit/miss counters.

Records are never dropped by the engine; `clear()` starts a new log. Kernel launches are recorded too
while a profile is active (see runtime/profile.py).
"""
import dataclasses
import time

_T0 = time.perf_counter()


def now():
    """Seconds since the process loaded the engine (the time base of every record)."""
    return time.perf_counter() - _T0


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One copy: h2d (upload) or d2h (download) of one node's value, and why it happened."""
    seq: int
    direction: str          # "h2d" or "d2h"
    nbytes: int
    node_id: int
    op: str
    reason: str             # operand-upload, host-read:<trigger>, eviction, setitem, host-kernel, ...
    device: str
    start_s: float
    duration_s: float       # measured by the backend (device events where it has them)


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel run while profiling: which node, where, and how long."""
    seq: int
    node_id: int
    op: str
    backend: str
    shape: tuple
    dtype: str
    start_s: float
    duration_s: float


class TransferLog:
    """All copies so far, operand hits/misses per device, and (while profiling) kernel launches."""

    def __init__(self):
        self.clear()

    def clear(self):
        self.records = []
        self.kernels = []
        self.operand_hits = {}
        self.operand_misses = {}
        self.profiling = 0

    def record(self, direction, buf, reason, device, start_s, duration_s):
        rec = Transfer(len(self.records), direction, buf.nbytes, buf.node_id, buf.op, reason, device,
                       start_s, duration_s)
        self.records.append(rec)
        return rec

    def kernel(self, node, backend, start_s, duration_s, label=None):
        self.kernels.append(KernelLaunch(len(self.kernels), node.id, label or node.op, backend, node.shape,
                                         str(node.dtype), start_s, duration_s))

    def hit(self, device):
        self.operand_hits[device] = self.operand_hits.get(device, 0) + 1

    def miss(self, device):
        self.operand_misses[device] = self.operand_misses.get(device, 0) + 1

    def totals(self, records=None):
        """Counts and bytes each way over `records` (default: the whole log)."""
        records = self.records if records is None else records
        up = [r.nbytes for r in records if r.direction == "h2d"]
        down = [r.nbytes for r in records if r.direction == "d2h"]
        return {"uploads": len(up), "upload_bytes": sum(up), "downloads": len(down),
                "download_bytes": sum(down)}


LOG = TransferLog()
