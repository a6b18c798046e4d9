"""glibc malloc settings for a process that allocates and frees many large arrays per step.

By default glibc serves blocks above a (dynamic) threshold with mmap and gives freed memory at the top
of the heap back to the kernel; every training step then takes the same megabytes back page by page,
each first touch a zero-filling page fault, and with several threads those faults serialize on the
process's memory map. Measured on the `small` model at 2 threads: 254 -> 215 ms per step
(bench/RESULTS.md). So once, at import, the engine raises the mmap threshold to its maximum (32 MiB)
and the trim threshold to 256 MiB: freed arrays stay in the process for the next step, as a caching
allocator would keep them. LAZYTENSOR_MALLOC=default leaves malloc as it is. Other platforms and C
libraries without `mallopt` are left alone.
"""
import ctypes
import os
import sys

M_TRIM_THRESHOLD = -1   # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20   # glibc's upper limit for this setting on 64-bit
TRIM_THRESHOLD = 256 << 20

_applied = {"value": None}


def tune():
    """Apply the settings above (once). True if applied, False if left alone."""
    if _applied["value"] is not None:
        return _applied["value"]
    ok = False
    wanted = os.environ.get("LAZYTENSOR_MALLOC", "").strip().lower() != "default"
    if wanted and sys.platform.startswith("linux"):
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
