"""Scoping the transfer log and residency stats to a block: `with lt.profile() as p:`.

A profile shows the copies and kernels of its block, the stats they add up to, a readable table, a JSON
dump, and a Chrome/Perfetto trace. The stats and the table count everything exactly; the record lists
(and so the JSON and the trace) hold the newest records the log kept (see runtime/transfers.py).
"""
import contextlib
import dataclasses
import json
import sys

from . import device_model, devices
from .counters import COUNTERS
from .transfers import LOG


def _device_counters():
    out = {}
    for d in devices.all_devices():
        m = d.memory
        out[d.name] = (m.evictions, m.evicted_bytes, m.memory_fallbacks)
    return out


class Profile:
    """The copies, kernel launches and stats of one `with` block. With `kernels=False` the block runs
    as it would unprofiled (no kernel records, no device events, compiled replays on their fastest
    path): the copies and stats are kept, and kernels are only counted. With `model` (a device
    profile's name, e.g. "h200"), the summary and stats add the block's modeled time on that device."""

    def __init__(self, kernels=True, model=None):
        if model is not None:
            device_model.profile_named(model)  # an unknown name fails here, at the user's line
            if not kernels:
                raise ValueError("a modeled timeline is made from kernel records: profile(kernels=True, model=...)")
        self.transfers, self.kernels, self.stats, self._waits = [], [], {}, []
        self.copies, self.kernel_totals = {}, {}
        self.records_kernels = kernels
        self.model = model
        self._stack = None

    def __enter__(self):
        self._start = LOG.snapshot()
        self._dev = _device_counters()
        self._reads = dict(COUNTERS.host_reads)
        self._launched = COUNTERS.kernels
        self._stack = contextlib.ExitStack()
        self._peaks = {d.name: self._stack.enter_context(d.memory.watch_peak()) for d in devices.all_devices()}
        if self.records_kernels:
            LOG.profiling += 1
        return self

    def __exit__(self, *exc):
        if self.records_kernels:
            for d in devices.all_devices():
                d.flush_kernel_records()
            LOG.profiling -= 1
        added = LOG.since(self._start)
        self.transfers, self.kernels, self._waits = added["transfers"], added["kernels"], added["waits"]
        self.copies, self.kernel_totals = added["copies"], added["kernel_totals"]
        if not LOG.profiling:
            LOG.kernels.clear()  # kernel records exist only for profiles
        stats = LOG.totals(self.copies)
        stats["operand_hits"] = added["operand_hits"]
        stats["operand_misses"] = added["operand_misses"]
        per_device = {}
        for d in devices.all_devices():
            e0, b0, o0 = self._dev.get(d.name, (0, 0, 0))
            m = d.memory
            per_device[d.name] = {"evictions": m.evictions - e0, "evicted_bytes": m.evicted_bytes - b0,
                                  "memory_fallbacks": m.memory_fallbacks - o0,
                                  "largest_refused_bytes": m.largest_refused,
                                  "peak_bytes": self._peaks[d.name][0] if d.name in self._peaks else
                                  m.peak_bytes, "bytes_resident": m.resident_bytes, "budget": m.budget}
        stats["evictions"] = sum(v["evictions"] for v in per_device.values())
        stats["devices"] = per_device
        stats["kernels"] = sum(count for count, _ in self.kernel_totals.values()) if self.records_kernels \
            else COUNTERS.kernels - self._launched
        stats["kernels_by_backend"] = {b: count for b, (count, _) in self.kernel_totals.items()}
        stats["records_dropped"] = {"transfers": added["dropped_transfers"], "kernels": added["dropped_kernels"]}
        stats["host_reads"] = {k: v - self._reads.get(k, 0) for k, v in COUNTERS.host_reads.items()
                               if v - self._reads.get(k, 0)}
        self.stats = stats
        if self.model is not None:
            t = self.modeled(self.model)
            stats["modeled"] = {"device": t.profile.name, "total_s": t.total_s, "device_kernel_s": t.device_kernel_s,
                                "copy_s": t.copy_s, "hidden_copy_s": t.hidden_copy_s,
                                "host_kernel_s": t.host_kernel_s, "bounds": dict(t.bounds)}
        self._stack.close()
        return False

    def modeled(self, device="h200"):
        """The block's modeled time on a named device profile (runtime/device_model.py: a roofline per
        kernel plus launch latency, copies at the host link's rate; a model, not a measurement): kernels
        that ran on a device are modeled, those of the host counted as they ran here."""
        if not self.records_kernels:
            raise ValueError("a modeled timeline is made from kernel records: profile with kernels=True")
        names = {d.name for d in devices.all_devices()}
        dropped = self.stats.get("records_dropped", {})
        peak = max([d["peak_bytes"] for d in self.stats.get("devices", {}).values()] or [0])
        return device_model.timeline(device, self.kernels, self.transfers, names, peak_bytes=peak, waits=self._waits,
                                     incomplete=bool(dropped.get("transfers") or dropped.get("kernels")))

    def summary(self, file=None):
        """Print (to `file`, default stdout) and return a table of copies by reason, kernels, and stats."""
        s = self.stats
        lines = ["transfers", f"  {'direction':<9} {'reason':<24} {'count':>7} {'bytes':>14}"]
        groups = {}
        for (direction, reason, _), (count, nbytes, _) in self.copies.items():
            g = groups.setdefault((direction, reason), [0, 0])
            g[0] += count
            g[1] += nbytes
        for (direction, reason), (count, nbytes) in sorted(groups.items()):
            lines.append(f"  {direction:<9} {reason:<24} {count:>7} {nbytes:>14,}")
        if not groups:
            lines.append("  (none)")
        lines.append(f"  {'total':<34} {s['uploads'] + s['downloads']:>7} "
                     f"{s['upload_bytes'] + s['download_bytes']:>14,}")
        lines.append("kernels")
        if not self.records_kernels:
            lines.append(f"  {s['kernels']:>19} launches (not timed: profile(kernels=False))")
        for backend, (count, secs) in sorted(self.kernel_totals.items()):
            lines.append(f"  {backend:<12} {count:>7} launches {secs * 1e3:>10.3f} ms")
        reads = ", ".join(f"{k} {v}" for k, v in sorted(s["host_reads"].items())) or "none"
        lines.append(f"host reads (values the program looked at): {reads}")
        lines.append(f"operand hits {s['operand_hits']}, misses {s['operand_misses']}, "
                     f"evictions {s['evictions']}")
        for name, d in s["devices"].items():
            lines.append(f"device {name}: peak {d['peak_bytes']:,} B, resident now {d['bytes_resident']:,} B, "
                         f"budget {d['budget']:,} B, kernels sent elsewhere for memory {d['memory_fallbacks']}")
            if d["memory_fallbacks"] and d["largest_refused_bytes"]:
                lines.append(f"  the budget is below what one kernel needs at once ({d['largest_refused_bytes']:,} B: "
                             f"its result and operands); a budget of at least that runs it on {name}")
        if self.model is not None:
            lines.extend(self.modeled(self.model).lines())
        dropped = [f"{n:,} {what} records" for what, n in (("copy", s["records_dropped"]["transfers"]),
                                                              ("kernel", s["records_dropped"]["kernels"])) if n]
        if dropped:
            lines.append(f"(totals are exact; the oldest {' and '.join(dropped)} were not kept: "
                         "LAZYTENSOR_LOG_RECORDS sets how many are)")
        text = "\n".join(lines)
        print(text, file=file or sys.stdout)
        return text

    def to_dict(self):
        return {"stats": self.stats, "transfers": [dataclasses.asdict(r) for r in self.transfers],
                "kernels": [dataclasses.asdict(k) for k in self.kernels]}

    def to_json(self, path):
        """Write stats, transfers and kernels as JSON."""
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    def to_chrome_trace(self, path):
        """Write a Chrome trace (open in Perfetto or chrome://tracing): one lane per backend and for copies."""
        lanes = {}
        events = []

        def lane(name):
            if name not in lanes:
                lanes[name] = len(lanes) + 1
                events.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": lanes[name],
                               "args": {"name": name}})
            return lanes[name]

        for k in self.kernels:
            events.append({"ph": "X", "name": k.op, "cat": "kernel", "pid": 1, "tid": lane(f"kernels:{k.backend}"),
                           "ts": k.start_s * 1e6, "dur": max(k.duration_s * 1e6, 0.001),
                           "args": {"node": k.node_id, "shape": list(k.shape), "dtype": k.dtype}})
        for r in self.transfers:
            events.append({"ph": "X", "name": f"{r.direction} {r.op}", "cat": r.direction, "pid": 1,
                           "tid": lane(f"copies:{r.device}"), "ts": r.start_s * 1e6,
                           "dur": max(r.duration_s * 1e6, 0.001),
                           "args": {"bytes": r.nbytes, "reason": r.reason, "node": r.node_id, "seq": r.seq}})
        with open(path, "w") as f:
            json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, f)
