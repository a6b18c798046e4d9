"""Categorical draws computed on the host at once, where the weights were just read there.

`multinomial` checks its weights on the host (lazytensor/sorting.py) before it draws. On the CPU device the
weights are then a host array already, and the draw (cumulative weights over their last entry, one uniform
number per sample, the count of cumulative weights at or below it) is a handful of kernels on a few values:
as graph nodes they cost a node each to build and plan or replay, many times what the kernels take (a decode
loop draws once per token). `categories` runs the same kernels in the same order on the host array instead,
so the draw is the one the graph would compute: the same bytes, the same random stream taken.
"""
import numpy as np

from ..kernels.reference import KERNELS
from . import devices
from .counters import COUNTERS
from .graph import Node
from .replay import capturing
from .transfers import LOG

_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)
_WEIGHTS = (np.dtype(np.float32), np.dtype(np.float64))  # float16/bfloat16 weights: the graph widens each op


def now(node):
    """Whether a draw from `node`'s value may be computed on the host at once: float32 or float64 weights on
    the host with the CPU as the device, and no capture or profile watching kernels (they see the graph's)."""
    buf = node.buffer
    return (buf is not None and buf.on_host and node.dtype in _WEIGHTS and devices.chain()[0].is_host
            and not capturing.anywhere() and not LOG.profiling)


def categories(weights, num_samples, seed, stream):
    """(rows, num_samples) int64 category indices drawn with replacement from the rows of the 2-D host
    array `weights` (checked: finite, non-negative, a positive weight in each row) with the uniform draw
    of (seed, stream): what lazytensor.sorting.multinomial's graph computes from them."""
    rows, n = weights.shape
    dt = weights.dtype
    cdf = KERNELS["cumsum"]({"axis": 1, "dtype": dt}, weights)
    cdf = KERNELS["div"]({"dtype": dt}, cdf, cdf[:, n - 1:n])  # the last entry exactly 1: u < 1 stays in range
    shape = (rows, num_samples, 1)
    u = _run(Node("uniform", (), {"shape": shape, "dtype": dt, "seed": seed, "stream": stream, "low": 0.0,
                                  "high": 1.0}, shape, dt))
    at_or_below = KERNELS["le"]({"dtype": _BOOL}, cdf.reshape(rows, 1, n), u)
    counts = KERNELS["cast"]({"dtype": _INT64}, at_or_below)
    COUNTERS.kernels += 6  # the graph's kernels, counted as the executor counts them
    return KERNELS["sum"]({"axes": (2,), "keepdims": False, "dtype": _INT64}, counts)


def _run(node):
    """`node` (no inputs) computed by the first host backend that takes it, as the executor would pick."""
    for backend in devices.chain():
        if backend.is_host and backend.accepts(node, ()):
            return backend.launch(node, ())
    raise AssertionError(f"no host backend computes {node.op}")
