"""CPU threads for host kernels: one pool of worker threads splits a kernel's rows between the cores.

OpenBLAS keeps its own threads spinning for a while after every product, so any other parallel work
in that window fights them for the cores (a 2-thread step once took six times longer that way). So
while the engine runs kernels with more than one thread, OpenBLAS is held to one thread (through
threadpoolctl; restored when the run ends) and matrix products are split by rows like every other
kernel. Without threadpoolctl the engine runs its kernels on one thread and leaves BLAS alone.

The thread count: `lt.set_num_threads(n)`, else LAZYTENSOR_NUM_THREADS, else OMP_NUM_THREADS, else the
cores this process may use.
"""
import contextlib
import os
import threading

from . import config

# Elements of work per thread below which a kernel is not split (~0.2 ms; a hand-off costs 0.012-0.06).
MIN_SPLIT = 262144

_state = {"threads": None, "pool": None, "controller": None, "depth": 0, "owner": None}
_lock = threading.Lock()


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
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


def _controller():
    """threadpoolctl's controller (found once), or False when threadpoolctl is not installed."""
    if _state["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController
            _state["controller"] = ThreadpoolController()
        except ImportError:
            _state["controller"] = False
    return _state["controller"]


def set_num_threads(n):
    """Use `n` threads for host kernels (1: everything on the calling thread, BLAS left alone)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: expected a positive integer, got {n!r}")
    _state["threads"] = n


def num_threads():
    """The threads host kernels may use: 1 when threadpoolctl is missing (see the module docstring)."""
    if _state["threads"] is None:
        _state["threads"] = _default_threads()
    n = _state["threads"]
    return n if n > 1 and _controller() else 1


def worth_splitting(nodes):
    """Whether any result of `nodes` is big enough to split between threads (MIN_SPLIT elements). The
    pieces decide per kernel (`ranges`): the small kernels of a run stay whole. An average over the
    run, the earlier rule, left a training step of many small kernels and a few big ones unsplit (a
    replayed tiny step at 2 threads: 60.6 ms instead of 48.4, bench/RESULTS.md)."""
    return any(n.size >= MIN_SPLIT for n in nodes)


@contextlib.contextmanager
def kernels_session(nodes, worth=None):
    """Around a run of the kernels of `nodes` (or, where `worth` is given, kernels for which
    `worth_splitting` said so): with several threads and results big enough to split, OpenBLAS on one
    thread and our splits on (see above). Smaller kernels would spend more on hand-offs than they gain,
    and OpenBLAS's own threads sync faster for small float64 products (measured: bench/RESULTS.md), so
    a run of only them is left to OpenBLAS."""
    if _state["depth"] or num_threads() == 1 or not (worth_splitting(nodes) if worth is None else worth):
        yield
        return
    _state["depth"] += 1
    _state["owner"] = threading.get_ident()  # only this thread splits: the workers serve one caller
    try:
        with _controller().limit(limits=1, user_api="blas"):
            yield
    finally:
        _state["depth"] -= 1
        _state["owner"] = None


def splitting():
    """Whether this thread splits kernels now (inside a run of big kernels with several threads)."""
    return _state["depth"] > 0 and _state["owner"] == threading.get_ident()


class _Worker:
    """One persistent thread running one piece at a time, signalled through two locks (no queue, no
    futures). A hand-off measured 12-60 us here, about what concurrent.futures costs (bench/RESULTS.md)."""

    def __init__(self):
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._task, self._error = None, None
        threading.Thread(target=self._loop, name="lazytensor-kernels", daemon=True).start()

    def _loop(self):
        while True:
            self._go.acquire()
            fn, lo, hi = self._task
            try:
                fn(lo, hi)
            except BaseException as e:  # handed to the caller by wait()
                self._error = e
            self._task = None
            self._done.release()

    def start(self, fn, lo, hi):
        self._task = (fn, lo, hi)
        self._go.release()

    def wait(self):
        """Block until the piece ran; re-raise what it raised."""
        self._done.acquire()
        error, self._error = self._error, None
        if error is not None:
            raise error


def _workers(n):
    with _lock:
        pool = _state["pool"] or []
        while len(pool) < n:
            pool.append(_Worker())
        _state["pool"] = pool
        return pool[:n]


def ranges(n, work_per_item=1):
    """[lo, hi) pieces of range(n), one per thread that gets at least MIN_SPLIT elements of work."""
    parts = min(_state["threads"] or 1, n, max(1, (n * work_per_item) // MIN_SPLIT))
    if parts <= 1 or not splitting():
        return [(0, n)]
    step, extra = divmod(n, parts)
    out, lo = [], 0
    for k in range(parts):
        hi = lo + step + (1 if k < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def split(fn, n, work_per_item=1):
    """fn(lo, hi) over pieces of range(n): the first on this thread, the rest on worker threads. `fn`
    must release the GIL (numba nogil kernels, NumPy's BLAS calls) for the pieces to overlap."""
    pieces = ranges(n, work_per_item)
    if len(pieces) == 1:
        fn(0, n)
        return
    workers = _workers(len(pieces) - 1)
    for w, (lo, hi) in zip(workers, pieces[1:]):
        w.start(fn, lo, hi)
    try:
        fn(*pieces[0])
    finally:
        errors = []
        for w in workers:
            try:
                w.wait()
            except BaseException as e:
                errors.append(e)
    if errors:
        raise errors[0]
