"""lt.plan: what a realization will run, seen before anything runs, and then run exactly as planned (on
whichever device the suite's pass selects: the CPU, the virtual device, the emulated CUDA driver)."""
import numpy as np
import pytest
from hypothesis import given

import lazytensor as lt

from test_random_graphs import _run as _run_program, programs


def _mlp_step():
    lt.manual_seed(3)
    w1 = lt.randn(32, 64, requires_grad=True)
    w2 = lt.randn(64, 10, requires_grad=True)
    x = lt.tensor(np.linspace(-1, 1, 96 * 32, dtype=np.float32).reshape(96, 32))
    y = lt.tensor(np.arange(96) % 10)
    loss = lt.nn.functional.cross_entropy(lt.nn.functional.gelu(x @ w1) @ w2, y)
    loss.backward()
    return [loss, w1.grad, w2.grad]


def _attention():
    lt.manual_seed(4)
    q, k, v = (lt.randn(2, 4, 64, 16) for _ in range(3))
    att = (q @ k.transpose(-2, -1)) * 0.25
    att = att.masked_fill(~lt.tril(lt.ones(64, 64, dtype=lt.bool)), float("-inf")).softmax(-1)
    return [(att @ v).transpose(1, 2).reshape(2, 64, 64).sum(dim=-1)]


def _elementwise_chain():
    x = lt.tensor(np.linspace(0.1, 3, 128 * 128, dtype=np.float32).reshape(128, 128))
    return [((x * 0.5).log1p() + x.sqrt()).tanh().mean(dim=0)]


# Copies a device makes for itself, not of values: in the transfer log, not in plans.
BOOKKEEPING = ("index-grouping", "status-read", "status-reset")
PROGRAMS = {"mlp training step": _mlp_step, "attention": _attention, "elementwise chain": _elementwise_chain}


def test_a_plan_computes_nothing_and_moves_nothing():
    targets = _mlp_step()
    plan = lt.plan(*targets)
    assert len(plan) > 0
    assert all(t.residency == lt.Residency.PENDING for t in targets)
    assert lt.counters()["kernels"] == 0 and lt.counters()["realizations"] == 0
    assert lt.transfer_log() == []


def _check_plan_against_run(targets):
    plan = lt.plan(*targets)
    lt.clear_transfer_log()
    with lt.profile() as profile:
        lt.realize(*targets)
    ran = [(k["op"], k["backend"], k["node_id"]) for k in profile.to_dict()["kernels"]]
    assert [(item.label, item.backend, item.node_id) for item in plan.items] == ran
    moved = [(r.direction, r.node_id, r.nbytes, r.reason, r.device) for r in lt.transfer_log()
             if r.reason not in BOOKKEEPING]
    assert [(c.direction, c.node_id, c.nbytes, c.reason, c.device) for c in plan.copies] == moved
    return plan


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_what_runs_is_what_was_planned(name):
    _check_plan_against_run(PROGRAMS[name]())


def _policy_programs():
    plans = [_check_plan_against_run(PROGRAMS[name]()) for name in sorted(PROGRAMS)]
    big = lt.tensor(np.ones((96, 96), np.float32))
    plans.append(_check_plan_against_run([((big @ big) // 3.0).sum()]))  # floordiv: no device kernel
    return {item.backend for p in plans for item in p.items}, {c.direction for p in plans for c in p.copies}


def test_what_runs_is_what_was_planned_when_the_policy_mixes_host_and_device(virtual):
    virtual(offload="policy")
    backends, directions = _policy_programs()
    assert {"virtual", "numpy"} <= backends and "h2d" in directions


def test_what_runs_is_what_was_planned_when_a_device_leaves_kernels_to_the_host(cuda_device):
    cuda_device(offload="policy")
    backends, directions = _policy_programs()
    assert {"cuda", "numpy"} <= backends and directions == {"h2d", "d2h"}


def test_a_realized_value_plans_nothing():
    x = lt.ones(4) + 1
    x.realize()
    plan = lt.plan(x)
    assert len(plan) == 0 and "nothing to compute" in str(plan)


def test_the_printed_plan_names_each_kernel_its_backend_and_shape():
    x = lt.tensor(np.ones((128, 128), np.float32))
    text = str(lt.plan(((x * 2.0 + 1.0).exp()).sum()))
    assert text.splitlines()[0].startswith("plan: ")
    assert "fused(mul+add+exp)" in text or "exp" in text
    assert "(128, 128)" in text and "float32" in text


def test_a_plan_on_a_device_lists_its_uploads_before_the_kernel_that_needs_them(virtual):
    virtual(offload="always")
    a = lt.tensor(np.ones((64, 64), np.float32))
    plan = lt.plan((a @ a).sum())
    first = plan.items[0]
    assert first.label == "matmul" and first.backend == "virtual"
    assert [(c.direction, c.reason, c.nbytes) for c in first.copies] == [("h2d", "operand-upload", 64 * 64 * 4)]
    assert plan.items[1].copies == []  # the product stays on the device for the sum


def test_planning_records_no_gemv_offer_and_no_planned_launch(virtual):
    device = virtual()  # the policy decides: a big matrix-vector product is declined on first offer
    m = lt.tensor(np.ones((1024, 512), np.float32))
    v = lt.tensor(np.ones(512, np.float32))
    for _ in range(3):
        assert lt.plan(m @ v).items[0].backend != "virtual"
    assert len(device.gemv_offers) == 0
    (m @ v).realize()
    assert len(device.gemv_offers) == 1  # running it remembers the offer; planning did not


def test_planning_on_a_kernel_compiling_device_leaves_no_launches_behind(cuda_device):
    device = cuda_device(offload="always")
    a = lt.tensor(np.ones((16, 16), np.float32))
    plan = lt.plan((a * 2.0).sum())
    assert {item.backend for item in plan.items} == {"cuda"}
    assert not device._planned


@given(programs())
def test_random_graphs_run_as_planned(program):
    results = [t for t, _, _ in _run_program(*program)]
    _check_plan_against_run(results)
