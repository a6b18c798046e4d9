"""matmul: 2-D, batched, broadcast weights, matrix-vector, vector-vector; tolerance vs NumPy."""
import numpy as np
import pytest

import lazytensor as lt

CASES = [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
         ((2, 3, 4), (2, 4, 5)), ((1, 3, 4), (6, 4, 2)), ((5, 1, 3, 4), (2, 4, 3)), ((0, 4), (4, 3)),
         ((3, 0), (0, 2))]


@pytest.mark.parametrize("sa,sb", CASES, ids=str)
@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul_matches_numpy(sa, sb, dtype, rtol, rng):
    a, b = rng.normal(size=sa).astype(dtype), rng.normal(size=sb).astype(dtype)
    got = (lt.tensor(a) @ lt.tensor(b)).numpy()
    want = a.astype(np.float64) @ b.astype(np.float64)
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 10)


def test_integer_matmul_is_exact(rng):
    a, b = rng.integers(-5, 5, (3, 4)), rng.integers(-5, 5, (4, 2))
    np.testing.assert_array_equal(lt.matmul(lt.tensor(a), lt.tensor(b)).numpy(), a @ b)


def test_rank2_weight_under_rank3_activation():
    x = lt.ones(2, 3, 4)
    w = lt.ones(4, 5)
    assert (x @ w).shape == (2, 3, 5)
    assert (x @ w).sum().item() == 2 * 3 * 5 * 4


def test_mismatched_inner_dimensions_name_both_shapes():
    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4, 5\)"):
        lt.ones(2, 3) @ lt.ones(4, 5)


@pytest.mark.filterwarnings("error")
def test_a_product_that_overflows_gives_infinities_without_numpy_warnings():
    a = lt.tensor(np.array([[1e308, 1e308]]))
    b = lt.tensor(np.array([[1e308], [-np.inf]]))
    assert np.isnan((a @ b).item())  # inf + -inf: a value, as on every backend, not a RuntimeWarning
    assert (lt.tensor(np.array([[3e38]], np.float32)) @ lt.tensor(np.array([[10.0]], np.float32))).item() == np.inf


@pytest.mark.filterwarnings("error")
def test_reductions_of_infinities_give_nan_without_numpy_warnings():
    x = lt.tensor(np.array([np.inf, -np.inf, 1.0] * 3000, np.float32))
    assert np.isnan(x.sum().item()) and np.isnan(x.mean().item()) and np.isnan(x.reshape(3, -1).var(1).numpy()).all()
