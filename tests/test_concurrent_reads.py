"""Several threads may read (realize) tensors at once: same values as one thread, no errors."""
import threading

import numpy as np
import pytest

import lazytensor as lt

TRIALS = 40


def _read_together(tensors, read=lambda t: t.item()):
    """Read each tensor in a thread of its own, all released at once; returns the values in order."""
    barrier = threading.Barrier(len(tensors))
    values, errors = [None] * len(tensors), []

    def work(i):
        try:
            barrier.wait()
            values[i] = read(tensors[i])
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(tensors))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    return values


def _programs(trial):
    rng = np.random.default_rng(trial)
    base = lt.tensor(rng.normal(size=(96, 96)).astype(np.float32))
    shared = (base @ base).tanh() * (trial + 1)   # a pending subgraph both outputs need
    return [shared.sum(), shared.sum(), (shared.exp() * 2).mean(), shared.amax()]


def _sequential(trial):
    return [t.item() for t in _programs(trial)]


@pytest.mark.parametrize("device", ["active", "virtual"])
def test_threads_reading_the_same_pending_tensors_get_the_one_thread_values(device):
    if device == "virtual":
        lt.set_device("virtual", offload="always")
    for trial in range(TRIALS):
        want = _sequential(trial)
        assert _read_together(_programs(trial)) == want


def test_threads_reading_under_a_tight_budget_evict_without_losing_values():
    lt.set_device("virtual", offload="always")
    lt.set_memory_budget("200KB")  # a few 36 KiB results: reads race the evictor
    for trial in range(TRIALS // 4):
        want = _sequential(trial)
        got = _read_together(_programs(trial), read=lambda t: t.numpy().tobytes())
        assert [np.frombuffer(g, np.float32).item() for g in got] == want


def test_threads_dropping_device_tensors_while_another_realizes_keep_the_allocator_consistent():
    lt.set_device("virtual", offload="always")
    device = lt.runtime.devices.active_device()
    rng = np.random.default_rng(0)
    keep = lt.tensor(rng.normal(size=(128, 128)).astype(np.float32))

    def churn(_):
        for _ in range(20):
            t = (keep * 2).exp()
            t.realize()
            del t  # its device block returns to the cache from this thread
        return True

    assert _read_together([0, 1, 2], read=churn) == [True] * 3
    m = device.memory
    assert m.resident_bytes == sum(entry[1] for entry in m._lru.values())
