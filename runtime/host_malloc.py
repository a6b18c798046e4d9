"""Host memory for the CPU kernels' results: their cache (kernels/cpu/host_cache.py), and the opt-in glibc
malloc settings that were needed for the same speed before it.

By default glibc serves blocks above a (dynamic) threshold with mmap and gives freed memory at the top
of the heap back to the kernel; every training step then takes the same megabytes back page by page,
each first touch a zero-filling page fault, and with several threads those faults serialize on the process's
memory map (bench/RESULTS.md, 'Host memory without a malloc setting'). `tune()` raises the mmap threshold to its
maximum (32 MiB) and the trim threshold to 256 MiB: freed arrays stay in the process for the next step, as a
caching allocator would keep them.

The kernels' result cache now keeps those arrays itself, so the settings are no longer needed for the
speed (bench/RESULTS.md). They belong to the whole process, so the library never applies them by itself:
a program may still opt in with `lt.tune_host_malloc()` or LAZYTENSOR_MALLOC=tuned (applied at the first
computation). Other platforms and C libraries without `mallopt` are left alone.
"""
import ctypes
import sys

from ..kernels.cpu import host_cache
from . import config

M_TRIM_THRESHOLD = -1   # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20   # glibc's upper limit for this setting on 64-bit
TRIM_THRESHOLD = 256 << 20

_applied = {"value": None}


def setting():
    """LAZYTENSOR_MALLOC: "tuned" (apply at the first computation), "default" (never apply), or "" (apply
    on request)."""
    return config.get("LAZYTENSOR_MALLOC")


def apply_if_asked():
    """tune() if LAZYTENSOR_MALLOC=tuned (called when the host backends start, at the first computation:
    a bad value then raises at a user's line, and `import lazytensor` never fails on one)."""
    if setting() == "tuned":
        tune()


def tune():
    """Apply the settings above (once). True if applied, False if the platform has no mallopt."""
    if _applied["value"] is not None:
        return _applied["value"]
    ok = False
    if sys.platform.startswith("linux"):
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # not glibc (musl has no mallopt)
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
            ok = bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and ok
    _applied["value"] = ok
    return ok


def cache_stats():
    """What the CPU kernels' result cache holds (`lt.cpu.cache_stats()`)."""
    stats = {k.removeprefix("host_cache_"): v for k, v in host_cache.CACHE.stats().items()}
    if stats["cap_bytes"] is None:  # no large result yet: the cap it will read
        stats["cap_bytes"] = config.get("LAZYTENSOR_HOST_CACHE")
    return stats


def empty_cache():
    host_cache.CACHE.release()


def set_cache_limit(nbytes):
    """Cap the cache's idle bytes at `nbytes`; the previous cap."""
    before = host_cache.CACHE.cap_bytes
    host_cache.configure(nbytes)
    return config.get("LAZYTENSOR_HOST_CACHE") if before is None else before
