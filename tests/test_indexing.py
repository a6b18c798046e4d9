"""Subscripts and index ops against NumPy."""
import numpy as np
import pytest

import lazytensor as lt

KEYS = [(slice(None),), (1,), (-1,), (slice(1, None, 2),), (slice(None, None, -1),), (Ellipsis, 0),
        (None, 1), (slice(None), None, slice(1, 3)), (1, slice(None, None, -2), 2), (Ellipsis, None),
        (slice(5, 1),), (slice(-100, 100),), (0, Ellipsis, slice(None, None, -1))]


@pytest.mark.parametrize("key", KEYS, ids=str)
def test_basic_slicing_matches_numpy_and_stays_lazy(key, rng):
    x = rng.normal(size=(3, 4, 5))
    t = lt.tensor(x)
    lt.reset_counters()
    sub = t[key]
    assert lt.counters()["realizations"] == 0
    np.testing.assert_array_equal(sub.numpy(), x[key])


@pytest.mark.parametrize("key", [(1,), (-1, slice(None, None, 2)), (slice(None), 2), (Ellipsis, 0)], ids=str)
def test_an_integer_index_is_one_node_that_drops_its_axis(key, rng, cuda_device):
    """x[i] is a single slice that drops the axis in its own copy: on a device, one kernel; its gradient
    lands where it read."""
    x = rng.normal(size=(3, 4, 5)).astype(np.float32)
    cuda_device(offload="always")
    t = lt.tensor(x, requires_grad=True)
    sub = t[key]
    assert sub._node.op == "slice" and sub._node.inputs == (t._node,)
    lt.reset_counters()
    np.testing.assert_array_equal(sub.numpy(), x[key])
    assert lt.counters()["kernels"] == 1
    (sub * 3).sum().backward()
    expected = np.zeros_like(x)
    expected[key] = 3
    np.testing.assert_array_equal(t.grad.numpy(), expected)


@pytest.mark.parametrize("shape", [(3, 1), (3, 4), (2, 1, 5)], ids=str)
def test_row_is_the_node_of_an_integer_index(shape, rng):
    """indexing.row(x, i), the optimizers' unpacking, builds the very node x[i] builds (no key parsing)."""
    from lazytensor.indexing import row
    x = lt.tensor(rng.normal(size=shape).astype(np.float32))
    for i in range(shape[0]):
        got, want = row(x, i)._node, x[i]._node
        assert (got.op, got.attrs, got.shape, got.dtype, got.inputs) == \
            (want.op, want.attrs, want.shape, want.dtype, want.inputs)
        np.testing.assert_array_equal(row(x, i).numpy(), x.numpy()[i])


def test_row_of_a_vector_is_a_lazy_scalar(rng):
    """Where x[i] of a vector reads the element on the host, row(x, i) stays a lazy 0-d slice."""
    from lazytensor.indexing import row
    x = lt.tensor(rng.normal(size=3)) * 2
    lt.reset_counters()
    r = row(x, 1)
    assert r.shape == () and lt.counters()["realizations"] == 0
    assert r.item() == x.numpy()[1]


def test_integer_on_every_axis_reads_one_element_and_downloads_once(rng):
    x = rng.normal(size=(3, 4))
    t = lt.tensor(x) * 2
    e = t[1, 2]
    c = lt.counters()
    assert c["realizations"] == 1 and c["host_reads_by_trigger"] == {"getitem": 1}
    assert isinstance(e, lt.Tensor) and e.shape == () and e.is_realized
    assert float(e) == x[1, 2] * 2
    t[0, 0], t[2, 3]
    assert lt.counters()["realizations"] == 1


def test_negative_indices_count_from_the_end():
    t = lt.arange(5)
    assert t[-1].item() == 4
    assert t[-5].item() == 0


@pytest.mark.parametrize("key", [([0, 2],), ([[0], [2]], slice(1, 3)), (slice(None), [1, -1]),
                                 ([0, 1], [2, 3]), ([0, 2], 1, slice(None)), (0, slice(None), [1, 3])],
                         ids=str)
def test_integer_tensor_indexing_matches_numpy(key, rng):
    x = rng.normal(size=(3, 4, 5))
    lt_key = tuple(lt.tensor(k) if isinstance(k, list) else k for k in key)
    np_key = tuple(np.array(k) if isinstance(k, list) else k for k in key)
    np.testing.assert_array_equal(lt.tensor(x)[lt_key].numpy(), x[np_key])


def test_picking_target_logits_with_two_index_tensors(rng):
    logits = rng.normal(size=(6, 10)).astype(np.float32)
    targets = rng.integers(0, 10, 6)
    got = lt.tensor(logits)[lt.arange(6), lt.tensor(targets)]
    np.testing.assert_array_equal(got.numpy(), logits[np.arange(6), targets])


def test_index_select_along_a_dim(rng):
    x = rng.normal(size=(5, 3))
    idx = np.array([4, 0, 0, 2])
    np.testing.assert_array_equal(lt.tensor(x).index_select(0, lt.tensor(idx)).numpy(), x[idx])
    np.testing.assert_array_equal(lt.index_select(lt.tensor(x), 1, lt.tensor([2, 1])).numpy(), x[:, [2, 1]])


def test_index_select_with_a_2d_index_is_an_embedding_lookup(rng):
    table = rng.normal(size=(10, 4))
    ids = rng.integers(0, 10, size=(2, 3))
    got = lt.tensor(table).index_select(0, lt.tensor(ids))
    assert got.shape == (2, 3, 4)
    np.testing.assert_array_equal(got.numpy(), table[ids])


def test_gather_follows_pytorch(rng):
    x = rng.normal(size=(3, 4))
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    got = lt.tensor(x).gather(1, lt.tensor(idx)).numpy()
    want = np.array([[x[i, idx[i, j]] for j in range(2)] for i in range(3)])
    np.testing.assert_array_equal(got, want)
    idx0 = np.array([[2, 0, 1]])  # smaller than x outside the gathered dim
    want0 = np.array([[x[idx0[0, j], j] for j in range(3)]])
    np.testing.assert_array_equal(lt.gather(lt.tensor(x), 0, lt.tensor(idx0)).numpy(), want0)


def test_take_along_axis_matches_numpy(rng):
    x = rng.normal(size=(3, 4))
    idx = np.argsort(x, axis=1)
    np.testing.assert_array_equal(lt.take_along_axis(lt.tensor(x), lt.tensor(idx), 1).numpy(),
                                  np.take_along_axis(x, idx, 1))


def test_masked_fill_keeps_dtype_and_shape():
    x = lt.zeros(2, 3)
    mask = lt.tensor([[True, False, True]])
    got = x.masked_fill(mask, float("-inf"))
    assert got.dtype == lt.float32 and got.shape == (2, 3)
    assert got.tolist() == [[float("-inf"), 0, float("-inf")]] * 2


def test_causal_mask_with_tril_triu():
    ones = lt.ones(3, 3)
    assert ones.tril().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert lt.triu(ones, 1).tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    batched = lt.ones(2, 3, 3).tril(-1)
    np.testing.assert_array_equal(batched.numpy(), np.tril(np.ones((2, 3, 3), np.float32), -1))


def test_narrow_is_a_lazy_slice():
    t = lt.arange(10).reshape(2, 5)
    assert t.narrow(1, 1, 3).tolist() == [[1, 2, 3], [6, 7, 8]]


@pytest.mark.parametrize("dim, start, length", [(1, 1, 3), (1, -2, 2), (0, 1, 1), (1, 5, 0)])
def test_narrow_builds_the_node_of_the_same_subscript(dim, start, length):
    t = lt.arange(10.0).reshape(2, 5)
    first = start + t.shape[dim] if start < 0 else start
    key = [slice(None)] * 2
    key[dim] = slice(first, first + length)
    narrowed, subscript = t.narrow(dim, start, length), t[tuple(key)]
    assert (narrowed._node.op, narrowed._node.attrs, narrowed.shape) == (
        subscript._node.op, subscript._node.attrs, subscript.shape)
    np.testing.assert_array_equal(narrowed.numpy(), subscript.numpy())


def test_narrow_of_the_whole_dimension_is_the_tensor_itself():
    t = lt.arange(10).reshape(2, 5)
    assert t.narrow(1, 0, 5) is t


def test_narrow_with_a_non_integer_start_is_a_type_error_naming_narrow():
    with pytest.raises(TypeError, match="narrow: start and length must be integers, got 1.5 and 2"):
        lt.arange(10).reshape(2, 5).narrow(1, 1.5, 2)


def test_iterating_yields_rows():
    rows = list(lt.tensor([[1, 2], [3, 4]]))
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4]]
