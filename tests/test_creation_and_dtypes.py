"""Creation functions and dtype promotion (docs/ARCHITECTURE.md states the rules)."""
import numpy as np
import pytest

import lazytensor as lt


def test_tensor_infers_pytorch_default_dtypes():
    assert lt.tensor([1.0, 2.0]).dtype == lt.float32
    assert lt.tensor([1, 2]).dtype == lt.int64
    assert lt.tensor([True]).dtype == lt.bool
    assert lt.tensor(np.zeros(2, np.float64)).dtype == lt.float64  # NumPy arrays keep their dtype
    assert lt.tensor(np.zeros(2, np.int32)).dtype == lt.int32
    assert lt.tensor([]).shape == (0,)


def test_tensor_copies_its_data():
    src = np.ones(3, np.float32)
    t = lt.tensor(src)
    src[0] = 5
    assert t.tolist() == [1, 1, 1]


@pytest.mark.parametrize("fn,args,want", [
    (lt.zeros, (2, 3), np.zeros((2, 3), np.float32)), (lt.ones, ((2,),), np.ones(2, np.float32)),
    (lt.empty, (0, 2), np.zeros((0, 2), np.float32)), (lt.eye, (3,), np.eye(3, dtype=np.float32)),
    (lt.eye, (2, 3), np.eye(2, 3, dtype=np.float32)),
])
def test_creation_functions(fn, args, want):
    got = fn(*args).numpy()
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_full_and_likes_follow_the_value_or_source_dtype():
    assert lt.full((2,), 7).dtype == lt.int64
    assert lt.full((2,), 7.5).tolist() == [7.5, 7.5]
    x = lt.ones(2, dtype=lt.float64)
    assert lt.zeros_like(x).dtype == lt.float64 and lt.ones_like(x).tolist() == [1, 1]
    assert lt.full_like(x, 3).tolist() == [3, 3]


@pytest.mark.parametrize("args,kw", [((5,), {}), ((2, 9, 3), {}), ((0, 1, 0.1), {}), ((1.5, -2, -0.25), {}),
                                     ((3,), {"dtype": lt.float64}), ((10, 0), {})])
def test_arange_matches_numpy(args, kw):
    got = lt.arange(*args, **kw).numpy()
    want = np.arange(*args, dtype=np.dtype(kw["dtype"].np) if kw else None)
    if want.dtype == np.float64 and not kw:
        want = want.astype(np.float32)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_linspace_includes_both_ends():
    np.testing.assert_allclose(lt.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5).astype(np.float32))
    assert lt.linspace(0, 1, 0).shape == (0,)


def test_creation_is_lazy():
    lt.zeros(1000, 1000)
    lt.arange(10)
    assert lt.counters()["kernels"] == 0


@pytest.mark.parametrize("a,b,want", [
    (lt.float32, lt.float64, lt.float64), (lt.int32, lt.int64, lt.int64), (lt.int32, lt.float32, lt.float64),
    (lt.int64, lt.float32, lt.float64), (lt.bool, lt.int32, lt.int32), (lt.bool, lt.float32, lt.float32),
    (lt.bool, lt.bool, lt.bool),
])
def test_tensor_tensor_promotion_follows_numpy(a, b, want):
    assert (lt.zeros(1, dtype=a) + lt.zeros(1, dtype=b)).dtype == want
    assert np.result_type(a.np, b.np) == want.np


@pytest.mark.parametrize("dtype,scalar,want", [
    (lt.float32, 1.5, lt.float32), (lt.float32, 2, lt.float32), (lt.int32, 2, lt.int32),
    (lt.int32, 2.5, lt.float32), (lt.bool, 1, lt.int64), (lt.bool, True, lt.bool), (lt.float64, 1, lt.float64),
])
def test_python_scalars_are_weak(dtype, scalar, want):
    assert (lt.zeros(1, dtype=dtype) + scalar).dtype == want


def test_true_division_of_integers_gives_the_default_float():
    assert (lt.tensor([1, 2]) / 2).dtype == lt.float32
    assert (lt.tensor([1, 2]) / lt.tensor([2, 4])).tolist() == [0.5, 0.5]


def test_dtype_objects_compare_with_numpy_dtypes_and_names():
    assert lt.float32 == np.float32 and lt.int64 == "int64" and lt.float == lt.float32
    assert repr(lt.float64) == "lt.float64"
    assert lt.ones(2).dtype.is_floating_point


def test_repr_looks_like_pytorch():
    assert repr(lt.tensor([1.0, 2.5])) == "tensor([1. , 2.5])"
    assert repr(lt.tensor([1, 2], dtype=lt.int32)) == "tensor([1, 2], dtype=lt.int32)"
    assert repr(lt.zeros(0, 2)) == "tensor([], size=(0, 2))"
    assert f"{lt.tensor(2.0) / 3:.3f}" == "0.667"
