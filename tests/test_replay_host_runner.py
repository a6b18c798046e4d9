"""A compiled step's replay on the CPU (runtime/replay/host_runner.py): prepared calls on host arrays, the
random kernels through the executors, constants folded, the values handed back as the executors hand
them back."""

import numpy as np
import pytest
from hypothesis import given, settings

import lazytensor as lt
from lazytensor.kernels import ops
from lazytensor.runtime import executor
from lazytensor.runtime.replay import host_runner, repeats
from test_random_graphs import programs
from jit_steps import (B, C, T, V, TinyAttention, _batches, _classification_step, _classifier_steps,  # noqa: F401
                       _program_fn, _same, _setup, _train, where)


def test_a_cpu_plan_generated_as_one_function_replays_steps_with_the_eager_bytes(monkeypatch):
    """From its GENERATE_AFTER-th replay a host runner runs as one generated function: here from the first."""
    lt.set_device("cpu")
    eager = _train(False)
    monkeypatch.setattr(host_runner, "GENERATE_AFTER", 0)
    lt.set_device("cpu")
    compiled = _train(True)
    assert compiled["fn"].stats()["replayed"] == 6
    _same(eager, compiled)


def test_a_cpu_replay_calls_every_kernel_but_the_random_ones_without_the_executors(monkeypatch):
    """On the CPU a replay calls each kernel from a list prepared once (runtime/replay/host_runner.py); only the
    random kernels, whose streams are each replay's, go through the executors."""
    lt.set_device("cpu")
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    data = _batches(3)
    for x, y in data[:2]:
        fn(lt.tensor(x), lt.tensor(y))
    ran = []
    run_node = executor.run_node
    monkeypatch.setattr(executor, "run_node", lambda node, *rest: ran.append(node.op) or run_node(node, *rest))
    lt.reset_counters()
    fn(lt.tensor(data[2][0]), lt.tensor(data[2][1])).item()
    assert fn.stats()["replayed"] == 1 and ran and set(ran) <= set(ops.names(family="random"))
    assert lt.counters()["prepared_kernels"] == lt.counters()["kernels"] - len(ran)


@pytest.mark.parametrize("generate_after", [host_runner.GENERATE_AFTER, 0])
def test_a_cpu_replay_runs_a_fused_group_reading_a_value_made_in_the_step_without_the_executors(monkeypatch,
                                                                                                generate_after):
    """A scale computed inside the call (a 0-d value) is a fused group's parameter: the replay reads it from
    its slot and launches the group itself, with the eager bytes at every replay."""
    monkeypatch.setattr(host_runner, "GENERATE_AFTER", generate_after)
    lt.set_device("cpu")
    rng = np.random.default_rng(3)
    xs = [rng.normal(size=(64, 256)).astype(np.float32) for _ in range(4)]

    def step(x):
        scale = 1.0 / (x.abs().amax() + 1.0)
        return (x * scale).exp() + 1.0
    eager = [step(lt.tensor(x)).numpy() for x in xs]
    repeats.clear()  # the eager calls' recording would serve lt.jit's first call
    fn = lt.jit(step)
    ran = []
    fused_on_host = executor.fused_on_host
    monkeypatch.setattr(executor, "fused_on_host", lambda group, *rest: ran.append(group.label) or
                        fused_on_host(group, *rest))
    got = [fn(lt.tensor(x)).numpy() for x in xs]
    replayed = fn.stats()["replayed"]
    assert replayed >= 2
    assert len(ran) == len(xs) - replayed  # the calls that ran eagerly; the replays launch it from the runner
    for g, e in zip(got, eager):
        assert g.tobytes() == e.tobytes()


def _causal_scores(x):
    """Scores masked as users write it, the mask made inside the call from constants alone."""
    t = x.shape[-1]
    mask = lt.tril(lt.ones(t, t)) == 0
    return (x * 2.0).masked_fill(mask, float("-inf")).softmax(-1), mask


@pytest.mark.parametrize("generate_after", [host_runner.GENERATE_AFTER, 0])
def test_a_cpu_replay_computes_values_made_only_from_constants_once(monkeypatch, generate_after):
    """A causal mask built inside the call (ones, tril, compare) is the same at every replay: the first
    CPU replay computes it, later replays reuse it and skip its three kernels, with the eager bytes
    (also when the plan runs as a generated function from its first replay on)."""
    monkeypatch.setattr(host_runner, "GENERATE_AFTER", generate_after)
    lt.set_device("cpu")
    fn = lt.jit(lambda x: _causal_scores(x)[0])
    xs = [lt.tensor(np.random.default_rng(i).standard_normal((2, T, T)).astype(np.float32)) for i in range(4)]
    kernels = []
    for x in xs:
        lt.reset_counters()
        out = fn(x).numpy()
        kernels.append(lt.counters()["kernels"])
    assert fn.stats()["replayed"] == 2
    assert kernels[3] == kernels[2] - 3 and kernels[2] == kernels[1]
    assert out.tobytes() == _causal_scores(xs[3])[0].numpy().tobytes()


def test_a_value_made_from_constants_that_a_replay_hands_back_is_made_anew_each_time():
    """A replay never hands back a value it keeps for the next one: writing into the returned mask
    changes neither the mask the next replay returns nor the scores it computes."""
    lt.set_device("cpu")
    fn = lt.jit(_causal_scores)
    x = lt.tensor(np.random.default_rng(0).standard_normal((2, T, T)).astype(np.float32))
    expected = [t.numpy().tobytes() for t in _causal_scores(x)]
    for _ in range(4):
        scores, mask = fn(x)
        assert [scores.numpy().tobytes(), mask.numpy().tobytes()] == expected
        mask[:] = False
    assert fn.stats()["replayed"] == 2


def test_a_cpu_replay_hands_back_results_a_later_in_place_write_may_reuse_as_the_executors_do():
    """Each value a replay hands back says, as the executors' Buffers do, whether it alone owns its
    memory: a fresh result does, a view of another value does not."""
    results = {}
    for plan in (False, True):
        lt.set_device("cpu")
        model, opt, sched, step = _setup()

        def parts(x):
            y = model.head(x) * 2.0
            return y, y[0], y.reshape(-1)
        fn = lt.jit(parts)
        x = lt.tensor(np.random.default_rng(0).standard_normal((B, T, C)).astype(np.float32))
        for _ in range(2 if plan else 1):
            fn(x)
        outs = fn(x)
        assert fn.stats()["replayed"] == int(plan)
        results[plan] = [(t._node.buffer.host_exclusive, t.numpy().tobytes()) for t in outs]
    assert results[True] == results[False] and [e for e, _ in results[True]] == [True, False, False]


@pytest.mark.parametrize("generate_after", [host_runner.GENERATE_AFTER, 0])
@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_programs_replayed_on_the_cpu_hand_back_what_the_executors_handed_back(generate_after, program):
    """Bytes, and whether each value alone owns its memory (an in-place write may reuse it), equal the
    executors' (the eager call's), for random graphs of elementwise ops, reductions and views; the
    replay's inputs are not the capture's, so a replay handing back captured values would fail. Also
    with the host runner generated as one function from its first replay on."""
    shapes, steps, seed = program
    lt.set_device("cpu")
    rng = np.random.default_rng(seed)
    first, second = ([rng.uniform(-2, 2, size=s) for s in shapes] for _ in range(2))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_runner, "GENERATE_AFTER", generate_after)
        fn = lt.jit(_program_fn(steps))
        values = fn(*map(lt.tensor, second))
        if values:
            lt.realize(*values)
        eager = _handed_back(values)
        fn(*map(lt.tensor, first))  # the capture
        replayed = _handed_back(fn(*map(lt.tensor, second)))
    assert fn.stats()["replayed"] == 1 and replayed == eager


def _handed_back(tensors):
    owns = [t._node.buffer.host_exclusive for t in tensors]  # before .numpy(), which may hand out a view
    return owns, [t.numpy().tobytes() for t in tensors]
