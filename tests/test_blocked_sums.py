"""Float sums and means over more than 4096 elements fold in strided partials (the blocked order of
kernels/reference/reduce.py) on every backend: the same bytes everywhere and on every run, within a
documented bound of the plain left fold; shorter sums, variances and the row ops keep the left fold."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.cpu import reduce as cpu_reduce
from lazytensor.kernels.cpu import softmax as cpu_softmax
from lazytensor.kernels.reference import REDUCE_KERNELS, SOFTMAX_KERNELS
from lazytensor.kernels.reference.optim import sum_of_squares as reference_sum_of_squares
from lazytensor.kernels.reference.reduce import BLOCK_SPAN, partials

U = 2.0 ** -53


def _blocked_loop(values):
    """The blocked order spelled out one addition at a time (float64 values)."""
    p = partials(len(values))
    parts = []
    for j in range(p):
        acc = None
        for v in values[j::p]:
            acc = v if acc is None else acc + v
        parts.append(acc)
    total = parts[0]
    for v in parts[1:]:
        total = total + v
    return total


def _left_loop(values):
    total = values[0]
    for v in values[1:]:
        total = total + v
    return total


def test_partial_count_depends_on_length_alone():
    assert [partials(k) for k in (0, 1, BLOCK_SPAN, BLOCK_SPAN + 1, 3 * BLOCK_SPAN, 10 ** 9)] == \
        [1, 1, 1, 2, 3, 1024]


@pytest.mark.parametrize("shape,axes", [((10001,), (0,)), ((3, 9000), (1,)), ((9000, 3), (0,)),
                                        ((5, 1700, 4), (0, 1)), ((2, 4097), None)], ids=str)
def test_long_sums_fold_in_strided_partials(rng, shape, axes):
    x = rng.normal(size=shape) * 10.0 ** rng.integers(-3, 3, size=shape)
    got = lt.tensor(x).sum(dim=axes).numpy()
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, list(axes) + kept).reshape(-1, int(np.prod([x.shape[d] for d in kept])))
    want = np.array([_blocked_loop(list(rows[:, c])) for c in range(rows.shape[1])])
    np.testing.assert_array_equal(got.reshape(-1), want)


def test_mean_divides_the_blocked_sum(rng):
    x = rng.normal(size=12345)
    assert lt.tensor(x).mean().item() == _blocked_loop(list(x)) / x.size


def test_sums_of_up_to_4096_elements_stay_left_folds(rng):
    x = rng.normal(size=BLOCK_SPAN) * 1e3
    assert lt.tensor(x).sum().item() == _left_loop(list(x))


def test_variance_keeps_the_left_fold(rng):
    x = rng.normal(size=9000)
    mu = _left_loop(list(x)) / x.size
    want = _left_loop([(v - mu) * (v - mu) for v in x]) / (x.size - 1)
    assert lt.tensor(x).var().item() == want


def test_numba_kernels_give_the_reference_bytes(rng):
    for dtype in (np.float32, np.float64):
        for shape, axes in [((3, 9000), (1,)), ((9000, 5), (0,)), ((4, 5000, 3), (1,)), ((70000,), (0,))]:
            x = rng.normal(size=shape).astype(dtype)
            attrs = {"axes": axes, "keepdims": False, "dtype": np.dtype(dtype)}
            want = REDUCE_KERNELS["sum"](attrs, x)
            got = cpu_reduce.fold_sum(x, axes, blocked=True).astype(dtype).reshape(want.shape)
            assert got.tobytes() == want.tobytes()


def test_sum_of_squares_gives_the_reference_bytes_on_the_numba_kernel(rng):
    for dtype in (np.float32, np.float64):
        grads = [rng.normal(size=n).astype(dtype) for n in (0, 3, 4096, 4097, 100_000)]
        want = reference_sum_of_squares({"dtype": np.dtype(dtype)}, *grads)
        assert cpu_reduce.sum_of_squares(grads, np.dtype(dtype)).tobytes() == want.tobytes()


def test_softmax_rows_longer_than_4096_keep_the_left_fold(rng):
    x = rng.normal(size=(2, 5000))
    attrs = {"axis": 1, "dtype": np.dtype(np.float64)}
    want = SOFTMAX_KERNELS["softmax"](attrs, x)
    e = np.exp(x - x.max(1, keepdims=True))
    totals = [_left_loop(list(row)) for row in e]
    np.testing.assert_array_equal(want, e / np.array(totals)[:, None])
    got = cpu_softmax.run("softmax", 1, [x], np.dtype(np.float64))
    np.testing.assert_allclose(got, want, rtol=4e-16, atol=0)


@settings(max_examples=40, deadline=None)
@given(st.integers(BLOCK_SPAN + 1, 300_000), st.integers(0, 2 ** 32 - 1), st.sampled_from([0.0, 1.0]))
def test_blocked_sum_is_within_the_documented_bound_of_the_exact_and_left_sums(n, seed, shift):
    """docs/NUMERICS.md: |blocked - exact| <= (ceil(K/P) + P - 2) u sum|x| and |left - exact| <=
    (K - 1) u sum|x| (u = 2^-53, float64 data; first-order bounds, 1% slack for the second order)."""
    x = np.random.default_rng(seed).normal(loc=shift, size=n)
    p = partials(n)
    magnitude = float(np.abs(x).sum())
    exact = math.fsum(x.tolist())
    blocked = lt.tensor(x).sum().item()
    left = float(np.add.accumulate(x)[-1])
    assert abs(blocked - exact) <= 1.01 * (-(-n // p) + p - 2) * U * magnitude
    assert abs(blocked - left) <= 1.01 * ((-(-n // p) + p - 2) + (n - 1)) * U * magnitude


def test_float32_results_of_blocked_and_left_sums_agree_within_one_unit(rng):
    x = rng.normal(size=200_000).astype(np.float32)
    blocked = lt.tensor(x).sum().item()
    left = np.float32(np.add.accumulate(x.astype(np.float64))[-1])
    assert abs(np.float32(blocked) - left) <= abs(np.spacing(left))


def _device_program(a, g):
    return [a.sum(), a.sum(0), a.mean(1), a.reshape(-1).mean(), lt.nn.functional.mse_loss(a, g),
            a.var(), a.sum((0, 1), keepdim=True)]


def test_device_blocked_sums_give_the_cpu_bytes(cuda_device, rng):
    a = rng.normal(size=(4100, 3)).astype(np.float32)
    g = rng.normal(size=(4100, 3)).astype(np.float32)
    lt.set_device("cpu")
    cpu = [r.numpy().copy() for r in _device_program(lt.tensor(a), lt.tensor(g))]
    cuda_device()
    for _ in range(2):  # the same bytes on every run
        dev = [r.numpy().copy() for r in _device_program(lt.tensor(a).to("cuda"), lt.tensor(g).to("cuda"))]
        assert [c.tobytes() for c in cpu] == [d.tobytes() for d in dev]


def test_device_sum_of_squares_gives_the_cpu_bytes(cuda_device, rng):
    shapes = [(3,), (64, 64), (4097,), (300, 70), (0,)]
    grads = [rng.normal(size=s).astype(np.float32) for s in shapes]

    def clip_total(device):
        params = [lt.tensor(np.zeros(s, np.float32), requires_grad=True) for s in shapes]
        for p, g in zip(params, grads):
            p.grad = lt.tensor(g).to(device) if device != "cpu" else lt.tensor(g)
        return lt.nn.utils.clip_grad_norm_((p for p in params), 1.0).numpy().copy()
    lt.set_device("cpu")
    cpu = clip_total("cpu")
    cuda_device()
    assert clip_total("cuda").tobytes() == cpu.tobytes()
