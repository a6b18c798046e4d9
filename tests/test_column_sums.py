"""A fused tree whose value only a float sum over all but its last axis reads folds its rows into the
column sums as its kernel makes them, never storing the value (runtime/fusion.py,
kernels/cpu/column_sums.py): a layer norm's weight gradient, a bias-like `(a * b).sum(0)`. The folds
are the reference's, in its order (blocked partials over more than 4096 rows included), so the sums are
the bytes the NumPy backend gives, on one thread or several."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.runtime import devices, parallel
from lazytensor.runtime.backends.numpy_backend import NumpyBackend


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Column sums fold in the CPU fuser's kernels; these tests run there whatever LAZYTENSOR_DEVICE says."""
    lt.set_device("cpu")


def _layer_norm_weight_grad(x, g):
    return (F.layer_norm(x, x.shape[-1:]) * g).sum(dim=tuple(range(x.ndim - 1)))


def _scaled_sum(x, g, keepdim=False):
    return (x * g + 0.5).sum(dim=tuple(range(x.ndim - 1)), keepdim=keepdim)


def _labels(fn, *arrays):
    with lt.profile() as p:
        value = fn(*(lt.tensor(a) for a in arrays)).numpy()
    return value, [kernel.op for kernel in p.kernels]


def _on_numpy(monkeypatch, fn, *arrays):
    with monkeypatch.context() as m:
        m.setattr(devices, "_HOST_CHAIN", (NumpyBackend(),))  # the reference alone
        return fn(*(lt.tensor(a) for a in arrays)).numpy()


def _normal(rng, shape, dtype=np.float32):
    return rng.normal(size=shape).astype(dtype)


def test_a_layer_norm_weight_gradient_is_one_kernel_with_its_column_sums():
    rng = np.random.default_rng(0)
    x, g = _normal(rng, (8, 64, 96)), _normal(rng, (8, 64, 96))
    _, labels = _labels(_layer_norm_weight_grad, x, g)
    assert labels == ["fused(layer_norm+mul+sum)"]


def test_a_layer_norm_module_backward_folds_its_weight_gradient_in_its_kernel():
    rng = np.random.default_rng(1)
    norm = lt.nn.LayerNorm(96)
    x = lt.tensor(_normal(rng, (4, 64, 96)), requires_grad=True)
    with lt.profile() as p:
        (norm(x) * lt.tensor(_normal(rng, (4, 64, 96)))).sum().backward()
        norm.weight.grad.numpy()
    assert any(kernel.op.startswith("fused(") and kernel.op.endswith("layer_norm+mul+sum)") for kernel in p.kernels)


def test_folded_column_sums_give_the_numpy_backend_bytes(monkeypatch):
    rng = np.random.default_rng(2)
    for fn in (_layer_norm_weight_grad, _scaled_sum):
        x, g = _normal(rng, (16, 40, 77)), _normal(rng, (16, 40, 77))
        got, labels = _labels(fn, x, g)
        assert labels[-1].endswith("+sum)")
        want = _on_numpy(monkeypatch, fn, x, g)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_column_sums_over_more_than_4096_rows_fold_the_reference_partials(monkeypatch):
    """6,000 rows: the blocked order's two strided partials (row r into partial r mod 2)."""
    rng = np.random.default_rng(3)
    x, g = _normal(rng, (3, 2000, 24)), _normal(rng, (3, 2000, 24))
    got, labels = _labels(_scaled_sum, x, g)
    assert labels == ["fused(mul+add+sum)"]
    assert got.tobytes() == _on_numpy(monkeypatch, _scaled_sum, x, g).tobytes()


def test_a_sum_keeping_its_dims_is_folded_with_the_reference_bytes_and_shape(monkeypatch):
    rng = np.random.default_rng(4)
    x, g = _normal(rng, (8, 32, 64)), _normal(rng, (8, 32, 64))
    got, labels = _labels(lambda a, b: _scaled_sum(a, b, keepdim=True), x, g)
    assert labels == ["fused(mul+add+sum)"] and got.shape == (1, 1, 64)
    assert got.tobytes() == _on_numpy(monkeypatch, lambda a, b: _scaled_sum(a, b, keepdim=True), x, g).tobytes()


def test_column_sums_of_signed_zeros_infinities_and_nans_match_the_reference(monkeypatch):
    """A float sum is never -0.0; inf - inf and NaN propagate as in the reference's folds."""
    x = np.full((4, 64, 40), -0.0, np.float32)
    g = np.ones((4, 64, 40), np.float32)
    x[:, :, 1] = np.inf
    x[1, 3, 2], x[2, 5, 2] = np.inf, -np.inf
    x[0, 0, 3] = np.nan
    fn = lambda a, b: (a * b).sum(dim=(0, 1))  # noqa: E731
    got, labels = _labels(fn, x, g)
    assert labels == ["fused(mul+sum)"]
    want = _on_numpy(monkeypatch, fn, x, g)
    assert got.tobytes() == want.tobytes() and np.signbit(got[0]) == np.False_


def test_a_summed_value_the_user_also_reads_is_stored_and_summed_apart():
    rng = np.random.default_rng(5)
    x, g = (lt.tensor(_normal(rng, (8, 64, 64))) for _ in range(2))
    with lt.profile() as p:
        y = x * g
        s = y.sum(dim=(0, 1))
        lt.realize(y, s)
    assert [kernel.op for kernel in p.kernels] == ["mul", "sum"]


def test_a_sum_that_keeps_a_leading_axis_is_not_folded():
    rng = np.random.default_rng(6)
    x, g = (lt.tensor(_normal(rng, (8, 64, 64))) for _ in range(2))
    with lt.profile() as p:
        (x * g).sum(dim=1).numpy()
    assert not any(kernel.op.endswith("+sum)") for kernel in p.kernels)


@settings(max_examples=25, deadline=None)
@given(lead=st.lists(st.integers(1, 48), min_size=1, max_size=2), cols=st.integers(1, 160),
       dtype=st.sampled_from([np.float32, np.float64]), layer_norm=st.booleans(), seed=st.integers(0, 2**16))
def test_random_folded_column_sums_give_the_numpy_backend_bytes(lead, cols, dtype, layer_norm, seed):
    rows = int(np.prod(lead))
    if rows * cols < 8192:  # smaller values are not fused
        rows_needed = -(-8192 // cols)
        lead = [lead[0] * -(-rows_needed // rows)] + lead[1:]
    shape = tuple(lead) + (cols,)
    rng = np.random.default_rng(seed)
    x, g = _normal(rng, shape, dtype), _normal(rng, shape, dtype)
    fn = _layer_norm_weight_grad if layer_norm and cols > 1 else _scaled_sum
    got, labels = _labels(fn, x, g)
    assert labels[-1].endswith("+sum)")
    with pytest.MonkeyPatch.context() as m:
        assert got.tobytes() == _on_numpy(m, fn, x, g).tobytes()


@pytest.fixture
def two_threads(monkeypatch):
    """Two CPU threads, kernels cut from 1,024 elements of work per piece; the pieces each kernel asked
    for are listed. Skips where numba's pool cannot run pieces."""
    monkeypatch.setattr(parallel, "MIN_PIECE", 1024)
    before = parallel._state["threads"]
    lt.set_num_threads(2)
    if lt.get_num_threads() < 2:
        parallel._state["threads"] = before
        pytest.skip("numba's pool runs no pieces here")
    cuts, cut = [], parallel.pieces
    monkeypatch.setattr(parallel, "pieces", lambda n, w=1: cuts.append(cut(n, w)) or cuts[-1])
    yield cuts
    lt.set_num_threads(1)
    parallel._state["threads"] = before


def test_column_sums_folded_on_two_threads_give_the_one_thread_bytes(two_threads, monkeypatch):
    rng = np.random.default_rng(7)
    x, g = _normal(rng, (12, 700, 48)), _normal(rng, (12, 700, 48))  # 8,400 rows: two partials
    split, labels = _labels(_scaled_sum, x, g)
    assert labels == ["fused(mul+add+sum)"] and any(b is not None and len(b) > 2 for b in two_threads)
    lt.set_num_threads(1)
    whole, _ = _labels(_scaled_sum, x, g)
    assert split.tobytes() == whole.tobytes() == _on_numpy(monkeypatch, _scaled_sum, x, g).tobytes()


def test_a_compiled_step_whose_only_kernel_folds_column_sums_cuts_it_between_threads(two_threads):
    """A replay decides to cut kernels from the operands they read too: here the one kernel's value,
    the (64,) sums, is small, its operands are not."""
    rng = np.random.default_rng(8)
    step = lt.jit(_scaled_sum)
    x, g = lt.tensor(_normal(rng, (16, 64, 64))), lt.tensor(_normal(rng, (16, 64, 64)))
    first = step(x, g).numpy()
    for _ in range(3):
        two_threads.clear()
        again = step(x, g).numpy()
        assert any(b is not None for b in two_threads)
        assert again.tobytes() == first.tobytes()
