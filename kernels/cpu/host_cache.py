"""A caching allocator for the CPU kernels' large results, so a training step that makes and frees the
same megabytes every step takes them back from this cache, not from the operating system.

Without it glibc serves each large array with a fresh mmap (or gives freed memory at the top of its heap
back), and every step takes the same bytes back page by page, each first touch a zero-filling page fault
(bench/RESULTS.md, 'Host memory without a malloc setting'). The cache changes nothing outside the arrays
the kernels make: no process-wide malloc setting, and a user's own NumPy arrays are untouched.

`empty(shape, dtype)` is `np.empty` for results of at least `MIN_BYTES`: the array views a block from
the cache, and the block comes back to it when no array views it any more (every array made from it and
every view of those hold its `Lease` through their NumPy base; a weak reference to the lease says when
it goes). Idle blocks are kept up to a cap (the `host_cache_bytes` kernel setting, read at the first
large result; `configure` changes it), the oldest freed first past it; `release()` frees them all.
Blocks come in size classes an eighth of a power of two apart, so a block is at most 1/8 larger than
the array it holds. The download pool of runtime/memory.py leases its blocks the same way (`leased`).
"""
import collections
import sys
import threading
import weakref

import numpy as np

from .. import settings

MIN_BYTES = 64 * 1024   # smaller arrays come from glibc's heap bins, which keep them without faults


class Lease:
    """What the arrays viewing a pooled block hold (through their NumPy base): the block, read as bytes.
    A pool watches it by a weak reference: when it goes, no array views the block."""

    __slots__ = ("block", "__array_interface__", "__weakref__")

    def __init__(self, block, nbytes, address=None):
        self.block = block
        if address is None:
            address = block.ctypes.data
        self.__array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (address, False), "version": 3}


def leased(block, nbytes, shape, dtype, address=None):
    """(a `shape`/`dtype` array over the first `nbytes` of `block` (at `address`, found if not given),
    its Lease). The bytes are viewed as `dtype` (a typestr cannot name extension dtypes such as
    bfloat16)."""
    lease = Lease(block, nbytes, address)
    return np.asarray(lease).view(dtype).reshape(shape), lease


class HostCache:
    """Size-classed idle blocks and the statistics of their reuse; `take` hands out arrays over them."""

    def __init__(self, cap_bytes=None):
        self.cap_bytes = cap_bytes   # None: the setting's, read at the first large result
        self._idle = collections.defaultdict(list)   # size class -> idle (block, its address)
        self._order = {}   # id(block) -> (size class, block) of each idle block, in the order they went idle
        self._leases = {}  # weak reference to a lease -> (size class, block, address) of each block in use
        # reentrant: a collection run by an allocation inside a locked section may drop a lease, whose
        # finalizer (`_back`) then takes the lock again in the same thread
        self._lock = threading.RLock()
        self.idle_bytes = 0
        self.leased_bytes = 0
        self.peak_bytes = 0     # leased + idle, at its highest
        self.reuses = 0
        self.allocations = 0

    def take(self, shape, dtype):
        """An uninitialized C-contiguous `shape`/`dtype` array over a cached block (`np.empty` below
        MIN_BYTES)."""
        dtype = np.dtype(dtype)
        if not isinstance(shape, tuple):
            shape = tuple(shape) if hasattr(shape, "__len__") else (int(shape),)
        n = 1
        for d in shape:
            n *= d
        nbytes = int(n) * dtype.itemsize
        if nbytes < MIN_BYTES or dtype.hasobject:
            return np.empty(shape, dtype)
        size = size_class(nbytes)
        if self.cap_bytes is None:
            self.cap_bytes = settings.get("host_cache_bytes")
        with self._lock:
            idle = self._idle.get(size)
            if idle:
                block, address = idle.pop()
                del self._order[id(block)]
                self.idle_bytes -= size
                self.reuses += 1
            else:
                block = np.empty(size, np.uint8)
                address = block.ctypes.data
                self.allocations += 1
                self.peak_bytes = max(self.peak_bytes, self.leased_bytes + size + self.idle_bytes)
            self.leased_bytes += size
            array, lease = leased(block, nbytes, shape, dtype, address)
            # a weak reference with a callback costs a third of a weakref.finalize (one per large result)
            self._leases[weakref.ref(lease, self._back)] = (size, block, address)
        return array

    def _back(self, ref):
        """A lease went: its block is idle again (freed instead when the idle blocks would pass the cap)."""
        with self._lock:
            size, block, address = self._leases.pop(ref)
            self.leased_bytes -= size
            if size > self.cap_bytes:
                return
            self._idle[size].append((block, address))
            self._order[id(block)] = (size, block)
            self.idle_bytes += size
            while self.idle_bytes > self.cap_bytes:
                self._drop_oldest()

    def _drop_oldest(self):
        size, block = self._order.pop(next(iter(self._order)))
        idle = self._idle[size]
        for k, (b, _) in enumerate(idle):
            if b is block:
                del idle[k]
                self.idle_bytes -= size
                return

    def release(self):
        """Free every idle block."""
        with self._lock:
            self._idle.clear()
            self._order.clear()
            self.idle_bytes = 0

    def stats(self):
        """Bytes idle, leased and at peak (both), the cap, and how many results reused a block or took a new
        one."""
        return {"host_cache_idle_bytes": self.idle_bytes, "host_cache_leased_bytes": self.leased_bytes,
                "host_cache_peak_bytes": self.peak_bytes, "host_cache_reuses": self.reuses,
                "host_cache_allocations": self.allocations, "host_cache_cap_bytes": self.cap_bytes}


def size_class(nbytes):
    """`nbytes` rounded up to a multiple of an eighth of the power of two at or below it (4096 at least)."""
    step = max(4096, 1 << max(0, nbytes.bit_length() - 4))
    return -(-nbytes // step) * step


def _base_references(array):
    base = array.base
    return sys.getrefcount(base)


def exclusive(array):
    """Whether `array` is the only array over a cached block (False for an array not from the cache).
    Every view of a cached array has the same base (NumPy points views at the byte array over the
    lease), so the base's reference count says how many arrays see the block."""
    base = array.base
    if type(base) is not np.ndarray or type(base.base) is not Lease:
        return False
    del base  # counted alone below
    return _base_references(array) == _ALONE


# what `_base_references` counts for an array alone over its base (how getrefcount counts its own
# argument and a function's locals differs between Python versions, so it is measured, not assumed)
_ALONE = _base_references(leased(np.empty(8, np.uint8), 8, (8,), np.uint8)[0])


CACHE = HostCache()


def empty(shape, dtype):
    """`np.empty(shape, dtype)`, from the cache when it is large."""
    return CACHE.take(shape, dtype)


def configure(cap_bytes):
    """Keep at most `cap_bytes` of idle blocks (0: none), freeing what is idle past it."""
    with CACHE._lock:
        CACHE.cap_bytes = cap_bytes
        while CACHE.idle_bytes > cap_bytes:
            CACHE._drop_oldest()


def zeros(shape, dtype):
    """`np.zeros(shape, dtype)`, from the cache when it is large (a reused block is filled: cheaper than
    the zero-filling page faults of fresh memory)."""
    out = CACHE.take(shape, dtype)
    out.fill(0)
    return out
