"""One re-entrant lock serializes the engine: realization, host reads and writes, device memory.

Realizing is safe from several threads: a thread that asks for a value another thread is computing waits
for it and then reads the same result. Kernels inside one realization still use the thread pool
(runtime/parallel.py); building graphs takes no lock.
"""
import functools
import threading

ENGINE_LOCK = threading.RLock()


def serialized(fn):
    """`fn` runs holding the engine lock (re-entrant: the engine may call itself)."""
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with ENGINE_LOCK:
            return fn(*args, **kwargs)
    return locked
