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
