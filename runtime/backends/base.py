"""The backend contract: every method the runtime calls on an executor, in two kinds.

A `HostBackend` computes on host arrays (NumPy, numba, and Metal, whose results come back per call);
a `DeviceBackend` owns memory of its own, and the runtime moves values to and from it (uploads,
downloads, residency, eviction). The scheduler, the memory manager, the copies and the policy call
nothing else, so a new executor is one class implementing these methods plus, for a device, one
`devices.register` call (`LoweringDevice` in runtime/backends/lowering.py is the mixin of devices that
compile the kernels of `kernels/gpu/`). Optional methods have working defaults here; required ones
raise NotImplementedError.

A backend answers only what it could compute (`accepts`/`kernel_for`, `group_kernel`, `can_fuse`), with
no side effects; which backend does compute a node is decided in runtime/placement.py, which asks them.
"""


class HostBackend:
    """An executor on host memory: it accepts or declines each kernel and runs the ones it accepts."""

    name = "abstract"
    is_host = True
    fuses = False  # whether it runs fused elementwise groups (launch_fused)
    fuses_rows = False  # whether those groups may hold a softmax or its gradient (runtime/fusion.py)
    in_pieces = False  # whether its kernels are cut in pieces for several CPU threads (runtime/parallel.py)
    # None: it computes whatever it has a kernel for; "policy" or "always": runtime/placement.py's offload
    # rules apply to it (devices, Metal), with its `thresholds` table and `gemv_offers`
    offload = None
    # Whether a compiled step's launches can be prepared once and replayed (`launch_calls`, `group_call`,
    # `prepare`: runtime/replay/device_runner.py); else a replay runs through the executors.
    prepares_launches = False

    def accepts(self, node, operands):
        """Whether this backend has a kernel computing `node` from operands like these (Buffers, or the
        planner's stand-ins: shape, dtype, nbytes, on_host, on_device, backend, host, identity); no side
        effects."""
        raise NotImplementedError

    def kernel_for(self, node, operands):
        """How this backend would compute `node` (what runtime/placement.py asks): the launches a device
        that lowers nodes would run, True, or None when it has no kernel for it. No side effects."""
        return self.accepts(node, operands) or None

    def can_fuse(self, recipe, root, shapes):
        """Whether `launch_fused` would run this fused group (operand `shapes`) rather than decline it."""
        return self.fuses

    def launch(self, node, args):
        """Compute `node` from its operands' host arrays; returns the result array."""
        raise NotImplementedError

    def prepared(self, node, dtypes=None):
        """A callable computing `node` from its operands' host arrays (of `dtypes`, where given) as
        `launch` does, for a compiled step to call at every replay (runtime/replay/host_runner.py), under
        NumPy's floating-point warnings off as every realization runs: backends resolve there once what
        `launch` decides per call."""
        return lambda *args: self.launch(node, args)

    def reuse_launches(self, node, launches):
        """Make the next `launch(node, ...)` run `launches` (what `kernel_for` gave, or `last_launches`)
        without lowering it again. Backends without launches ignore it."""

    def last_launches(self):
        """What the last `launch` ran, in a form `reuse_launches` takes back (a compiled step keeps it
        and skips the planning when it replays that kernel), or None."""
        return None

    def launch_fused(self, recipe, root, arrays, params):
        """A fused elementwise group's value (runtime/fusion.py builds `recipe`), or None to decline it."""
        return None

    def prepared_fused(self, recipe, root, shapes):
        """A callable (arrays, params) -> what `launch_fused` gives for operands of `shapes`, with what it
        decides per call decided once (a replay's), or None: call `launch_fused`."""
        return None

    def synchronize(self):
        """Wait for queued work. Host backends run synchronously."""

    def kernel_seconds(self):
        """Time the last kernel took where the backend measures it itself (device events), else None."""
        return None

    def defer_kernel_record(self, node, start, label, work=(0, 0, 0)):
        """While profiling: keep the last kernel's record until its device time is known without
        waiting (True), or leave it to the caller, who waits and records it now (False)."""
        return False

    def flush_kernel_records(self):
        """Write the kernel records held back by `defer_kernel_record` (waiting for the device if any)."""

    def mem_info(self):
        """(free, total) bytes of this backend's memory, or None for host memory."""
        return None


class DeviceBackend(HostBackend):
    """An executor with memory of its own. Besides the kernel methods it provides what `DeviceMemory`
    (runtime/memory.py), the copies (runtime/copies.py) and placement (runtime/placement.py) use:

    - `name`: the device's name (selection, placements, the transfer log), set per instance;
    - `memory`: its DeviceMemory (budget, block cache, eviction), `pinned_pool`: host staging buffers;
    - `thresholds` (a table of runtime/offload_tables.py), `offload` ("policy" or "always"), `gemv_offers`;
    - raw_alloc / raw_free / view / upload / download / mem_info below.
    """

    is_host = False
    status_reads = 0  # reads of a device status word (each is also a "status-read" record in the log)
    copies_beside = False  # upload(..., beside=True) queues a copy on a stream beside the kernels

    def raw_alloc(self, size):
        """A new block of at least `size` bytes (an object the backend understands), or raise MemoryError."""
        raise NotImplementedError

    def raw_free(self, block):
        raise NotImplementedError

    def view(self, block, shape, dtype):
        """What a kernel of this backend receives for a value of `shape`/`dtype` stored in `block`."""
        raise NotImplementedError

    def upload(self, block, host):
        """Copy the host array into `block`; returns the copy's device time in seconds, or None. Where
        `copies_beside`, `upload(block, host, beside=True)` queues it beside the kernels instead
        (a prefetch), and work on `block` waits for it from `wait_for_copy(block)` on."""
        raise NotImplementedError

    def wait_for_copy(self, block):
        """Work queued from now on that reads or reuses `block` runs after its copy beside the kernels,
        if one is in flight (called before a prefetched value's first reader, and when a block is
        released)."""

    def download(self, block, out):
        """Copy `block` into the host array `out` (waiting for queued work); seconds or None as upload."""
        raise NotImplementedError

    def mem_info(self):
        """(free, total) bytes of device memory."""
        raise NotImplementedError

    def launch(self, node, args, out_block):
        """Queue `node`'s kernels on operand views `args` (0-d host values stay host arrays), writing
        the result into `out_block`."""
        raise NotImplementedError

    def group_kernel(self, group):
        """Whether this device has a kernel for a fused elementwise group (launch_group then runs it)."""
        return False

    def launch_group(self, group, args, out_block):
        raise NotImplementedError

