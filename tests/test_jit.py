"""lt.jit: a captured training step replays byte-identically to the eager step (dropout, clipping, AdamW
with a schedule), moves what the eager step moves, retraces when a guard changes, and refuses what it
cannot replay (on the suite pass's device, and on the virtual device and the emulated CUDA driver)."""
import warnings
import weakref

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor import nn
from lazytensor.kernels import ops
from lazytensor.runtime import capture, host_plan, launch_plan, scheduler
from test_random_graphs import UNARY, BINARY, programs

V, T, B, C = 17, 8, 4, 16


class TinyAttention(nn.Module):
    """Attention written by hand, as PyTorch users write it: tril mask, masked_fill, softmax, dropout."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.qkv = nn.Linear(C, 3 * C)
        self.ln = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.drop = nn.Dropout(0.2)
        self.register_buffer("mask", lt.tril(lt.ones(T, T)).reshape(1, T, T))

    def forward(self, idx):
        x = self.emb(idx)
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / C ** 0.5)
        att = att.masked_fill(self.mask[:, :idx.shape[1], :idx.shape[1]] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        return self.head(x + att @ v)


def _setup(seed=0):
    lt.manual_seed(seed)
    model = TinyAttention()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = lt.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                         lr=3e-3)
    sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, 20)

    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss
    return model, opt, sched, step


def _batches(n, seed=1, batch=B, block=T):
    rs = np.random.default_rng(seed)
    return [(rs.integers(0, V, (batch, block)), rs.integers(0, V, (batch, block))) for _ in range(n)]


def _train(compiled, steps=8, batches=None, read_every=1):
    model, opt, sched, step = _setup()
    fn = lt.jit(step) if compiled else step
    losses = []
    for i, (x, y) in enumerate(batches or _batches(steps)):
        loss = fn(lt.tensor(x), lt.tensor(y))
        sched.step()
        if i % read_every == 0:
            losses.append(loss.item())
    state = opt.state_dict()["state"]
    return {"losses": losses, "params": [p.numpy().copy() for p in model.parameters()],
            "moments": [state[i][k].numpy().copy() for i in state for k in ("exp_avg", "exp_avg_sq")],
            "steps": [state[i]["step"] for i in state], "rng": lt.get_rng_state(),
            "grads": [p.grad.numpy().copy() for p in model.parameters()], "fn": fn}


@pytest.fixture(params=["suite device", "virtual device", "emulated CUDA"])
def where(request, virtual, cuda_device):
    if request.param == "virtual device":
        virtual()
    elif request.param == "emulated CUDA":
        cuda_device(offload="always")
    return request.param


def _same(eager, compiled):
    assert compiled["losses"] == eager["losses"]
    for key in ("params", "moments", "grads"):
        assert all(np.array_equal(a, b) for a, b in zip(eager[key], compiled[key])), key
    assert compiled["steps"] == eager["steps"] and compiled["rng"] == eager["rng"]


def test_replayed_steps_equal_eager_steps_bit_for_bit_with_dropout_and_a_schedule(where):
    eager, compiled = _train(False), _train(True)
    assert compiled["fn"].stats()["replayed"] == 6  # one warm-up call, one capture, then replays
    _same(eager, compiled)


def test_a_cpu_plan_generated_as_one_function_replays_steps_with_the_eager_bytes(monkeypatch):
    """From its GENERATE_AFTER-th replay a host plan runs as one generated function: here from the first."""
    lt.set_device("cpu")
    eager = _train(False)
    monkeypatch.setattr(host_plan, "GENERATE_AFTER", 0)
    lt.set_device("cpu")
    compiled = _train(True)
    assert compiled["fn"].stats()["replayed"] == 6
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


def test_a_cpu_replay_calls_every_kernel_but_the_random_ones_without_the_executors(monkeypatch):
    """On the CPU a replay calls each kernel from a list prepared once (runtime/host_plan.py); only the
    random kernels, whose streams are each replay's, go through the scheduler's executors."""
    lt.set_device("cpu")
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    data = _batches(3)
    for x, y in data[:2]:
        fn(lt.tensor(x), lt.tensor(y))
    ran = []
    run_node = scheduler.run_node
    monkeypatch.setattr(scheduler, "run_node", lambda node, *rest: ran.append(node.op) or run_node(node, *rest))
    lt.reset_counters()
    fn(lt.tensor(data[2][0]), lt.tensor(data[2][1])).item()
    assert fn.stats()["replayed"] == 1 and ran and set(ran) <= set(ops.names(family="random"))
    assert lt.counters()["prepared_kernels"] == lt.counters()["kernels"] - len(ran)


def _causal_scores(x):
    """Scores masked as users write it, the mask made inside the call from constants alone."""
    t = x.shape[-1]
    mask = lt.tril(lt.ones(t, t)) == 0
    return (x * 2.0).masked_fill(mask, float("-inf")).softmax(-1), mask


@pytest.mark.parametrize("generate_after", [host_plan.GENERATE_AFTER, 0])
def test_a_cpu_replay_computes_values_made_only_from_constants_once(monkeypatch, generate_after):
    """A causal mask built inside the call (ones, tril, compare) is the same at every replay: the first
    CPU replay computes it, later replays reuse it and skip its three kernels, with the eager bytes
    (also when the plan runs as a generated function from its first replay on)."""
    monkeypatch.setattr(host_plan, "GENERATE_AFTER", generate_after)
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


def _program_fn(steps):
    """test_random_graphs' program as a function of its input tensors, returning every value it made
    (views among them: `.mT` of a square operand)."""
    def fn(*inputs):
        pool = list(inputs)
        for step in steps:
            t = pool[-1]
            if step[0] == "unary":
                pool.append(UNARY[step[1]][0](t))
            elif step[0] == "binary":
                pool.append(BINARY[step[1]][0](t, pool[step[2] % len(pool)]))
            elif t.ndim and not (step[1] == "amax" and t.shape[step[2] % t.ndim] == 0):
                pool.append(getattr(lt, step[1])(t, dim=step[2] % t.ndim, keepdim=True))
        return tuple(pool[len(inputs):])
    return fn


@pytest.mark.parametrize("generate_after", [host_plan.GENERATE_AFTER, 0])
@settings(max_examples=30, deadline=None)
@given(programs())
def test_random_programs_replayed_on_the_cpu_hand_back_what_the_executors_handed_back(generate_after, program):
    """Bytes, and whether each value alone owns its memory (an in-place write may reuse it), equal the
    executors' (the eager call's), for random graphs of elementwise ops, reductions and views; the
    replay's inputs are not the capture's, so a replay handing back captured values would fail. Also
    with the host plan generated as one function from its first replay on."""
    shapes, steps, seed = program
    lt.set_device("cpu")
    rng = np.random.default_rng(seed)
    first, second = ([rng.uniform(-2, 2, size=s) for s in shapes] for _ in range(2))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(host_plan, "GENERATE_AFTER", generate_after)
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
    """On a device whose replays write the new .grad's over the old ones (a CUDA launch plan) the old ones
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


def _classification_step(model, opt):
    """One training step as users write it: zero the grads, the cross-entropy loss, backward, the
    optimizer's step; returns the loss."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _classifier_steps(compiled, make_opt, steps, make_sched=None):
    """`steps` steps of a small classifier (Linear, ReLU, Linear, cross entropy) trained by the optimizer
    `make_opt(parameters)` builds, eager or compiled: the losses, the final parameters, and the kernels
    of the last step."""
    lt.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched is not None else None
    step = _classification_step(model, opt)
    fn = lt.jit(step) if compiled else step
    rs = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        lt.reset_counters()
        out.append(fn(lt.tensor(rs.standard_normal((16, 8)).astype(np.float32)),
                      lt.tensor(rs.integers(0, 3, 16))).item())
        if sched is not None:
            sched.step()
    return out, [p.numpy() for p in model.parameters()], lt.counters()["kernels"]


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


def _peaks(start, device):
    """Device memory peak of the 4th step (a replay when compiled), eager and compiled, and the last fn."""
    peaks = {}
    for compiled in (False, True):
        memory = start(offload="always").memory
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for i, (x, y) in enumerate(_batches(4)):
            x, y = lt.tensor(x).to(device), lt.tensor(y).to(device)
            with memory.watch_peak() as peak:
                fn(x, y).item()
            peaks[compiled] = peak[0]
    return peaks, fn


def test_a_replayed_step_peaks_no_higher_in_device_memory_than_an_eager_step(virtual):
    peaks, fn = _peaks(virtual, "virtual")
    assert fn.stats()["replayed"] == 2
    assert peaks[True] <= peaks[False], peaks


def test_a_replay_on_cuda_launches_every_kernel_from_prebuilt_arguments(cuda_device):
    cuda_device(offload="always")
    eager = _train(False)
    cuda_device(offload="always")
    compiled = _train(True)
    _same(eager, compiled)
    fn = compiled["fn"]
    x, y = _batches(9)[8]
    lt.reset_counters()
    fn(lt.tensor(x), lt.tensor(y))  # one more replay, counted alone
    counts = lt.counters()
    # Every kernel of a replay is a prepared launch: dropout's random mask, the targets' reshape (which
    # keeps a host copy), and the index kernels (embedding rows, their gradient with its destinations
    # grouped on the host, the loss's target gather and scatter).
    assert fn.stats()["replayed"] == 7
    assert counts["kernels"] == counts["prepared_kernels"] > 0, counts


def test_a_planned_replay_mixing_host_and_device_kernels_computes_what_eager_steps_compute(cuda_device):
    # Under the placement policy small kernels run on the host, and their results (0-d values among
    # them: scalars of device launches) are patched into the prepared launches at each replay.
    batches = _batches(6, batch=128)  # big enough for the policy to put most kernels on the device
    cuda_device(offload="policy")
    eager = _train(False, batches=batches)
    cuda_device(offload="policy")
    compiled = _train(True, batches=batches)
    _same(eager, compiled)
    assert lt.counters()["prepared_kernels"] > 0


def test_a_replay_on_cuda_makes_the_copies_the_eager_step_makes(cuda_device):
    logs = {}
    for compiled in (False, True):
        cuda_device(offload="always")
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for i, (x, y) in enumerate(_batches(4)):
            x, y = lt.tensor(x), lt.tensor(y)  # uploaded by the step: the batch is the only copy up
            lt.clear_transfer_log()
            fn(x, y).item()
            if i == 3:
                logs[compiled] = [(r.direction, r.nbytes, r.reason) for r in lt.transfer_log()]
    assert lt.counters()["prepared_kernels"] > 0
    assert logs[True] == logs[False] and ("d2h", 4, "host-read:item") in logs[True]
    # the batch is the only value that goes up (the scatters' index groupings go up too, logged as such)
    assert [r for r in logs[True] if r[2] == "operand-upload"] == [("h2d", B * T * 8, "operand-upload")] * 2
    assert {r[2] for r in logs[True]} == {"operand-upload", "index-grouping", "status-read", "host-read:item"}


def test_a_planned_replay_peaks_no_higher_in_device_memory_than_an_eager_step(cuda_device):
    peaks, _ = _peaks(cuda_device, "cuda")
    assert lt.counters()["prepared_kernels"] > 0
    assert peaks[True] <= peaks[False], peaks


def _state_tensors(model, opt):
    """Each parameter, its two moments and its .grad."""
    state = [opt.state[id(p)] for p in model.parameters()]
    return list(model.parameters()) + [st[k] for st in state for k in ("exp_avg", "exp_avg_sq")] + \
        [p.grad for p in model.parameters()]


def _state_blocks(model, opt):
    """Weak references to the Buffers holding the state now (a strong one would make them someone
    else's), and their device blocks' addresses."""
    tensors = _state_tensors(model, opt)
    return [weakref.ref(t._node.buffer) for t in tensors], [t._node.buffer.device.ptr for t in tensors]


def _four_steps(compiled):
    """On the CUDA device the fixture started: the model, its optimizer, the step (compiled or not) after
    four calls, and the fifth batch."""
    model, opt, sched, step = _setup()
    fn = lt.jit(step) if compiled else step
    data = _batches(5)
    for x, y in data[:4]:
        fn(lt.tensor(x), lt.tensor(y)).item()
    return model, opt, fn, (lt.tensor(data[4][0]), lt.tensor(data[4][1]))


def test_a_planned_replay_writes_parameters_and_moments_over_their_own_device_blocks(cuda_device):
    """The .grad's zero_grad dropped are dropped when the replay starts, as the eager step drops them
    (their blocks go back to the budget before the step's peak), and the new ones get blocks of their own."""
    cuda_device(offload="always")
    model, opt, fn, batch = _four_steps(True)
    n = len(list(model.parameters()))
    refs, blocks = _state_blocks(model, opt)
    old_grads = [weakref.ref(p.grad._node.buffer) for p in model.parameters()]
    lt.reset_counters()
    fn(*batch).item()
    refs_after, blocks_after = _state_blocks(model, opt)
    assert all(a() is b() is not None for a, b in zip(refs[:3 * n], refs_after))
    assert blocks_after[:3 * n] == blocks[:3 * n]
    assert all(r() is None for r in old_grads)
    assert lt.counters()["updated_in_place"] == 3 * n


def _kernels_of_fifth_step(cuda_device, compiled, hold=None):
    """The fifth step's kernel count and state values on the emulated driver; `hold(model, opt)` picks a
    tensor whose value someone else keeps (detached) across that step."""
    cuda_device(offload="always")
    model, opt, fn, batch = _four_steps(compiled)
    kept = hold(model, opt).detach() if hold is not None else None
    lt.reset_counters()
    fn(*batch).item()
    return lt.counters(), [t.numpy().copy() for t in _state_tensors(model, opt)], kept


def test_a_replay_writing_its_adamw_state_in_place_runs_each_update_as_one_launch(cuda_device):
    """Eagerly (and in a replay that cannot overwrite p, m and v) an AdamW update is one kernel
    stacking p', m', v' and three copies unstacking them; a replay whose p, m, v are nobody else's writes
    p', m', v' over them with one kernel and runs no copies: the same bytes. (The replay also
    computes the clipped .grad's it hands back, one multiply each, which the eager step leaves pending:
    its AdamW kernels scale the gradients themselves.)"""
    eager, eager_state, _ = _kernels_of_fifth_step(cuda_device, False)
    counts, state, _ = _kernels_of_fifth_step(cuda_device, True)
    n_params = len(state) // 4
    assert all(np.array_equal(a, b) for a, b in zip(eager_state, state))
    assert counts["updated_in_place"] == 3 * n_params  # the .grad's zero_grad dropped get new blocks
    assert counts["kernels"] == counts["prepared_kernels"] == eager["kernels"] - 3 * n_params + n_params


def test_a_replay_updating_adamw_state_in_place_never_makes_the_stacked_results(cuda_device, monkeypatch):
    """Where parameters dominate a step's memory, a replay that cannot write p, m, v in place holds the
    old state and the stacked (p', m', v') results at once; an in-place replay holds the state once and
    no stacked result, so its device peak is lower by more than two copies of the parameters (and no
    higher than the eager step's)."""
    def peak_of_fourth_step(compiled):
        memory = cuda_device(offload="always").memory
        lt.manual_seed(0)
        model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
        opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
        step = _classification_step(model, opt)
        fn = lt.jit(step) if compiled else step
        rs = np.random.default_rng(0)
        for _ in range(4):
            x = lt.tensor(rs.standard_normal((2, 128)).astype(np.float32)).to("cuda")
            with memory.watch_peak() as peak:
                fn(x, lt.tensor(rs.integers(0, 4, 2)).to("cuda")).item()
        return peak[0], sum(p.numpy().nbytes for p in model.parameters()), lt.counters()["updated_in_place"]
    eager, params, _ = peak_of_fourth_step(False)
    in_place, _, updated = peak_of_fourth_step(True)
    with monkeypatch.context() as m:
        m.setattr(launch_plan.LaunchPlan, "_writes_in_place", lambda self, slots, donors: False)
        stacked, _, _ = peak_of_fourth_step(True)
    assert updated > 0
    assert in_place <= stacked - 2 * params and in_place <= eager, (in_place, stacked, eager, params)


def test_a_held_moment_keeps_every_adamw_update_stacked_and_unstacked_by_copies(cuda_device):
    def a_moment(model, opt):
        return opt.state[id(next(model.parameters()))]["exp_avg"]
    eager, eager_state, _ = _kernels_of_fifth_step(cuda_device, False, a_moment)
    counts, state, kept = _kernels_of_fifth_step(cuda_device, True, a_moment)
    assert all(np.array_equal(a, b) for a, b in zip(eager_state, state))
    assert not np.array_equal(kept.numpy(), state[len(state) // 4])  # the held moment kept its old value
    assert counts["updated_in_place"] == 3 * (len(state) // 4) - 1  # p, m, v but the moment held
    # and the clipped .grad's it hands back, which the eager step leaves pending (one multiply each)
    assert counts["kernels"] == counts["prepared_kernels"] == eager["kernels"] + len(state) // 4


def test_adam_whose_decay_reads_the_parameter_before_its_update_replays_in_place_as_it_runs_eagerly(
        cuda_device):
    """Adam's L2 decay (g + wd * p) reads the old parameter in a kernel of its own before the update
    kernel writes the new one over it: the in-place replay computes the eager bytes."""
    def run(compiled):
        cuda_device(offload="always")
        return _classifier_steps(compiled, lambda ps: lt.optim.Adam(ps, lr=0.01, weight_decay=0.1), 6)
    (a, pa, eager_kernels), (b, pb, kernels) = run(False), run(True)
    assert a == b and all(np.array_equal(x, y) for x, y in zip(pa, pb))
    assert kernels == eager_kernels - 3 * len(pa)  # the last replay: four updates in place


def test_a_planned_replay_never_overwrites_a_value_someone_else_holds(cuda_device):
    results = {}
    for compiled in (False, True):
        cuda_device(offload="always")
        model, opt, fn, batch = _four_steps(compiled)
        first, last = list(model.parameters())[0], list(model.parameters())[-1]
        held = [first.detach(), last.grad]  # a second handle on a parameter's value, a .grad kept
        snapshots = [t.numpy().copy() for t in held]
        lt.reset_counters()
        fn(*batch).item()
        assert all(np.array_equal(t.numpy(), s) for t, s in zip(held, snapshots))
        assert not np.array_equal(first.numpy(), snapshots[0])
        results[compiled] = ([p.numpy().copy() for p in model.parameters()], lt.counters()["updated_in_place"])
    assert all(np.array_equal(a, b) for a, b in zip(results[False][0], results[True][0]))
    # the held parameter gets a new block, every other parameter and moment is updated in place (the
    # .grad's zero_grad dropped, the one held among them, get new blocks)
    assert results[True][1] == 3 * len(results[True][0]) - 1


@settings(max_examples=5, deadline=None)
@given(held=st.sets(st.integers(min_value=0, max_value=4 * 6 - 1), max_size=8))  # 6 parameters
def test_replays_compute_what_eager_steps_compute_whichever_state_values_someone_holds(held):
    """Any parameters, moments and .grad's held elsewhere (a detached handle, a host array) keep their
    values; the other parameters and moments are updated in place (the .grad's zero_grad dropped get
    new blocks); every value equals the eager step's, byte for byte."""
    results = []
    for compiled in (False, True):
        lt.set_device("cuda", driver="emulated", memory="64MB", offload="always")
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        for i, (x, y) in enumerate(_batches(6)):
            if i == 4:
                kept = [(t.detach(), t.numpy().copy()) for j, t in enumerate(_state_tensors(model, opt))
                        if j in held]
                lt.reset_counters()
            fn(lt.tensor(x), lt.tensor(y)).item()
            sched.step()
        assert all(np.array_equal(t.numpy(), value) for t, value in kept)
        results.append(([t.numpy().copy() for t in _state_tensors(model, opt)], lt.counters()["updated_in_place"]))
    assert all(np.array_equal(a, b) for a, b in zip(results[0][0], results[1][0]))
    n = 3 * len(results[1][0]) // 4  # parameters and moments come first, the .grad's last
    # the last two replays: only the held parameters and moments get new blocks (in the first: the
    # second writes over the new values)
    assert results[1][1] == 2 * n - len([j for j in held if j < n])


def test_a_planned_replay_drops_the_stale_host_copy_of_a_value_it_overwrites(cuda_device):
    results = {}
    for compiled in (False, True):
        cuda_device(offload="always")
        model, opt, fn, batch = _four_steps(compiled)
        p = list(model.parameters())[0]
        old = p.numpy()  # the value now has a host copy too (it stays the caller's, unchanged)
        kept = old.copy()
        lt.reset_counters()
        fn(*batch).item()
        assert np.array_equal(old, kept)
        results[compiled] = (p.numpy().copy(), lt.counters()["updated_in_place"])
    assert results[True][1] > 0 and np.array_equal(results[True][0], results[False][0])
    assert not np.array_equal(results[True][0], kept)


def _bad_target_run(compiled, gather_by_hand):
    """Four steps, then one with targets out of range: where the IndexError came ("call" or "read"),
    whether the parameters stayed as they were, the parameters, and the values the fourth step (a
    planned replay when compiled) updated in place."""
    model, opt, sched, step = _setup()
    if gather_by_hand:  # the loss's gather indexed by the targets as given: its bounds checked on the host
        def step(x, y):
            opt.zero_grad()
            logp = F.log_softmax(model(x).view(-1, V), dim=-1)
            loss = -logp.gather(1, y.view(-1, 1)).mean()
            loss.backward()
            opt.step()
            return loss
    fn = lt.jit(step) if compiled else step
    data = _batches(5)
    for x, y in data[:4]:
        lt.reset_counters()
        fn(lt.tensor(x), lt.tensor(y)).item()
    in_place = lt.counters()["updated_in_place"]
    before = [p.numpy().copy() for p in model.parameters()]
    where = None
    try:
        loss = fn(lt.tensor(data[4][0]), lt.tensor(np.full((B, T), V + 5)))
        where = "read"
        loss.item()
    except IndexError:
        where = where or "call"
    after = [p.numpy().copy() for p in model.parameters()]
    return where, all(np.array_equal(a, b) for a, b in zip(before, after)), after, in_place


@pytest.mark.parametrize("gather_by_hand", [False, True], ids=["cross_entropy", "gather"])
def test_a_bad_target_fails_a_replay_where_and_with_the_state_the_eager_step_fails(cuda_device, gather_by_hand):
    """F.cross_entropy's gather reads targets it computed on the device, which a kernel checks: the error
    comes at the next host read, after the step, in both. A gather of the targets as given checks them on
    the host: the call raises before the optimizer step and the state stays as it was, in a replay that
    updates it in place too (the loss's gather, computed after the updates, is checked before them)."""
    results = {}
    for compiled in (False, True):
        cuda_device(offload="always")
        results[compiled] = _bad_target_run(compiled, gather_by_hand)
    assert results[True][3] > 0  # the replays update in place
    assert results[True][:2] == results[False][:2] == (("call", True) if gather_by_hand else ("read", False))
    assert all(np.array_equal(a, b) for a, b in zip(results[True][2], results[False][2]))


@settings(max_examples=6, deadline=None)
@given(budget_kb=st.integers(min_value=48, max_value=2048))
@example(budget_kb=63)  # a 0-d operand passed by value when captured is on the device at the replay
@example(budget_kb=64)  # ... and a launch plan then reads that value, made inside the replay, as a scalar
def test_planned_replays_under_any_memory_budget_compute_what_eager_steps_compute(budget_kb):
    """Budgets below what a plan needs replay through the executors; above it, through the plan."""
    results = []
    for compiled in (False, True):
        lt.set_device("cuda", driver="emulated", memory="64MB", offload="always")
        lt.set_memory_budget(budget_kb * 1024)
        results.append(_train(compiled, steps=5))
    _same(*results)


@pytest.mark.filterwarnings("ignore:a memory budget of")  # the device smaller than its budget, on purpose
def test_a_replay_whose_device_memory_runs_out_midway_starts_over_and_computes_the_same():
    results = []
    for compiled in (False, True):
        # The budget allows the plan, but the device itself is smaller: an allocation fails midway.
        lt.set_device("cuda", driver="emulated", memory="48KB", offload="always")
        lt.set_memory_budget("64MB")
        results.append(_train(compiled, steps=5))
    _same(*results)
    assert lt.counters()["prepared_kernels"] == 0


@pytest.mark.parametrize("on", ["cpu", "emulated CUDA"])
def test_a_replay_while_profiling_runs_through_the_executors_and_records_each_kernel(on, cuda_device):
    if on == "cpu":
        lt.set_device("cpu")  # no launch plan there, a host plan (runtime/host_plan.py)
    else:
        cuda_device(offload="always")
    model, opt, sched, step = _setup()
    fn = lt.jit(step)
    data = _batches(3)
    for x, y in data[:2]:
        fn(lt.tensor(x), lt.tensor(y))
    lt.reset_counters()
    with lt.profile() as prof:
        fn(lt.tensor(data[2][0]), lt.tensor(data[2][1])).item()
    assert fn.stats()["replayed"] == 1 and lt.counters()["prepared_kernels"] == 0
    assert len(prof.kernels) == lt.counters()["kernels"]


@pytest.mark.filterwarnings("ignore:a memory budget of")  # the device smaller than its budget, on purpose
def test_a_device_with_barely_room_for_a_step_trains_with_its_own_bookkeeping_evicting_values():
    """The status word the index kernels report into, and their index groupings, are allocated through
    the memory manager: on a nearly full device they evict values (downloaded first) or run elsewhere,
    instead of failing with an out-of-memory error from the driver."""
    results = []
    for memory in ("256MB", "64KB"):
        lt.set_device("cuda", driver="emulated", memory=memory, offload="always")
        lt.set_memory_budget("64MB")
        results.append(_train(False, steps=3))
    assert np.allclose(results[0]["losses"], results[1]["losses"], rtol=1e-4)
    for a, b in zip(results[0]["params"], results[1]["params"]):
        assert np.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_reseeding_between_planned_replays_gives_the_eager_dropout_masks(cuda_device):
    runs = []
    for compiled in (False, True):
        cuda_device(offload="always")
        model, opt, sched, step = _setup()
        fn = lt.jit(step) if compiled else step
        losses = []
        for i, (x, y) in enumerate(_batches(7)):
            if i == 5:
                lt.manual_seed(123)  # between calls: the replay's random kernels take the new seed
            losses.append(fn(lt.tensor(x), lt.tensor(y)).item())
        runs.append(losses)
    assert runs[0] == runs[1] and lt.counters()["prepared_kernels"] > 0
