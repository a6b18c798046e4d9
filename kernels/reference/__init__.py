"""NumPy reference kernels: the definition of every op (see docs/NUMERICS.md).

`KERNELS` maps an op name to a function `(attrs, *arrays) -> ndarray`; `prepared(op, attrs, dtypes)` gives,
for some ops, a call making the same bytes with the per-call decisions taken once (replays).
"""
from .creation import CREATION_KERNELS
from .elementwise import ELEMENTWISE_KERNELS
from .elementwise import prepared as _prepared_elementwise
from .linalg import LINALG_KERNELS
from .movement import MOVEMENT_KERNELS
from .reduce import REDUCE_KERNELS
from .indexing import INDEX_KERNELS
from .random import RANDOM_KERNELS
from .optim import OPTIM_KERNELS
from .softmax import SOFTMAX_KERNELS
from .softmax import prepared as _prepared_softmax
from .layer_norm import LAYER_NORM_KERNELS
from .scan import SCAN_KERNELS
from .host_call import HOST_CALL_KERNELS
from .window import WINDOW_KERNELS

KERNELS = {}
for _table in (CREATION_KERNELS, ELEMENTWISE_KERNELS, LINALG_KERNELS, MOVEMENT_KERNELS,
               REDUCE_KERNELS, INDEX_KERNELS, RANDOM_KERNELS, OPTIM_KERNELS, SOFTMAX_KERNELS,
               LAYER_NORM_KERNELS, SCAN_KERNELS, HOST_CALL_KERNELS, WINDOW_KERNELS):
    assert not (KERNELS.keys() & _table.keys()), "an op is defined twice"
    KERNELS.update(_table)


def prepared(op, attrs, dtypes):
    """A callable on operands of `dtypes` making what KERNELS[op](attrs, ...) makes, with what the kernel
    decides per call decided once, for a replay to call many times under NumPy's floating-point warnings
    off (as the engine's realizations run); None where the op has no such form."""
    if op in SOFTMAX_KERNELS:
        return _prepared_softmax(op, attrs, dtypes)
    return _prepared_elementwise(op, attrs, dtypes)
