"""Shape ops against NumPy: reshape/view, permute/transpose/.T/.mT, expand, squeeze, cat/stack/split."""
import numpy as np
import pytest

import lazytensor as lt


@pytest.fixture
def x(rng):
    return rng.normal(size=(2, 3, 4)).astype(np.float32)


def test_reshape_with_inferred_size(x):
    np.testing.assert_array_equal(lt.tensor(x).reshape(4, -1).numpy(), x.reshape(4, -1))
    np.testing.assert_array_equal(lt.tensor(x).view((6, 4)).numpy(), x.reshape(6, 4))


def test_reshape_of_a_transposed_tensor_reads_row_major(x):
    np.testing.assert_array_equal(lt.tensor(x).mT.reshape(-1).numpy(), np.swapaxes(x, -1, -2).reshape(-1))


def test_permute_transpose_and_T(x):
    t = lt.tensor(x)
    np.testing.assert_array_equal(t.permute(2, 0, 1).numpy(), x.transpose(2, 0, 1))
    np.testing.assert_array_equal(t.transpose(0, 2).numpy(), np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(t.T.numpy(), x.T)
    np.testing.assert_array_equal(t.mT.numpy(), np.swapaxes(x, -1, -2))


def test_a_bad_permutation_raises_on_every_call_not_only_the_first():
    t = lt.ones(2, 3)
    for _ in range(2):  # the checked permutations are cached; a refused one never is
        with pytest.raises(ValueError, match=r"permute: \(0, 0\) is not a permutation of the dimensions 0..1"):
            t.permute(0, 0)
        with pytest.raises(lt.AxisError, match="transpose: axis 2 is out of range"):
            t.transpose(0, 2)


def test_transpose_takes_numpy_integers_and_integer_tensors_as_dims(x):
    t = lt.tensor(x)
    np.testing.assert_array_equal(t.transpose(np.int64(0), lt.tensor(2)).numpy(), np.swapaxes(x, 0, 2))
    np.testing.assert_array_equal(t.permute(np.int64(2), 0, -2).numpy(), x.transpose(2, 0, 1))


def _kernels_to_realize(t):
    before = lt.counters()["kernels"]
    t.realize()
    return lt.counters()["kernels"] - before


def test_a_permute_of_a_pending_permute_runs_as_one_permute_of_its_source(x):
    t = lt.tensor(x).permute(1, 2, 0).transpose(0, 2)
    assert _kernels_to_realize(t) == 1
    np.testing.assert_array_equal(t.numpy(), x.transpose(1, 2, 0).swapaxes(0, 2))


def test_a_permute_undoing_a_pending_permute_runs_no_kernel(x):
    for t in (lt.tensor(x).mT.mT, lt.tensor(x).permute(2, 0, 1).permute(1, 2, 0)):
        assert _kernels_to_realize(t) == 0
        np.testing.assert_array_equal(t.numpy(), x)


def test_a_reshape_of_a_pending_reshape_runs_as_one_reshape(x):
    t = lt.tensor(x).reshape(4, 6).view(8, 3)
    assert _kernels_to_realize(t) == 1
    np.testing.assert_array_equal(t.numpy(), x.reshape(8, 3))
    assert _kernels_to_realize(lt.tensor(x).reshape(-1).view(2, 3, 4)) == 0


def test_a_write_to_the_middle_view_leaves_a_view_of_it_as_it_was(x):
    middle = lt.tensor(x).mT
    outer = middle.mT
    middle[0, 0, 0] = 5.0
    np.testing.assert_array_equal(outer.numpy(), x)
    assert middle.numpy()[0, 0, 0] == 5.0


def test_the_gradient_through_two_permutes_reaches_their_source(x, rng):
    w = lt.tensor(x, requires_grad=True)
    c = rng.normal(size=(4, 3, 2)).astype(np.float32)
    (w.permute(1, 0, 2).permute(2, 0, 1) * lt.tensor(c)).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), c.transpose(1, 2, 0).transpose(1, 0, 2))
    with lt.no_grad():
        assert _kernels_to_realize(w.mT.mT) == 0


def test_a_transposed_product_of_a_transpose_is_one_product_of_the_transposed_factors(rng):
    a, b = (rng.normal(size=s).astype(np.float32) for s in ((3, 5), (3, 4)))
    t = (lt.tensor(a).T @ lt.tensor(b)).T
    assert _kernels_to_realize(t) == 2  # b.T and the product: a.T.T is a, and no transpose of the result
    np.testing.assert_allclose(t.numpy(), (a.T @ b).T, rtol=1e-6)
    u = (lt.tensor(a.T) @ lt.tensor(b)).T  # no factor is a transpose: the product, then its transpose
    assert _kernels_to_realize(u) == 2
    np.testing.assert_allclose(u.numpy(), (a.T @ b).T, rtol=1e-6)


def test_a_linear_layers_weight_gradient_is_computed_in_the_weights_layout_on_the_host(rng):
    lt.set_device("cpu")  # a layout on the host (a device's result comes down contiguous anyway)
    layer = lt.nn.Linear(3, 4)
    x = rng.normal(size=(2, 5, 3)).astype(np.float32)
    layer(lt.tensor(x)).square().sum().backward()
    w, b = layer.weight.numpy(), layer.bias.numpy()
    g = 2 * (x @ w.T + b)
    np.testing.assert_allclose(layer.weight.grad.numpy(), g.reshape(-1, 4).T @ x.reshape(-1, 3), rtol=1e-5)
    assert layer.weight.grad._node.buffer.host.flags.c_contiguous  # as PyTorch's: no transposed view
    plain = (lt.tensor(x[0]) @ lt.tensor(w.T)).T
    plain.realize()
    assert not plain._node.buffer.host.flags.c_contiguous  # a transpose of a plain product stays a view


def test_expand_and_broadcast_to():
    t = lt.tensor([[1.0], [2.0]])
    assert t.expand(2, 3).tolist() == [[1, 1, 1], [2, 2, 2]]
    assert t.expand(4, -1, 3).shape == (4, 2, 3)
    assert lt.broadcast_to(t, (2, 2)).tolist() == [[1, 1], [2, 2]]


def test_squeeze_unsqueeze_flatten():
    t = lt.zeros(1, 3, 1, 2)
    assert t.squeeze().shape == (3, 2)
    assert t.squeeze(0).shape == (3, 1, 2)
    assert t.squeeze(1).shape == (1, 3, 1, 2)  # PyTorch leaves a non-1 dim alone
    assert t.unsqueeze(-1).shape == (1, 3, 1, 2, 1)
    assert t.flatten().shape == (6,)
    assert t.flatten(1, 2).shape == (1, 3, 2)
    assert lt.tensor(5.0).flatten().shape == (1,)


def test_cat_and_stack(rng):
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(4, 3))
    np.testing.assert_array_equal(lt.cat([lt.tensor(a), lt.tensor(b)]).numpy(), np.concatenate([a, b]))
    np.testing.assert_array_equal(lt.stack([lt.tensor(a), lt.tensor(a)], dim=1).numpy(), np.stack([a, a], 1))
    mixed = lt.cat([lt.tensor([1, 2]), lt.tensor([0.5])])
    assert mixed.dtype == lt.float64 and mixed.tolist() == [1, 2, 0.5]


def test_cat_with_an_empty_piece(rng):
    a = rng.normal(size=(2, 3)).astype(np.float32)
    got = lt.cat([lt.tensor(a), lt.zeros(0, 3)], dim=0).numpy()
    np.testing.assert_array_equal(got, a)


def test_split_and_chunk_follow_pytorch():
    t = lt.arange(10)
    assert [p.tolist() for p in t.split(4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [p.tolist() for p in t.split([2, 8])] == [[0, 1], [2, 3, 4, 5, 6, 7, 8, 9]]
    assert [p.shape for p in t.chunk(3)] == [(4,), (4,), (2,)]
    assert [p.shape for p in lt.zeros(2, 6).chunk(3, dim=1)] == [(2, 2)] * 3


def test_contiguous_and_clone_keep_values(x):
    t = lt.tensor(x).permute(1, 0, 2)
    np.testing.assert_array_equal(t.contiguous().numpy(), x.transpose(1, 0, 2))
    np.testing.assert_array_equal(t.clone().numpy(), x.transpose(1, 0, 2))
