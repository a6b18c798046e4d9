"""Reductions against NumPy, the left-fold rule, keepdim, PyTorch/NumPy call forms."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

SHAPES_AXES = [((5,), None), ((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), (0, 2)), ((2, 1, 3), 1),
               ((), None), ((0, 3), 0), ((3, 0), 1), ((4, 0), None)]
NP = {"sum": np.sum, "prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy warns computing the expected empty means
@pytest.mark.parametrize("op", sorted(NP))
@pytest.mark.parametrize("shape,axis", SHAPES_AXES, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions_match_numpy(op, shape, axis, keepdims, dtype, rng):
    x = rng.uniform(0.5, 1.5, size=shape).astype(dtype)
    empty = x.size == 0 or (axis is not None and any(shape[a] == 0 for a in np.atleast_1d(axis)))
    if op in ("amax", "amin") and empty:
        with pytest.raises(ValueError, match="size 0"):
            getattr(lt, op)(lt.tensor(x), axis=axis, keepdims=keepdims)
        return
    got = getattr(lt, op)(lt.tensor(x), axis=axis, keepdims=keepdims).numpy()
    with np.errstate(all="ignore"):
        want = NP[op](x.astype(np.float64), axis=axis, keepdims=keepdims).astype(dtype)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # ddof >= n in the expected values
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("correction", [0, 1])
@pytest.mark.parametrize("shape,axis", SHAPES_AXES[:6], ids=str)
def test_var_std_match_numpy_ddof(op, correction, shape, axis, rng):
    x = rng.normal(size=shape)
    got = getattr(lt, op)(lt.tensor(x), axis=axis, correction=correction).numpy()
    with np.errstate(all="ignore"):
        want = getattr(np, op)(x, axis=axis, ddof=correction)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_var_defaults_to_pytorch_unbiased_estimate():
    x = lt.tensor([1.0, 2.0, 3.0, 4.0])
    assert x.var().item() == pytest.approx(np.var([1, 2, 3, 4], ddof=1))
    assert x.var(unbiased=False).item() == pytest.approx(np.var([1, 2, 3, 4]))
    assert x.std(ddof=0).item() == pytest.approx(np.std([1, 2, 3, 4]))


def test_float32_sum_is_a_left_fold_in_float64_rounded_once(rng):
    x = rng.normal(size=1000).astype(np.float32) * np.float32(1e4)
    acc = 0.0
    for v in x.tolist():
        acc += v
    assert lt.tensor(x).sum().item() == np.float32(acc)


def test_multi_axis_sum_folds_in_row_major_order(rng):
    x = rng.normal(size=(3, 4, 5))
    got = lt.tensor(x).sum(dim=(0, 2)).numpy()
    for j in range(4):
        acc = 0.0
        for i in range(3):
            for k in range(5):
                acc += x[i, j, k]
        assert got[j] == acc


def test_integer_and_bool_sums_give_int64():
    assert lt.tensor([1, 2, 3], dtype=lt.int32).sum().dtype == lt.int64
    assert lt.tensor([True, True, False]).sum().item() == 2
    assert lt.tensor([1, 2, 3]).mean().dtype == lt.float32


def test_argmax_argmin_return_first_position_like_numpy(rng):
    x = rng.integers(0, 3, size=(4, 6)).astype(np.float32)
    t = lt.tensor(x)
    np.testing.assert_array_equal(t.argmax(1).numpy(), x.argmax(1))
    np.testing.assert_array_equal(t.argmin(0).numpy(), x.argmin(0))
    assert t.argmax().item() == x.argmax()
    assert t.argmax(1, keepdim=True).shape == (4, 1)
    assert t.argmax(dim=1).dtype == lt.int64


def test_max_with_dim_returns_values_and_indices_like_pytorch():
    x = lt.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    values, indices = x.max(dim=1)
    assert values.tolist() == [5, 7] and indices.tolist() == [1, 0]
    assert x.min(0).values.tolist() == [1, 0, 2]
    assert x.max().item() == 7
    assert x.max(axis=1).tolist() == [5, 7]  # NumPy's form returns the values only
    assert lt.max(x, lt.tensor([3.0, 3.0, 3.0])).tolist() == [[3, 5, 3], [7, 3, 7]]


def test_max_propagates_nan_like_numpy():
    assert np.isnan(lt.tensor([1.0, float("nan"), 2.0]).amax().item())


def test_any_all():
    x = lt.tensor([[0, 1], [0, 0]])
    assert x.any().item() is True and x.all().item() is False
    assert x.any(dim=1).tolist() == [True, False]


def test_dim_and_axis_keywords_are_aliases():
    x = lt.ones(2, 3)
    assert x.sum(dim=1, keepdim=True).shape == x.sum(axis=1, keepdims=True).shape == (2, 1)


def test_softmax_rows_sum_to_one_and_survive_large_inputs():
    x = lt.tensor([[1000.0, 1001.0, 1002.0], [-5.0, 0.0, 5.0]])
    p = lt.softmax(x, dim=-1).numpy()
    np.testing.assert_allclose(p.sum(-1), 1, rtol=1e-6)
    z = np.array([0.0, 1.0, 2.0])
    np.testing.assert_allclose(p[0], np.exp(z - 2) / np.exp(z - 2).sum(), rtol=1e-6)


def test_log_softmax_matches_log_of_softmax(rng):
    x = rng.normal(size=(4, 7)) * 30
    got = lt.log_softmax(lt.tensor(x), dim=1).numpy()
    m = x.max(1, keepdims=True)
    want = x - m - np.log(np.exp(x - m).sum(1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=80)
@given(st.lists(st.integers(0, 5), min_size=1, max_size=4), st.data())
def test_sum_and_prod_are_left_folds_for_any_shape_and_axes(shape, data):
    """The fast fold path must equal an explicit element-by-element loop over the reduced positions."""
    shape = tuple(shape)
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    rng = np.random.default_rng(len(shape) * 7 + sum(shape))
    x = (rng.normal(size=shape) * 10.0 ** rng.integers(-6, 6, size=shape)).astype(np.float32)
    kept = [d for d in range(len(shape)) if d not in axes]
    want_sum = np.zeros([shape[d] for d in kept], np.float64)
    want_prod = np.ones([shape[d] for d in kept], np.float64)
    for idx in np.ndindex(*shape):  # row-major over all positions = row-major over the reduced ones
        out = tuple(idx[d] for d in kept)
        want_sum[out] += np.float64(x[idx])
        want_prod[out] *= np.float64(x[idx] / 4)
    got = lt.tensor(x).sum(dim=axes).numpy()
    np.testing.assert_array_equal(got, want_sum.astype(np.float32))
    got = (lt.tensor(x) / 4).prod(dim=axes).numpy()
    np.testing.assert_array_equal(got, want_prod.astype(np.float32))


def test_a_sum_over_an_expanded_tensor_reads_the_broadcast_value_without_materializing_it():
    import tracemalloc
    n = 10 ** 8  # 400 MB if the expansion were materialized
    x = lt.tensor([0.1], dtype=lt.float32)
    x.numpy()
    tracemalloc.start()
    try:
        value = x.expand(n).sum().item()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"{peak / 2**20:.0f} MB"
    assert value == lt.full((n,), 0.1).sum().item()  # the same fold, so the same bits


def test_sums_over_broadcast_axes_in_the_middle_or_leading_give_the_bytes_of_the_copied_input():
    base = lt.tensor(np.random.default_rng(0).standard_normal((3, 1, 5)).astype(np.float32))
    wide = base.expand(3, 4000, 5)
    copied = lt.tensor(np.ascontiguousarray(np.broadcast_to(base.numpy(), (3, 4000, 5))))
    for dims in ((1,), (0, 1), (1, 2), (0,), None):
        a = wide.sum() if dims is None else wide.sum(dim=dims)
        b = copied.sum() if dims is None else copied.sum(dim=dims)
        assert a.numpy().tobytes() == b.numpy().tobytes(), dims
