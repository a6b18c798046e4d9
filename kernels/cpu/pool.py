"""numba's thread pool, which runs the pieces of the CPU kernels' parallel forms (a `prange` over piece
bounds): which threading layer it has, how many threads it holds, how many a launch uses.

Each kernel's parallel form is written out beside the kernel (`softmax_rows_in_pieces`, ...), alike in
shape: one generic driver taking the kernel as an argument would do, but numba's disk cache does not
find such a function again in a new process (measured: a new cache entry and ~1 s of compiling per
kernel in every process), where a form naming its kernel is cached like any other function."""
import numba as nb
import numpy as np


@nb.njit(parallel=True, nogil=True, cache=True)
def _launch(out):
    for i in nb.prange(out.shape[0]):
        out[i] = i


def threading_layer():
    """numba's threading layer ("omp", "tbb" or "workqueue"), known after a first launch: this makes one."""
    _launch(np.empty(2, np.int64))
    return nb.threading_layer()


def size():
    """The threads numba's pool holds (NUMBA_NUM_THREADS, by default the cores)."""
    return nb.config.NUMBA_NUM_THREADS


def use_threads(n):
    """Launches from this thread use `n` of the pool's threads (at most its size)."""
    nb.set_num_threads(max(1, min(n, size())))
