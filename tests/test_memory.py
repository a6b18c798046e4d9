"""The arena allocator, the caching allocator's buckets, and the pinned staging pool."""
import numpy as np
import pytest

import lazytensor as lt

from lazytensor.runtime.backends.arena import Arena, OutOfDeviceMemory
from lazytensor.runtime.memory import PinnedPool, bucket


def test_arena_coalesces_freed_neighbours():
    a = Arena(4096)
    blocks = [a.alloc(1024) for _ in range(4)]
    with pytest.raises(OutOfDeviceMemory, match="no free block of 256 bytes"):
        a.alloc(1)
    for start, size in (blocks[1], blocks[0], blocks[3], blocks[2]):
        a.free(start, size)
    assert a.alloc(4096) == (0, 4096)


def test_arena_is_first_fit_and_reports_fragmentation():
    a = Arena(3072)
    b0, _, b2 = a.alloc(1024), a.alloc(1024), a.alloc(1024)
    a.free(*b0)
    a.free(*b2)
    with pytest.raises(OutOfDeviceMemory, match="2048 bytes free of 3072, fragmented into 2 blocks"):
        a.alloc(2048)
    assert a.alloc(512)[0] == 0


@pytest.mark.parametrize("n,want", [(0, 512), (1, 512), (512, 512), (513, 1024), (2 ** 20, 2 ** 20),
                                    (2 ** 20 + 1, 2 ** 20 + 2 ** 16), (1536 * 384 * 4, 1536 * 384 * 4),
                                    (2 ** 21 + 1, 2 ** 21 + 2 ** 17), (2 ** 30 - 1, 2 ** 30)])
def test_size_buckets(n, want):
    assert bucket(n) == want


@pytest.mark.parametrize("n", [2 ** 20 + 1, 1152 * 384 * 4 + 4, 3 * 2 ** 20 + 12345, 10 ** 9 + 7, 2 ** 33 + 1])
def test_a_block_above_a_mebibyte_is_at_most_a_sixteenth_larger_than_its_request(n):
    assert n <= bucket(n) <= n + n // 16


def test_caching_allocator_reuses_a_freed_block_before_allocating(virtual):
    device = virtual()
    m = device.memory
    block = m.allocate(3000)
    m.give_back(block, 3000)
    assert m.cached_bytes == bucket(3000)
    used = device.arena.used
    again = m.allocate(2900)  # same bucket
    assert again is block and device.arena.used == used and m.cached_bytes == 0


def test_the_caching_allocator_hands_back_a_preferred_block_while_it_is_cached(virtual):
    """A device runner asks for the block it had: its prepared launches then point at it already."""
    m = virtual().memory
    first, second = m.allocate(3000), m.allocate(3000)
    m.give_back(first, 3000)
    m.give_back(second, 3000)  # cached last: taken first without a preference
    assert m.allocate(3000, prefer=first) is first
    assert m.allocate(3000, prefer=first) is second  # no longer cached: any block of the bucket
    assert m.cached_bytes == 0


def test_cached_blocks_never_take_the_device_past_its_budget(virtual):
    device = virtual(budget=4 * 2 ** 20)
    m = device.memory
    for size in range(2 ** 20, 40 * 2 ** 20, 2 ** 20 + 4096):  # every request a size of its own
        block = m.allocate(min(size, m.budget))
        assert block is not None
        m.give_back(block, min(size, m.budget))
        assert m.resident_bytes + m.cached_bytes <= m.budget
        assert device.arena.used <= m.budget


def test_a_step_under_a_small_budget_keeps_reserved_memory_within_it(virtual):
    device = virtual(budget="4MB")
    x = lt.tensor(np.random.default_rng(0).normal(size=(256, 256)).astype(np.float32))
    w = lt.tensor(np.random.default_rng(1).normal(size=(256, 256)).astype(np.float32))
    for _ in range(20):
        x = ((x @ w).tanh() * 0.5).reshape(128, 512).reshape(256, 256)
        x.realize()
        assert device.memory.resident_bytes + device.memory.cached_bytes <= device.memory.budget


def test_pinned_pool_reuses_a_block_only_once_nothing_views_it():
    pool = PinnedPool(lambda n: np.empty(n, np.uint8))
    a = pool.take((100,), np.float32)
    view = a[10:]
    del a
    b = pool.take((100,), np.float32)
    assert not np.shares_memory(b, view)  # the first block is still seen through `view`
    del view
    c = pool.take((50,), np.float64)
    assert pool.reuses == 1 and c.shape == (50,) and c.dtype == np.float64


def test_pinned_pool_past_its_cap_hands_out_plain_arrays():
    pool = PinnedPool(lambda n: np.empty(n, np.uint8), cap_bytes=4096)
    keep = [pool.take((1024,), np.float32)]
    extra = pool.take((1024,), np.float32)
    assert pool.pooled_bytes == 4096 and extra.base is None and keep


def test_a_budget_larger_than_the_device_is_a_warning_naming_both_sizes(virtual):
    virtual(memory="64MB")
    with pytest.warns(lt.runtime.memory.BudgetWarning, match="a memory budget of 100,000,000 bytes is more than "
                                                            "the virtual device's 64,000,000 bytes"):
        assert lt.set_memory_budget("100MB") == 100_000_000  # kept: the device runs out first


def test_a_budget_variable_larger_than_the_device_is_a_warning_when_the_device_starts(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_MEMORY_BUDGET", "1GB")
    with pytest.warns(lt.runtime.memory.BudgetWarning, match="LAZYTENSOR_MEMORY_BUDGET"):
        lt.set_device("virtual", memory="64MB")


def test_nested_peak_watches_opened_at_the_same_bytes_each_keep_counting_after_the_inner_closes(virtual):
    virtual(offload="always")
    from lazytensor.runtime import devices
    memory = devices.chain()[0].memory
    with memory.watch_peak() as outer:
        with memory.watch_peak() as inner:
            pass
        assert outer == inner  # equal lists: closing the inner one must not close the outer one
        before = memory.resident_bytes
        kept = (lt.tensor(np.ones(2 ** 18, np.float32)) * 2.0).realize()
        assert memory.resident_bytes > before
    assert outer[0] >= memory.resident_bytes and inner[0] == before
    del kept
