"""The CPU kernels' result cache (kernels/cpu/host_cache.py, `lt.cpu`): a block is reused only once no
array views it, a result over a block is written in place only when nothing else sees it, and the cap
on idle memory holds."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.cpu import host_cache

BIG = (256, 256)   # 256 KiB of float32: above the cache's threshold


@pytest.fixture
def cache():
    """A fresh cache in place of the process's, with a 64 MiB cap."""
    saved = host_cache.CACHE
    host_cache.CACHE = host_cache.HostCache(64 << 20)
    try:
        yield host_cache.CACHE
    finally:
        host_cache.CACHE = saved


def test_a_freed_result_block_serves_the_next_result_of_its_size(cache):
    a = host_cache.empty(BIG, np.float32)
    address = a.ctypes.data
    del a
    b = host_cache.empty(BIG, np.float32)
    assert b.ctypes.data == address
    assert cache.stats()["host_cache_reuses"] == 1


def test_a_block_is_not_reused_while_a_view_of_its_array_lives(cache):
    a = host_cache.empty(BIG, np.float32)
    a[:] = 7.0
    view = a[10:20]
    del a
    b = host_cache.empty(BIG, np.float32)
    b[:] = -1.0
    assert np.all(view == 7.0)
    assert b.ctypes.data != view.ctypes.data - 10 * BIG[1] * 4


def test_small_results_come_from_numpy_not_the_cache(cache):
    small = host_cache.empty((16, 16), np.float32)
    assert small.base is None
    assert cache.stats()["host_cache_allocations"] == 0


def test_a_cached_array_is_exclusive_only_while_it_alone_views_its_block(cache):
    a = host_cache.empty(BIG, np.float32)
    assert host_cache.exclusive(a)
    view = a.reshape(-1)
    assert not host_cache.exclusive(a) and not host_cache.exclusive(view)
    del view
    assert host_cache.exclusive(a)
    assert not host_cache.exclusive(np.empty(BIG, np.float32))


def test_idle_blocks_past_the_cap_are_freed_oldest_first(cache):
    host_cache.configure(600 * 1024)
    arrays = [host_cache.empty((256, 256 + k), np.float32) for k in range(4)]  # four size classes
    del arrays
    stats = cache.stats()
    assert stats["host_cache_idle_bytes"] <= 600 * 1024
    assert stats["host_cache_leased_bytes"] == 0


def test_size_classes_waste_at_most_an_eighth():
    for nbytes in (65536, 65537, 100_000, 3 << 20, (5 << 20) + 1):
        size = host_cache.size_class(nbytes)
        assert nbytes <= size <= nbytes * 9 / 8 + 4096


def test_a_user_array_from_numpy_keeps_its_values_when_the_tensor_goes():
    x = lt.tensor(np.arange(BIG[0] * BIG[1], dtype=np.float32).reshape(BIG))
    y = x * 2.0
    held = y.numpy()
    expected = held.copy()
    del y
    for k in range(4):  # results of the same size, computed after the tensor went
        (x + float(k)).numpy()
    np.testing.assert_array_equal(held, expected)


def test_an_in_place_write_to_a_result_leaves_an_earlier_numpy_view_as_it_was():
    x = lt.tensor(np.ones(BIG, np.float32))
    y = x * 3.0
    seen = y.numpy()
    y[0, 0] = 100.0
    assert seen[0, 0] == 3.0
    assert y[0, 0].item() == 100.0


def test_results_are_the_same_bytes_with_the_cache_off():
    rng = np.random.default_rng(0)
    data = rng.standard_normal((300, 500)).astype(np.float32)

    def compute():
        x = lt.tensor(data)
        return lt.softmax(x @ x.T * 0.1, dim=-1).sum(dim=0).numpy().copy()

    before = lt.cpu.set_cache_limit(0)
    try:
        off = compute()
    finally:
        lt.cpu.set_cache_limit(before)
    np.testing.assert_array_equal(compute(), off)


def test_set_cache_limit_frees_idle_blocks_and_returns_the_previous_limit():
    lt.tensor(np.ones(BIG, np.float32)).mul(2.0).numpy()
    before = lt.cpu.set_cache_limit("1MB")
    try:
        assert lt.cpu.cache_stats()["idle_bytes"] <= 10 ** 6
        assert lt.cpu.set_cache_limit(0) == 10 ** 6
        assert lt.cpu.cache_stats()["idle_bytes"] == 0
    finally:
        lt.cpu.set_cache_limit(before)


def test_empty_cache_frees_every_idle_block():
    lt.tensor(np.ones(BIG, np.float32)).mul(2.0).numpy()
    lt.cpu.empty_cache()
    assert lt.cpu.cache_stats()["idle_bytes"] == 0


def test_a_cache_limit_that_is_not_a_size_names_the_accepted_forms():
    with pytest.raises(ValueError, match="512MB"):
        lt.cpu.set_cache_limit("lots")


def test_the_host_cache_variable_sets_the_limit():
    import os
    import subprocess
    import sys
    env = dict(os.environ, LAZYTENSOR_HOST_CACHE="1MB")
    program = ("import numpy as np, lazytensor as lt; "
               "lt.tensor(np.ones((256, 256), np.float32)).mul(2.0).numpy(); "
               "print(lt.cpu.cache_stats()['cap_bytes'])")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["1000000"]
