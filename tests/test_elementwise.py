"""Elementwise ops against NumPy: every op, broadcasting, empty and size-1 dims, scalars, dtypes."""
import math

import numpy as np
import pytest

import lazytensor as lt

SHAPE_PAIRS = [((), ()), ((5,), ()), ((3, 4), (4,)), ((3, 1), (1, 4)), ((2, 3, 4), (3, 1)),
               ((0,), (1,)), ((2, 0, 3), (3,)), ((1, 1), (1,)), ((4, 1, 2), (1, 3, 1))]

# Ops NumPy computes correctly rounded in float32, so the widen-compute-round rule matches it exactly.
EXACT_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
                "maximum": np.maximum, "minimum": np.minimum}
OTHER_BINARY = {"floordiv": np.floor_divide, "mod": np.mod, "pow": np.power}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}
UNARY = {"neg": np.negative, "abs": np.abs, "sqrt": np.sqrt, "exp": np.exp, "log": np.log,
         "expm1": np.expm1, "log1p": np.log1p,
         "tanh": np.tanh, "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin,
         "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "sign": np.sign,
         "square": np.square, "floor": np.floor, "ceil": np.ceil, "rsqrt": lambda x: 1 / np.sqrt(x),
         "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
         "erf": np.vectorize(math.erf, otypes=[np.float64]),
         "log2": np.log2, "log10": np.log10, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
         "reciprocal": np.reciprocal, "trunc": np.trunc, "round": np.round, "signbit": np.signbit,
         "real": np.real, "imag": np.imag, "conj": np.conj, "bitwise_invert": np.invert}
INTEGER_ONLY = {"bitwise_invert": {np.float32: np.int32, np.float64: np.int64}}  # dtype used instead
DOMAIN = {"sqrt": (0.1, 4), "rsqrt": (0.1, 4), "log": (0.1, 4), "log1p": (-0.9, 4), "asin": (-0.9, 0.9),
          "acos": (-0.9, 0.9), "log2": (0.1, 4), "log10": (0.1, 4), "acosh": (1.1, 4), "atanh": (-0.9, 0.9),
          "reciprocal": (0.5, 4)}
ULP_TOL = {np.float32: 4e-7, np.float64: 4e-16}


def _data(rng, shape, dtype, lo=-3.0, hi=3.0):
    if np.dtype(dtype).kind == "i":
        return rng.integers(-9, 10, size=shape).astype(dtype)
    return rng.uniform(lo, hi, size=shape).astype(dtype)


@pytest.mark.parametrize("op", sorted(EXACT_BINARY))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arithmetic_matches_numpy_exactly_with_broadcasting(op, shapes, dtype, rng):
    a, b = _data(rng, shapes[0], dtype), _data(rng, shapes[1], dtype)
    if op == "div":
        b = np.where(b == 0, 1, b).astype(dtype)
    got = getattr(lt, op)(lt.tensor(a), lt.tensor(b)).numpy()
    want = EXACT_BINARY[op](a, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(EXACT_BINARY) + sorted(OTHER_BINARY))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS[:6], ids=str)
def test_integer_arithmetic_matches_numpy(op, shapes, rng):
    a = _data(rng, shapes[0], np.int64)
    b = _data(rng, shapes[1], np.int64)
    if op in ("div", "floordiv", "mod"):
        b = np.where(b == 0, 3, b)
    if op == "pow":
        a, b = np.abs(a) % 4, np.abs(b) % 4
    got = getattr(lt, op)(lt.tensor(a), lt.tensor(b)).numpy()
    want = (np.true_divide(a, b).astype(np.float32) if op == "div"
            else {**EXACT_BINARY, **OTHER_BINARY}[op](a, b))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(OTHER_BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_floordiv_mod_pow_match_numpy_within_rounding(op, dtype, rng):
    a = _data(rng, (3, 5), dtype, 0.5, 3)
    b = _data(rng, (5,), dtype, 0.5, 2)
    got = getattr(lt, op)(lt.tensor(a), lt.tensor(b)).numpy()
    want = OTHER_BINARY[op](a.astype(np.float64), b.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(COMPARE))
@pytest.mark.parametrize("shapes", SHAPE_PAIRS, ids=str)
def test_comparisons_give_bool_tensors_matching_numpy(op, shapes, rng):
    a = _data(rng, shapes[0], np.int64).astype(np.float32)
    b = _data(rng, shapes[1], np.int64).astype(np.float32)
    got = getattr(lt, op)(lt.tensor(a), lt.tensor(b))
    assert got.dtype == lt.bool
    np.testing.assert_array_equal(got.numpy(), COMPARE[op](a, b))


@pytest.mark.parametrize("op", sorted(UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (7,), (2, 0, 3), (3, 1, 4)], ids=str)
def test_unary_ops_match_numpy(op, dtype, shape, rng):
    lo, hi = DOMAIN.get(op, (-3, 3))
    if op in INTEGER_ONLY:
        x = _data(rng, shape, INTEGER_ONLY[op][dtype])
        np.testing.assert_array_equal(getattr(lt, op)(lt.tensor(x)).numpy(), UNARY[op](x))
        return
    x = _data(rng, shape, dtype, lo, hi)
    got = getattr(lt, op)(lt.tensor(x)).numpy()
    want = np.asarray(UNARY[op](x.astype(np.float64)))
    want = want if want.dtype == np.bool_ else want.astype(dtype)
    assert got.dtype == want.dtype and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=ULP_TOL[dtype], atol=0)


def test_transcendental_of_integer_tensor_is_default_float():
    assert lt.exp(lt.tensor([0, 1])).dtype == lt.float32
    assert lt.sqrt(lt.tensor([4, 9], dtype=lt.int32)).tolist() == [2.0, 3.0]


_SMALL_SHAPES = [(), (1,), (3,), (0,), (1, 3), (2, 1), (2, 3), (0, 1), (1, 0), (2, 0), (4, 1, 3), (1, 2, 1)]


def test_two_shapes_broadcast_as_numpy_broadcasts_them_or_fail_naming_both():
    """Every pair of small shapes (zero sizes included) gives NumPy's shape, or ValueError naming both."""
    for a in _SMALL_SHAPES:
        for b in _SMALL_SHAPES:
            try:
                want = np.broadcast_shapes(a, b)
            except ValueError:
                with pytest.raises(ValueError, match=r"add: shapes .* cannot be broadcast"):
                    (lt.zeros(*a) + lt.zeros(*b))
                continue
            assert (lt.zeros(*a) + lt.zeros(*b)).shape == want


def test_python_scalars_on_either_side_broadcast_like_numpy():
    x = lt.tensor([1.0, 2.0, 4.0])
    assert (x + 1).tolist() == [2, 3, 5]
    assert (1 - x).tolist() == [0, -1, -3]
    assert (2 / x).tolist() == [2, 1, 0.5]
    assert (x ** 2).tolist() == [1, 4, 16]
    assert (2 ** x).tolist() == [2, 4, 16]
    assert (7 // x).tolist() == [7, 3, 1]
    assert (-x % 3).tolist() == [2, 1, 2]


def test_numpy_array_on_the_left_gives_a_tensor():
    out = np.array([1.0, 2.0], dtype=np.float32) + lt.tensor([10.0, 20.0])
    assert isinstance(out, lt.Tensor)
    assert out.tolist() == [11, 22]


def test_where_selects_and_broadcasts():
    cond = lt.tensor([[True], [False]])
    got = lt.where(cond, lt.tensor([1.0, 2.0, 3.0]), 0.0)
    assert got.tolist() == [[1, 2, 3], [0, 0, 0]]


def test_where_with_two_python_numbers():
    got = lt.where(lt.tensor([True, False]), 1.0, 0)
    assert got.dtype == lt.float32 and got.tolist() == [1.0, 0.0]


def test_clip_bounds_either_side_and_keeps_nan():
    x = lt.tensor([-2.0, 0.5, 3.0, float("nan")])
    got = x.clip(-1, 1).numpy()
    np.testing.assert_array_equal(got, np.array([-1, 0.5, 1, np.nan], dtype=np.float32))
    assert lt.clamp(x, min=0).tolist()[:3] == [0, 0.5, 3]


def test_logical_operators_on_bool_tensors():
    a, b = lt.tensor([True, True, False]), lt.tensor([True, False, False])
    assert (a & b).tolist() == [True, False, False]
    assert (a | b).tolist() == [True, True, False]
    assert (a ^ b).tolist() == [False, True, False]
    assert (~a).tolist() == [False, False, True]


def test_casts_truncate_toward_zero_like_numpy():
    x = lt.tensor([-1.7, -0.2, 0.9, 2.5])
    assert x.long().tolist() == [-1, 0, 0, 2]
    assert x.to(lt.bool).tolist() == [True, True, True, True]
    assert lt.tensor([0, 2]).bool().tolist() == [False, True]


def test_integer_division_by_zero_gives_zero_like_numpy():
    got = lt.tensor([5, -5]) // lt.tensor([0, 0])
    np.testing.assert_array_equal(got.numpy(), np.floor_divide(np.array([5, -5]), np.array([1, 1])) * 0)


def test_float_division_by_zero_gives_inf_and_nan():
    got = (lt.tensor([1.0, -1.0, 0.0]) / 0.0).numpy()
    assert got[0] == np.inf and got[1] == -np.inf and np.isnan(got[2])
