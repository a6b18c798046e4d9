"""What the evictor spills while a realization runs (runtime/next_reads.py): the value its remaining
steps read furthest ahead, not the least recently used one; small values last. Values are the same."""
from types import SimpleNamespace

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime.next_reads import NEVER, NextReads

MIB = 2 ** 20


@pytest.fixture(autouse=True)
def _one_kernel_per_op(monkeypatch):
    """Each elementwise op its own step, so the steps read the values in the order the test writes them
    (the device would fuse `p * 2.0 + q + w` into one kernel reading all three at once)."""
    monkeypatch.setenv("LAZYTENSOR_FUSE", "0")


N = MIB // 4  # float32 elements in one mebibyte


def _on_device(value):
    """A device-only value of N elements (made there, never downloaded)."""
    return (lt.tensor(np.full(N, value, np.float32)) * 1.0).realize()


def _evicted():
    return [r.node_id for r in lt.transfer_log() if r.reason == "eviction"]


def test_next_reads_names_the_first_step_at_or_after_the_current_one():
    steps = [SimpleNamespace(ins=(0,)), SimpleNamespace(ins=(1,)), SimpleNamespace(ins=(0, 1))]
    a, b = object(), object()
    reads = NextReads(steps, [a, b])
    assert reads.next_read(id(a)) == 0 and reads.next_read(id(b)) == 1
    reads.at = 1
    assert reads.next_read(id(a)) == 2 and reads.next_read(id(b)) == 1
    reads.at = 3
    assert reads.next_read(id(a)) == NEVER


def test_a_value_made_during_the_run_is_known_by_its_buffer_from_then_on():
    steps = [SimpleNamespace(ins=()), SimpleNamespace(ins=(0,)), SimpleNamespace(ins=(0,))]
    slots = [None]
    reads = NextReads(steps, slots)
    made = object()
    assert reads.next_read(id(made)) == NEVER
    slots[0] = made
    reads.made(0, made)
    reads.at = 2
    assert reads.next_read(id(made)) == 2


def test_a_budget_spills_the_value_read_last_not_the_least_recently_used(virtual):
    device = virtual(offload="always")
    p, q, w = _on_device(1.0), _on_device(2.0), _on_device(3.0)  # q is the least recently used
    device.memory.set_budget(3 * MIB + MIB // 2)  # p, q and w fit; one more value does not
    lt.clear_transfer_log()
    r = p * 2.0           # needs room: q or w goes (p is its operand)
    s = r + q             # reads q next
    t = s + w             # reads w last
    got = t.numpy()
    assert _evicted()[0] == w._node.buffer.node_id
    np.testing.assert_array_equal(got, np.full(N, 7.0, np.float32))


def test_without_a_run_under_way_the_evictor_spills_the_least_recently_used(virtual):
    device = virtual(offload="always")
    held = [_on_device(1.0), _on_device(2.0), _on_device(3.0)]  # the first is the least recently used
    lt.clear_transfer_log()
    device.memory.set_budget(2 * MIB + MIB // 2)
    assert _evicted() == [held[0]._node.buffer.node_id]


def test_a_small_value_read_last_is_spilled_after_a_large_one_read_sooner(virtual):
    device = virtual(offload="always")
    small = (lt.tensor(np.full(1024, 5.0, np.float32)) * 1.0).realize()
    p, q = _on_device(1.0), _on_device(2.0)
    device.memory.set_budget(3 * MIB)  # p, q and the small one fit; one more mebibyte does not
    lt.clear_transfer_log()
    r = p * 2.0            # needs room: q (read next) or the small value (read last)
    t = (r + q).sum() + small.sum()
    got = t.item()
    assert _evicted()[0] == q._node.buffer.node_id
    assert got == float(N * 4.0 + 1024 * 5.0)


def test_a_compiled_step_replayed_under_a_budget_spills_the_value_read_last(virtual):
    device = virtual(offload="always")

    @lt.jit
    def f(p, q, w):
        return ((p * 2.0) + q) + w

    p, q, w = _on_device(1.0), _on_device(2.0), _on_device(3.0)
    for _ in range(2):  # traced, then captured: the third call replays the capture's steps
        f(p, q, w).numpy()
    device.memory.set_budget(3 * MIB + MIB // 2)
    for value in (p, w):  # q the least recently used
        device.memory.touch(value._node.buffer)
    lt.clear_transfer_log()
    got = f(p, q, w).numpy()
    assert _evicted()[0] == w._node.buffer.node_id
    np.testing.assert_array_equal(got, np.full(N, 7.0, np.float32))
