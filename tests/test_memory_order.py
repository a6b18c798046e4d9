"""The order a device realization runs in (runtime/graph.py `consumers_early`): the last consumers of a
big value run as soon as all of them can when together they make less than it holds, so the value goes
early; on the host the order stays depth first. Values are the same either way."""
import numpy as np

import lazytensor as lt
from lazytensor.runtime.graph import pending_order


def _graph(rng):
    """The roots of a graph where g is read by a chain (the first root) and two small reductions (the later
    roots): depth first holds g until the chain is done; the reductions can run, and let g go, once the
    chain's first op has read it."""
    x = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    g = x * 2.0
    m = g @ w
    chain = m.tanh() * m.exp()
    return [chain, g.sum(0), g.amax()]


def test_the_last_consumers_of_a_value_run_right_after_the_op_that_leaves_them_alone():
    roots = _graph(np.random.default_rng(0))
    nodes = [r._node for r in roots]
    depth_first = [n.op for n in pending_order(nodes)]
    early = [n.op for n in pending_order(nodes, early=True)]
    assert depth_first == ["mul", "matmul", "tanh", "exp", "mul", "sum", "amax"]
    assert early == ["mul", "matmul", "sum", "amax", "tanh", "exp", "mul"]


def test_a_device_realization_peaks_lower_and_gives_the_bytes_of_another_order(virtual):
    device = virtual(offload="always")
    want = [r.numpy() for r in reversed(_graph(np.random.default_rng(0)))][::-1]  # one root at a time
    roots = _graph(np.random.default_rng(0))
    with device.memory.watch_peak() as peak:
        lt.realize(*roots)
    assert all(np.array_equal(r.numpy(), w) for r, w in zip(roots, want))
    one = 256 * 256 * 4
    # depth first holds g beside tanh(m), exp(m) and their product (4 values); here g goes first (3)
    assert peak[0] <= 3 * one + 4096, peak[0] / one


def test_small_values_keep_the_depth_first_order():
    x = lt.tensor(np.ones((4, 4), np.float32))
    g = x * 2.0
    roots = [((g @ x).tanh()).exp(), g.sum(0), g.amax()]
    nodes = [r._node for r in roots]
    assert [n.op for n in pending_order(nodes, early=True)] == [n.op for n in pending_order(nodes)]
