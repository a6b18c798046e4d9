"""realize(): order the pending subgraph, run each node on the first backend that accepts it, cut inputs."""
import numpy as np

from .backends import NumpyBackend
from .counters import COUNTERS
from .graph import pending_order
from .residency import Buffer

_CHAIN = [NumpyBackend()]


def backend_chain():
    """The backends tried for each kernel, in order; the last one always accepts."""
    return list(_CHAIN)


def _exclusive(out, args):
    # The result may be written in place later only if it shares memory with no operand.
    return out.flags.writeable and out.base is None and not any(
        isinstance(a, np.ndarray) and np.may_share_memory(out, a) for a in args)


def realize(roots):
    """Compute every pending node needed for `roots`. Returns the number of kernels run."""
    order = pending_order(roots)
    if not order:
        return 0
    COUNTERS.realizations += 1
    for i in range(len(order)):
        node = order[i]
        # Release our reference so an intermediate is freed as soon as its last consumer has run.
        order[i] = None
        args = [inp.buffer.host for inp in node.inputs]
        backend = next(b for b in _CHAIN if b.accepts(node, node.inputs))
        out = backend.launch(node, args)
        node.buffer = Buffer.on_host(out, _exclusive(out, args))
        node.inputs = ()
        COUNTERS.kernels += 1
    return len(order)
