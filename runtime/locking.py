"""One re-entrant lock serializes the engine: realization, host reads and writes, device memory.

Realizing is safe from several threads: a thread that asks for a value another thread is computing waits
for it and then reads the same result. Kernels inside one realization still use the thread pool
(runtime/parallel.py); building graphs takes no lock.
"""
import functools
import threading

import numpy as np

ENGINE_LOCK = threading.RLock()


def serialized(fn):
    """`fn` runs holding the engine lock (re-entrant: the engine may call itself)."""
    @functools.wraps(fn)
    def locked(*args, **kwargs):
        with ENGINE_LOCK:
            return fn(*args, **kwargs)
    return locked


def computing(fn):
    """`fn` runs holding the engine lock, with NumPy's floating-point warnings off: an infinity or a
    NaN a kernel makes is a value (IEEE's, as on every backend), not something to warn a user about."""
    @functools.wraps(fn)
    def quiet(*args, **kwargs):
        with ENGINE_LOCK, np.errstate(all="ignore"):
            return fn(*args, **kwargs)
    return quiet
