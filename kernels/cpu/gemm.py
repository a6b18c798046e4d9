"""Float32 matrix products of a small model's sizes through BLIS (the `blis` package) on machines where
it is faster than NumPy's BLAS, chosen by measuring both once per machine.

Which library is faster at these sizes (2^18 to 2^25 multiply-adds: a dimension of 64-512, the other of
~1000-4000) depends on the CPU and the operands' layout (bench/RESULTS.md, 'float32 products of a
training step: NumPy's BLAS vs BLIS'). So `LAZYTENSOR_HOST_BLAS=auto` (the default) times both on two such products
the first time a product of these sizes is planned, keeps BLIS only when it is clearly faster (NumPy's is
the reference's library), and writes the answer to the cache folder, keyed by the CPU and the two
libraries' versions, so that every later process on the machine computes the same bytes without
measuring again; `numpy` or `blis` fixes the choice. Outside these sizes NumPy keeps every product: below
2^18 BLIS's call costs more than it saves, above 2^25 the two are alike (bench/RESULTS.md, 'Figures behind
the code's choices').

Where Intel's MKL is installed (the `mkl` extra, kernels/cpu/mkl.py), `auto` times it too and, where it
is faster than the library chosen above, MKL computes every float product the numba backend takes (all
sizes, whole or in pieces; bench/RESULTS.md has the products it was measured on); `mkl` fixes that
choice. The products are the same sums
in another order: matmul is in the tolerance class.
"""
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import time

import numpy as np

from .. import settings
from ..cache import cache_path
from . import blas, mkl
from .machine import cpu_description

try:
    from blis.py import gemm as _blis_gemm
except ImportError:  # an install without the wheel: NumPy computes every product
    _blis_gemm = None
try:
    from threadpoolctl import threadpool_limits
except ImportError:  # optional (runtime/parallel.py): BLAS then runs as configured
    threadpool_limits = None

MIN_MACS, MAX_MACS = 1 << 18, 1 << 25
_F32 = np.dtype(np.float32)
# BLIS is kept only if NumPy's time is at least this multiple of its own: near a tie, the reference's library.
CLEARLY_FASTER = 1.25
# MKL, installed on purpose, is kept when it is faster by this much (its margin here is 6-40%, steadily).
MKL_FASTER = 1.05
_measured = {}   # "auto" -> the library chosen for this process


def prefers_blis(m, k, n, dtype, choice=None):
    """Whether an (m, k) @ (k, n) product of `dtype` goes to BLIS (float32, MIN_MACS <= m k n < MAX_MACS,
    and BLIS is the library chosen for this machine: `choice`, a `host_blas()` answer, else asked now)."""
    return (_blis_gemm is not None and dtype == _F32 and MIN_MACS <= m * k * n < MAX_MACS
            and (choice if choice is not None else host_blas()) == "blis")


def host_blas():
    """"mkl", "blis" or "numpy": who computes this machine's float products ("blis": its mid-sized float32
    ones; LAZYTENSOR_HOST_BLAS, a library not installed counting as "numpy"; `auto` measures once per
    machine, and a process reads the stored choice once: products ask per call)."""
    choice = settings.get("host_blas")
    if choice == "mkl":
        return "mkl" if mkl.gemm_address(_F32) is not None else "numpy"
    if choice == "numpy" or (_blis_gemm is None and mkl.gemm_address(_F32) is None):
        return "numpy"
    if choice == "blis":
        return "blis" if _blis_gemm is not None else "numpy"
    if "auto" not in _measured:
        path = os.path.join(cache_path("blas"), "choice.json")
        _measured["auto"] = _stored_or_measured(path)
    return _measured["auto"]


def gemm_library(dtype, choice):
    """(address of the cblas_?gemm products of `dtype` call from compiled code, its integer type) under the
    library `choice` (a host_blas() answer): MKL's where chosen, else NumPy's OpenBLAS; None if neither."""
    if choice == "mkl":
        found = mkl.gemm_address(dtype)
        if found is not None:
            return found
    return blas.gemm_address(dtype)


def _operand(a):
    """`a` as a C-contiguous array and whether BLIS reads it transposed (a transposed view is not copied)."""
    if a.flags.c_contiguous:
        return a, False
    if a.T.flags.c_contiguous:
        return a.T, True
    return np.ascontiguousarray(a), False


def matmul_into(a, b, out):
    """out = a @ b for 2-D float32 `a`, `b` and a C-contiguous float32 `out`, by BLIS (releases the GIL)."""
    (a, trans_a), (b, trans_b) = _operand(a), _operand(b)
    _blis_gemm(a, b, out=out, trans1=trans_a, trans2=trans_b, alpha=1.0, beta=0.0)
    return out


def machine_key():
    """What the measured choice depends on: the CPU and the libraries' versions."""
    blis_version = importlib.metadata.version("blis") if _blis_gemm is not None else None
    mkl_version = mkl.version() if mkl.gemm_address(_F32) is not None else None
    text = f"{cpu_description()}|numpy {np.__version__}|blis {blis_version}"
    if mkl_version is not None:  # without MKL, the key machines stored before MKL was a choice
        text += f"|mkl {mkl_version}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _stored_or_measured(path):
    key = machine_key()
    try:
        with open(path) as f:
            library = json.load(f)[key]["library"]
        if library in ("numpy", "blis", "mkl"):
            return library
    except (OSError, ValueError, KeyError, TypeError):
        pass  # nothing stored for this machine yet (or an unreadable file): measure
    numpy_s, blis_s = measure() if _blis_gemm is not None else (None, None)
    library = "blis" if blis_s is not None and numpy_s >= CLEARLY_FASTER * blis_s else "numpy"
    entry = {"numpy_s": numpy_s, "blis_s": blis_s}
    mkl_s, openblas_s = measure_mkl()
    if mkl_s is not None:
        entry.update(mkl_s=mkl_s, openblas_s=openblas_s)
        if openblas_s >= MKL_FASTER * mkl_s:
            library = "mkl"
    _store(path, key, dict(library=library, **entry, cpu=cpu_description(), python=platform.python_version()))
    return library


def _store(path, key, entry):
    """Add `entry` under `key` to the JSON file at `path`, atomically; a folder that cannot be written
    leaves the choice to this process."""
    try:
        with open(path) as f:
            table = json.load(f)
        if not isinstance(table, dict):
            table = {}
    except (OSError, ValueError):
        table = {}
    table[key] = entry
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(table, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


def measure(rounds=8):
    """(NumPy's seconds, BLIS's seconds) for a forward product (1024, 64) @ (64, 256) and a weight
    gradient (256, 1024) @ (1024, 64) read transposed, together, on one thread: the fastest of `rounds`
    alternated rounds after a warm-up call of each (tens of milliseconds in all, once per machine)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 64), dtype=np.float32)
    w = rng.standard_normal((64, 256), dtype=np.float32)
    g = rng.standard_normal((1024, 256), dtype=np.float32)
    y, dw = np.empty((1024, 256), np.float32), np.empty((256, 64), np.float32)

    def with_numpy():
        np.matmul(x, w, out=y)
        np.matmul(g.T, x, out=dw)

    def with_blis():
        matmul_into(x, w, y)
        matmul_into(g.T, x, dw)

    best = _fastest((with_numpy, with_blis), rounds)
    return best[with_numpy], best[with_blis]


def measure_mkl(rounds=8):
    """(MKL's seconds, NumPy's OpenBLAS's seconds) on one thread, each called as products run (from
    compiled code, kernels/cpu/blas.py), for a small GPT's forward (4096, 128) @ (128, 384) and its
    weight gradient (384, 4096) @ (4096, 128) together; (None, None) without MKL."""
    libraries = mkl.gemm_address(_F32), blas.gemm_address(_F32)
    if None in libraries:
        return None, None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4096, 128), dtype=np.float32)
    w = rng.standard_normal((384, 128), dtype=np.float32)
    g = rng.standard_normal((4096, 384), dtype=np.float32)
    y, dw = np.empty((4096, 384), np.float32), np.empty((384, 128), np.float32)
    rows, cols = np.array([0, 4096], np.int64), np.array([0, 384], np.int64)

    def products(library):
        def run():
            blas.matmul_rows(x, w.T, y, rows, library)
            blas.matmul_rows(g.T, x, dw, cols, library)
        return run
    fns = [products(library) for library in libraries]
    best = _fastest(fns, rounds)
    return best[fns[0]], best[fns[1]]


def _fastest(fns, rounds):
    """{fn: its fastest time of `rounds`} over alternated rounds after a warm-up call of each, BLAS on one
    thread (as the products run)."""
    best = dict.fromkeys(fns, float("inf"))
    one_thread = threadpool_limits(limits=1, user_api="blas") if threadpool_limits else contextlib.nullcontext()
    with one_thread:
        for r in range(rounds + 1):
            for fn in best:
                t0 = time.perf_counter()
                fn()
                if r:
                    best[fn] = min(best[fn], time.perf_counter() - t0)
    return best
