"""realize(): the one entry point of a realization. It orders the pending subgraph and runs it: replayed
from a recorded plan where it repeats an earlier one on the host (runtime/replay/repeats.py), else planned
(runtime/planner.py) and run (runtime/executor.py). A capture under way (runtime/replay/capturing.py) or a
profile always takes the planned path, so that every kernel is seen."""
from . import devices, executor, parallel, remat
from .replay import capturing, repeats
from .counters import COUNTERS
from .locking import computing
from .schedule import Schedule
from .transfers import LOG


@computing
def realize(roots):
    """Compute every pending node needed for `roots`. Returns the Schedule that ran (empty when nothing
    was pending), or None when a recorded plan was replayed instead."""
    chain = devices.chain()
    order = remat.ordered(roots, chain)
    if not order:
        return Schedule([])
    COUNTERS.realizations += 1
    if capturing.anywhere():
        capturing.other_thread_computes()
    fuser = devices.fusing_backend(chain)
    with parallel.kernels_session(order):
        if chain[0].is_host and not capturing.anywhere() and not LOG.profiling:
            return repeats.realize(order, roots, chain, fuser)
        return executor.run(order, roots, chain, fuser)
