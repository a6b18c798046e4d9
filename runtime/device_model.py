"""A modeled device timeline: what a profiled block's kernels and copies would take on a named GPU.

This is a model, not a measurement. Each device kernel costs its launch latency plus the longer of its
bytes over the device's memory bandwidth and its floating-point work over the device's rate (a
roofline); each copy costs the host link's latency plus its bytes over the link's bandwidth. Kernels and
copies run one after another on one stream, in the order they were issued, except prefetches (the
transfer log's reason "prefetch": runtime/prefetch.py): those run on a copy stream from when they were
issued, beside the kernels, and the kernel that reads one waits for it to finish; an upload that is not
a prefetch waits for the copy stream too (one host-to-device engine). Kernels that ran on a host backend
(NumPy, numba, MPI) are counted at the time they took here, on this CPU.

The figures of each profile are sustained rates, not datasheet peaks; `DeviceProfile.basis` says where
each comes from. `bench/device_check.py` compares the model with measured kernel times when a GPU is lent.
"""
import dataclasses
import math

import numpy as np

from ..kernels.ops import OPS

# Ops whose work is a sum of products over a shared inner dimension: 2 * out elements * inner flops.
_PRODUCTS = frozenset({"matmul"})


@dataclasses.dataclass(frozen=True)
class DeviceProfile:
    """The rates a modeled timeline uses for one kind of device (bytes and seconds)."""
    name: str
    title: str
    memory_bytes: int
    memory_bytes_per_s: float    # sustained device-memory bandwidth
    flops_per_s: float           # float32 rate of elementwise and row kernels (no tensor cores)
    product_flops_per_s: float   # float32 rate of lazytensor's own matrix-product kernel on that device
    launch_s: float              # the least a kernel takes, back to back on one stream
    link_bytes_per_s: float      # pinned host <-> device copies, one direction
    link_latency_s: float
    basis: str


PROFILES = {
    "h200": DeviceProfile(
        "h200", "NVIDIA H200 SXM (141 GB HBM3e)", 141 * 10**9,
        memory_bytes_per_s=4.0e12, flops_per_s=60e12, product_flops_per_s=2.7e12, launch_s=3e-6,
        link_bytes_per_s=50e9, link_latency_s=10e-6,
        basis="HBM3e 4.8 TB/s peak, taken at 4.0 sustained; 67 TFLOP/s float32 peak without tensor cores, "
              "taken at 60; products at 2.7 TFLOP/s, what lazytensor's tiled float32 product reached on an "
              "H200 (bench/RESULTS.md: the small model's 75 products of a step, 22.9 GFLOP in 8.57 ms); "
              "PCIe 5.0 x16 64 GB/s peak, taken at 50 for pinned copies, 10 us a copy"),
    "rtx4060": DeviceProfile(
        "rtx4060", "an 8 GB consumer card (GeForce RTX 4060)", 8 * 2**30,
        memory_bytes_per_s=230e9, flops_per_s=13e12, product_flops_per_s=0.6e12, launch_s=4e-6,
        link_bytes_per_s=12e9, link_latency_s=12e-6,
        basis="GDDR6 272 GB/s peak, taken at 230 sustained; 15.1 TFLOP/s float32 peak, taken at 13; "
              "products at 0.6 TFLOP/s (the H200's measured rate scaled by the float32 peaks: not measured); "
              "PCIe 4.0 x8 16 GB/s peak, taken at 12, 12 us a copy"),
}


def profile_named(name):
    """The DeviceProfile called `name`; a ValueError listing the known names otherwise."""
    if isinstance(name, DeviceProfile):
        return name
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"no device profile named {name!r}; known: {', '.join(sorted(PROFILES))}") from None


def _nbytes(shape, dtype):
    return math.prod(shape) * np.dtype(dtype).itemsize


def kernel_work(op, shape, dtype, inputs, ops_per_element=1):
    """(bytes read, bytes written, flops) of a kernel computing `op`'s value of `shape` and `dtype` from
    `inputs` ((shape, dtype) pairs, each distinct operand once)."""
    read = sum(_nbytes(s, d) for s, d in inputs)
    written = _nbytes(shape, dtype)
    out = math.prod(shape)
    if op in _PRODUCTS and inputs:
        first = inputs[0][0]
        inner = first[-1] if first else 1
        flops = 2 * out * inner
    else:
        record = OPS.get(op)
        elements = max([out] + [math.prod(s) for s, _ in inputs])
        flops = elements * (ops_per_element if record is None or record.elementwise else 4)
    return read, written, flops


def work_of(what, operands):
    """kernel_work of a node's kernel, or of a fused group's (an op per member), from its operands'
    Buffers (each distinct one once)."""
    seen, inputs = set(), []
    for b in operands:
        if id(b) not in seen:
            seen.add(id(b))
            inputs.append((b.shape, b.dtype))
    recipe = getattr(what, "recipe", None)
    node = what.root if recipe is not None else what
    members = 1 if recipe is None else sum(1 for instr in recipe[1] if instr[0] not in ("in", "param"))
    return kernel_work(node.op, node.shape, node.dtype, inputs, ops_per_element=max(1, members))


def kernel_seconds(profile, op, read, written, flops):
    """(seconds, bound) of one kernel on `profile`; bound is "memory", "compute" or "launch"."""
    memory = (read + written) / profile.memory_bytes_per_s
    compute = flops / (profile.product_flops_per_s if op in _PRODUCTS else profile.flops_per_s)
    busy = max(memory, compute)
    bound = "launch" if busy < profile.launch_s else ("compute" if compute > memory else "memory")
    return profile.launch_s + busy, bound


def copy_seconds(profile, nbytes):
    return profile.link_latency_s + nbytes / profile.link_bytes_per_s


@dataclasses.dataclass
class Timeline:
    """A profiled block's modeled time on one device profile (seconds), and what it is made of."""
    profile: DeviceProfile
    device_kernel_s: float = 0.0
    copy_s: float = 0.0
    hidden_copy_s: float = 0.0      # copy time prefetches spent beside kernels: not on the step's path
    host_kernel_s: float = 0.0      # measured here: kernels that ran on a host backend
    device_kernels: int = 0
    host_kernels: int = 0
    copies: int = 0
    copy_bytes: int = 0
    bounds: dict = dataclasses.field(default_factory=dict)   # "memory"/"compute"/"launch" -> kernels
    by_op: dict = dataclasses.field(default_factory=dict)    # op -> [kernels, modeled seconds]
    incomplete: bool = False        # records were dropped from the log: the model saw only some
    peak_bytes: int = 0             # the block's device peak, against the profile's memory

    @property
    def total_s(self):
        return self.device_kernel_s + self.copy_s + self.host_kernel_s - self.hidden_copy_s

    def lines(self):
        """The timeline as summary lines."""
        p = self.profile
        bounds = "".join(f", {n} {b}-bound" for b, n in sorted(self.bounds.items()))
        head = (f"modeled on {p.name} ({p.title}; a model, not a measurement): {self.total_s * 1e3:.3f} ms = "
                f"device kernels {self.device_kernel_s * 1e3:.3f} ms ({self.device_kernels} launches{bounds})"
                f" + copies {self.copy_s * 1e3:.3f} ms ({self.copies}, {self.copy_bytes:,} B"
                f"{f'; {self.hidden_copy_s * 1e3:.3f} ms of them beside kernels' if self.hidden_copy_s else ''})"
                f" + host kernels {self.host_kernel_s * 1e3:.3f} ms ({self.host_kernels}, as measured here)")
        top = sorted(self.by_op.items(), key=lambda item: -item[1][1])[:6]
        lines = [head]
        if top:
            lines.append("  largest modeled: " + ", ".join(f"{op} {n}x {s * 1e3:.3f} ms" for op, (n, s) in top))
        if self.peak_bytes > p.memory_bytes:
            lines.append(f"  the block's device peak, {self.peak_bytes:,} B, is more than {p.name}'s "
                         f"{p.memory_bytes:,} B: there it would need a budget, and move more")
        if self.incomplete:
            lines.append("  (the log dropped records of this block: the model counts only those it kept)")
        return lines


def timeline(profile, kernels, transfers, device_names, incomplete=False, peak_bytes=0, waits=()):
    """The Timeline of kernel records `kernels` and copy records `transfers` on `profile`: records of a
    backend in `device_names` are modeled, the others counted as measured. `waits`: (kernel seq,
    transfer seq) pairs, a kernel (or the first after that seq) that reads a prefetched value."""
    profile = profile_named(profile)
    t = Timeline(profile, incomplete=incomplete, peak_bytes=peak_bytes)
    events = sorted([(k.start_s, 0, k.seq, k) for k in kernels] +
                    [(r.start_s, 1, r.seq, r) for r in transfers if r.device in device_names],
                    key=lambda e: e[:3])
    waits = sorted(waits)
    compute = copying = 0.0   # when the kernel stream and the copy stream are next free
    ready, next_wait = {}, 0  # prefetch transfer seq -> when it is done
    for _, is_copy, seq, r in events:
        if is_copy:
            seconds = copy_seconds(profile, r.nbytes)
            t.copy_s += seconds
            t.copies += 1
            t.copy_bytes += r.nbytes
            if r.reason == "prefetch":
                copying = ready[seq] = max(copying, compute) + seconds
            else:
                compute = (max(compute, copying) if r.direction == "h2d" else compute) + seconds
            continue
        while next_wait < len(waits) and waits[next_wait][0] <= seq:
            compute = max(compute, ready.get(waits[next_wait][1], 0.0))
            next_wait += 1
        if r.backend not in device_names:
            t.host_kernel_s += r.duration_s
            t.host_kernels += 1
            compute += r.duration_s
            continue
        seconds, bound = kernel_seconds(profile, r.op, r.read_bytes, r.written_bytes, r.flops)
        compute += seconds
        t.device_kernel_s += seconds
        t.device_kernels += 1
        t.bounds[bound] = t.bounds.get(bound, 0) + 1
        entry = t.by_op.setdefault(r.op, [0, 0.0])
        entry[0] += 1
        entry[1] += seconds
    if ready:  # without prefetches the sum is the path (no float residue from adding in another order)
        t.hidden_copy_s = max(0.0, t.device_kernel_s + t.copy_s + t.host_kernel_s - max(compute, copying))
    return t
