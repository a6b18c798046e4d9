"""cumsum, cumprod, sort/argsort, topk and multinomial (values and gradients against PyTorch where it is installed),
and two PyTorch habits: an embedding index of -1 and a second backward through one graph."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lazytensor as lt


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _grads(fn_lt, fn_torch, torch, x):
    w = np.random.default_rng(3).uniform(0.5, 1.5, size=np.shape(fn_torch(torch.from_numpy(x)).detach()))
    ours, theirs = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_lt, out_t = fn_lt(ours), fn_torch(theirs)
    (out_lt * lt.tensor(w, dtype=out_lt.dtype)).sum().backward()
    (out_t * torch.from_numpy(w).to(out_t.dtype)).sum().backward()
    return out_lt, out_t, ours.grad.numpy(), theirs.grad.numpy()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumsum_matches_pytorch_in_value_and_gradient(torch, dim):
    x = np.random.default_rng(0).standard_normal((5, 6))
    out, ref, g, g_ref = _grads(lambda t: t.cumsum(dim), lambda t: t.cumsum(dim), torch, x)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_cumsum_of_integers_and_bools_is_int64_as_in_pytorch(torch):
    ints = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    assert lt.tensor(ints).cumsum(1).dtype == lt.int64
    assert lt.tensor(ints).cumsum(1).tolist() == torch.from_numpy(ints).cumsum(1).tolist()
    assert lt.tensor([True, False, True]).cumsum(0).tolist() == [1, 1, 2]
    assert lt.tensor(ints).cumsum(0, dtype=lt.float32).dtype == lt.float32


def test_cumsum_folds_left_to_right_in_float64():
    x = np.array([1e8, 1.0, -1e8, 1.0], dtype=np.float32)
    expected = np.cumsum(x.astype(np.float64)).astype(np.float32)
    assert lt.tensor(x).cumsum(0).numpy().tobytes() == expected.tobytes()


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_matches_pytorch_in_value_and_gradient(torch, dim):
    x = np.random.default_rng(5).uniform(-1.5, 1.5, (5, 6))
    out, ref, g, g_ref = _grads(lambda t: t.cumprod(dim), lambda t: t.cumprod(dim), torch, x)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12)


def test_cumprod_gradient_is_exact_where_the_input_has_zeros(torch):
    x = np.array([[2.0, 0.0, 3.0, 0.0, 5.0], [0.0, 1.5, -2.0, 4.0, 0.5], [1.0, 2.0, 3.0, 4.0, 0.0]])
    out, ref, g, g_ref = _grads(lambda t: lt.cumprod(t, 1), lambda t: t.cumprod(1), torch, x)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=0)
    assert np.isfinite(g).all()


def test_cumprod_of_integers_is_int64_and_folds_in_float64_for_floats(torch):
    ints = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int32)
    assert lt.tensor(ints).cumprod(1).dtype == lt.int64
    assert lt.tensor(ints).cumprod(1).tolist() == torch.from_numpy(ints).cumprod(1).tolist()
    x = np.array([1e20, 1e20, 1e-30, 3.0], dtype=np.float32)  # a float32 running product would overflow
    with np.errstate(over="ignore"):
        expected = np.cumprod(x.astype(np.float64)).astype(np.float32)
    assert np.isinf(expected[1]) and np.isfinite(expected[2:]).all()
    assert lt.tensor(x).cumprod(0).numpy().tobytes() == expected.tobytes()


@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_in_both_directions_with_nan_largest_as_in_pytorch(torch, descending):
    x = np.array([[3.0, 1.0, np.nan, 1.0, 3.0, -2.0], [0.0, 0.0, 5.0, -1.0, 5.0, np.nan]], dtype=np.float32)
    values, indices = lt.tensor(x).sort(dim=1, descending=descending)
    ref = torch.from_numpy(x).sort(dim=1, descending=descending, stable=True)
    assert indices.tolist() == ref.indices.tolist()
    np.testing.assert_array_equal(values.numpy(), ref.values.numpy())
    assert lt.argsort(lt.tensor(x), dim=1, descending=descending).tolist() == ref.indices.tolist()


def test_sorted_values_carry_the_gradient_to_their_positions(torch):
    x = np.random.default_rng(1).standard_normal((4, 7))
    out, ref, g, g_ref = _grads(lambda t: t.sort(dim=0, descending=True).values,
                                lambda t: t.sort(dim=0, descending=True).values, torch, x)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(g, g_ref)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_pytorch_values_indices_and_gradient(torch, largest):
    x = np.random.default_rng(2).standard_normal((3, 9))  # no ties: PyTorch leaves tie order open
    out, ref, g, g_ref = _grads(lambda t: t.topk(4, dim=1, largest=largest).values,
                                lambda t: t.topk(4, dim=1, largest=largest).values, torch, x)
    np.testing.assert_array_equal(out.numpy(), ref.detach().numpy())
    np.testing.assert_array_equal(g, g_ref)
    ours = lt.tensor(x).topk(4, dim=1, largest=largest).indices
    assert ours.tolist() == torch.from_numpy(x).topk(4, dim=1, largest=largest).indices.tolist()


def test_topk_ties_come_in_position_order_and_bad_k_is_refused():
    values, indices = lt.tensor([1.0, 5.0, 3.0, 5.0]).topk(3)
    assert indices.tolist() == [1, 3, 2] and values.tolist() == [5.0, 5.0, 3.0]
    with pytest.raises(ValueError, match=r"k must be an integer in \[0, 4\]"):
        lt.tensor([1.0, 2.0, 3.0, 4.0]).topk(5)


def test_multinomial_with_replacement_draws_each_category_as_often_as_its_weight():
    lt.manual_seed(11)
    weights = np.array([1.0, 0.0, 6.0, 3.0], dtype=np.float32)  # need not sum to one
    draws = lt.multinomial(lt.tensor(np.tile(weights, (40000, 1))), 1).numpy().ravel()
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, weights / weights.sum(), atol=0.01)  # ~5 standard deviations
    assert freq[1] == 0.0


def test_multinomial_without_replacement_draws_distinct_categories_with_the_sequential_law():
    lt.manual_seed(12)
    p = np.array([0.1, 0.0, 0.6, 0.3])
    draws = lt.multinomial(lt.tensor(np.tile(p, (40000, 1)).astype(np.float32)), 2).numpy()
    assert draws.shape == (40000, 2) and (draws[:, 0] != draws[:, 1]).all() and not (draws == 1).any()
    # P(second = i) = sum_j p_j p_i / (1 - p_j), drawing one by one without putting back
    second = [sum(p[j] * p[i] / (1 - p[j]) for j in range(4) if j != i) for i in range(4)]
    np.testing.assert_allclose(np.bincount(draws[:, 1], minlength=4) / 40000, second, atol=0.01)


def test_multinomial_on_a_1d_tensor_and_its_errors():
    lt.manual_seed(13)
    assert lt.tensor([0.2, 0.8]).multinomial(5, replacement=True).shape == (5,)
    with pytest.raises(ValueError, match="without replacement from 2 categories"):
        lt.multinomial(lt.tensor([0.2, 0.8]), 3)
    with pytest.raises(ValueError, match="1-d or 2-d float"):
        lt.multinomial(lt.tensor([1, 2]), 1)


def test_multinomial_samples_the_same_on_every_backend_for_one_seed(virtual):
    def draw():
        lt.manual_seed(14)
        return lt.multinomial(lt.tensor(np.tile([[1.0, 2.0, 3.0]], (64, 1)).astype(np.float32)), 2).numpy()
    lt.set_device("cpu")
    on_cpu = draw()
    virtual(offload="always")
    assert np.array_equal(draw(), on_cpu)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.integers(1, 3), st.booleans(),
       st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 1e-3]), min_size=5, max_size=5).filter(any))
def test_a_draw_with_replacement_on_the_cpu_is_the_draw_a_device_makes_for_one_seed(seed, rows, samples, flat,
                                                                                   weights):
    """On the CPU the draw is made on the host at once (runtime/sampling.py); on a device it stays a graph.
    The same seed gives the same categories, and the random stream after it is the same too."""
    def draw():
        lt.manual_seed(seed)
        w = lt.tensor(np.array(weights if flat else [weights] * rows, np.float32))
        out = lt.multinomial(w, samples, replacement=True)
        return out.numpy(), lt.rand(3).numpy()
    lt.set_device("cpu")
    try:
        on_cpu = draw()
        lt.set_device("virtual", offload="always")
        on_device = draw()
    finally:
        lt.set_device("cpu")
    assert on_cpu[0].dtype == on_device[0].dtype == np.int64
    assert np.array_equal(on_cpu[0], on_device[0]) and np.array_equal(on_cpu[1], on_device[1])


def test_a_draw_of_one_sample_on_the_cpu_is_made_at_once_and_counted_as_its_kernels():
    lt.set_device("cpu")
    probs = lt.softmax(lt.randn(2, 7), dim=-1)
    probs.numpy()
    lt.reset_counters()
    out = lt.multinomial(probs, 1)
    assert out.residency == lt.Residency.HOST and out.shape == (2, 1)
    assert lt.counters()["kernels"] == 6  # cumsum, div, uniform, le, cast, sum: as the graph's
    assert ((out.numpy() >= 0) & (out.numpy() < 7)).all()


def test_an_embedding_index_of_minus_one_raises_index_error_as_in_pytorch():
    emb = lt.nn.Embedding(10, 4)
    with pytest.raises(IndexError, match="index -1 is out of range for dimension 0 with size 10"):
        emb(lt.tensor([[-1]]))
    with pytest.raises(IndexError, match="index 10 is out of range"):
        emb(lt.tensor([3, 10]))
    assert emb(lt.tensor([0, 9])).shape == (2, 4)


def test_a_second_backward_through_one_graph_raises_unless_the_first_retained_it():
    a = lt.tensor([1.0, 2.0], requires_grad=True)
    loss = (a * a).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()
    b = lt.tensor([1.0, 2.0], requires_grad=True)
    kept = (b * b).sum()
    kept.backward(retain_graph=True)
    kept.backward()
    assert b.grad.tolist() == [4.0, 8.0]  # accumulated twice: 2 * (2b)


@pytest.mark.parametrize("weights,message", [
    ([-1.0, 2.0], "inf, nan or an element < 0"),
    ([float("nan"), 1.0], "inf, nan or an element < 0"),
    ([float("inf"), 1.0], "inf, nan or an element < 0"),
    ([0.0, 0.0], "sum to 0"),
    ([[0.2, 0.8], [0.0, 0.0]], "sum to 0"),
])
def test_multinomial_refuses_weights_that_are_no_distribution(weights, message):
    with pytest.raises(ValueError, match=message):
        lt.multinomial(lt.tensor(weights), 1)


def test_multinomial_without_replacement_needs_as_many_positive_weights_as_samples():
    with pytest.raises(ValueError, match="only 1 nonzero"):
        lt.multinomial(lt.tensor([0.0, 1.0, 0.0]), 2)
    assert lt.multinomial(lt.tensor([0.0, 1.0, 0.0]), 2, replacement=True).numpy().tolist() == [1, 1]
