"""What refuses a capture is one list (runtime/replay/refusals.py), and every refusal is counted under its
replay and reason in `lt.counters()["replay_refusals"]`."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime.replay import refusals


def test_each_refusal_has_its_own_name_a_text_and_the_replays_it_stops():
    names = [r.name for r in refusals.ALL]
    assert len(names) == len(set(names))
    for refusal in refusals.ALL:
        assert refusal.text and set(refusal.replays) <= {refusals.JIT, refusals.REPEATS, refusals.BACKWARD}


def test_a_compiled_function_reading_an_element_warns_with_the_lists_text_and_counts_a_host_read():
    @lt.jit
    def peek(x):
        y = x * 2
        y.sum().item()
        return y + 1
    with pytest.warns(lt.JitWarning, match=r"a host read \(host-read:item\)"):
        for _ in range(3):
            peek(lt.tensor(np.arange(4.0, dtype=np.float32)))
    assert lt.counters()["replay_refusals"]["jit: host_read"] >= 1


def test_a_compiled_function_keeping_a_tensor_counts_kept_tensors():
    kept = []

    @lt.jit
    def leaky(x):
        kept.append((x * 3).realize())
        return x + 1
    with pytest.warns(lt.JitWarning, match=r"it keeps 1 new tensor\(s\) outside its return value and \.grad"):
        for _ in range(3):
            leaky(lt.tensor(np.ones(4, np.float32)))
    assert lt.counters()["replay_refusals"]["jit: kept_tensors"] >= 1


def test_a_backward_with_an_explicit_gradient_is_counted_as_not_replayed(rng):
    w = lt.tensor(rng.random((3, 3)).astype(np.float32), requires_grad=True)
    y = w * 2
    y.backward(gradient=lt.ones((3, 3)))
    assert lt.counters()["replay_refusals"] == {"backward: explicit": 1}


def test_a_small_backward_and_a_small_realization_are_counted_as_small(cpu_only):
    w = lt.tensor(np.ones(3, np.float32), requires_grad=True)
    (w * 2).sum().backward()
    w.grad.numpy()
    (w * 3).numpy()  # one node: fewer than repeats.MIN_NODES
    counted = lt.counters()["replay_refusals"]
    assert counted["backward: small"] == 1 and counted["repeats: small"] >= 1


def test_a_realization_replayed_from_its_recording_counts_no_refusal(cpu_only, rng):
    a = rng.random((8, 8)).astype(np.float32)
    for _ in range(3):
        x = lt.tensor(a)
        for _ in range(20):
            x = (x * 0.5 + 1.0).exp().log()
        x.numpy()
    counted = lt.counters()
    assert counted["replayed_realizations"] == 1
    assert "repeats: small" not in counted["replay_refusals"]


def test_reset_counters_forgets_the_refusals():
    (lt.tensor(np.ones(2, np.float32)) + 1).numpy()
    lt.reset_counters()
    assert lt.counters()["replay_refusals"] == {}


@pytest.fixture
def cpu_only():
    """Eager repeats run on host backends only: these tests need the CPU device."""
    lt.set_device("cpu")
    lt.reset_counters()
    yield
