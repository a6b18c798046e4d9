"""CPU threads for host kernels: numba's thread pool runs the pieces of a kernel's rows side by side.

Every kernel that splits has a parallel form, a `prange` over piece bounds that calls the one-thread
kernel on each piece (kernels/cpu/), so each row is computed as on one thread: the bytes do not depend
on the thread count (matrix products excepted: a piece may be blocked differently, and matmul is in the
tolerance class). The pieces run on numba's pool only where its threading layer keeps idle threads
spinning between launches (OpenMP or TBB: a launch costs a few microseconds); numba's fallback layer
(workqueue) wakes its threads through the OS on every launch, which costs more than a training step's
kernels gain, so without OpenMP or TBB the kernels run on one thread. (An earlier pool of Python threads
handed pieces over through locks and the GIL, which made a two-thread training step slower than a
one-thread one; bench/RESULTS.md, 'Figures behind the code's choices'.)

OpenBLAS also keeps its idle threads spinning, and two spinning pools on the same cores take turns by
the scheduler's time slices (a kernel and a product took twenty times longer together than apart). So
from the first run of kernels split between several threads, OpenBLAS is held to one thread (through
threadpoolctl) until `set_num_threads(1)`, and big matrix products run in pieces on numba's pool as
well, each piece a one-thread OpenBLAS call (kernels/cpu/blas.py). Holding it only during each run was
not enough: restoring its threads woke them, and they spun through the next run (a replayed training
step took sixteen times longer). Without threadpoolctl the engine runs its kernels on one thread and
leaves BLAS alone. GNU OpenMP cannot be used again in a forked child, so a forked process runs its
kernels on one thread.

The thread count: `lt.set_num_threads(n)`, else LAZYTENSOR_NUM_THREADS, else OMP_NUM_THREADS, else the
cores this process may use (at most numba's pool size, NUMBA_NUM_THREADS), shared among the ranks mpiexec
started on this machine.
"""
import contextlib
import functools
import math
import os
import threading

import numpy as np

from . import collectives, config
from ..kernels.cpu import pool

# Elements of work per piece below which a kernel is not split: a few times the cost of a launch on a
# spinning pool (bench/RESULTS.md, 'Figures behind the code's choices').
MIN_PIECE = 32768

_state = {"threads": None, "controller": None, "layer": None, "forked": False, "depth": 0, "owner": None,
          "blas_held": None}


def _default_threads():
    ours = config.get("LAZYTENSOR_NUM_THREADS")
    if ours is not None:
        return ours
    value = os.environ.get("OMP_NUM_THREADS", "").strip()  # the ecosystem's variable, not ours
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            raise ValueError(f"OMP_NUM_THREADS must be a positive integer, got {value!r}") from None
    try:
        cores = max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        cores = max(1, os.cpu_count() or 1)
    # Ranks mpiexec started on this machine share its cores (as torchrun gives each process one OpenMP
    # thread): two ranks each splitting kernels over every core ran a data-parallel step many times slower,
    # their pools' spinning threads taking turns on the cores (bench/RESULTS.md, 'Data-parallel training').
    ranks = collectives.launcher_ranks() if collectives.launched_by_mpi() else None
    local = int(ranks["LOCAL_WORLD_SIZE"]) if ranks and ranks["LOCAL_WORLD_SIZE"].isdigit() else 1
    return max(1, cores // max(local, 1))


def _controller():
    """threadpoolctl's controller (found once), or False when threadpoolctl is not installed."""
    if _state["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController
            _state["controller"] = ThreadpoolController()
        except ImportError:
            _state["controller"] = False
    return _state["controller"]


def _spinning_pool():
    """Whether numba's pool keeps its threads spinning between launches (its threading layer is OpenMP
    or TBB), asked once: the first ask starts the pool. False in a forked child."""
    if _state["layer"] is None:
        _state["layer"] = pool.threading_layer()
    return _state["layer"] in ("omp", "tbb") and not _state["forked"]


def _after_fork_in_child():
    _state["forked"] = True
    _state["depth"], _state["owner"] = 0, None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def set_num_threads(n):
    """Use `n` threads for host kernels (1: everything on the calling thread, BLAS's threads restored)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _state["threads"] = n
    if n == 1 and _state["blas_held"] is not None:
        _state["blas_held"].restore_original_limits()
        _state["blas_held"] = None


def _hold_blas():
    """OpenBLAS on one thread from now until set_num_threads(1) (see above)."""
    if _state["blas_held"] is None:
        _state["blas_held"] = _controller().limit(limits=1, user_api="blas")


def num_threads():
    """The threads host kernels use: 1 without threadpoolctl or a spinning numba pool (see above)."""
    if _state["threads"] is None:
        _state["threads"] = _default_threads()
    n = min(_state["threads"], pool.size())
    # the pool first: starting it loads SciPy's OpenBLAS where SciPy is installed (numba imports SciPy),
    # and the controller holds only the BLAS libraries loaded when it is made
    return n if n > 1 and _spinning_pool() and _controller() else 1


def _work(node):
    """Elements of work of a node's kernel: its size, times the inner dimension for a product; a
    reduction's, its input's size (a column sum folded in its tree's kernel computes the whole tree)."""
    if node.op == "matmul" and node.inputs and len(node.inputs[0].shape) >= 1:
        return node.size * node.inputs[0].shape[-1]
    return max([node.size] + [inp.size for inp in node.inputs])


def worth_splitting(nodes, read_shapes=()):
    """Whether any kernel of `nodes` has the work of two pieces (2 MIN_PIECE elements), or reads an
    operand of one of `read_shapes` that large (a compiled step's nodes no longer name their inputs).
    The pieces decide per kernel (`pieces`): the small kernels of a run stay whole."""
    return (any(_work(n) >= 2 * MIN_PIECE for n in nodes)
            or any(math.prod(shape) >= 2 * MIN_PIECE for shape in read_shapes))


@contextlib.contextmanager
def kernels_session(nodes, worth=None):
    """Around a run of the kernels of `nodes` (or, where `worth` is given, kernels for which
    `worth_splitting` said so): with several threads and kernels big enough to split, OpenBLAS held to
    one thread, numba's pool at our thread count, and `pieces` cutting kernels (see above). A run of
    only small kernels is left as it is."""
    if not _splits(nodes, worth):
        yield
        return
    _hold_blas()
    pool.use_threads(num_threads())  # numba's thread count is per calling thread
    with _splitting_here():
        yield


@contextlib.contextmanager
def planning(nodes):
    """Around planning the kernels of `nodes` (runtime/planner.py): `splitting` and `pieces` answer as
    they will in the run's kernels_session, with nothing held or started."""
    if not _splits(nodes, None):
        yield
        return
    with _splitting_here():
        yield


def _splits(nodes, worth):
    return not _state["depth"] and num_threads() > 1 and (worth_splitting(nodes) if worth is None else worth)


@contextlib.contextmanager
def _splitting_here():
    _state["depth"] += 1
    _state["owner"] = threading.get_ident()
    try:
        yield
    finally:
        _state["depth"] -= 1
        _state["owner"] = None


def splitting():
    """Whether this thread cuts kernels into pieces now (inside a run of big kernels, several threads)."""
    return _state["depth"] > 0 and _state["owner"] == threading.get_ident()


def pieces(n, work_per_item=1):
    """Bounds of the pieces of range(n) for this run's threads, an int64 array 0 = b_0 < ... < b_k = n
    with at least MIN_PIECE elements of work in each piece, or None for one piece (the kernel runs whole
    on this thread). The kernels' `pieces` argument (kernels/cpu/common.py); the array is shared between
    calls asking the same (the kernels only read it)."""
    if not splitting():
        return None
    return _cut(n, work_per_item, num_threads(), MIN_PIECE)


@functools.lru_cache(maxsize=4096)  # each launch of a kernel asks for its pieces
def _cut(n, work_per_item, threads, min_piece):
    parts = min(threads, n, (n * work_per_item) // min_piece)
    if parts <= 1:
        return None
    step, extra = divmod(n, parts)
    return np.cumsum([0] + [step + (k < extra) for k in range(parts)], dtype=np.int64)
