"""Planned rematerialization (runtime/remat.py): under a budget its values would exceed, a device
realization makes a cheap value again for its late readers instead of holding or spilling it. The values
are those of the run without a budget, byte for byte; the device never holds more than the budget."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.runtime import remat

N, LAYERS = 256, 6
ONE = N * N * 4


def _program(device, seed=0):
    """A forward and backward pass in miniature: each layer's probabilities a = softmax(h @ w) are read
    going forward (h' = a @ v) and again coming back, with h, which the way back reads too. Holding
    every a to the turn is what peaks; each is made again from h and w for less than a spill costs.
    (The layers share their weights: what the device holds before is small beside what the pass makes.)"""
    rng = np.random.default_rng(seed)
    def leaf():
        return lt.tensor(rng.standard_normal((N, N)).astype(np.float32) / 16).to(device)
    w, v, h = leaf(), leaf(), leaf()
    hs, probs = [], []
    for _ in range(LAYERS):
        hs.append(h)
        a = lt.softmax(h @ w, dim=-1)
        probs.append(a)
        h = a @ v
    g = h
    for a, h_in in reversed(list(zip(probs, hs))):
        g = (g * a) @ v.mT + h_in
    return g


def _run(budget=None, ratio=1.0):
    """(the program's value, the device's peak, values made again, bytes spilled) on the active device."""
    device = lt.runtime.devices.active_device()
    if budget is not None:
        lt.set_memory_budget(budget, recompute_ratio=ratio)
    g = _program(device.name)
    lt.reset_counters()
    with device.memory.watch_peak() as peak:
        lt.realize(g)
    return g.numpy(), peak[0], lt.counters()["remade"], device.memory.evicted_bytes


def _unlimited(virtual):
    virtual(offload="always")
    want, peak, remade, _ = _run()
    return want, peak, remade


def test_without_a_budget_that_binds_nothing_is_made_again(virtual):
    _, _, remade = _unlimited(virtual)
    assert remade == 0


def test_a_value_read_before_and_after_the_peak_is_made_again_with_the_same_bytes(virtual):
    want, peak, _ = _unlimited(virtual)
    virtual(offload="always")
    got, got_peak, remade, _ = _run(peak * 3 // 4)
    assert remade > 0
    assert got_peak <= peak * 3 // 4
    assert np.array_equal(got, want)


def test_making_values_again_spills_less_than_holding_them(virtual, monkeypatch):
    want, peak, _ = _unlimited(virtual)
    budget = peak * 3 // 4
    virtual(offload="always")
    _, _, remade, spilled_with = _run(budget)
    monkeypatch.setattr(remat, "_ROUNDS", 0)  # the evictor alone
    virtual(offload="always")
    got, _, none, spilled_without = _run(budget)
    assert remade > 0 and none == 0
    assert np.array_equal(got, want)
    assert spilled_with < spilled_without, (spilled_with / ONE, spilled_without / ONE)


def test_a_recompute_ratio_of_zero_spills_what_the_budget_cannot_hold(virtual):
    want, peak, _ = _unlimited(virtual)
    virtual(offload="always")
    got, got_peak, remade, spilled = _run(peak * 3 // 4, ratio=0)
    assert remade == 0 and spilled > 0
    assert got_peak <= peak * 3 // 4
    assert np.array_equal(got, want)


def test_a_recompute_ratio_must_be_a_number_of_zero_or_more():
    with pytest.raises(TypeError, match="recompute_ratio must be a number"):
        lt.set_memory_budget("64MB", recompute_ratio="2")
    for bad in (-1, float("nan")):
        with pytest.raises(ValueError, match="0 or more"):
            lt.set_memory_budget("64MB", recompute_ratio=bad)


def test_random_values_are_never_made_again_and_products_and_softmax_are():
    x = lt.tensor(np.ones((4, 4), np.float32))
    noise = lt.rand(4, 4)  # a random value is never made a second time
    assert not remat._remakeable(noise._node)
    assert remat._remakeable((x @ x)._node) and remat._remakeable(lt.softmax(x, dim=0)._node)


@settings(max_examples=8, deadline=None)
@given(fraction=st.floats(0.2, 0.95))
def test_any_budget_gives_the_unlimited_bytes_within_the_budget(fraction):
    lt.set_device("virtual", memory="256MB", offload="always")
    want, peak, _, _ = _run()
    lt.set_device("virtual", memory="256MB", offload="always")
    budget = max(int(peak * fraction), 4 * ONE)  # a step reads two values and makes one: room for it
    got, got_peak, _, _ = _run(budget)
    assert got_peak <= budget
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fraction", [0.5, 0.75])
def test_the_emulated_cuda_device_makes_the_same_bytes_again(cuda_device, fraction):
    cuda_device(offload="always")
    want, peak, _, _ = _run()
    cuda_device(offload="always")
    got, got_peak, remade, _ = _run(int(peak * fraction))
    assert remade > 0 and got_peak <= int(peak * fraction)
    assert np.array_equal(got, want)
