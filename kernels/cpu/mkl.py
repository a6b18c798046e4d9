"""Intel's MKL as the host BLAS where its wheel is installed (`pip install lazytensor[mkl]`, optional):
the address of its `cblas_sgemm` / `cblas_dgemm`, for products called from compiled code as
kernels/cpu/blas.py calls OpenBLAS's.

The runtime library is loaded with the sequential threading layer, so each call runs on the thread
that makes it: a product split between threads is split by numba's pool (runtime/parallel.py), as
with OpenBLAS held to one thread, and no OpenMP or TBB pool of MKL's starts. The LP64 interface: the
integer arguments are 32-bit.
"""
import ctypes
import ctypes.util
import functools
import importlib.metadata
import os
import sys

import numpy as np

_SEQUENTIAL, _LP64 = 1, 0  # MKL_THREADING_SEQUENTIAL, MKL_INTERFACE_LP64
_FILES = ("libmkl_rt.so.3", "libmkl_rt.so.2", "libmkl_rt.so", "libmkl_rt.dylib", "mkl_rt.3.dll", "mkl_rt.2.dll")


@functools.lru_cache(maxsize=1)
def _library():
    """MKL's runtime library, loaded and set to its sequential layer, or None where it is not installed."""
    folders = [os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "Library", "bin")]
    paths = [os.path.join(d, name) for d in folders for name in _FILES]
    found = ctypes.util.find_library("mkl_rt")
    for path in [p for p in paths if os.path.exists(p)] + ([found] if found else []):
        try:
            lib = ctypes.CDLL(path)
            # Before MKL's first computation: afterwards the layers cannot change.
            lib.MKL_Set_Interface_Layer(ctypes.c_int(_LP64))
            lib.MKL_Set_Threading_Layer(ctypes.c_int(_SEQUENTIAL))
        except (OSError, AttributeError):
            continue
        return lib
    return None


@functools.lru_cache(maxsize=8)  # asked for every product (kernels/cpu/gemm.py host_blas)
def gemm_address(dtype):
    """(address of MKL's cblas_sgemm or cblas_dgemm for `dtype`, its integer type), or None without MKL."""
    dtype = np.dtype(dtype)
    lib = _library()
    if lib is None or dtype not in (np.float32, np.float64):
        return None
    fn = lib.cblas_sgemm if dtype == np.float32 else lib.cblas_dgemm
    return ctypes.cast(fn, ctypes.c_void_p).value, np.int32


def version():
    """The installed MKL wheel's version, or None (what a stored library choice depends on)."""
    try:
        return importlib.metadata.version("mkl")
    except importlib.metadata.PackageNotFoundError:
        return None
