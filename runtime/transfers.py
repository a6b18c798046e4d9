"""The transfer log: one record per copy between host and device, plus operand hit/miss counters.

The newest records are kept in a ring buffer (LAZYTENSOR_LOG_RECORDS of them, 10000 by default); totals
count every copy exactly, dropped records included. `clear()` starts a new log. Kernel launches are
recorded too while a profile is active (see runtime/profile.py).
"""
import collections
import dataclasses
import time

from . import config

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
    name: str = ""          # the parameter or buffer it is the value of ("blocks.0.attn.weight"), if any


@dataclasses.dataclass(frozen=True)
class KernelLaunch:
    """One kernel run while profiling: which node, where, how long, and its work (bytes read and
    written, flops: what runtime/device_model.py models it from; 0 where not known)."""
    seq: int
    node_id: int
    op: str
    backend: str
    shape: tuple
    dtype: str
    start_s: float
    duration_s: float
    read_bytes: int = 0
    written_bytes: int = 0
    flops: int = 0


class TransferLog:
    """The latest copies (and, while profiling, kernel launches), with exact totals of all of them.

    Records live in ring buffers of `capacity` entries, so a long run's memory stays flat; the totals
    (counts, bytes and seconds per direction, reason and device; launches and seconds per backend)
    count every copy and launch since `clear()`, dropped records included.
    """

    def __init__(self, capacity=None):
        self._capacity = capacity  # None: LAZYTENSOR_LOG_RECORDS, read at the first record (not at import)
        self.namer = None  # node id -> the name users know its value by (set by lazytensor.nn), or None
        self.profiling = 0
        self.generation = 0
        self.clear()

    @property
    def capacity(self):
        if self._capacity is None:
            self._bound()
        return self._capacity

    def _bound(self):
        """Bound the ring buffers by LAZYTENSOR_LOG_RECORDS (read at the first record, not at import)."""
        self.set_capacity(config.get("LAZYTENSOR_LOG_RECORDS"))

    def clear(self):
        """Forget every record and total (a profile open across this counts from here)."""
        self.records = collections.deque(maxlen=self._capacity)
        self.kernels = collections.deque(maxlen=self._capacity)
        # while profiling: (kernel seq, transfer seq) for a kernel that waits for a prefetch to finish
        self.waits = collections.deque(maxlen=self._capacity)
        self.transfer_count = 0
        self.kernel_count = 0
        self.copies = {}          # (direction, reason, device) -> [count, bytes, seconds]
        self.kernel_totals = {}   # backend -> [launches, seconds]
        self.operand_hits = {}
        self.operand_misses = {}
        self.generation += 1

    def set_capacity(self, n):
        """Keep at most `n` records of each kind from now on (the newest when shrinking)."""
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"the transfer log's capacity must be a non-negative int, got {n!r}")
        self._capacity = n
        self.records = collections.deque(self.records, maxlen=n)
        self.kernels = collections.deque(self.kernels, maxlen=n)
        self.waits = collections.deque(self.waits, maxlen=n)

    @property
    def dropped_transfers(self):
        return self.transfer_count - len(self.records)

    @property
    def dropped_kernels(self):
        return self.kernel_count - len(self.kernels)

    def record(self, direction, buf, reason, device, start_s, duration_s):
        return self.record_bytes(direction, buf.nbytes, buf.node_id, buf.op, reason, device, start_s, duration_s)

    def record_bytes(self, direction, nbytes, node_id, op, reason, device, start_s, duration_s):
        """A copy of bytes that are no node's value (a kernel's index grouping, a device status word);
        `node_id`/`op` name what they belong to."""
        if self._capacity is None:
            self._bound()
        name = self.namer(node_id) if self.namer is not None else ""
        rec = Transfer(self.transfer_count, direction, nbytes, node_id, op, reason, device, start_s, duration_s,
                       name)
        self.transfer_count += 1
        self.records.append(rec)
        total = self.copies.get((direction, reason, device))
        if total is None:
            total = self.copies[(direction, reason, device)] = [0, 0, 0.0]
        total[0] += 1
        total[1] += rec.nbytes
        total[2] += duration_s
        return rec

    def kernel(self, node, backend, start_s, duration_s, label=None, work=(0, 0, 0)):
        self.kernel_record(node.id, label or node.op, backend, node.shape, str(node.dtype), start_s, duration_s,
                           work=work)

    def reserve_kernel_seq(self):
        """A kernel record's place in launch order, for a record written later (device events)."""
        self.kernel_count += 1
        return self.kernel_count - 1

    def kernel_record(self, node_id, op, backend, shape, dtype, start_s, duration_s, seq=None, work=(0, 0, 0)):
        if seq is None:
            seq = self.reserve_kernel_seq()
        if self._capacity is None:
            self._bound()
        self.kernels.append(KernelLaunch(seq, node_id, op, backend, shape, dtype, start_s, duration_s, *work))
        total = self.kernel_totals.get(backend)
        if total is None:
            total = self.kernel_totals[backend] = [0, 0.0]
        total[0] += 1
        total[1] += duration_s

    def prefetch_wait(self, transfer_seq):
        """The next kernel launched reads the value prefetched by copy `transfer_seq` (runtime/prefetch.py):
        on a GPU it would wait for that copy to finish."""
        if self._capacity is None:
            self._bound()
        self.waits.append((self.kernel_count, transfer_seq))

    def hit(self, device, n=1):
        self.operand_hits[device] = self.operand_hits.get(device, 0) + n

    def miss(self, device):
        self.operand_misses[device] = self.operand_misses.get(device, 0) + 1

    def snapshot(self):
        """The totals now, for `since()` to subtract later (what a profile does)."""
        return {"generation": self.generation, "transfer_count": self.transfer_count,
                "kernel_count": self.kernel_count, "copies": {k: list(v) for k, v in self.copies.items()},
                "kernel_totals": {k: list(v) for k, v in self.kernel_totals.items()},
                "operand_hits": dict(self.operand_hits), "operand_misses": dict(self.operand_misses)}

    def since(self, snap):
        """What was added after `snap` (a snapshot): totals, plus the records still kept."""
        if snap["generation"] != self.generation:
            snap = _CLEARED  # cleared in between: count from the clear
        transfers = [r for r in self.records if r.seq >= snap["transfer_count"]]
        # in launch order: a device kernel's record may be written after later host kernels' records
        kernels = sorted((k for k in self.kernels if k.seq >= snap["kernel_count"]), key=lambda k: k.seq)
        n_transfers = self.transfer_count - snap["transfer_count"]
        n_kernels = self.kernel_count - snap["kernel_count"]
        waits = [w for w in self.waits if w[0] >= snap["kernel_count"]]
        return {"transfers": transfers, "kernels": kernels, "waits": waits,
                "copies": _difference(self.copies, snap["copies"]),
                "kernel_totals": _difference(self.kernel_totals, snap["kernel_totals"]),
                "operand_hits": sum(self.operand_hits.values()) - sum(snap["operand_hits"].values()),
                "operand_misses": sum(self.operand_misses.values()) - sum(snap["operand_misses"].values()),
                "dropped_transfers": n_transfers - len(transfers), "dropped_kernels": n_kernels - len(kernels)}

    def totals(self, copies=None):
        """Counts and bytes each way over `copies` ((direction, reason, device) -> [count, bytes, s];
        default: every copy since the log was cleared)."""
        copies = self.copies if copies is None else copies
        out = {"uploads": 0, "upload_bytes": 0, "downloads": 0, "download_bytes": 0}
        for (direction, _, _), (count, nbytes, _) in copies.items():
            key = "upload" if direction == "h2d" else "download"
            out[key + "s"] += count
            out[key + "_bytes"] += nbytes
        return out


_CLEARED = {"transfer_count": 0, "kernel_count": 0, "copies": {}, "kernel_totals": {}, "operand_hits": {},
            "operand_misses": {}}


def _difference(now, then):
    """{key: now - then} over totals lists, for the keys that changed."""
    out = {}
    for key, values in now.items():
        before = then.get(key)
        delta = values if before is None else [a - b for a, b in zip(values, before)]
        if any(delta):
            out[key] = list(delta)
    return out


LOG = TransferLog()
