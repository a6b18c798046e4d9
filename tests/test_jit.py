"""lt.jit: a captured training step replays byte-identically to the eager step (dropout, clipping, AdamW
with a schedule), moves what the eager step moves, retraces when a guard changes, and refuses what it
cannot replay (on the suite pass's device, and on the virtual device and the emulated CUDA driver). The
runners a replay uses: tests/test_replay_host_runner.py, tests/test_replay_device_runner.py."""
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.runtime.replay import capture
from jit_steps import (B, C, T, V, TinyAttention, _batches, _classification_step, _classifier_steps,  # noqa: F401
                       _same, _setup, _train, where)


def test_replayed_steps_equal_eager_steps_bit_for_bit_with_dropout_and_a_schedule(where):
    eager, compiled = _train(False), _train(True)
    assert compiled["fn"].stats()["replayed"] == 6  # one warm-up call, one capture, then replays
    _same(eager, compiled)


@pytest.mark.slow
def test_fifty_replayed_steps_equal_fifty_eager_steps_bit_for_bit_with_dropout(where):
    _same(_train(False, steps=50), _train(True, steps=50))


def test_a_replay_builds_no_graph_only_the_values_it_hands_back():
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    data = _batches(4)
    for x, y in data[:2]:
        fn(lt.tensor(x), lt.tensor(y))
    x, y = lt.tensor(data[2][0]), lt.tensor(data[2][1])
    first = lt.tensor(0.0)._node.id
    lt.reset_counters()
    loss = fn(x, y)
    created = lt.tensor(0.0)._node.id - first - 1
    params = list(model.parameters())
    # one leaf each: the loss, the new parameters, their two moments, their gradients
    assert created == 1 + 3 * len(params) + len(params)
    assert lt.counters()["realizations"] == 1 and loss.grad_fn is None
    assert fn.stats()["replayed"] == 1


def test_a_replayed_step_makes_the_copies_the_eager_step_makes(virtual):
    logs = {}
    for compiled in (False, True):
        virtual()
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for i, (x, y) in enumerate(_batches(4)):
            x, y = lt.tensor(x).to("virtual"), lt.tensor(y).to("virtual")
            lt.clear_transfer_log()
            loss = fn(x, y)
            loss.item()
            if i == 3:
                logs[compiled] = [(r.direction, r.nbytes, r.reason) for r in lt.transfer_log()]
    assert fn.stats()["replayed"] == 2
    assert logs[True] == logs[False] and ("d2h", 4, "host-read:item") in logs[True]


def test_a_new_input_shape_is_captured_anew_and_each_shape_replays_its_own():
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    short = _batches(4, seed=2, block=5)
    for (x, y), (xs, ys) in zip(_batches(4), short):
        fn(lt.tensor(x), lt.tensor(y))
        fn(lt.tensor(xs), lt.tensor(ys))
    assert fn.stats() == {"eager": 2, "captured": 2, "replayed": 4, "refused": 0, "cached": 2}
    model2, opt2, sched2, step2 = _setup()
    for (x, y), (xs, ys) in zip(_batches(4), short):
        step2(lt.tensor(x), lt.tensor(y))
        step2(lt.tensor(xs), lt.tensor(ys))
    assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(model.parameters(), model2.parameters()))


def test_switching_a_module_to_eval_mode_never_replays_the_training_capture():
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    data = _batches(3)
    for x, y in data:
        fn(lt.tensor(x), lt.tensor(y))
    model.eval()  # dropout off: the captured training step (dropout on) must not run
    x, y = lt.tensor(data[0][0]), lt.tensor(data[0][1])
    model2, opt2, sched2, step2 = _setup()
    for xx, yy in data:
        step2(lt.tensor(xx), lt.tensor(yy))
    model2.eval()
    assert fn(x, y).item() == step2(x, y).item()
    assert fn.stats()["replayed"] == 1 and fn.stats()["captured"] == 2


def test_a_python_argument_is_part_of_the_guard():
    w = lt.randn(64, requires_grad=False)

    @lt.jit
    def scaled(x, factor):
        return (x * factor + w).sum()
    x = lt.ones(64)
    results = [scaled(x, f).item() for f in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0)]
    assert results == [(x * f + w).sum().item() for f in (2.0, 2.0, 2.0, 3.0, 3.0, 3.0)]
    assert scaled.stats()["replayed"] == 2


def test_a_host_read_inside_the_function_warns_once_and_runs_eagerly():
    model, opt, sched, step = _setup()
    seen = []

    @lt.jit
    def logged(x, y):
        loss = step(x, y)
        seen.append(loss.item())  # steers nothing, but a replay could not repeat it
        return loss
    data = _batches(4)
    with pytest.warns(lt.JitWarning, match=r"host read \(host-read:item\)"):
        for x, y in data[:2]:
            logged(lt.tensor(x), lt.tensor(y))
            sched.step()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, y in data[2:]:
            logged(lt.tensor(x), lt.tensor(y))
            sched.step()
    assert len(seen) == 4 and logged.stats()["refused"] == 1 and logged.stats()["replayed"] == 0
    assert seen == _train(False, batches=data)["losses"]


def test_keeping_a_new_tensor_outside_the_return_value_refuses_the_capture():
    model, opt, sched, step = _setup()
    kept = {}

    @lt.jit
    def leaky(x, y):
        kept["logits"] = model(x).realize()
        return step(x, y)
    with pytest.warns(lt.JitWarning, match=r"keeps \d+ new tensor\(s\) outside its return value"):
        for x, y in _batches(3):
            leaky(lt.tensor(x), lt.tensor(y))
    assert leaky.stats()["replayed"] == 0


def test_an_exception_while_capturing_leaves_the_engine_usable():
    model, opt, sched, step = _setup()
    calls = []

    @lt.jit
    def flaky(x, y):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return step(x, y)
    data = _batches(6)
    flaky(lt.tensor(data[0][0]), lt.tensor(data[0][1]))
    sched.step()
    with pytest.raises(RuntimeError, match="boom"):
        flaky(lt.tensor(data[1][0]), lt.tensor(data[1][1]))
    losses = []
    for x, y in data[1:]:
        losses.append(flaky(lt.tensor(x), lt.tensor(y)).item())
        sched.step()
    assert flaky.stats()["replayed"] >= 3
    eager = _train(False, batches=data)
    assert [eager["losses"][0]] + losses == eager["losses"]


def test_a_failing_replay_changes_no_state():
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    for x, y in _batches(3):
        fn(lt.tensor(x), lt.tensor(y))
    before = ([p.numpy().copy() for p in model.parameters()], lt.get_rng_state(),
              [s["step"] for s in opt.state_dict()["state"].values()])
    bad = np.full((B, T), V + 5)  # out of range for the embedding: its kernel raises
    with pytest.raises(IndexError):
        fn(lt.tensor(bad), lt.tensor(bad))
    after = ([p.numpy().copy() for p in model.parameters()], lt.get_rng_state(),
             [s["step"] for s in opt.state_dict()["state"].values()])
    assert all(np.array_equal(a, b) for a, b in zip(before[0], after[0])) and before[1:] == after[1:]


@pytest.mark.parametrize("device", ["cpu", "virtual"])
def test_a_failing_replay_leaves_the_grads_zero_grad_dropped_as_a_failing_eager_step_does(virtual, device):
    """On a device whose replays write the new .grad's over the old ones (a CUDA device runner) the old ones
    stay until then, so there a failing replay leaves them as they were."""
    bad = np.full((B, T), V + 5)  # out of range for the embedding: its kernel raises
    grads = {}
    for compiled in (False, True):
        if device == "virtual":
            virtual(offload="always")
        else:
            lt.set_device("cpu")
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for x, y in _batches(3):
            fn(lt.tensor(x).to(device), lt.tensor(y).to(device))
        with pytest.raises(IndexError):
            fn(lt.tensor(bad).to(device), lt.tensor(bad).to(device))
        grads[compiled] = [p.grad for p in model.parameters()]
    assert fn.stats()["replayed"] == 2  # the third batch's call and the failing one
    assert grads[True] == grads[False] == [None] * len(grads[False])


def test_a_replay_frees_the_grads_zero_grad_drops_before_its_kernels_run(virtual, monkeypatch):
    """As the eager step frees them at zero_grad: the replay does not hold the old and the new ones."""
    virtual(offload="always")
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    batches = [(lt.tensor(x).to("virtual"), lt.tensor(y).to("virtual")) for x, y in _batches(4)]
    for x, y in batches[:3]:
        fn(x, y)
    old = [weakref.ref(p.grad._node.buffer) for p in model.parameters()]
    alive_at_start, run = [], capture.Program.run

    def counting_run(self, *args, **kwargs):
        alive_at_start.append(sum(r() is not None for r in old))
        return run(self, *args, **kwargs)
    monkeypatch.setattr(capture.Program, "run", counting_run)
    fn(*batches[3])
    assert fn.stats()["replayed"] == 2 and alive_at_start == [0]
    assert all(p.grad is not None for p in model.parameters())


def test_replacing_the_optimizer_state_is_seen_and_recaptured():
    data = _batches(6)
    results = {}
    for compiled in (False, True):
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for x, y in data[:3]:
            fn(lt.tensor(x), lt.tensor(y))
        opt.load_state_dict(opt.state_dict())  # new state tensors: the capture's are gone
        results[compiled] = [fn(lt.tensor(x), lt.tensor(y)).item() for x, y in data[3:]]
    assert results[True] == results[False]


def test_sgd_with_momentum_and_a_schedule_replays_as_it_runs_eagerly():
    def run(compiled):
        return _classifier_steps(compiled, lambda ps: lt.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=1e-3),
                                 7, lambda opt: lt.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5))
    (a, pa, _), (b, pb, _) = run(False), run(True)
    assert a == b and all(np.array_equal(x, y) for x, y in zip(pa, pb))


def test_numpy_arguments_are_refused_with_a_hint():
    fn = lt.jit(lambda x: x * 2)
    with pytest.raises(TypeError, match=r"lt.tensor\(array\)"):
        fn(np.ones(3))


def test_the_cache_of_captures_is_bounded():
    fn = lt.jit(lambda x: (x * 2).sum())
    for n in range(lt.compiled.MAX_CACHED + 3):
        for _ in range(3):
            assert fn(lt.ones(n + 1)).item() == 2 * (n + 1)
    assert fn.stats()["cached"] == lt.compiled.MAX_CACHED


def test_a_compiled_micro_step_accumulates_into_the_current_grads():
    def run(compiled):
        model, opt, sched, _ = _setup()

        def micro(x, y):  # no zero_grad: backward adds to the .grad of the previous micro-batch
            loss = F.cross_entropy(model(x).view(-1, V), y.view(-1)) / 2
            loss.backward()
            if not compiled:  # a compiled call computes what it hands back at its end: so does this one
                lt.realize(loss, *(p.grad for p in model.parameters()))
            return loss
        fn = lt.jit(micro) if compiled else micro
        data = _batches(8)
        for i in range(0, 8, 2):
            opt.zero_grad()
            for x, y in data[i:i + 2]:
                fn(lt.tensor(x), lt.tensor(y))
            opt.step()
        return [p.numpy().copy() for p in model.parameters()], fn
    (eager, _), (compiled, fn) = run(False), run(True)
    assert fn.stats()["replayed"] >= 4
    assert all(np.array_equal(a, b) for a, b in zip(eager, compiled))


@settings(max_examples=6, deadline=None)
@given(budget_kb=st.integers(min_value=48, max_value=2048))
def test_replays_under_any_memory_budget_compute_what_eager_steps_compute(budget_kb):
    """Random budgets from far below one step's working set (every step evicts) to above it."""
    results = []
    for compiled in (False, True):
        lt.set_device("virtual", memory="64MB", offload="always")
        lt.set_memory_budget(budget_kb * 1024)
        results.append(_train(compiled, steps=5))
    _same(*results)  # evictions differ (a replay holds fewer values alive); the values may not


def test_another_thread_reading_values_during_captures_does_not_switch_the_function_off():
    import threading
    w = lt.tensor(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))

    @lt.jit
    def step(x):
        return ((x @ w).tanh() * 2).sum(dim=0)
    x = lt.ones(4, 16)
    expected = step.eager(x).tolist()
    stop = threading.Event()

    def reader():  # a user's monitoring thread: host reads in a loop
        y = lt.ones(8, 8)
        while not stop.is_set():
            float((y * 3).sum())
    thread = threading.Thread(target=reader)
    thread.start()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", lt.JitWarning)
            results = [step(x).tolist() for _ in range(12)]
    finally:
        stop.set()
        thread.join()
    assert all(r == expected for r in results)
    assert step.stats()["replayed"] > 0 and step.stats()["refused"] == 0


def test_a_capture_refused_while_another_thread_computed_is_tried_again_at_the_next_call():
    import threading
    calls = []

    @lt.jit
    def step(x):
        calls.append(1)
        worker = threading.Thread(target=lambda: float(lt.ones(3).sum()))  # another thread computes meanwhile
        worker.start()
        worker.join()
        y = x * 2
        if len(calls) == 2:  # the first capture (after one eager warm-up call) reads the host
            float(y.sum())
        return y + 1
    x = lt.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", lt.JitWarning)  # a retried refusal says nothing
        values = [step(x).tolist() for _ in range(6)]
    assert values == [[3.0, 3.0, 3.0]] * 6
    stats = step.stats()
    assert stats["refused"] == 1 and stats["captured"] == 2 and stats["replayed"] >= 3


def test_backward_from_a_replayed_forwards_result_says_a_replay_keeps_no_history():
    model = lt.nn.Linear(3, 2)
    forward = lt.jit(lambda x: model(x).sum())
    grads = []
    for _ in range(2):  # the warm-up and the capture run eagerly: their results have history
        forward(lt.ones(4, 3)).backward()
        grads.append(model.weight.grad.tolist())
        model.weight.grad = None
    assert grads[0] == grads[1]
    replayed = forward(lt.ones(4, 3))
    assert replayed.requires_grad and forward.stats()["replayed"] == 1
    with pytest.raises(RuntimeError, match="a replay keeps no gradient history"):
        replayed.backward()


@pytest.mark.parametrize("read_through", ["first", "second"])
def test_a_replay_reads_the_new_value_of_a_tensor_that_shared_its_value_when_captured(read_through):
    """A parameter loaded from a checkpoint shares its value with the loaded tensor until the optimizer
    replaces it; a capture made meanwhile cannot tell which of the two the call read, so it stands only
    while they still share (nanoGPT's train.py evaluated a resumed model with stale weights before)."""
    a = lt.ones(3)
    b = a.detach()
    w, other = (a, b) if read_through == "first" else (b, a)
    f = lt.jit(lambda x: (x * w).sum())
    x = lt.ones(3)
    for _ in range(3):
        assert f(x).item() == 3.0
    with lt.no_grad():
        w.mul_(2.0)  # w takes a new value; `other` keeps the old one
    assert w._node.buffer is not other._node.buffer
    assert f(x).item() == 6.0 and f(x).item() == 6.0
    assert f.stats()["replayed"] >= 1
