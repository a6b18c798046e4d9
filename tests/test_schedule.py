"""The step as a value: `lt.plan(t)` is the Schedule that realizing `t` then runs (the same steps on the
same backends with the same copies), on the CPU, the virtual device and the emulated CUDA driver,
including under a budget that cannot hold some kernels; and a schedule holds no value alive."""
import gc
import weakref

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime import devices, executor, graph, scheduler


def _training_step():
    lt.manual_seed(5)
    w1 = lt.randn(48, 64, requires_grad=True)
    w2 = lt.randn(64, 8, requires_grad=True)
    x = lt.tensor(np.linspace(-1, 1, 80 * 48, dtype=np.float32).reshape(80, 48))
    y = lt.tensor(np.arange(80) % 8)
    hidden = lt.nn.functional.gelu(x @ w1)
    loss = lt.nn.functional.cross_entropy(hidden @ w2, y)
    loss.backward()
    return [loss, w1.grad, w2.grad]


def _planned_then_ran(targets):
    planned = lt.plan(*targets)
    ran = scheduler.realize([t._node for t in targets])
    return planned, ran


def _assert_ran_as_planned(planned, ran):
    assert ran is not None and ran.replanned == 0
    assert ran.keys() == planned.keys()
    assert [c.key() for c in ran.copies] == [c.key() for c in planned.copies]


def test_the_plan_is_the_schedule_that_runs_on_the_cpu():
    lt.set_device("cpu")
    planned, ran = _planned_then_ran(_training_step())
    _assert_ran_as_planned(planned, ran)
    assert {step.backend for step in ran.steps} <= {"numba", "numpy"}


@pytest.mark.parametrize("offload", ["policy", "always"])
def test_the_plan_is_the_schedule_that_runs_on_the_virtual_device(virtual, offload):
    virtual(offload=offload)
    planned, ran = _planned_then_ran(_training_step())
    _assert_ran_as_planned(planned, ran)
    assert "virtual" in {step.backend for step in ran.steps}


@pytest.mark.parametrize("offload", ["policy", "always"])
def test_the_plan_is_the_schedule_that_runs_on_the_emulated_cuda_driver(cuda_device, offload):
    cuda_device(offload=offload)
    planned, ran = _planned_then_ran(_training_step())
    _assert_ran_as_planned(planned, ran)
    assert "cuda" in {step.backend for step in ran.steps}


def _over_budget_program():
    """Small kernels that fit a 2 MiB budget, and a product whose operands and result cannot be held in
    it at once (each 600 x 600 float32 value takes a 2 MiB block)."""
    small = lt.tensor(np.linspace(0, 1, 128 * 128, dtype=np.float32).reshape(128, 128))
    big = lt.tensor(np.linspace(-1, 1, 600 * 600, dtype=np.float32).reshape(600, 600))
    return [(small * 2.0).exp().sum() + (big @ big).sum()]


def _check_over_budget(device):
    planned, ran = _planned_then_ran(_over_budget_program())
    _assert_ran_as_planned(planned, ran)
    by_label = {step.label: step for step in ran.steps}
    assert by_label["matmul"].backend != device.name and by_label["matmul"].refused == (device,)
    assert device.name in {step.backend for step in ran.steps}
    assert device.memory.stats()["memory_fallbacks"] >= 1
    moved = [(r.direction, r.node_id, r.nbytes, r.reason) for r in lt.transfer_log()]
    assert moved == [(c.direction, c.node_id, c.nbytes, c.reason) for c in ran.copies]


def test_a_kernel_the_budget_cannot_hold_is_planned_down_the_chain_on_the_virtual_device(virtual):
    _check_over_budget(virtual(offload="always", budget="2MiB"))


def test_a_kernel_the_budget_cannot_hold_is_planned_down_the_chain_on_the_emulated_cuda_driver(cuda_device):
    _check_over_budget(cuda_device(offload="always", budget="2MiB"))


def test_an_eviction_replans_the_remaining_steps_and_loses_no_value(virtual):
    device = virtual(offload="always", budget="5MiB")
    values = [lt.tensor(np.full((600, 600), k, np.float32)) * 1.0 for k in range(3)]
    total = values[0] + values[1] + values[2]  # three 2 MiB blocks cannot all stay: the evictor moves some
    ran = scheduler.realize([v._node for v in values] + [total._node])
    assert ran.replanned >= 1
    assert device.memory.evictions >= 1
    np.testing.assert_array_equal(total.numpy(), np.full((600, 600), 3.0, np.float32))


def test_a_run_planned_again_after_an_eviction_keeps_the_order_it_had(virtual):
    """Only where the remaining steps run and what they copy follow the values; their order (which a
    plan chose for the whole run, values made again included) stays."""
    device = virtual(offload="always", budget="5MiB")
    held = lt.tensor(np.ones((700, 700), np.float32)).to("virtual") * 1.0
    held.numpy()  # 1.96 MB on the device that the run does not read: the evictor's first choice
    x, y = (lt.tensor(np.full((600, 600), k, np.float32)) for k in (1.0, 2.0))
    a, b, c = x + y, x - y, x * y
    ab = a + b
    total = ab + c
    order = [a._node, c._node, b._node, ab._node, total._node]  # inputs first, not depth first
    ran = executor.run(list(order), [total._node], devices.chain(), None)
    assert device.memory.evictions >= 1 and ran.replanned >= 1
    assert [step.node_id for step in ran.steps] == [node.id for node in order]
    np.testing.assert_array_equal(total.numpy(), np.full((600, 600), 4.0, np.float32))


def test_an_order_that_would_run_a_node_before_its_input_is_not_kept():
    x = lt.tensor(np.ones(4, np.float32))
    a = x + 1.0
    b = a * 2.0
    kept = graph.pending_in_order([b._node], {a._node: 0, b._node: 1})
    assert kept.index(a._node) < kept.index(b._node) == len(kept) - 1  # the constants go with their readers
    assert graph.pending_in_order([b._node], {b._node: 0, a._node: 1}) is None


def test_a_schedule_keeps_no_value_of_its_realization_alive():
    x = lt.tensor(np.ones((64, 64), np.float32))
    y = (x * 3.0).exp()
    probe = weakref.ref(y._node)
    planned = lt.plan(y.sum())
    ran = scheduler.realize([(y.sum())._node])
    del y
    gc.collect()
    assert probe() is None
    assert all(step.node is None and step.group is None and step.what is None for step in planned.steps + ran.steps)


def test_a_replayed_realization_returns_no_schedule():
    lt.set_device("cpu")
    w = lt.tensor(np.ones((8, 8), np.float32))
    results = []
    for _ in range(4):
        out = w
        for _ in range(40):
            out = out * 1.0 + 0.5
        results.append(scheduler.realize([out._node]))
    assert results[0] is not None and results[-1] is None  # the third sighting on is replayed
