"""Device memory: a caching allocator (size buckets), a budget, an evictor that downloads before it frees
(the value read furthest ahead while a run says what it reads next, else the least recently used),
weakref finalizers that free a dropped value's device copy, and the pinned staging pool."""
import collections
import contextlib
import gc
import math
import time
import warnings
import weakref

import numpy as np

from ..kernels.cpu import host_cache
from .backends.arena import OutOfDeviceMemory
from . import config, copies
from .config import parse_bytes  # noqa: F401 (runtime.memory.parse_bytes: the name callers know)
from .locking import ENGINE_LOCK
from .next_reads import NEVER

_SMALL = 256 * 1024  # evicting a buffer this small frees little for the copy's latency: the last resort


def bucket(nbytes):
    """The size class a request is served from: multiples of 512 B below 1 MiB; above, sixteen classes
    per doubling (a 2.25 MiB weight is held in 2.25 MiB, not 3), so a block is at most 1/16 larger than
    its request."""
    if nbytes <= 2 ** 20:
        return max(512, -(-nbytes // 512) * 512)
    step = 2 ** ((nbytes - 1).bit_length() - 5)
    return -(-nbytes // step) * step


# A budget set with lt.set_memory_budget() before a device starts applies to it when it starts.
_budget_override = None


def set_budget_override(nbytes):
    global _budget_override
    _budget_override = nbytes


class BudgetWarning(RuntimeWarning):
    """A memory budget above the device's memory: the device, not the budget, decides what fits."""


def default_budget(free_bytes):
    """LAZYTENSOR_MEMORY_BUDGET, else a budget set earlier, else a quarter of the device's free memory."""
    if _budget_override is not None:
        return _budget_override
    env = config.get("LAZYTENSOR_MEMORY_BUDGET")
    if env is not None:
        return env
    return free_bytes // 4


class DeviceMemory:
    """One device's allocations: cached blocks by bucket, resident buffers in LRU order, a byte budget.

    Resident bytes (the bucket sizes of live device copies) never exceed the budget: a request that
    would exceed it evicts unpinned buffers first (downloading device-only ones; `_victim` says which).
    Freed blocks are cached for reuse only while resident plus cached bytes fit in the budget, so the
    device memory held (PyTorch's "reserved") never exceeds the budget either.
    `allocate` returns None when nothing more can be done; the caller then runs the kernel elsewhere.
    """

    def __init__(self, backend):
        self.backend = backend
        self._cache = collections.defaultdict(list)
        self.cached_bytes = 0
        self._lru = collections.OrderedDict()   # id(buffer) -> (weakref freeing the block on death, size)
        self._pinned = collections.Counter()
        self._pin_scopes = []
        self.resident_bytes = 0
        self.peak_bytes = 0
        self._scope_peaks = []
        self.evictions = 0
        self.evicted_bytes = 0
        # realizations run since the last eviction (the executor counts them): placement brings spilled
        # values back only once the device has been quiet for a while (runtime/placement.py, re-homing)
        self.quiet = 0
        # what the run under way reads next (runtime/next_reads.py), while one says so
        self.next_reads = None
        self._last_gc = (float("-inf"), False)
        self.memory_fallbacks = 0  # requests refused (budget or device full): the kernel ran elsewhere
        # the most bytes one refused kernel needed at once (result and operands) under the current budget:
        # the smallest budget that runs every kernel refused so far on this device
        self.largest_refused = 0
        self._free_at_start, self._total = backend.mem_info()
        self.budget = self._within_memory(default_budget(self._free_at_start),
                                          " (LAZYTENSOR_MEMORY_BUDGET, or an lt.set_memory_budget before it started)")

    # ---- budget ---------------------------------------------------------------------------------
    def restore_default_budget(self):
        """The budget this device would start with now (LAZYTENSOR_MEMORY_BUDGET, else a quarter of
        the free memory it started with); evicts down to it if that is smaller. Returns it."""
        self.set_budget(default_budget(self._free_at_start))
        return self.budget

    def set_budget(self, nbytes):
        """Change the budget; evicts at once down to it (downloading what only the device holds)."""
        with ENGINE_LOCK:
            self._set_budget(nbytes)

    def _within_memory(self, nbytes, source=""):
        """`nbytes` as a budget; a budget above the device's memory is kept (the device then runs out
        first, and kernels that find no room move down the chain) but warned about: it evicts nothing
        the device could not hold anyway."""
        nbytes = int(nbytes)
        if self._total and nbytes > self._total:
            warnings.warn(f"a memory budget of {nbytes:,} bytes is more than the {self.backend.name} device's "
                          f"{self._total:,} bytes{source}: the device runs out before the budget does",
                          BudgetWarning, stacklevel=3)
        return nbytes

    def _set_budget(self, nbytes):
        nbytes = self._within_memory(nbytes)
        self.largest_refused = 0
        if nbytes > self.budget:
            # room was given back: spilled values may return at once (re-homing), not after a quiet spell
            self.quiet = float("inf")
        self.budget = nbytes
        while self.resident_bytes > self.budget and self._evict_one():
            pass

    # ---- allocation -------------------------------------------------------------------------------
    def allocate(self, nbytes, prefer=None):
        """A device block for `nbytes`, within the budget; None if it cannot be had (see class doc).
        `prefer`: a block given back earlier, taken again if it is still cached (a device runner's
        pointers to it then stay as they are)."""
        size = bucket(nbytes)
        block = self._allocate(size, prefer)
        if block is None:
            self.memory_fallbacks += 1
            if size > self.budget:
                self.refused_need(size)
        else:
            self._add_resident(size)
        return block

    def refused_need(self, nbytes):
        """Note that a kernel needing `nbytes` at once was refused by the budget (it runs elsewhere)."""
        self.largest_refused = max(self.largest_refused, nbytes)

    def _allocate(self, size, prefer=None):
        if size > self.budget:
            return None
        while self.resident_bytes + size > self.budget:
            if not self._evict_one():
                return None
        cached = self._cache[size]
        if cached:
            self.cached_bytes -= size
            if prefer is not None and cached[-1] is not prefer:
                for i in range(len(cached) - 2, -1, -1):
                    if cached[i] is prefer:
                        return cached.pop(i)
            return cached.pop()
        self._trim_cache(self.budget - self.resident_bytes - size)
        return self._raw_alloc(size)

    def _raw_alloc(self, size):
        """The out-of-memory ladder: try; free the cache; evict one buffer at a time; gc; give up."""
        def attempt():
            try:
                return self.backend.raw_alloc(size)
            except OutOfDeviceMemory:
                return None
        block = attempt()
        if block is None:
            self.free_cache()
            block = attempt()
        while block is None and self._evict_one():
            self.free_cache()
            block = attempt()
        if block is None and self._gc_may_help():
            before = self.resident_bytes
            gc.collect()  # finalizers of tensors dropped inside reference cycles return their blocks
            self._last_gc = (time.monotonic(), self.resident_bytes < before)
            self.free_cache()
            block = attempt()
        return block

    def _gc_may_help(self):
        # A full collection costs milliseconds in a large process; after one that freed nothing, wait a
        # second before trying again (dropped tensors outside cycles are freed at once by refcounting).
        when, helped = self._last_gc
        return helped or time.monotonic() - when > 1.0

    def reset_peak(self):
        """Count the peak again from the bytes resident now (torch.cuda.reset_peak_memory_stats)."""
        self.peak_bytes = self.resident_bytes

    def free_cache(self):
        """Return every cached block to the device."""
        for size, blocks in self._cache.items():
            for block in blocks:
                self.backend.raw_free(block)
            self.cached_bytes -= size * len(blocks)
            blocks.clear()

    def _add_resident(self, size):
        self.resident_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.resident_bytes)
        for scope in self._scope_peaks:
            scope[0] = max(scope[0], self.resident_bytes)

    def _release_block(self, block, size):
        self.backend.wait_for_copy(block)  # its next user must not overtake a prefetch still copying into it
        self.resident_bytes -= size
        self._cache[size].append(block)
        self.cached_bytes += size
        self._trim_cache(self.budget - self.resident_bytes)

    def _trim_cache(self, limit):
        """Free cached blocks, largest first, until the cache holds at most `limit` bytes."""
        if self.cached_bytes <= limit:
            return
        for size in sorted(self._cache, reverse=True):  # a copy: finalizers may add buckets meanwhile
            blocks = self._cache[size]
            while blocks and self.cached_bytes > limit:
                self.backend.raw_free(blocks.pop())
                self.cached_bytes -= size
            if self.cached_bytes <= limit:
                return

    def reserve(self, nbytes):
        """A block outside the budget for the device's own bookkeeping (its 16-byte status word), through
        the out-of-memory ladder; raises OutOfDeviceMemory when the device has none."""
        block = self._raw_alloc(bucket(nbytes))
        if block is None:
            raise OutOfDeviceMemory(nbytes)
        return block

    def give_back(self, block, nbytes):
        """Return a block that was allocated but never attached to a buffer (a failed launch)."""
        self._release_block(block, bucket(nbytes))

    # ---- resident buffers ----------------------------------------------------------------------------
    def register(self, buf):
        """Track `buf`'s device copy: LRU position, and a weak reference whose callback frees the block
        when `buf` dies (dropping the entry, as `forget` does, drops the callback with it)."""
        key = id(buf)
        size = bucket(buf.nbytes)
        block = buf.device
        self._lru[key] = (weakref.ref(buf, lambda ref: self._on_buffer_death(key, ref, block, size)), size)

    def _on_buffer_death(self, key, ref, block, size):
        with ENGINE_LOCK:  # the last reference may drop in any thread, mid-realization in another
            entry = self._lru.get(key)
            if entry is not None and entry[0] is ref:
                del self._lru[key]
                self._release_block(block, size)

    def touch(self, buf):
        """Mark `buf` as just used (most recently used end of the LRU order)."""
        if id(buf) in self._lru:
            self._lru.move_to_end(id(buf))

    def forget(self, buf):
        """Drop `buf`'s device copy (BOTH -> HOST) and free its block, e.g. before a host write."""
        entry = self._lru.pop(id(buf))
        block, _ = buf.drop_device_copy()
        self._release_block(block, entry[1])

    def pin(self, buf):
        """Keep `buf` from being evicted until the matching `unpin` (a compiled replay's operands)."""
        self._pinned[id(buf)] += 1

    def unpin(self, buf):
        key = id(buf)
        self._pinned[key] -= 1
        if not self._pinned[key]:
            del self._pinned[key]

    def pin_scope(self, held):
        """Keep every buffer whose id is a key of `held` from being evicted until `unpin_scope(held)`;
        the caller adds and removes keys as it goes (a compiled replay's operands and results)."""
        self._pin_scopes.append(held)

    def unpin_scope(self, held):
        self._pin_scopes = [scope for scope in self._pin_scopes if scope is not held]  # by identity

    def pinning(self, buffers):
        """Keep `buffers` from being evicted inside a `with` block (the operands of the kernel being run)."""
        return _Pinning(self._pinned, [id(b) for b in buffers])

    def _evict_one(self):
        """Evict one unpinned buffer (download first if only the device has it): the one read furthest
        ahead while a run says what it reads next (`next_reads`), else the least recently used."""
        buf = self._victim()
        if buf is None:
            return False
        if not buf.on_host:
            copies.download(buf, "eviction")
        self.forget(buf)
        buf.home = self.backend  # where it returns when there is room (placement: re-homing)
        self.evictions += 1
        self.quiet = 0
        self.evicted_bytes += buf.nbytes
        return True

    def _victim(self):
        """The buffer `_evict_one` evicts, or None. While a run says what it reads next: one that no
        remaining step reads and that has a host copy (evicting it copies nothing), else the one read
        furthest ahead (Belady's rule), one with a host copy first among equals, buffers under 256 KiB
        only when nothing larger can go (each would pay a copy's latency for little room). Otherwise,
        and among equals, the least recently used."""
        reads = self.next_reads
        best, best_rank = None, None
        for key in list(self._lru):
            if self._pinned[key] > 0 or key not in self._lru or any(key in held for held in self._pin_scopes):
                continue
            entry = self._lru[key]
            buf = entry[0]()
            if buf is None:
                continue
            if reads is None:
                return buf
            at = reads.next_read(key)
            if at == NEVER and buf.on_host:
                return buf
            rank = (entry[1] >= _SMALL or at == NEVER, at, buf.on_host)
            if best is None or rank > best_rank:
                best, best_rank = buf, rank
        return best

    @contextlib.contextmanager
    def watch_peak(self):
        """Yields a one-element list that holds the peak resident bytes seen inside the block."""
        scope = self.open_peak_scope()
        try:
            yield scope
        finally:
            self.close_peak_scope(scope)

    def open_peak_scope(self):
        """A one-element list holding the peak resident bytes from now until `close_peak_scope`."""
        scope = [self.resident_bytes]
        self._scope_peaks.append(scope)
        return scope

    def close_peak_scope(self, scope):
        # by identity: scopes opened at the same resident bytes are equal lists, and `remove` would
        # close the first of them, leaving this one counting and the other one blind
        self._scope_peaks[:] = [s for s in self._scope_peaks if s is not scope]

    def stats(self):
        free, total = self.backend.mem_info()
        return {"bytes_resident": self.resident_bytes, "peak_bytes": self.peak_bytes, "budget": self.budget,
                "cached_bytes": self.cached_bytes, "buffers_resident": len(self._lru),
                "evictions": self.evictions, "evicted_bytes": self.evicted_bytes,
                "memory_fallbacks": self.memory_fallbacks, "largest_refused_bytes": self.largest_refused,
                "device_free": free, "device_total": total,
                "status_reads": self.backend.status_reads}


class _Pinning:
    """The context of DeviceMemory.pinning (a class: a generator-based one cost more than the kernel
    bookkeeping it guards)."""

    __slots__ = ("counts", "keys")

    def __init__(self, counts, keys):
        self.counts, self.keys = counts, keys

    def __enter__(self):
        counts = self.counts
        for key in self.keys:
            counts[key] += 1

    def __exit__(self, *exc):
        counts = self.counts
        for key in self.keys:
            counts[key] -= 1
            if not counts[key]:
                del counts[key]


class PinnedPool:
    """Reusable host blocks for downloads (page-locked where the backend can allocate such memory).

    A download's host array is a view of a pooled block, so a value read on the host needs no fresh
    allocation. A block is free again once no array views it: every array made from it, and every view
    of those, holds the block's lease (numpy keeps the lease as their base), and the pool watches the
    lease by a weak reference.
    """

    def __init__(self, alloc, cap_bytes=256 * 2 ** 20):
        self._alloc = alloc
        self._blocks = collections.defaultdict(list)  # size -> [[raw block, weak reference to its lease]]
        self.cap_bytes = cap_bytes
        self.pooled_bytes = 0
        self.reuses = 0

    def take(self, shape, dtype):
        """A host array of `shape`/`dtype` backed by a pooled block (a fresh array past the cap)."""
        dtype = np.dtype(dtype)
        nbytes = math.prod(shape) * dtype.itemsize
        if nbytes == 0:
            return np.empty(shape, dtype)
        size = max(4096, 1 << (nbytes - 1).bit_length())
        for block in self._blocks[size]:
            if block[1]() is None:
                self.reuses += 1
                return _leased(block, nbytes, shape, dtype)
        if self.pooled_bytes + size > self.cap_bytes:
            return np.empty(shape, dtype)
        block = [self._alloc(size), None]
        self._blocks[size].append(block)
        self.pooled_bytes += size
        return _leased(block, nbytes, shape, dtype)


def _leased(block, nbytes, shape, dtype):
    """A `shape`/`dtype` array (`nbytes` long) over pooled `block` ([raw, lease ref]), the block's new
    lease recorded."""
    array, lease = host_cache.leased(block[0], nbytes, shape, dtype)
    block[1] = weakref.ref(lease)
    return array