"""lazytensor as an Array API namespace (lazytensor/array_api), checked against array-api-strict, the
standard's reference implementation, on random inputs with special values (skipped where it is not
installed; the test extra installs it). The official conformance suite is docs/ARRAY_API.md's."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import lazytensor as lt
import lazytensor.array_api as xp

xs = pytest.importorskip("array_api_strict")

STANDARD = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
            "complex64", "complex128"]
FLOATS = ["float32", "float64"]
TOL = {"float32": 4e-7, "float64": 4e-16, "complex64": 4e-7, "complex128": 4e-16}


def _pair(arr):
    return xp.asarray(arr), xs.asarray(arr)


def _same(ours, theirs, rtol=0.0, atol=0.0):
    """Equal values (NaN where NaN, the sign of zeros too when exact), shape and dtype name."""
    theirs = np.asarray(theirs)
    got = ours.numpy() if isinstance(ours, lt.Tensor) else np.asarray(ours)
    assert got.shape == theirs.shape, (got.shape, theirs.shape)
    assert got.dtype == theirs.dtype, (got.dtype, theirs.dtype)
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, theirs, rtol=rtol, atol=atol, equal_nan=True)
        if rtol == 0.0 and got.dtype.kind == "f":
            both_zero = (got == 0) & (theirs == 0)
            assert (np.signbit(got)[both_zero] == np.signbit(theirs)[both_zero]).all(), "signed zero"
    else:
        np.testing.assert_array_equal(got, theirs)


def _arrays(dtype, shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), **kw):
    if np.dtype(dtype).kind == "f":
        kw = {"allow_nan": True, "allow_infinity": True, **kw}
    return hnp.arrays(np.dtype(dtype), shape, elements=hnp.from_dtype(np.dtype(dtype), **kw))


def test_an_array_names_this_namespace_and_array_api_compat_finds_it():
    compat = pytest.importorskip("array_api_compat")
    x = lt.ones(3)
    assert x.__array_namespace__() is xp and xp.__array_api_version__ == "2024.12"
    assert compat.array_namespace(x) is xp
    assert x.size == 3 and x.size() == (3,) and x.size(0) == 3  # the standard's attribute, PyTorch's call


def test_the_promotion_table_is_the_standards_wherever_it_defines_one():
    for a in STANDARD:
        for b in STANDARD:
            try:
                expected = xs.result_type(getattr(xs, a), getattr(xs, b))
            except TypeError:
                continue  # mixed kinds, int64 with uint64: left to implementations
            assert xp.result_type(getattr(xp, a), getattr(xp, b)).name == str(expected).split(".")[-1], (a, b)


EXACT_UNARY = ["abs", "negative", "positive", "floor", "ceil", "trunc", "round", "sign", "square", "conj", "real",
               "signbit", "isnan", "isinf", "isfinite"]
ROUNDED_UNARY = ["sqrt", "exp", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
                 "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "reciprocal"]


@pytest.mark.parametrize("name", EXACT_UNARY + ROUNDED_UNARY)
@pytest.mark.parametrize("dtype", FLOATS)
@given(data=st.data())
def test_unary_functions_match_the_reference_special_values_included(name, dtype, data):
    arr = data.draw(_arrays(dtype))
    ours, theirs = _pair(arr)
    with np.errstate(all="ignore"):
        _same(getattr(xp, name)(ours), getattr(xs, name)(theirs), rtol=0.0 if name in EXACT_UNARY else TOL[dtype])


@pytest.mark.parametrize("name", ["abs", "negative", "sqrt", "exp", "log", "sin", "conj", "real", "imag", "square",
                                  "sign", "isnan", "isfinite"])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@given(data=st.data())
def test_complex_functions_match_the_reference_on_finite_values(name, dtype, data):
    # Not subnormal: the reference's complex64 x / |x| overflows there (inf + nan j), ours widens first
    arr = data.draw(_arrays(dtype, allow_nan=False, allow_infinity=False, max_magnitude=50, min_magnitude=1e-30))
    ours, theirs = _pair(arr)
    with np.errstate(all="ignore"):
        _same(getattr(xp, name)(ours), getattr(xs, name)(theirs), rtol=TOL[dtype] * 8)


@pytest.mark.parametrize("name", ["abs", "negative", "floor", "ceil", "trunc", "round", "sign", "square",
                                  "bitwise_invert"])
@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "uint32", "int64"])
@given(data=st.data())
def test_integer_unary_functions_keep_the_dtype_and_match_the_reference(name, dtype, data):
    if name in ("negative", "abs", "sign") and dtype.startswith("u"):
        return
    arr = data.draw(_arrays(dtype, min_value=-50 if dtype.startswith("i") else 0, max_value=50))
    ours, theirs = _pair(arr)
    _same(getattr(xp, name)(ours), getattr(xs, name)(theirs))


BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "equal", "not_equal", "less", "less_equal",
          "greater", "greater_equal", "floor_divide", "remainder", "pow", "atan2", "hypot", "logaddexp", "copysign",
          "nextafter"]


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", FLOATS)
@given(data=st.data())
def test_binary_functions_broadcast_and_match_the_reference(name, dtype, data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    # floor_divide: the reference keeps NumPy's answers on infinities, the standard's differ (tested below)
    finite = {"allow_infinity": False} if name == "floor_divide" else {}
    a = data.draw(_arrays(dtype, shape, **finite))
    b = data.draw(_arrays(dtype, hnp.broadcastable_shapes(shape, max_dims=3), **finite))
    (oa, ta), (ob, tb) = _pair(a), _pair(b)
    exact = name not in ("pow", "atan2", "hypot", "logaddexp", "remainder", "floor_divide")
    with np.errstate(all="ignore"):
        expected = getattr(xs, name)(ta, tb)
        if name == "pow":  # (-inf) ** y for y > 0 not an odd integer is +inf (the standard, C99); NumPy's
            x1, x2 = np.broadcast_arrays(a, b)  # SIMD power answers NaN on some broadcast paths (AVX-512)
            expected = np.where((x1 == -np.inf) & (x2 > 0) & (np.fmod(x2, 2) != 1), np.inf, np.asarray(expected))
            expected = expected.astype(dtype)
    _same(getattr(xp, name)(oa, ob), expected, rtol=0.0 if exact else TOL[dtype] * 4)


@pytest.mark.parametrize("name", ["add", "multiply", "bitwise_and", "bitwise_or", "bitwise_xor",
                                  "bitwise_left_shift", "bitwise_right_shift", "floor_divide", "remainder"])
@pytest.mark.parametrize("dtypes", [("int8", "int8"), ("uint8", "int16"), ("int32", "int64"), ("uint16", "uint32")])
@given(data=st.data())
def test_integer_binary_functions_promote_and_match_the_reference(name, dtypes, data):
    a = data.draw(_arrays(dtypes[0], (5,), min_value=0, max_value=60))
    b = data.draw(_arrays(dtypes[1], (5,), min_value=1, max_value=7))
    (oa, ta), (ob, tb) = _pair(a), _pair(b)
    _same(getattr(xp, name)(oa, ob), getattr(xs, name)(ta, tb))


def test_floor_divide_gives_the_standards_special_cases_on_infinities():
    x1 = xp.asarray([np.inf, np.inf, -np.inf, -np.inf, 1.0, -1.0, 1.0, -1.0])
    x2 = xp.asarray([2.0, -2.0, 2.0, -2.0, -np.inf, np.inf, np.inf, -np.inf])
    out = xp.floor_divide(x1, x2).numpy()
    assert out[:4].tolist() == [np.inf, -np.inf, -np.inf, np.inf]
    assert out[4:].tolist() == [0.0, 0.0, 0.0, 0.0] and np.signbit(out[4:]).tolist() == [True, True, False, False]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("exponent_shape", [(), (1,), (4,)], ids=["0-d", "one", "each"])
def test_pow_of_minus_infinity_and_minus_zero_gives_the_standards_special_cases(dtype, exponent_shape):
    """(-inf) ** y and (-0.0) ** y for y > 0 not an odd integer are +inf and +0.0, and -inf / -0.0 for an
    odd integer, however the exponent broadcasts (NumPy's AVX-512 loops give NaN and -0.0 for a
    broadcast one)."""
    x1 = xp.asarray([-np.inf, -0.0, -np.inf, -0.0], dtype=getattr(xp, dtype))
    for y, want in ((0.5, [np.inf, 0.0, np.inf, 0.0]), (2.0, [np.inf, 0.0, np.inf, 0.0]),
                    (3.0, [-np.inf, -0.0, -np.inf, -0.0])):
        x2 = xp.asarray(np.full(exponent_shape, y), dtype=getattr(xp, dtype))
        out = xp.pow(x1, x2).numpy()
        assert out.tolist() == want and np.signbit(out).tolist() == np.signbit(want).tolist(), (y, out)


def test_python_numbers_are_weak_on_either_side():
    x = xp.asarray([1, 2, 3], dtype=xp.int8)
    assert xp.add(x, 1).dtype == xp.int8 and xp.multiply(2, x).dtype == xp.int8
    assert xp.add(xp.asarray([1.0], dtype=xp.float64), 1j).dtype == xp.complex128
    assert (xp.asarray([1.0]) ** 2).dtype == xp.float32


@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min", "var", "std", "all", "any"])
@given(data=st.data())
def test_reductions_over_axes_match_the_reference(name, data):
    arr = data.draw(_arrays("float64", hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
                            allow_nan=False, allow_infinity=False, min_value=-10, max_value=10))
    axis = data.draw(st.none() | st.sampled_from([0, -1, tuple(range(arr.ndim))]))
    keepdims = data.draw(st.booleans())
    ours, theirs = _pair(arr)
    # Folds in another order than NumPy's pairwise sums: equal within rounding of the data's scale
    # (the standard deviation of equal values is ~1e-15, not 0, after a left-fold mean).
    _same(getattr(xp, name)(ours, axis=axis, keepdims=keepdims),
          getattr(xs, name)(theirs, axis=axis, keepdims=keepdims), rtol=1e-12, atol=1e-12 * 10)


def test_a_bool_sum_counts_in_the_default_integer_dtype():
    assert xp.sum(xp.asarray([True, True, False])).dtype == xp.int64
    assert xp.sum(xp.asarray([True, True, False])).numpy() == 2


@pytest.mark.parametrize("dtype", ["int8", "uint8", "float32"])
def test_sums_accumulate_in_the_standards_dtypes(dtype):
    arr = np.arange(6).astype(dtype)
    for kw in ({}, {"dtype": getattr(xp, "float64")}):
        theirs_kw = {k: getattr(xs, v.name) for k, v in kw.items()}
        _same(xp.sum(xp.asarray(arr), **kw), xs.sum(xs.asarray(arr), **theirs_kw))
        _same(xp.cumulative_sum(xp.asarray(arr), include_initial=True, **kw),
              xs.cumulative_sum(xs.asarray(arr), include_initial=True, **theirs_kw))


MANIPULATIONS = {
    "concat": lambda m, a: m.concat([a, a], axis=-1),
    "concat_none": lambda m, a: m.concat([a, a], axis=None),
    "stack": lambda m, a: m.stack([a, a], axis=1),
    "expand_dims": lambda m, a: m.expand_dims(a, axis=-1),
    "flip": lambda m, a: m.flip(a, axis=0),
    "moveaxis": lambda m, a: m.moveaxis(a, 0, -1),
    "permute_dims": lambda m, a: m.permute_dims(a, (2, 0, 1)),
    "repeat": lambda m, a: m.repeat(a, 2, axis=1),
    "repeat_array": lambda m, a: m.repeat(a, m.asarray([1, 0, 2]), axis=1),
    "roll": lambda m, a: m.roll(a, 2, axis=None),
    "squeeze": lambda m, a: m.squeeze(m.expand_dims(a, axis=0), axis=0),
    "tile": lambda m, a: m.tile(a, (1, 2, 1)),
    "unstack": lambda m, a: m.unstack(a, axis=1)[1],
    "broadcast_to": lambda m, a: m.broadcast_to(a[:, :1, :], (2, 3, 4)),
    "reshape": lambda m, a: m.reshape(a, (4, -1)),
    "tril": lambda m, a: m.tril(a, k=-1),
    "take": lambda m, a: m.take(a, m.asarray([2, 0, 2]), axis=1),
    "take_along_axis": lambda m, a: m.take_along_axis(a, m.argsort(a, axis=-1), axis=-1),
    "sort_descending": lambda m, a: m.sort(a, axis=1, descending=True),
    "argsort_stable": lambda m, a: m.argsort(m.round(a), axis=-1, stable=True),
    "argmax_keepdims": lambda m, a: m.argmax(a, axis=1, keepdims=True),
    "count_nonzero": lambda m, a: m.count_nonzero(m.round(a), axis=(0, 2)),
    "diff": lambda m, a: m.diff(a, axis=1, n=2),
    "where": lambda m, a: m.where(a > 0, a, 0.5),
    "clip": lambda m, a: m.clip(a, -0.5, 0.5),
    "cumulative_prod": lambda m, a: m.cumulative_prod(a, axis=2),
    "searchsorted": lambda m, a: m.searchsorted(m.sort(m.reshape(a, (-1,))), a, side="right"),
    "isin": lambda m, a: m.isin(m.astype(m.round(a), m.int64), m.asarray([0, 1])),
    "getitem_mask": lambda m, a: a[a > 0],
    "getitem_ints": lambda m, a: a[m.asarray([1, 0]), m.asarray([0, 2]), m.asarray([3, 3])],
    "vecdot": lambda m, a: m.vecdot(a, a, axis=-2),
    "tensordot": lambda m, a: m.tensordot(a, a, axes=([0, 1], [0, 1])),
    "matrix_transpose": lambda m, a: m.matrix_transpose(a) @ a,
}


@pytest.mark.parametrize("name", sorted(MANIPULATIONS))
def test_manipulation_searching_and_indexing_match_the_reference(name, rng):
    arr = rng.standard_normal((2, 3, 4))
    fn = MANIPULATIONS[name]
    _same(fn(xp, xp.asarray(arr)), fn(xs, xs.asarray(arr)), rtol=1e-12)


def test_nonzero_and_unique_read_their_input_on_the_host_and_match_the_reference():
    arr = np.array([[3, 1, 0], [1, 0, 3]], dtype=np.int16)
    ours, theirs = _pair(arr)
    for a, b in zip(xp.nonzero(ours), xs.nonzero(theirs)):
        _same(a, b)
    for a, b in zip(xp.unique_all(ours), xs.unique_all(theirs)):
        _same(a, b)
    values = np.array([np.nan, 1.0, np.nan])  # every NaN is distinct
    _same(xp.unique_values(xp.asarray(values)), xs.unique_values(xs.asarray(values)))


LINALG = {
    "inv": lambda m, a: m.linalg.inv(a), "det": lambda m, a: m.linalg.det(a),
    "slogdet": lambda m, a: m.linalg.slogdet(a).logabsdet, "solve": lambda m, a: m.linalg.solve(a, a[..., :2]),
    "cholesky": lambda m, a: m.linalg.cholesky(a @ m.matrix_transpose(a)),
    "eigvalsh": lambda m, a: m.linalg.eigvalsh(a + m.matrix_transpose(a)),
    "svdvals": lambda m, a: m.linalg.svdvals(a), "pinv": lambda m, a: m.linalg.pinv(a[..., :2]),
    "matrix_rank": lambda m, a: m.linalg.matrix_rank(a), "matrix_norm": lambda m, a: m.linalg.matrix_norm(a, ord=1),
    "vector_norm": lambda m, a: m.linalg.vector_norm(a, axis=(-2, -1), ord=3),
    "trace": lambda m, a: m.linalg.trace(a, offset=1), "diagonal": lambda m, a: m.linalg.diagonal(a, offset=-1),
    "cross": lambda m, a: m.linalg.cross(a, m.flip(a, axis=-1)), "outer": lambda m, a: m.linalg.outer(a[0, 0, :], a[1, 1, :]),
    "matrix_power": lambda m, a: m.linalg.matrix_power(a, 3),
    "qr_r_abs": lambda m, a: m.abs(m.linalg.qr(a).R), "svd_s": lambda m, a: m.linalg.svd(a).S,
}


@pytest.mark.parametrize("name", sorted(LINALG))
def test_linalg_matches_the_reference(name, rng):
    arr = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    fn = LINALG[name]
    _same(fn(xp, xp.asarray(arr)), fn(xs, xs.asarray(arr)), rtol=1e-10)


def test_factorizations_reconstruct_their_input(rng):
    a = xp.asarray(rng.standard_normal((4, 3)))
    q, r = xp.linalg.qr(a)
    np.testing.assert_allclose((q @ r).numpy(), a.numpy(), atol=1e-12)
    u, s, vh = xp.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(((u * s[None, :]) @ vh).numpy(), a.numpy(), atol=1e-12)
    sym = a.mT @ a
    w, v = xp.linalg.eigh(sym)
    np.testing.assert_allclose((v @ (w[:, None] * v.mT)).numpy(), sym.numpy(), atol=1e-12)


def test_fft_round_trips_and_matches_numpy_in_the_standards_dtypes(rng):
    a = rng.standard_normal(8).astype(np.float32)
    spectrum = xp.fft.rfft(xp.asarray(a))
    assert spectrum.dtype == xp.complex64 and spectrum.shape == (5,)
    np.testing.assert_allclose(spectrum.numpy(), np.fft.rfft(a), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(xp.fft.irfft(spectrum, n=8).numpy(), a, atol=1e-5)


def test_every_function_stays_lazy_until_a_read():
    x = xp.asarray(np.arange(9.0).reshape(3, 3)) + 1.0
    outs = [xp.linalg.inv(x + xp.eye(3)), xp.fft.fft(x), xp.sum(x, axis=0), xp.searchsorted(x[0], x[1]),
            xp.concat([x, x]), xp.cumulative_sum(x, axis=1)]
    lt.reset_counters()
    assert all(o.residency == lt.Residency.PENDING for o in outs) and lt.counters()["kernels"] == 0
    np.testing.assert_allclose(outs[0].numpy(), np.linalg.inv(np.arange(9.0).reshape(3, 3) + 1 + np.eye(3)))


def test_on_a_device_linalg_reads_its_operand_on_the_host_and_the_log_shows_it(virtual):
    virtual(offload="always")
    a = xp.asarray(np.eye(3) * 2.0) * 1.0  # computed on the device
    a.realize()
    lt.clear_transfer_log()
    inverse = xp.linalg.inv(a)
    np.testing.assert_array_equal(inverse.numpy(), np.eye(3) / 2.0)
    assert [(r.direction, r.reason) for r in lt.transfer_log()] == [("d2h", "host-kernel")]


def test_a_mask_on_a_device_is_downloaded_once_to_read_its_positions(virtual):
    virtual(offload="always")
    x = xp.asarray(np.arange(6.0)) * 1.0
    x.realize()
    lt.clear_transfer_log()
    picked = x[x > 2.5]
    assert [(r.direction, r.reason) for r in lt.transfer_log()] == [("d2h", "host-read:mask")]
    assert picked.numpy().tolist() == [3.0, 4.0, 5.0]


def test_setitem_with_a_mask_and_inplace_operators_write_into_the_same_array():
    x = xp.asarray([1.0, -2.0, 3.0])
    alias = x
    x[x < 0] = 0.0
    x *= 2
    assert alias is x and x.numpy().tolist() == [2.0, 0.0, 6.0]
    with pytest.raises(TypeError, match="cannot be stored"):
        y = xp.asarray([1, 2], dtype=xp.int32)
        y += 0.5


def test_dlpack_shares_host_memory_with_numpy_and_pytorch_both_ways():
    x = xp.asarray(np.arange(4.0))
    shared = np.from_dlpack(x)
    assert np.shares_memory(shared, x.numpy())
    back = xp.from_dlpack(shared)
    assert np.shares_memory(back.numpy(), shared)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(x)
    assert t.data_ptr() == x.numpy().ctypes.data
    assert xp.from_dlpack(torch.arange(3)).numpy().tolist() == [0, 1, 2]


def test_errors_are_the_standards_exception_types():
    with pytest.raises(TypeError):
        xp.logical_and(xp.asarray([1.0]), xp.asarray([True]))
    with pytest.raises(ValueError):
        xp.squeeze(xp.ones((2, 3)), axis=0)
    with pytest.raises(IndexError):
        xp.ones(3)[xp.asarray([True, False])]
    with pytest.raises(TypeError):
        xp.finfo(xp.int32)
    with pytest.raises(ValueError):
        xp.asarray(xp.ones(2), dtype=xp.int64, copy=False)


def test_info_lists_devices_default_dtypes_and_capabilities():
    info = xp.__array_namespace_info__()
    assert info.default_dtypes() == {"real floating": xp.float32, "complex floating": xp.complex64,
                                     "integral": xp.int64, "indexing": xp.int64}
    assert set(info.dtypes(kind="complex floating").values()) == {xp.complex64, xp.complex128}
    assert info.capabilities()["boolean indexing"] and info.default_device() == "cpu"


def test_an_array_made_for_a_device_reports_it_whatever_its_residency(virtual):
    virtual()
    on_cpu, default, on_device = (xp.asarray([1.0], device="cpu"), xp.asarray([1.0]),
                                  xp.asarray([1.0], device="virtual"))
    assert (on_cpu.device, default.device, on_device.device) == ("cpu", "virtual", "virtual")
    assert on_cpu.residency is lt.Residency.HOST and on_device.residency is lt.Residency.BOTH
    assert (default + 1.0).device == "virtual"  # computed on the host by the policy, still the device's
