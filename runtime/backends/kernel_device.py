"""A device that runs compiled kernels through a driver: the CUDA backend's engine side.

The driver (runtime/backends/cuda_driver.py: pycuda, cuda-bindings, or the C-emulated driver) owns
memory, copies, compilation and launches; this class owns residency (DeviceMemory), the policy and
the lowering of nodes to kernels. Launches are queued on one stream and never wait; a download waits
for the stream, and only then are the per-launch temporaries (scatter groupings) freed.

Index kernels whose indices exist only on the device check bounds themselves and report a bad index
in a 16-byte status buffer; after a wait that follows such a launch the backend reads that word (a
control read, not a data transfer: it is counted in `status_reads`, not in the transfer log) and
raises IndexError at the host read, the way PyTorch reports device-side assertions.
"""
import weakref

import numpy as np

from ...kernels.gpu import elementwise as gew
from ...kernels.ops import OPS
from ..memory import DeviceMemory, PinnedPool
from ..policy import CUDA_THRESHOLDS, accepts_group
from ..transfers import LOG
from .base import DeviceBackend
from .lowering import OUT, STATUS, LoweringDevice, lower, scalar_values


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

    def upload(self, block, host):
        """Queue the copy; while profiling, wait for it and return its device time (CUDA events)."""
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

    def download(self, block, out):
        measured = self.driver.download(out, block.ptr)
        self._after_wait()
        return measured

    def synchronize(self):
        self.driver.synchronize()
        self._after_wait()

    def _after_wait(self):
        self._free_temps()
        if self._checks:
            checks, self._checks = self._checks, []
            word = np.zeros(2, np.int64)
            self.driver.download(word, self._status)
            self.status_reads += 1
            if word[0]:
                self.driver.upload(self._status, np.zeros(2, np.int64))
                op, axis, size = checks[int(word[0]) - 1]
                raise IndexError(f"{op}: index {int(word[1])} is out of range for dimension {axis} with size "
                                 f"{size} (found by a device kernel; reported at this host read)")

    def _status_buffer(self):
        if self._status is None:
            self._status = self.driver.alloc(16)
            self.driver.upload(self._status, np.zeros(2, np.int64))
        return self._status

    def mem_info(self):
        return self.driver.mem_get_info()

    def _free_temps(self):
        for ptr in self._temps:
            self.driver.free(ptr)
        self._temps.clear()

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
        start = self.driver.event() if self._timing() else None
        for launch in launches:
            ptrs = []
            for operand in launch.operands:
                if operand is OUT:
                    ptrs.append(out_block.ptr)
                elif operand is STATUS:
                    ptrs.append(self._status_buffer())
                elif isinstance(operand, np.ndarray):
                    ptr = self.driver.alloc(max(operand.nbytes, 1))
                    self._temps.append(ptr)
                    self.driver.upload(ptr, operand)
                    ptrs.append(ptr)
                else:
                    ptrs.append(args[operand].ptr)
            tag = 0
            if launch.check is not None:
                self._checks.append(launch.check)
                tag = len(self._checks)  # names this launch's check in the status word
            scalars = scalar_values(launch, node, args, tag) if launch.scalars else ()
            self.driver.launch(self._function(launch.spec), launch.spec, ptrs, scalars)
        if start is not None:
            self._events = (start, self.driver.event())


    # ---- fused elementwise groups (runtime/fusion.py) ------------------------------------------------
    def accepts_group(self, group, operands):
        """Whether this device runs the fused group, given its operands' buffers (see policy)."""
        if not self.driver.profile.has_double:
            return False
        if self.offload == "always":
            return True
        transcendental = any(OPS[ins[0]].policy == "transcendental" for ins in group.recipe[1] if ins[0] in OPS)
        return accepts_group(self, group.root, transcendental, operands)

    def launch_group(self, group, args, out_block):
        """Launch the fused group: `args` are the inputs' device arrays, then the 0-d parameter nodes'
        values (host arrays become scalars, device arrays stay buffers)."""
        inputs, node_params = args[:len(group.inputs)], iter(args[len(group.inputs):])
        param_buffers, values, ptrs = [], [], []
        for p in group.params:
            value = next(node_params) if hasattr(p, "op") else p
            on_device = isinstance(value, DeviceArray)
            param_buffers.append(on_device)
            if on_device:
                ptrs.append(value.ptr)
            else:
                values.append(value.item() if isinstance(value, np.ndarray) else value)
        spec = gew.fused(group.root.shape, group.recipe, [a.shape for a in inputs], param_buffers)
        start = self.driver.event() if self._timing() else None
        buffers = [out_block.ptr] + [a.ptr for a in inputs] + ptrs
        self.driver.launch(self._function(spec), spec, buffers, values)
        if start is not None:
            self._events = (start, self.driver.event())

