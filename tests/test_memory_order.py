"""The order a realization runs in (runtime/graph.py `consumers_early`): the last consumers of a
big value run as soon as all of them can when together they make less than it holds, so the value goes
early, on a device and on the host alike. Values are the same either way."""
import numpy as np

import lazytensor as lt
from lazytensor.runtime.graph import pending_order


def _graph(rng, n=256):
    """The roots of a graph where g (n x n) is read by a chain (the first root) and two small reductions
    (the later roots): depth first holds g until the chain is done; the reductions can run, and let g
    go, once the chain's first op has read it."""
    x = lt.tensor(rng.standard_normal((n, n)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((n, n)).astype(np.float32))
    g = x * 2.0
    m = g @ w
    chain = m.tanh() * m.exp()
    return [chain, g.sum(1), g.amax()]  # row sums: a column sum would be folded into g's own kernel


def test_the_last_consumers_of_a_value_run_right_after_the_op_that_leaves_them_alone():
    roots = _graph(np.random.default_rng(0))
    nodes = [r._node for r in roots]
    depth_first = [n.op for n in pending_order(nodes)]
    early = [n.op for n in pending_order(nodes, early=True)]
    assert depth_first == ["mul", "matmul", "tanh", "exp", "mul", "sum", "amax"]
    assert early == ["mul", "matmul", "sum", "amax", "tanh", "exp", "mul"]


def test_a_sum_of_elementwise_ops_on_the_value_counts_as_the_bytes_of_the_sum():
    # a layer norm's weight gradient, sum(dy * x_hat, 0): the product is never stored where it is fused
    # (and freed after its one reader elsewhere), so the sum's bytes are what running it early keeps
    rng = np.random.default_rng(0)
    x = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((256, 256)).astype(np.float32))
    g = x * 2.0
    m = g @ w
    roots = [(m.tanh() * m.exp())._node, (g * x.exp()).sum(0)._node, g.amax()._node]
    early = [n.op for n in pending_order(roots, early=True)]
    assert early == ["mul", "matmul", "exp", "mul", "sum", "amax", "tanh", "exp", "mul"]


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


def test_a_host_realization_runs_the_last_consumers_of_a_value_beyond_a_cores_cache_early():
    # On the host the value is not what is at stake but where it is: read again right after it was made,
    # it comes from cache (a GPT's weight gradients beside their layer's output gradient, bench/RESULTS.md).
    lt.set_device("cpu")
    roots = _graph(np.random.default_rng(0), n=1024)  # 4 MiB values
    want = [r.numpy() for r in reversed(_graph(np.random.default_rng(0), n=1024))][::-1]
    assert [s.label for s in lt.plan(*roots).steps] == ["fused(mul)", "matmul", "sum", "amax", "fused(tanh+exp+mul)"]
    lt.realize(*roots)
    assert all(np.array_equal(r.numpy(), w) for r, w in zip(roots, want))


def test_a_host_realization_keeps_the_depth_first_order_for_values_a_cores_cache_holds():
    lt.set_device("cpu")
    roots = _graph(np.random.default_rng(0))  # 256 KiB values
    assert [s.label for s in lt.plan(*roots).steps] == ["fused(mul)", "matmul", "fused(tanh+exp+mul)", "sum", "amax"]


def test_a_training_step_on_the_host_computes_each_weight_gradient_beside_its_input_gradient():
    lt.set_device("cpu")
    lt.manual_seed(0)
    model = lt.nn.Sequential(lt.nn.Linear(64, 256), lt.nn.GELU(), lt.nn.Linear(256, 256), lt.nn.GELU(),
                             lt.nn.Linear(256, 8))
    x = lt.tensor(np.random.default_rng(1).standard_normal((4096, 64)).astype(np.float32))  # 4 MiB activations
    model(x).square().mean().backward()
    weights = [p.grad._node.id for p in model.parameters() if p.ndim == 2]
    products = [s.node_id for s in lt.plan(*[p.grad for p in model.parameters()]).steps if s.label == "matmul"]
    # backward from the last layer: its weight's product, the input gradient, the next weight's product...
    # depth first from the parameters' order ran every weight gradient after the whole backward pass
    positions = sorted(products.index(w) for w in weights)
    assert positions != list(range(len(products) - len(weights), len(products))), products
    assert products.index(weights[-2]) < products.index(weights[0])


def test_small_values_keep_the_depth_first_order():
    x = lt.tensor(np.ones((4, 4), np.float32))
    g = x * 2.0
    roots = [((g @ x).tanh()).exp(), g.sum(0), g.amax()]
    nodes = [r._node for r in roots]
    assert [n.op for n in pending_order(nodes, early=True)] == [n.op for n in pending_order(nodes)]
