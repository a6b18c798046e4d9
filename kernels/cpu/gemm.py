"""Float32 matrix products of a small model's sizes through BLIS (the `blis` package) on machines where
it is faster than NumPy's BLAS, chosen by measuring both once per machine.

Which library is faster at these sizes (2^18 to 2^25 multiply-adds: a dimension of 64-512, the other of
~1000-4000) depends on the CPU: on a Zen 1 EPYC, NumPy's OpenBLAS moved between 13 and 43 GFLOP/s with
the operands' layout and its weight-gradient products (a transposed operand, long inner dimension) stayed
at 14-20, where BLIS ran at 33-40; on a Zen 3 EPYC OpenBLAS runs every one of them at ~85 and BLIS at
~28 (bench/RESULTS.md). So `LAZYTENSOR_HOST_BLAS=auto` (the default) times both on two such products
the first time a product of these sizes is planned, keeps BLIS only when it is clearly faster (NumPy's is
the reference's library), and writes the answer to the cache folder, keyed by the CPU and the two
libraries' versions, so that every later process on the machine computes the same bytes without
measuring again; `numpy` or `blis` fixes the choice. Outside these sizes NumPy keeps every product:
below 2^18 BLIS's call costs more than it saves (~10 us against ~3), above 2^25 the two are alike.
The products are the same sums in another order: matmul is in the tolerance class.
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
_measured = {}   # "auto" -> whether BLIS is faster, for this process


def prefers_blis(m, k, n, dtype, choice=None):
    """Whether an (m, k) @ (k, n) product of `dtype` goes to BLIS (float32, MIN_MACS <= m k n < MAX_MACS,
    and BLIS is the library chosen for this machine: `choice`, a `host_blas()` answer, else asked now)."""
    return (_blis_gemm is not None and dtype == _F32 and MIN_MACS <= m * k * n < MAX_MACS
            and (choice if choice is not None else host_blas()) == "blis")


def host_blas():
    """"blis" or "numpy": who computes this machine's mid-sized float32 products (LAZYTENSOR_HOST_BLAS;
    `auto` measures once per machine, and a process reads the stored choice once: products ask per call)."""
    choice = settings.get("host_blas")
    if _blis_gemm is None or choice == "numpy":
        return "numpy"
    if choice == "blis":
        return "blis"
    if "auto" not in _measured:
        path = os.path.join(cache_path("blas"), "choice.json")
        _measured["auto"] = _stored_or_measured(path)
    return "blis" if _measured["auto"] else "numpy"


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
    """What the measured choice depends on: the CPU and the two libraries' versions."""
    text = f"{cpu_description()}|numpy {np.__version__}|blis {importlib.metadata.version('blis')}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _stored_or_measured(path):
    key = machine_key()
    try:
        with open(path) as f:
            return json.load(f)[key]["library"] == "blis"
    except (OSError, ValueError, KeyError, TypeError):
        pass  # nothing stored for this machine yet (or an unreadable file): measure
    numpy_s, blis_s = measure()
    faster = numpy_s >= CLEARLY_FASTER * blis_s
    _store(path, key, {"library": "blis" if faster else "numpy", "numpy_s": numpy_s, "blis_s": blis_s,
                       "cpu": cpu_description(), "python": platform.python_version()})
    return faster


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
    alternated rounds after a warm-up call of each (~30 ms in all on a Zen 3)."""
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

    best = {with_numpy: float("inf"), with_blis: float("inf")}
    one_thread = threadpool_limits(limits=1, user_api="blas") if threadpool_limits else contextlib.nullcontext()
    with one_thread:  # one thread each, as the products run
        for r in range(rounds + 1):
            for fn in best:
                t0 = time.perf_counter()
                fn()
                if r:
                    best[fn] = min(best[fn], time.perf_counter() - t0)
    return best[with_numpy], best[with_blis]
