"""The seeded generator: Philox known answers, determinism, distributions, backend byte-identity."""
import math

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.cpu import philox as cpu_philox
from lazytensor.kernels.reference import random as reference_random
from lazytensor.kernels.reference.random import philox4x32

KAT = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
       ((0xffffffff,) * 4, (0xffffffff,) * 2, (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
       ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
        (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox4x32_10_matches_the_random123_known_answers(ctr, key, want):
    out = philox4x32(*[np.array([c], np.uint64) for c in ctr], *key)
    assert tuple(int(o[0]) for o in out) == want


def test_same_seed_same_bytes_and_different_seeds_differ():
    lt.manual_seed(42)
    a = [lt.rand(1000).numpy(), lt.randn(3, 5).numpy(), lt.randint(0, 7, (50,)).numpy()]
    lt.manual_seed(42)
    b = [lt.rand(1000).numpy(), lt.randn(3, 5).numpy(), lt.randint(0, 7, (50,)).numpy()]
    assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
    lt.manual_seed(43)
    assert lt.rand(1000).numpy().tobytes() != a[0].tobytes()


def test_consecutive_draws_are_different_streams():
    lt.manual_seed(0)
    assert lt.rand(100).numpy().tobytes() != lt.rand(100).numpy().tobytes()


def test_values_do_not_depend_on_realization_order():
    lt.manual_seed(7)
    a, b = lt.rand(64), lt.randn(64)
    vb, va = b.numpy(), a.numpy()
    lt.manual_seed(7)
    assert lt.rand(64).numpy().tobytes() == va.tobytes() and lt.randn(64).numpy().tobytes() == vb.tobytes()


def test_a_prefix_of_a_draw_is_independent_of_its_length():
    # each element is computed from its own index (what lets a device thread jump straight to it)
    lt.manual_seed(1)
    long = lt.rand(1000).numpy()
    lt.manual_seed(1)
    assert np.array_equal(lt.rand(10).numpy(), long[:10])


def test_uniform_range_and_moments():
    lt.manual_seed(3)
    u = lt.rand(200_000, dtype=lt.float64).numpy()
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002
    x = lt.uniform(1000, low=-2, high=3).numpy()
    assert x.min() >= -2 and x.max() < 3 and x.dtype == np.float32


def test_normal_passes_a_kolmogorov_smirnov_test_at_a_million_samples():
    lt.manual_seed(123)
    n = 1_000_000
    z = np.sort(lt.randn(n, dtype=lt.float64).numpy())
    from lazytensor.kernels.reference.elementwise import _erf
    cdf = 0.5 * (1 + _erf(z / math.sqrt(2)))
    i = np.arange(1, n + 1)
    d = max(np.max(i / n - cdf), np.max(cdf - (i - 1) / n))
    assert d < 1.63 / math.sqrt(n), f"KS statistic {d}"
    assert abs(z.mean()) < 0.005 and abs(z.var() - 1) < 0.005


def test_normal_with_mean_and_std():
    lt.manual_seed(0)
    x = lt.normal(3.0, 0.5, (100_000,)).numpy()
    assert abs(x.mean() - 3) < 0.01 and abs(x.std() - 0.5) < 0.01


def test_randint_range_and_uniformity():
    lt.manual_seed(5)
    r = lt.randint(-3, 4, (70_000,)).numpy()
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 3
    counts = np.bincount(r + 3)
    assert np.all(np.abs(counts - 10_000) < 500)
    with pytest.raises(ValueError, match="low < high"):
        lt.randint(5, 5, (3,))


def test_dropout_keeps_the_expected_fraction_and_rescales():
    lt.manual_seed(9)
    x = lt.ones(100_000)
    y = lt.nn.functional.dropout(x, 0.25).numpy()
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    assert lt.nn.functional.dropout(x, 0.25, training=False) is x


def test_in_place_initializers_give_new_seeded_values():
    t = lt.zeros(5)
    lt.manual_seed(2)
    lt.nn.init.normal_(t, 0.0, 0.02)
    lt.manual_seed(2)
    assert t.numpy().tobytes() == lt.normal(0.0, 0.02, (5,)).numpy().tobytes()


def test_rng_fills_are_byte_identical_on_the_virtual_device(virtual):
    lt.manual_seed(11)
    want = [lt.rand(10_000).numpy(), lt.randn(9000, dtype=lt.float64).numpy(), lt.randint(0, 100, (9000,)).numpy()]
    virtual()
    lt.manual_seed(11)
    got = [lt.rand(10_000), lt.randn(9000, dtype=lt.float64), lt.randint(0, 100, (9000,))]
    lt.realize(*got)
    assert all(g.residency is lt.Residency.DEVICE for g in got)  # fills of 8192+ elements: made on the device
    assert all(g.numpy().tobytes() == w.tobytes() for g, w in zip(got, want))


def test_rng_state_round_trip():
    lt.manual_seed(4)
    lt.rand(3)
    state = lt.get_rng_state()
    a = lt.rand(5).numpy()
    lt.set_rng_state(state)
    assert lt.rand(5).numpy().tobytes() == a.tobytes()


@pytest.mark.parametrize("seed,stream,n", [(0, 0, 1), (5, 7, 13), (2 ** 40 + 3, 2 ** 33 + 9, 100_001)])
def test_compiled_philox_words_are_the_reference_words(seed, stream, n):
    want = reference_random.words(seed, stream, n)
    assert np.array_equal(cpu_philox.words(seed, stream, n), want)
    def pieces(blocks, work_per_item):  # a counter-based generator may be cut anywhere
        return None if blocks < 2 else np.array(list(range(0, blocks, 3)) + [blocks], np.int64)
    assert np.array_equal(cpu_philox.words(seed, stream, n, pieces), want)


@pytest.mark.parametrize("op,attrs", [
    ("uniform", {"low": -2.0, "high": 3.0, "dtype": np.dtype(np.float32)}),
    ("uniform", {"low": 0.0, "high": 1.0, "dtype": np.dtype(np.float64)}),
    ("normal", {"mean": 0.5, "std": 2.0, "dtype": np.dtype(np.float32)}),
    ("normal", {"mean": 0.0, "std": 1.0, "dtype": np.dtype(np.float64)}),
    ("randint", {"low": -5, "high": 17, "dtype": np.dtype(np.int64)})], ids=str)
def test_fills_over_compiled_words_give_the_reference_bytes(op, attrs):
    attrs = {**attrs, "shape": (3, 7001), "seed": 12345, "stream": 6}
    fill = getattr(reference_random, op)
    assert fill(attrs, cpu_philox.words).tobytes() == fill(attrs).tobytes()
