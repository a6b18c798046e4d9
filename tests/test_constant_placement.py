"""Constants follow their consumers: a value built from fills alone (a causal mask from ones and tril,
positions from arange) is computed on the device holding its consumer's other operands, so a model that
builds its mask in every forward uploads nothing for it (runtime/constants.py)."""
import numpy as np
import pytest

import lazytensor as lt

T = 16


def _scores(rng):
    return rng.standard_normal((2, 4, T, T)).astype(np.float32)


def _masked_softmax_sum(att):
    mask = lt.tril(lt.ones(T, T, dtype=lt.bool))
    return att.masked_fill(~mask, float("-inf")).softmax(-1).sum()


def _expected(scores):
    masked = np.where(np.tril(np.ones((T, T), bool)), scores.astype(np.float64), -np.inf)
    e = np.exp(masked - masked.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)).sum()


def _on_device_only(scores, device):
    att = lt.tensor(scores * 0.5).to(device) * 2.0  # computed on the device: no host copy
    att.realize()
    assert att.residency == lt.Residency.DEVICE
    return att


def _uploads():
    return [(r.node_id, r.reason) for r in lt.transfer_log() if r.direction == "h2d"]


@pytest.mark.parametrize("device", ["virtual", "cuda"])
def test_a_mask_built_without_a_device_is_made_where_the_scores_live(device, virtual, cuda_device, rng):
    (virtual if device == "virtual" else cuda_device)(offload="policy")
    scores = _scores(rng)
    att = _on_device_only(scores, device)
    lt.clear_transfer_log()
    total = _masked_softmax_sum(att)
    value = total.item()
    assert _uploads() == []
    assert [(r.direction, r.reason) for r in lt.transfer_log()] == [("d2h", "host-read:item")]
    assert value == pytest.approx(_expected(scores), rel=1e-6)


def test_positions_from_arange_are_made_on_the_device_holding_the_embedding(virtual):
    virtual(offload="policy")
    table = lt.tensor(np.arange(40, dtype=np.float32).reshape(10, 4)).to("virtual") * 1.0
    table.realize()
    lt.clear_transfer_log()
    rows = lt.nn.functional.embedding(lt.arange(6), table).sum()
    assert rows.item() == float(np.arange(24).sum())
    assert _uploads() == []


@pytest.mark.parametrize("copy", ["host only", "host and device"])
def test_a_constant_whose_consumer_can_run_on_the_host_is_made_on_the_host(copy, virtual, rng):
    virtual(offload="policy")
    att = lt.tensor(_scores(rng))  # the small softmax stays on the host
    if copy == "host and device":
        att.to("virtual")
    lt.clear_transfer_log()
    _masked_softmax_sum(att).item()
    assert lt.transfer_log() == []


def test_a_constant_asked_for_itself_is_placed_as_before(virtual):
    virtual(offload="policy")
    mask = lt.tril(lt.ones(T, T))
    mask.realize()
    assert mask.residency == lt.Residency.HOST  # 256 elements: below the fill threshold


def test_the_plan_shows_the_mask_made_on_the_device_before_its_consumer(virtual, rng):
    virtual(offload="policy")
    total = _masked_softmax_sum(_on_device_only(_scores(rng), "virtual"))
    plan = lt.plan(total)
    assert plan.copies == []
    labels = [(item.label, item.backend) for item in plan.items]
    assert ("full", "virtual") in labels and ("tril", "virtual") in labels
    with lt.profile() as profile:
        total.realize()
    ran = [(k["op"], k["backend"], k["node_id"]) for k in profile.to_dict()["kernels"]]
    assert [(item.label, item.backend, item.node_id) for item in plan.items] == ran


def test_a_0d_constant_read_by_a_device_kernel_stays_a_host_parameter(virtual, rng):
    virtual(offload="policy")
    att = _on_device_only(_scores(rng), "virtual")
    lt.clear_transfer_log()
    scale = lt.full((), 0.5)
    out = (att * scale).sum()
    out.item()
    assert _uploads() == []
    assert scale.residency == lt.Residency.HOST


def test_a_mean_gradient_built_from_a_0d_seed_is_made_on_the_device(virtual, rng):
    virtual(offload="policy")
    w = lt.tensor(rng.standard_normal(64).astype(np.float32)).to("virtual") * 1.0
    w.realize()
    w.requires_grad_()
    lt.clear_transfer_log()
    (w * w).mean().backward()  # the seed is a 0-d fill, expanded and divided by 64: one constant chain
    np.testing.assert_allclose(w.grad.numpy(), 2 * w.numpy() / 64, rtol=1e-6)
    assert _uploads() == []


@pytest.mark.parametrize("device", ["virtual", "cuda"])
def test_a_compiled_step_makes_its_mask_on_the_device_at_every_replay(device, virtual, cuda_device, rng):
    (virtual if device == "virtual" else cuda_device)(offload="policy")
    att = _on_device_only(_scores(rng), device)
    step = lt.jit(lambda a: _masked_softmax_sum(a * 1.0))
    expected = _expected(_scores(np.random.default_rng(1234)))
    for _ in range(4):  # the eager call, the capture, then replays
        lt.clear_transfer_log()
        assert step(att).item() == pytest.approx(expected, rel=1e-6)
        assert [(r.direction, r.reason) for r in lt.transfer_log()] == [("d2h", "host-read:item")]
