"""The virtual device: a bounded memory arena in host RAM with its own allocator.

Uploads and downloads are real copies across the arena boundary and the reference kernels run on arena
buffers, so the residency engine (budget, eviction, transfer log) runs on machines with no accelerator.
It runs the fused elementwise groups a CUDA device would (runtime/fusion.py) as one kernel each, whose
members live only during the call (kernels/reference/fused.py: the reference's bits), so its memory,
copies and kernel count rehearse a CUDA run's. It is a test and rehearsal device, not acceleration:
everything it does costs more than the CPU path.
"""
import math
import time
import weakref

import numpy as np

from ...kernels.reference import KERNELS
from ...kernels.reference import fused as reference_fused
from .. import config
from ..config import parse_bytes
from ..memory import DeviceMemory, PinnedPool
from ..offload_tables import CUDA_THRESHOLDS
from .arena import Arena
from .base import DeviceBackend

# A NumPy function with no kernel of its own runs on the host on every device (a GPU has none of them).
HOST_ONLY = frozenset({"host_call"})


class VirtualBlock:
    """A byte range of the arena."""
    __slots__ = ("start", "size")

    def __init__(self, start, size):
        self.start, self.size = start, size


class VirtualDevice(DeviceBackend):
    """A simulated device: separate arena memory, real copies, the CUDA offload policy."""

    name = "virtual"
    thresholds = CUDA_THRESHOLDS  # so a virtual run rehearses a CUDA run's transfers
    fuses = True

    def __init__(self, memory=None, offload=None):
        # "policy" (default): the CUDA thresholds decide; "always": every kernel runs here (for tests
        # that push every op through uploads, residency and downloads).
        self.offload = config.offload_mode("virtual", offload or config.get("LAZYTENSOR_VIRTUAL_OFFLOAD"))
        self.capacity = parse_bytes(memory) if memory is not None else config.get("LAZYTENSOR_VIRTUAL_MEMORY")
        self._bytes = np.empty(self.capacity, np.uint8)  # untouched pages cost nothing until used
        self.arena = Arena(self.capacity)
        self.pinned_pool = PinnedPool(lambda n: np.empty(n, np.uint8))
        self.gemv_offers = weakref.WeakValueDictionary()  # matrices offered once (see policy)
        self.memory = DeviceMemory(self)

    def raw_alloc(self, size):
        start, size = self.arena.alloc(size)
        return VirtualBlock(start, size)

    def raw_free(self, block):
        self.arena.free(block.start, block.size)

    def view(self, block, shape, dtype):
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        return self._bytes[block.start:block.start + nbytes].view(dtype).reshape(shape)

    def upload(self, block, host):
        t0 = time.perf_counter()
        np.copyto(self.view(block, host.shape, host.dtype), host)
        return time.perf_counter() - t0

    def download(self, block, out):
        t0 = time.perf_counter()
        np.copyto(out, self.view(block, out.shape, out.dtype))
        return time.perf_counter() - t0

    def accepts(self, node, operands):
        return node.op in KERNELS and node.op not in HOST_ONLY

    def launch(self, node, args, out_block):
        result = KERNELS[node.op](node.attrs, *args)
        np.copyto(self.view(out_block, node.shape, node.dtype), result)

    def group_kernel(self, group):
        return True

    def launch_group(self, group, args, out_block):
        """A fused group's value from the inputs' arena views `args`, then its 0-d operands' values."""
        inputs, node_params = args[:len(group.inputs)], iter(args[len(group.inputs):])
        params = [next(node_params).item() if hasattr(p, "op") else p for p in group.params]
        root = group.root
        result = reference_fused.run(group.recipe, root.shape, root.dtype, inputs, params)
        np.copyto(self.view(out_block, root.shape, root.dtype), result)

    def mem_info(self):
        return self.arena.free_bytes, self.capacity
