"""Repeated backward passes rebuilt from a recording (lazytensor/backward_replay.py): a backward whose graph
has the structure of one recorded before makes, node for node, the gradient graph the rules would make,
and so computes the same bytes; what it cannot replay, the rules build."""
import numpy as np
import pytest
from hypothesis import given, settings

import lazytensor as lt
from lazytensor import backward_replay
from lazytensor.runtime import graph
from lazytensor.runtime.replay.signature import frozen
from jit_steps import _same, _train as _jit_train
from test_random_graphs import programs
from jit_steps import _program_fn

import user_gpt


@pytest.fixture
def replay(monkeypatch):
    """The CPU device, no recordings yet, every backward recordable (the size floor off);
    `replay(on)` sets LAZYTENSOR_REPLAY."""
    lt.set_device("cpu")
    monkeypatch.setattr(backward_replay, "MIN_RECORDS", 1)
    backward_replay.clear()

    def switch(on):
        monkeypatch.setenv("LAZYTENSOR_REPLAY", "1" if on else "0")
        backward_replay.clear()
    return switch


def _structure(tensors, known):
    """The pending graph under `tensors` as plain data: for each node (inputs first) its op, attributes,
    shape, dtype and inputs (an earlier node's position; a value of `known`, by index; any other value
    by its shape, dtype and bytes); then the positions of `tensors`."""
    known_at = {id(n): k for k, n in enumerate(known)}
    nodes = graph.walk([t._node for t in tensors])
    pos = {id(n): i for i, n in enumerate(nodes)}
    items = []
    for n in nodes:
        if n.buffer is not None:
            k = known_at.get(id(n))
            items.append(("known", k) if k is not None else ("value", n.shape, str(n.dtype), n.buffer.host.tobytes()))
        else:
            items.append((n.op, frozen(n.attrs), n.shape, str(n.dtype), tuple(pos[id(i)] for i in n.inputs)))
    return items, [pos[id(t._node)] for t in tensors]


def _user_steps(steps, n_layer=1):
    """The user-written GPT trained eagerly (clip over the `model.parameters()` generator): after each
    backward the structure of its .grad graphs; the losses and final parameters."""
    lt.manual_seed(0)
    gpt, optimizer, _ = user_gpt.make(lt)
    model = gpt(40, n_layer, 2, 32, 32)
    opt = optimizer(model)
    rng = np.random.default_rng(0)
    structures, losses = [], []
    for _ in range(steps):
        x, y = (lt.tensor(rng.integers(0, 40, (8, 32))) for _ in range(2))
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        params = list(model.parameters())
        structures.append(_structure([p.grad for p in params], [p._node for p in params] + [x._node, y._node]))
        lt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return structures, np.array(losses), [p.numpy().tobytes() for p in model.parameters()]


def test_a_repeated_backward_makes_the_graph_the_rules_make_node_for_node(replay):
    replay(False)
    by_rules = _user_steps(5)
    replay(True)
    lt.reset_counters()
    replayed = _user_steps(5)
    # step 1 records; step 2's parameters are computed values (another signature) and record; then replays
    assert lt.counters()["replayed_backwards"] == 3
    assert replayed[0] == by_rules[0]
    assert replayed[1].tobytes() == by_rules[1].tobytes() and replayed[2] == by_rules[2]


def test_a_training_step_with_dropout_and_a_schedule_replays_its_backward_with_the_same_bytes(replay):
    """test_jit's model (dropout draws new random streams every step) and its optimizer state."""
    replay(False)
    by_rules = _jit_train(False)
    replay(True)
    lt.reset_counters()
    replayed = _jit_train(False)
    assert lt.counters()["replayed_backwards"] >= 5
    _same(by_rules, replayed)


@pytest.mark.parametrize("device", ["virtual", "emulated CUDA"])
def test_a_training_step_on_a_device_replays_its_backward_with_the_bytes_of_the_rules(
        virtual, cuda_device, monkeypatch, device):
    """Offload always: every value on the device, so the seed gradient and the rules' fills go there."""
    def start():
        if device == "virtual":
            virtual(offload="always")
        else:
            cuda_device(offload="always")
        backward_replay.clear()
    results = []
    for on in (False, True):
        monkeypatch.setenv("LAZYTENSOR_REPLAY", "1" if on else "0")
        start()
        results.append(_jit_train(False))
    assert lt.counters()["replayed_backwards"] >= 5
    _same(*results)


@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_backward_passes_replay_the_graph_and_bytes_of_the_rules(program):
    """Random graphs of elementwise ops (broadcasting), reductions and views; each backward on new input
    values, so a replay wired to the recorded backward's values would fail."""
    shapes, steps, seed = program
    lt.set_device("cpu")
    rng = np.random.default_rng(seed)
    inputs = [[rng.uniform(-2, 2, size=s) for s in shapes] for _ in range(3)]
    fn = _program_fn(steps)
    results = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(backward_replay, "MIN_RECORDS", 1)
        for on in (False, True):
            mp.setenv("LAZYTENSOR_REPLAY", "1" if on else "0")
            backward_replay.clear()
            lt.reset_counters()
            got = []
            for arrays in inputs:
                xs = [lt.tensor(a, requires_grad=True) for a in arrays]
                loss = sum((v.sum() for v in fn(*xs) if v.requires_grad), lt.tensor(0.0))
                if not loss.requires_grad:
                    return
                loss.backward()
                grads = [x.grad for x in xs if x.grad is not None]
                got.append((_structure(grads, [x._node for x in xs]), [g.numpy().tobytes() for g in grads]))
            results[on] = got, lt.counters()["replayed_backwards"]
    assert results[True][1] == 2 and results[False][1] == 0
    assert results[True][0] == results[False][0]


def test_a_backward_of_another_structure_is_built_by_the_rules_and_recorded(replay):
    counts = []
    for n in (4, 4, 5, 5, 4):
        x = lt.ones(n, requires_grad=True)
        ((x * 2.0).exp() * x).sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.exp(2.0) * 3.0)
        counts.append(lt.counters()["replayed_backwards"])
    assert counts == [0, 1, 1, 2, 3]


def test_a_backward_over_an_attribute_that_cannot_be_compared_is_built_by_the_rules(replay):
    """An array attribute (a fill value) in the graph cannot key a recording: the rules build each such
    backward, and none is kept, so the same structure with a number there still replays."""
    def backward_with(value):
        x = lt.ones(8, requires_grad=True)
        w = lt.Tensor._from_op("full", (), {"shape": (8,), "value": value, "dtype": np.dtype(np.float32)},
                               (8,), lt.float32)
        ((x * w).exp() * x).sum().backward()
        return x.grad.numpy()
    for k in range(3):
        np.testing.assert_allclose(backward_with(np.full(8, float(k))), np.exp(k) * (k + 1.0), rtol=1e-6)
    assert lt.counters()["replayed_backwards"] == 0
    for _ in range(3):
        backward_with(1.5)
    assert lt.counters()["replayed_backwards"] == 2


def test_leaf_grads_kept_from_the_last_backward_accumulate_in_a_replay_as_by_the_rules(replay):
    def run():
        w = lt.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        x = lt.tensor(np.linspace(-1, 1, 12).reshape(4, 3))
        seen = []
        for _ in range(5):
            (x @ w.mT).tanh().sum().backward()  # no zero_grad: every .grad adds to the last
            seen.append(w.grad.numpy().tobytes())
        return seen
    replay(False)
    by_rules = run()
    replay(True)
    # recorded: without a .grad, with the first's, with a sum's (another op); then replayed
    assert run() == by_rules and lt.counters()["replayed_backwards"] == 2


def test_a_second_backward_through_a_replayed_graph_raises_as_through_one_built_by_the_rules(replay):
    for _ in range(3):
        x = lt.ones(3, requires_grad=True)
        y = (x * x).sum()
        y.backward()
    assert lt.counters()["replayed_backwards"] == 2
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_retain_graph_keeps_a_replayed_graph_for_another_backward(replay):
    for _ in range(3):
        x = lt.ones(3, requires_grad=True)
        y = (x * x).sum()
        y.backward(retain_graph=True)
    y.backward()
    assert lt.counters()["replayed_backwards"] == 2
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0, 4.0])


def test_each_leaf_of_a_replay_gets_its_own_grad_tensor_as_by_the_rules(replay):
    for _ in range(3):
        a, b = lt.ones(3, requires_grad=True), lt.ones(3, requires_grad=True)
        (a + b).sum().backward()
    assert lt.counters()["replayed_backwards"] == 2
    assert a.grad is not b.grad  # add's rule hands both the same gradient tensor; each leaf's is new
    a.grad *= 3.0
    np.testing.assert_array_equal(b.grad.numpy(), [1.0, 1.0, 1.0])


def test_replay_off_builds_every_backward_by_the_rules(replay):
    replay(False)
    for _ in range(3):
        x = lt.ones(3, requires_grad=True)
        (x * x).sum().backward()
    assert lt.counters()["replayed_backwards"] == 0


def test_small_backward_passes_are_not_recorded(replay, monkeypatch):
    monkeypatch.setattr(backward_replay, "MIN_RECORDS", 16)
    for _ in range(3):
        x = lt.ones(3, requires_grad=True)
        (x * x).sum().backward()
    assert lt.counters()["replayed_backwards"] == 0
