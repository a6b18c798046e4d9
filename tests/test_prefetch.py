"""Prefetching under a budget (runtime/prefetch.py) and the modeled timeline that overlaps it
(runtime/device_model.py): a spilled operand is uploaded a few steps before its device reader, into
room the budget has free, evicting nothing; values stay the unlimited run's bytes; on the modeled GPU
the copy runs beside the kernels before its reader, which waits for it; on the CUDA backend it runs on a
copy stream (the emulated driver makes the copy only when waited for, so a missed wait reads garbage)."""
import collections
import functools

import numpy as np
import pytest

import lazytensor as lt
import offload_devices
import user_gpt
from lazytensor.runtime import devices, device_model, prefetch
from lazytensor.runtime.transfers import KernelLaunch, Transfer

H200 = device_model.PROFILES["h200"]
STEPS = 3


def _train(budget_fraction=None, device="virtual"):
    """(losses, parameter bytes, the last step's profile, the device's peak) of the tiny user GPT on
    the virtual device (or the emulated CUDA device), under `budget_fraction` of the unlimited run's peak."""
    budget = None if budget_fraction is None else int(_unlimited(device)[3] * budget_fraction)  # before set_device
    memory = offload_devices.start(device).memory
    lt.manual_seed(0)
    model, opt, step, batch, block = user_gpt.built(lt, "tiny")
    if budget is not None:
        lt.set_memory_budget(budget)
    rng = np.random.default_rng(0)
    losses, prof = [], None
    with memory.watch_peak() as watched:
        for i in range(STEPS):
            x, y = (lt.tensor(rng.integers(0, 65, (batch, block))).to(device) for _ in range(2))
            with lt.profile(model="h200") as prof:
                losses.append(step(model, opt, x, y).item())
    params = b"".join(q.numpy().tobytes() for q in model.parameters())
    return losses, params, prof, watched[0]


@functools.lru_cache(maxsize=None)
def _unlimited(device="virtual"):
    return _train(device=device)


def _moved(prof):
    moved = collections.Counter()
    for r in prof.transfers:
        moved[r.direction] += r.nbytes
    return moved


def test_a_binding_budget_prefetches_spilled_operands_and_keeps_the_unlimited_runs_bytes():
    want_losses, want_params, *_ = _unlimited()
    losses, params, prof, _ = _train(0.5)
    assert any(r.reason == "prefetch" for r in prof.transfers)
    assert losses == want_losses and params == want_params


def test_prefetching_hides_copy_time_in_the_modeled_timeline_and_copies_no_more_bytes(monkeypatch):
    _, _, prefetched, _ = _train(0.5)
    monkeypatch.setattr(prefetch, "WINDOW", 0)
    _, _, on_demand, _ = _train(0.5)
    assert not any(r.reason == "prefetch" for r in on_demand.transfers)
    assert _moved(prefetched) == _moved(on_demand)
    with_prefetch, without = prefetched.modeled("h200"), on_demand.modeled("h200")
    assert with_prefetch.hidden_copy_s > 0 and without.hidden_copy_s == 0
    assert with_prefetch.total_s < without.total_s
    assert with_prefetch.copy_s == pytest.approx(without.copy_s)


def test_a_prefetch_evicts_nothing_and_uploads_each_value_at_most_once_a_run(monkeypatch):
    ahead, evictions = prefetch.Prefetcher.ahead, []

    def watched(self, steps, k):
        memory = devices.chain()[0].memory
        before = memory.evictions
        ahead(self, steps, k)
        evictions.append(memory.evictions - before)

    monkeypatch.setattr(prefetch.Prefetcher, "ahead", watched)
    _, _, prof, _ = _train(0.25)
    assert evictions and set(evictions) == {0}
    per_value = collections.Counter(r.node_id for r in prof.transfers if r.reason == "prefetch")
    assert per_value and max(per_value.values()) == 1


def test_an_unbounded_run_prefetches_nothing():
    _, _, prof, _ = _train()
    assert not prof.transfers or not any(r.reason == "prefetch" for r in prof.transfers)
    assert prof.modeled("h200").hidden_copy_s == 0


def test_on_cuda_a_prefetch_copies_on_the_copy_stream_and_its_reader_waits_for_it():
    want_losses, want_params, *_ = _unlimited("cuda")
    losses, params, prof, _ = _train(0.5, "cuda")
    driver = devices.chain()[0].driver
    assert any(r.reason == "prefetch" for r in prof.transfers)
    assert driver.beside_waits > 0  # copies queued beside, and waited for
    assert losses == want_losses and params == want_params


def test_on_the_emulated_copy_stream_a_reader_that_does_not_wait_reads_garbage(monkeypatch):
    """The check above can fail: a reader queued without the wait sees the NaN bytes of a copy not
    yet made."""
    monkeypatch.setattr(prefetch.Prefetcher, "reading", lambda self, step: self._waits.clear())
    losses, *_ = _train(0.5, "cuda")
    assert any(np.isnan(losses))


def test_on_cuda_a_download_and_a_released_block_wait_for_the_copy_beside():
    device = offload_devices.start("cuda")
    host = np.arange(1 << 16, dtype=np.float32)
    read, released = device.memory.allocate(host.nbytes), device.memory.allocate(host.nbytes)
    device.upload(read, host, beside=True)
    device.upload(released, host, beside=True)
    out = np.empty_like(host)
    device.download(read, out)
    assert np.array_equal(out, host)
    device.memory.give_back(released, host.nbytes)  # its next user is queued after the copy
    device.memory.give_back(read, host.nbytes)
    assert device.driver.beside_waits == 2 and not device.driver._beside
    device.memory.free_cache()  # the driver refuses to free a block with a copy in flight


# ---- the modeled timeline, from records made by hand ------------------------------------------------

def _kernel(seq, start, nbytes):
    """A device kernel record reading and writing `nbytes` each (memory-bound on the H200)."""
    return KernelLaunch(seq, seq, "add", "virtual", (nbytes // 4,), "float32", start, 0.0, nbytes, nbytes, 0)


def _copy(seq, start, nbytes, reason, direction="h2d"):
    return Transfer(seq, direction, nbytes, 100 + seq, "add", reason, "virtual", start, 0.0)


def _model(kernels, transfers, waits=()):
    return device_model.timeline("h200", kernels, transfers, {"virtual"}, waits=waits)


def _kernel_s(nbytes):
    return device_model.kernel_seconds(H200, "add", nbytes, nbytes, 0)[0]


def test_a_prefetch_shorter_than_the_kernels_before_its_reader_is_hidden_entirely():
    big, copied = 2 ** 28, 2 ** 20   # each kernel ~134 us, the copy ~31 us
    kernels = [_kernel(0, 1.0, big), _kernel(1, 2.0, big), _kernel(2, 3.0, big)]
    t = _model(kernels, [_copy(0, 0.5, copied, "prefetch")], waits=[(2, 0)])
    assert t.hidden_copy_s == pytest.approx(device_model.copy_seconds(H200, copied))
    assert t.total_s == pytest.approx(3 * _kernel_s(big))


def test_the_reader_of_a_prefetch_waits_for_the_copy_to_finish():
    small, copied = 2 ** 16, 2 ** 30   # each kernel ~36 us, the copy ~21 ms
    kernels = [_kernel(0, 1.0, small), _kernel(1, 2.0, small)]
    t = _model(kernels, [_copy(0, 0.5, copied, "prefetch")], waits=[(1, 0)])
    assert t.total_s == pytest.approx(device_model.copy_seconds(H200, copied) + _kernel_s(small))
    assert t.hidden_copy_s == pytest.approx(_kernel_s(small))


def test_copies_that_are_not_prefetches_stay_on_the_kernels_path():
    big, copied = 2 ** 28, 2 ** 20
    kernels = [_kernel(0, 1.0, big), _kernel(1, 3.0, big)]
    transfers = [_copy(0, 2.0, copied, "re-home"), _copy(1, 2.5, copied, "eviction", "d2h")]
    t = _model(kernels, transfers)
    assert t.hidden_copy_s == 0
    assert t.total_s == pytest.approx(2 * _kernel_s(big) + 2 * device_model.copy_seconds(H200, copied))


def test_an_upload_on_demand_queues_behind_a_prefetch_still_copying():
    small, copied = 2 ** 16, 2 ** 30
    kernels = [_kernel(0, 1.0, small)]
    transfers = [_copy(0, 0.5, copied, "prefetch"), _copy(1, 2.0, 2 ** 20, "re-home")]
    t = _model(kernels, transfers)
    copy_s = device_model.copy_seconds
    assert t.total_s == pytest.approx(copy_s(H200, copied) + copy_s(H200, 2 ** 20))
