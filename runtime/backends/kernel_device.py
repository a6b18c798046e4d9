"""A device that runs compiled kernels through a driver: the CUDA backend's engine side.

The driver (runtime/backends/cuda_driver.py: pycuda, cuda-bindings, or the C-emulated driver) owns
memory, copies, compilation and launches; this class owns residency (DeviceMemory), the policy and
the lowering of nodes to kernels. Launches are queued on one stream and never wait; a download waits
for the stream, and only then are the per-launch temporaries (scatter groupings and blocked sums'
partials, allocated from the budget) freed. A prefetch's upload goes on the driver's copy stream
(`upload(..., beside=True)`); `wait_for_copy(block)` queues a wait for it before its reader, a download
of it, or the reuse of its block.

Index kernels whose indices exist only on the device check bounds themselves and report a bad index
in a 16-byte status buffer; after a wait that follows such a launch the backend reads that word
(logged as a "status-read" copy and counted in `status_reads`) and raises IndexError at the host
read, the way PyTorch reports device-side assertions. Every copy the driver makes is in the transfer
log, those of index groupings and of the status word included.
"""
import weakref

import numpy as np

from ...kernels.gpu import elementwise as gew
from ..memory import DeviceMemory, PinnedPool
from ..offload_tables import CUDA_THRESHOLDS
from ..transfers import LOG, now
from .arena import OutOfDeviceMemory
from .base import DeviceBackend
from .lowering import OUT, STATUS, LoweringDevice, Scratch, lower, scalar_values


class DeviceBlock:
    """A device allocation: its address and size."""
    __slots__ = ("ptr", "size")

    def __init__(self, ptr, size):
        self.ptr, self.size = ptr, size


class DeviceArray:
    """A typed view of a device block (what kernels receive for an operand)."""
    __slots__ = ("ptr", "shape", "dtype")

    def __init__(self, ptr, shape, dtype):
        self.ptr, self.shape, self.dtype = ptr, tuple(shape), np.dtype(dtype)


class KernelDevice(LoweringDevice, DeviceBackend):
    """Residency, policy and lowering over a kernel driver; the device's name is the driver's."""

    thresholds = CUDA_THRESHOLDS
    prepares_launches = True
    fuses = True

    def __init__(self, driver, offload="policy"):
        self.driver = driver
        self.name = driver.device_name
        self.offload = offload
        self.pinned_pool = PinnedPool(driver.pinned_empty)
        self.gemv_offers = weakref.WeakValueDictionary()
        self._functions = {}
        self._temps = []
        self._status, self._checks, self.status_reads = None, [], 0
        self._events = None  # (start, end) CUDA events around the last node's launches, while profiling
        self._held = []  # kernel records waiting for their events (written after the next wait)
        self.copies_beside = hasattr(driver, "upload_beside")
        self._beside = {}  # block pointer -> the driver's token of a copy in flight on its copy stream
        self.memory = DeviceMemory(self)

    # ---- memory -----------------------------------------------------------------------------------
    def raw_alloc(self, size):
        return DeviceBlock(self.driver.alloc(size), size)

    def raw_free(self, block):
        self.driver.free(block.ptr)

    def view(self, block, shape, dtype):
        return DeviceArray(block.ptr, shape, dtype)

    def _timing(self):
        return LOG.profiling and hasattr(self.driver, "event")

    def upload(self, block, host, beside=False):
        """Queue the copy; while profiling, wait for it and return its device time (CUDA events). With
        `beside` (a prefetch), queue it on the driver's copy stream instead, not timed: kernels queued
        before it run while it copies, and `wait_for_copy(block)` orders the work that reads it."""
        if beside:
            self._beside[block.ptr] = self.driver.upload_beside(block.ptr, np.ascontiguousarray(host))
            return None
        if not self._timing():
            return self.driver.upload(block.ptr, np.ascontiguousarray(host))
        start = self.driver.event()
        self.driver.upload(block.ptr, np.ascontiguousarray(host))
        return self.driver.elapsed_ms(start, self.driver.event()) / 1e3

    def kernel_seconds(self):
        """Device time of the last node's launches (CUDA events), or None where there are no events."""
        if self._events is None:
            return None
        start, end = self._events
        self._events = None
        return self.driver.elapsed_ms(start, end) / 1e3

    def defer_kernel_record(self, node, start, label, work=(0, 0, 0)):
        if self._events is None:  # a driver without events: times are host times, taken at once
            return False
        self._held.append((LOG.reserve_kernel_seq(), node.id, label or node.op, node.shape, str(node.dtype), start,
                           self._events, work))
        self._events = None
        return True

    def flush_kernel_records(self):
        if self._held:  # a wait for the events only: a bad index stays for the next host read to report
            self.driver.synchronize()
            self._write_held_records()

    def _write_held_records(self):
        held, self._held = self._held, []
        for seq, node_id, op, shape, dtype, start, (begin, end), work in held:
            LOG.kernel_record(node_id, op, self.name, shape, dtype, start, self.driver.elapsed_ms(begin, end) / 1e3,
                              seq, work)

    def wait_for_copy(self, block):
        token = self._beside.pop(block.ptr, None) if self._beside else None
        if token is not None:
            self.driver.wait_beside(token)

    def download(self, block, out):
        self.wait_for_copy(block)
        measured = self.driver.download(out, block.ptr)
        self._after_wait()
        return measured

    def synchronize(self):
        self.driver.synchronize()
        while self._beside:  # copies done with the streams: let their tokens go
            self.driver.wait_beside(self._beside.popitem()[1])
        self._after_wait()

    def _after_wait(self):
        self._free_temps()
        if self._held:
            self._write_held_records()
        if self._checks:
            checks, self._checks = self._checks, []
            word = np.zeros(2, np.int64)
            start = now()
            self.driver.download(word, self._status.ptr)
            LOG.record_bytes("d2h", word.nbytes, -1, "status", "status-read", self.name, start, now() - start)
            self.status_reads += 1
            if word[0]:
                self._reset_status()
                op, axis, size = checks[int(word[0]) - 1]
                raise IndexError(f"{op}: index {int(word[1])} is out of range for dimension {axis} with size "
                                 f"{size} (found by a device kernel; reported at this host read)")

    def _status_buffer(self):
        if self._status is None:
            self._status = self.memory.reserve(16)
            self._reset_status()
        return self._status.ptr

    def _reset_status(self):
        zero, start = np.zeros(2, np.int64), now()
        self.driver.upload(self._status.ptr, zero)
        LOG.record_bytes("h2d", zero.nbytes, -1, "status", "status-reset", self.name, start, now() - start)

    def mem_info(self):
        return self.driver.mem_get_info()

    def _free_temps(self):
        for block, nbytes in self._temps:
            self.memory.give_back(block, nbytes)
        self._temps.clear()

    def _temporaries(self, node, launches):
        """Device memory for what `launches` read besides the node's operands, taken from the budget:
        copies of host arrays (index groupings, uploaded and logged) and Scratch blocks (not copied);
        {id(operand): pointer}. Raises OutOfDeviceMemory, before anything is uploaded, when the memory
        cannot be had (the scheduler then runs the node elsewhere)."""
        extra = {id(o): o for launch in launches for o in launch.operands
                 if isinstance(o, (np.ndarray, Scratch))}
        if not extra:
            return None
        blocks = []
        for o in extra.values():
            nbytes = max(o.nbytes, 1)
            block = self.memory.allocate(nbytes)
            if block is None:
                for b, n in blocks:
                    self.memory.give_back(b, n)
                raise OutOfDeviceMemory(nbytes)
            blocks.append((block, nbytes))
        ptrs = {}
        for o, (block, nbytes) in zip(extra.values(), blocks):
            if isinstance(o, np.ndarray):
                self.upload_grouping(node, block.ptr, o)
            self._temps.append((block, nbytes))  # freed at the next wait, when the launches have run
            ptrs[id(o)] = block.ptr
        return ptrs

    def upload_grouping(self, node, ptr, host):
        """Queue the upload of an index grouping `node`'s launches read (logged as "index-grouping")."""
        start = now()
        self.driver.upload(ptr, np.ascontiguousarray(host))
        LOG.record_bytes("h2d", host.nbytes, node.id, node.op, "index-grouping", self.name, start, now() - start)

    # ---- policy and launch --------------------------------------------------------------------------
    def lower(self, node, operands):
        return lower(node, operands, self.driver.profile.has_double, self.driver.tiled_matmul, device_checks=True)

    def _function(self, spec):
        fn = self._functions.get(spec.name)
        if fn is None:
            fn = self._functions[spec.name] = self.driver.function(spec)
        return fn

    def launch(self, node, args, out_block):
        launches = self.planned_launches(node, args)
        temps = self._temporaries(node, launches)
        start = self.driver.event() if self._timing() else None
        for launch in launches:
            ptrs = [self._pointer(operand, args, out_block.ptr, temps) for operand in launch.operands]
            tag = self.add_check(launch.check) if launch.check is not None else 0
            scalars = scalar_values(launch, node, args, tag) if launch.scalars else ()
            self.driver.launch(self._function(launch.spec), launch.spec, ptrs, scalars)
        if start is not None:
            self._events = (start, self.driver.event())

    def _pointer(self, operand, args, out_ptr, temps=None):
        if operand is OUT:
            return out_ptr
        if operand is STATUS:
            return self._status_buffer()
        if isinstance(operand, (np.ndarray, Scratch)):  # a temporary of this node's launches
            return temps[id(operand)]
        return args[operand].ptr

    def add_check(self, check):
        """Register a device index check (op, axis, size) for the next wait's status read; returns the
        tag its kernel writes into the status word if an index is out of range."""
        self._checks.append(check)
        return len(self._checks)

    def launch_calls(self, node, launches, args, out_ptr, scratch=None, tag=None):
        """`launches` of `node` as driver calls (function, spec, pointers, scalars) for a replay that
        launches them itself (runtime/replay/device_runner.py), or None when one needs per-call work the replay
        cannot do (a device index check). `args` may stand in for values: a device operand's `ptr`, a
        0-d operand's `item()`; `scratch(operand)` gives the pointer of a Scratch operand or of a host
        array uploaded for the launch (a scatter's grouping, which the replay rebuilds and uploads
        there: `upload_grouping`); `tag(launch)` stands for the tag of a launch checking indices on the
        device (`add_check` at each replay). Without `scratch` or `tag`, what needs them refuses."""
        temps = {}
        for launch in launches:
            if launch.check is not None and tag is None:
                return None
            for o in launch.operands:
                if isinstance(o, (Scratch, np.ndarray)) and scratch is not None:
                    if id(o) not in temps:
                        temps[id(o)] = scratch(o)
                elif not (o is OUT or isinstance(o, int) or (o is STATUS and tag is not None)):
                    return None
        return [(self._function(launch.spec), launch.spec,
                 [self._pointer(operand, args, out_ptr, temps) for operand in launch.operands],
                 scalar_values(launch, node, args, tag(launch) if launch.check is not None else 0)
                 if launch.scalars else [])
                for launch in launches]

    def prepare(self, call):
        """A driver launch of `call` (from launch_calls or group_call) whose arguments are built once."""
        return self.driver.prepare(*call)

    # ---- fused elementwise groups (runtime/fusion.py) ------------------------------------------------
    def group_kernel(self, group):
        """A fused group's kernel computes in float64 inside: only where the driver has it."""
        return self.driver.profile.has_double

    def launch_group(self, group, args, out_block):
        """Launch the fused group: `args` are the inputs' device arrays, then the 0-d parameter nodes'
        values (host arrays become scalars, device arrays stay buffers)."""
        start = self.driver.event() if self._timing() else None
        self.driver.launch(*self.group_call(group, args, out_block.ptr))
        if start is not None:
            self._events = (start, self.driver.event())

    def group_call(self, group, args, out_ptr):
        """The fused group's driver call (function, spec, pointers, scalars); `args` as for launch_group."""
        inputs, node_params = args[:len(group.inputs)], iter(args[len(group.inputs):])
        param_buffers, values, ptrs = [], [], []
        for p in group.params:
            value = next(node_params) if hasattr(p, "op") else p
            on_device = isinstance(value, DeviceArray)
            param_buffers.append(on_device)
            if on_device:
                ptrs.append(value.ptr)
            else:
                values.append(value.item() if hasattr(value, "item") else value)
        spec = gew.fused(group.root.shape, group.recipe, [a.shape for a in inputs], param_buffers)
        return self._function(spec), spec, [out_ptr] + [a.ptr for a in inputs] + ptrs, values
