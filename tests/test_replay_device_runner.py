"""A compiled step's replay on a device that prepares launches (runtime/replay/device_runner.py): prebuilt
launches over scratch, no higher a memory peak than the eager step, state written over its own blocks,
AdamW updates in place, budgets, profiling and errors as the eager step has them."""
import weakref

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor import nn
from lazytensor.runtime.replay import device_runner
from jit_steps import (B, C, T, V, TinyAttention, _batches, _classification_step, _classifier_steps,  # noqa: F401
                       _same, _setup, _train, where)


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
        m.setattr(device_runner.DeviceRunner, "_writes_in_place", lambda self, slots, donors: False)
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


def test_a_replay_never_overwrites_a_value_another_tensor_took_by_copy(cuda_device):
    """`other.copy_(p)` makes `other` share p's value (no kernel runs): the replay must give p a new
    block, as it does for a detached handle, and `other` keeps the old value."""
    cuda_device(offload="always")
    model, opt, fn, batch = _four_steps(True)
    p = list(model.parameters())[0]
    other = lt.zeros(*p.shape).to("cuda")
    with lt.no_grad():
        other.copy_(p)
    old = other.numpy().copy()
    fn(*batch).item()
    assert np.array_equal(other.numpy(), old) and not np.array_equal(p.numpy(), old)


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
@example(budget_kb=64)  # ... and a device runner then reads that value, made inside the replay, as a scalar
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
        lt.set_device("cpu")  # no device runner there, a host runner (runtime/replay/host_runner.py)
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
