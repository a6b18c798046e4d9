"""Repeated CPU realizations replayed (runtime/replay/repeats.py): the third time a realization with the same
structure runs, it runs from the plan captured the second time, and computes, hands back and leaves
pending exactly what the scheduler's own run would."""
import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings

import lazytensor as lt
from lazytensor.runtime.replay import host_runner, repeats
from jit_steps import _program_fn, _same, _train as _jit_train
from test_random_graphs import programs

import user_gpt


@pytest.fixture
def cpu(monkeypatch):
    """The CPU device; `replay(on)` sets LAZYTENSOR_REPLAY, and every realization of a node or more may
    be replayed (the size floor off, so small graphs exercise the replay)."""
    lt.set_device("cpu")
    monkeypatch.setattr(repeats, "MIN_NODES", 1)
    repeats.clear()

    def replay(on):
        monkeypatch.setenv("LAZYTENSOR_REPLAY", "1" if on else "0")
    return replay


def _chain(x, n=40):
    """2n small elementwise nodes on x (NumPy runs each: too small to fuse); the value of each pair."""
    made = []
    for k in range(n):
        x = x * 1.5 - k if k % 2 else (x + 0.25).abs()
        made.append(x)
    return made


def _train(steps, sizes=dict(n_layer=1, n_head=2, n_embd=32, block_size=32), batch=8):
    """Losses and final parameters of `steps` eager AdamW steps of the user-written GPT (clipping over
    the `model.parameters()` generator, as users write it)."""
    lt.manual_seed(0)
    gpt, optimizer, _ = user_gpt.make(lt)
    model = gpt(40, sizes["n_layer"], sizes["n_head"], sizes["n_embd"], sizes["block_size"])
    opt = optimizer(model)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = lt.tensor(rng.integers(0, 40, (batch, sizes["block_size"])))
        y = lt.tensor(rng.integers(0, 40, (batch, sizes["block_size"])))
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        lt.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return np.array(losses), [p.numpy().tobytes() for p in model.parameters()]


@pytest.mark.parametrize("generate_after", [host_runner.GENERATE_AFTER, 0])
def test_an_eager_training_loop_replays_its_steps_with_the_bytes_of_one_that_never_replays(
        cpu, monkeypatch, generate_after):
    """Also with each plan run as a generated function from its first replay on."""
    monkeypatch.setattr(host_runner, "GENERATE_AFTER", generate_after)
    cpu(False)
    plain = _train(8)
    cpu(True)
    lt.reset_counters()
    losses, params = _train(8)
    assert lt.counters()["replayed_realizations"] >= 5
    assert losses.tobytes() == plain[0].tobytes() and params == plain[1]


def test_a_realization_is_replayed_from_its_third_sighting(cpu):
    replayed = []
    for k in range(4):
        x = lt.tensor(np.full(8, float(k)))
        lt.realize(_chain(x)[-1])
        replayed.append(lt.counters()["replayed_realizations"])
    assert replayed == [0, 0, 1, 2]


def test_a_replay_computes_from_the_new_values_read(cpu):
    for k in range(3):
        a = np.linspace(-1, 1, 8) * (k + 1)
        assert _chain(lt.tensor(a))[-1].numpy().tobytes() == _numpy_chain(a)[-1].tobytes()
    assert lt.counters()["replayed_realizations"] == 1


def _numpy_chain(a, n=40):
    made = []
    for k in range(n):
        a = a * 1.5 - k if k % 2 else np.abs(a + 0.25)
        made.append(a)
    return made


def test_an_intermediate_someone_holds_gets_its_value_in_a_replay(cpu):
    for k in range(3):
        a = np.arange(8.0) + k
        made = _chain(lt.tensor(a))
        held, last = made[10], made[-1]
        del made
        lt.realize(last)
        realizations = lt.counters()["realizations"]
        assert held.numpy().tobytes() == _numpy_chain(a)[10].tobytes()
        assert lt.counters()["realizations"] == realizations  # computed by the realization, not read anew
    assert lt.counters()["replayed_realizations"] == 1


def test_an_intermediate_nobody_holds_is_freed_by_a_replay_as_by_the_scheduler(cpu):
    for _ in range(3):
        made = _chain(lt.tensor(np.arange(8.0)))
        dropped, last = weakref.ref(made[10]._node), made[-1]
        del made
        lt.realize(last)
        assert dropped() is None
    assert lt.counters()["replayed_realizations"] == 1


def _fused(x):
    """Big enough to fuse on numba: h = u * 2 is absorbed into exp(h) + 1, and u = x + 1, read by that
    kernel and by a sum, is stored."""
    u = x + 1.0
    h = u * 2.0
    y = (h.exp() + 1.0).sum() + u.sum()
    return h, _chain(y)[-1]


def test_a_fused_member_someone_holds_stays_pending_with_its_inputs_as_in_the_scheduler_run(cpu):
    """...and its input, computed by the realization, keeps its value for it: reading h then runs one
    kernel (h's), not two."""
    states = {}
    for on in (False, True):
        cpu(on)
        repeats.clear()
        for k in range(3):
            a = np.linspace(0, 1, 1 << 15) + k
            h, last = _fused(lt.tensor(a))
            lt.realize(last)
            pending, inputs = h._node.buffer is None, len(h._node.inputs)
            kernels = lt.counters()["kernels"]
            states[on, k] = (pending, inputs, h.numpy().tobytes(), lt.counters()["kernels"] - kernels)
    assert lt.counters()["replayed_realizations"] == 2  # the third of each: the realization, h's read
    assert [states[True, k] for k in range(3)] == [states[False, k] for k in range(3)]
    assert states[True, 2][:2] == (True, 2) and states[True, 2][3] == 1  # pending with u and 2.0: absorbed


@pytest.mark.parametrize("zero, other, sign", [(0.0, -0.0, np.signbit),
                                               (0j, complex(0.0, -0.0), lambda a: np.signbit(a.imag))])
def test_a_zero_attribute_of_the_other_sign_is_another_structure(cpu, zero, other, sign):
    for value in (zero, zero, zero, other):
        x = lt.full((8,), value)  # the value is an attribute of the node
        lt.realize(_chain(x)[-1])
    assert sign(x.numpy()).all()
    assert lt.counters()["replayed_realizations"] == 1


@pytest.mark.parametrize("attrs, other", [
    ({"bounds": (1, 0.0)}, {"bounds": (1, -0.0)}),
    ({"value": np.float32(0.0), "dtype": np.dtype(np.float32)},
     {"value": np.float32(-0.0), "dtype": np.dtype(np.float32)}),
    ({"key": (slice(0, 2), None, 0.0)}, {"key": (slice(0, 2), None, -0.0)}),
])
def test_a_signed_zero_anywhere_in_the_attributes_keeps_its_sign_in_the_signature(attrs, other):
    # equal dicts (0.0 == -0.0) whose plans would differ: a tuple's members and NumPy scalars included
    assert attrs == other and repeats.frozen(attrs) != repeats.frozen(other)


def test_attributes_without_a_float_are_their_items():
    attrs = {"dims": (0, 2, 1), "dtype": np.dtype(np.float32), "keepdims": False, "axis": 0, "name": None}
    assert repeats.frozen(attrs) == tuple(attrs.items())


def test_a_realization_with_an_attribute_that_cannot_be_compared_is_planned_every_time(cpu):
    """An array attribute (here a fill value) cannot key a plan: the realization runs as planned, each
    time, and is not kept, so the same structure with a number there still replays."""
    def filled(value):
        return lt.Tensor._from_op("full", (), {"shape": (8,), "value": value, "dtype": np.dtype(np.float64)},
                                  (8,), lt.float64)
    for k in range(3):
        got = _chain(filled(np.full(8, float(k))))[-1].numpy()
        assert got.tobytes() == _numpy_chain(np.full(8, float(k)))[-1].tobytes()
    assert lt.counters()["replayed_realizations"] == 0
    for _ in range(3):
        lt.realize(_chain(filled(1.5))[-1])
    assert lt.counters()["replayed_realizations"] == 1


def test_a_changed_setting_is_planned_anew_not_replayed(cpu, monkeypatch):
    def kernels():
        before = lt.counters()["kernels"]
        lt.realize(_fused(lt.tensor(np.linspace(0, 1, 1 << 15)))[1])
        return lt.counters()["kernels"] - before

    cpu(False)
    monkeypatch.setenv("LAZYTENSOR_FUSE", "0")
    unfused = kernels()
    cpu(True)
    counts = []
    for fuse in ("1", "1", "1", "0"):
        monkeypatch.setenv("LAZYTENSOR_FUSE", fuse)
        counts.append(kernels())
    assert lt.counters()["replayed_realizations"] == 1
    assert counts[3] == unfused > counts[2]


def test_random_ops_replayed_draw_what_the_scheduler_draws_reseeded_or_not(cpu):
    values = {}
    for on in (False, True):
        cpu(on)
        repeats.clear()
        lt.manual_seed(3)
        values[on] = []
        for k in range(7):
            if k == 4:
                lt.manual_seed(5)  # a new seed: the replay draws under it, as the planned run does
            x = lt.tensor(np.arange(64.0) + k)
            dropped = lt.nn.functional.dropout(_chain(x)[-1], 0.5)
            if k == 6:
                lt.manual_seed(7)  # after the mask was drawn: it keeps the seed it was drawn under
            values[on].append(dropped.numpy().tobytes())
    assert values[True] == values[False]
    assert lt.counters()["replayed_realizations"] >= 3


def test_a_dropout_model_trained_eagerly_replays_with_the_bytes_of_one_that_never_replays(cpu):
    """Dropout, an LR schedule, AdamW: losses, parameters, moments, gradients and the generator's state."""
    cpu(False)
    plain = _jit_train(False)
    cpu(True)
    lt.reset_counters()
    replayed = _jit_train(False)
    assert lt.counters()["replayed_realizations"] >= 4
    _same(plain, replayed)


def test_no_replay_with_LAZYTENSOR_REPLAY_0(cpu):
    cpu(False)
    for _ in range(4):
        lt.realize(_chain(lt.tensor(np.arange(8.0)))[-1])
    assert lt.counters()["replayed_realizations"] == 0


def test_a_profile_records_every_kernel_of_a_repeated_realization(cpu):
    for _ in range(3):
        lt.realize(_chain(lt.tensor(np.arange(8.0)))[-1])
    with lt.profile() as p:
        kernels = lt.counters()["kernels"]
        lt.realize(_chain(lt.tensor(np.arange(8.0)))[-1])
        kernels = lt.counters()["kernels"] - kernels
    assert len(p.kernels) == kernels == 80  # two nodes per link of the chain


def test_the_plans_kept_are_bounded(cpu):
    for n in range(repeats.REPLAYS + 3):
        for _ in range(3):
            lt.realize(_chain(lt.tensor(np.arange(8.0)), 33 + n)[-1])
    assert len(repeats._replays) == repeats.REPLAYS


@pytest.mark.parametrize("generate_after", [host_runner.GENERATE_AFTER, 0])
@settings(max_examples=40, deadline=None)
@given(programs())
def test_random_graphs_replayed_compute_hand_back_and_leave_pending_what_the_scheduler_does(generate_after,
                                                                                          program):
    """For random graphs of elementwise ops, reductions and views over new inputs each run, with every
    other value held: the asked-for value's bytes, and for each held value whether it was computed, the
    inputs it keeps, whether it alone owns its memory (an in-place write may reuse it) and its bytes,
    equal the scheduler's own run's; also with the plan generated as one function from its first replay."""
    shapes, steps, seed = program
    lt.set_device("cpu")
    rng = np.random.default_rng(seed)
    runs = [[rng.uniform(-2, 2, size=s) for s in shapes] for _ in range(3)]
    fn = _program_fn(steps)
    seen = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(repeats, "MIN_NODES", 1)
        mp.setattr(host_runner, "GENERATE_AFTER", generate_after)
        for on in (False, True):
            mp.setenv("LAZYTENSOR_REPLAY", "1" if on else "0")
            repeats.clear()
            for k, arrays in enumerate(runs):
                values = fn(*map(lt.tensor, arrays))
                if not values:
                    return
                held = values[::2]
                last = values[-1]
                del values
                lt.realize(last)
                state = [(t._node.buffer is not None, len(t._node.inputs),
                          t._node.buffer.host_exclusive if t._node.buffer is not None else None) for t in held]
                seen[on, k] = (state, [t.numpy().tobytes() for t in held], last.numpy().tobytes())
    assert [seen[True, k] for k in range(3)] == [seen[False, k] for k in range(3)]


def test_a_small_read_repeated_in_a_loop_is_replayed_with_the_eager_bytes(rng, monkeypatch):
    lt.set_device("cpu")
    repeats.clear()
    a, b, c = (lt.tensor(rng.standard_normal((64, 64)).astype(np.float32)) for _ in range(3))
    lt.reset_counters()
    got = [float((a * b + c).tanh().sum()) for _ in range(5)]  # four nodes, at the default floor
    assert lt.counters()["replayed_realizations"] == 3  # from the third sighting on
    monkeypatch.setenv("LAZYTENSOR_REPLAY", "0")
    assert got == [float((a * b + c).tanh().sum())] * 5


def test_a_python_number_operand_shares_its_leaf_across_ops_and_keeps_a_zeros_sign():
    x = lt.tensor(np.array([1.0, 2.0], np.float32))
    assert (x * 0.5)._node.inputs[1] is (x + 0.5)._node.inputs[1]
    assert (x * 0.5)._node.inputs[1] is not (x * 0.25)._node.inputs[1]
    for _ in range(3):  # +0.0 and -0.0 compare equal: each keeps its own leaf
        assert np.signbit((x * -0.0).numpy()).all()
        assert not np.signbit((x * 0.0).numpy()).any()
    assert np.isnan((x * float("nan")).numpy()).all()
    assert (x * 2)._node.dtype == np.float32 and (x * 2.0)._node.dtype == np.float32


def _generate(tokens, replay, monkeypatch, block=16):
    """Tokens sampled one at a time from a small user-written GPT whose context is already full, as
    PyTorch users write the loop (`model(idx[:, -block:])`, softmax, `multinomial`, `cat`); the tokens and
    lt.counters() after it."""
    monkeypatch.setenv("LAZYTENSOR_REPLAY", "1" if replay else "0")
    repeats.clear()
    lt.manual_seed(0)
    gpt, _, _ = user_gpt.make(lt)
    model = gpt(20, 1, 2, 16, block)
    model.eval()
    idx = lt.randint(0, 20, (1, block))
    lt.reset_counters()
    with lt.no_grad():
        for _ in range(tokens):
            logits, _ = model(idx[:, -block:])
            probs = lt.nn.functional.softmax(logits[:, -1, :], dim=-1)
            idx = lt.cat((idx, lt.multinomial(probs, num_samples=1)), dim=1)
    return idx.tolist(), lt.counters()


def test_a_decode_loop_replays_the_part_of_each_step_whose_shapes_stay_the_same(monkeypatch):
    """The context grows by a token each step (`cat`) and its last positions are sliced off: those nodes
    change from one realization to the next, so they are run apart, and the model's forward pass, the
    same each step, is replayed: with the tokens of a run that never replays."""
    lt.set_device("cpu")
    plain, _ = _generate(12, False, monkeypatch)
    tokens, counters = _generate(12, True, monkeypatch)
    assert tokens == plain
    assert counters["replayed_realizations"] >= 8


def test_a_realization_whose_changing_part_is_most_of_it_is_not_split(cpu):
    """Shapes that change everywhere (a batch of another size) leave nothing the same to replay."""
    for n in range(2, 8):
        x = lt.tensor(np.arange(float(n)))
        assert _chain(x, 4)[-1].numpy().tobytes() == _numpy_chain(np.arange(float(n)), 4)[-1].tobytes()
    assert lt.counters()["replayed_realizations"] == 0
    assert len(repeats._seen) == 6  # each planned whole, a sighting of its own


def test_a_constant_someone_holds_in_a_replayed_realization_keeps_its_value_when_written(cpu):
    """A causal mask built from attributes alone is computed once and shared between replays; the node
    someone holds gets it shared, so writing to it copies and later replays still read the mask."""
    expected_mask = np.tril(np.ones((4, 4)))
    for k in range(5):
        a = np.arange(16.0).reshape(4, 4) + k
        mask = lt.tril(lt.ones(4, 4, dtype=lt.float64))
        y = (lt.tensor(a) * 2.0 + 1.0).sum()
        lt.realize(y, mask)  # nothing reads the mask: a write to it would go in place if it were its own
        assert mask.numpy().tolist() == expected_mask.tolist()
        assert float(y) == float((a * 2.0 + 1.0).sum())
        mask[0, 0] = 7.0
        mask.add_(1.0)
        assert mask.numpy()[0, 0] == 8.0
    assert lt.counters()["replayed_realizations"] >= 3


def test_a_split_whose_rest_stops_repeating_is_forgotten_and_values_stay_right(cpu):
    """The last 8 of a growing vector (the changing part), then a steady chain and a roll: split and
    replayed; once the roll's shift changes at every step too, the split is dropped after a few misses."""
    for i in range(16):
        values = np.arange(16.0 + i)
        shift = 1 if i < 8 else i % 7 + 1
        y = _chain(lt.tensor(values)[-8:], 6)[-1].roll(shift)
        assert y.numpy().tobytes() == np.roll(_numpy_chain(values[-8:], 6)[-1], shift).tobytes()
        if i == 7:
            assert len(repeats._splits) == 1 and lt.counters()["replayed_realizations"] >= 3
    assert len(repeats._splits) == 0


def test_a_recording_no_longer_kept_is_freed_at_once_without_the_cycle_collector(cpu, monkeypatch):
    """Neither the recorder of a capture nor the runner of a dropped recording is in a reference cycle:
    a decode loop capturing and dropping recordings leaves the collector nothing to find."""
    from lazytensor.runtime.replay import capture
    recorders = []

    class Watched(capture.Recorder):
        def __init__(self):
            super().__init__()
            recorders.append(weakref.ref(self))
    monkeypatch.setattr(capture, "Recorder", Watched)
    gc.disable()
    try:
        for k in range(3):  # with a constant (folded: kept by the runner) and a random fill (the executors')
            x = lt.tensor(np.full(8, float(k))) + lt.ones(8, dtype=lt.float64) + lt.rand(8, dtype=lt.float64)
            lt.realize(_chain(x)[-1])
        (replay,) = list(repeats._replays._entries.values())
        runner = weakref.ref(replay.runner)
        del replay
        repeats.clear()
        assert len(recorders) == 1 and recorders[0]() is None
        assert runner() is None
    finally:
        gc.enable()
