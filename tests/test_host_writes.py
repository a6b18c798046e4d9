"""Host writes: t[i] = v, fill_, copy_; value semantics for tensors derived before the write."""
import numpy as np
import pytest

import lazytensor as lt


def test_setitem_realizes_and_writes_on_the_host():
    t = lt.zeros(2, 3) + 1
    t[0, 1] = 5
    assert t.tolist() == [[1, 5, 1], [1, 1, 1]]
    c = lt.counters()
    assert c["realizations"] == 1 and c["host_writes_by_trigger"] == {"setitem": 1}


def test_setitem_with_slices_broadcasts_and_casts_to_the_tensor_dtype():
    t = lt.zeros(3, 3, dtype=lt.int64)
    t[1:, :2] = 7.9
    t[0] = lt.tensor([1, 2, 3])
    assert t.tolist() == [[1, 2, 3], [7, 7, 0], [7, 7, 0]]


def test_tensors_derived_before_a_write_keep_their_old_values():
    t = lt.tensor([1.0, 2.0, 3.0])
    pending = t * 10
    realized = (t + 0).realize()
    view = t[1:]
    t[1] = 100
    assert pending.tolist() == [10, 20, 30]
    assert realized.tolist() == [1, 2, 3]
    assert view.tolist() == [2, 3]
    assert t.tolist() == [1, 100, 3]


def test_arrays_handed_out_by_numpy_keep_their_values_after_a_write():
    t = lt.tensor([1.0, 2.0])
    arr = t.numpy()
    t[0] = 9
    assert arr.tolist() == [1, 2] and t.tolist() == [9, 2]
    with pytest.raises(ValueError):
        arr[0] = 5  # read-only: the engine owns that memory


def test_from_numpy_does_not_copy_and_writes_do_not_reach_the_source_array():
    src = np.arange(4, dtype=np.float64)
    t = lt.from_numpy(src)
    assert np.shares_memory(t.numpy(), src)
    t[0] = 42
    assert src[0] == 0 and t.tolist() == [42, 1, 2, 3]


def test_repeated_writes_to_an_unshared_tensor_happen_in_place():
    t = lt.zeros(1000)
    t[0] = 1  # first write copies (the fill's node may be shared); later writes reuse the buffer
    first = t._node.buffer.host
    for i in range(1, 10):
        t[i] = i
    assert t._node.buffer.host is first
    assert t.numpy()[:10].tolist() == [1, 1, 2, 3, 4, 5, 6, 7, 8, 9]


def test_fill_overwrites_everything():
    t = lt.ones(2, 2)
    before = t * 1
    t.fill_(3)
    assert t.tolist() == [[3, 3], [3, 3]] and before.tolist() == [[1, 1], [1, 1]]
    assert lt.counters()["host_writes_by_trigger"] == {"fill_": 1}


def test_copy_from_numpy_and_from_tensor():
    t = lt.zeros(2, 3)
    t.copy_(np.arange(3))
    assert t.tolist() == [[0, 1, 2], [0, 1, 2]] and t.dtype == lt.float32
    t.copy_(lt.tensor([[5], [6]], dtype=lt.int64))
    assert t.tolist() == [[5, 5, 5], [6, 6, 6]] and t.dtype == lt.float32


def test_a_write_after_copying_from_a_tensor_leaves_the_source_tensor_as_it_was():
    src = lt.tensor([1.0, 2.0]) + 1
    t = lt.zeros(2)
    t.copy_(src)
    t[0] = 50
    assert t.tolist() == [50, 3] and src.tolist() == [2, 3]
    src[1] = 7
    assert t.tolist() == [50, 3] and src.tolist() == [2, 7]


def test_copy_from_a_shape_that_does_not_broadcast_names_both_shapes():
    with pytest.raises(ValueError, match=r"\(4,\).*\(2, 3\)"):
        lt.zeros(2, 3).copy_(np.zeros(4))
