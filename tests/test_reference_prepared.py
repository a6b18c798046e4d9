"""The reference kernels' prepared forms (kernels/reference: `prepared`), which replays call instead of the
kernels: the same bytes as the kernel for every operand dtype they are prepared for, special values included."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lazytensor.kernels.ops import OPS
from lazytensor.kernels.reference import KERNELS, prepared
from lazytensor.kernels.reference.elementwise import _FUNCTIONS

# NaNs of three bit patterns (sign, payload): which one comes out is part of the bytes
NANS = [np.nan, -np.nan, np.frombuffer(np.uint64(0x7FFC000000000000).tobytes(), np.float64)[0]]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, 3.0, np.inf, -np.inf, 1e-30, -7.25, 65504.0] + NANS
FLOATS = (np.float32, np.float64)
INTS = (np.int32, np.int64)


def _values(draw, shape, dtype):
    if np.dtype(dtype).kind == "f":
        picks = draw(st.lists(st.sampled_from(SPECIAL) | st.floats(-10, 10, width=32), min_size=int(np.prod(shape)),
                              max_size=int(np.prod(shape))))
        return np.array(picks, dtype=np.float64).astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "b":
        return np.array(draw(st.lists(st.booleans(), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                        dtype=bool).reshape(shape)
    return np.array(draw(st.lists(st.integers(-50, 50), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))),
                    dtype=dtype).reshape(shape)


def _same_bytes(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@st.composite
def _elementwise_case(draw):
    op = draw(st.sampled_from(sorted(_FUNCTIONS)))
    family = _FUNCTIONS[op][0]
    arity = 1 if family == "unary" else 2
    if family == "logical":
        dtypes = [np.dtype(bool)] * 2
    else:
        kinds = draw(st.sampled_from([FLOATS, INTS])) if not OPS[op].name.startswith("bitwise") else INTS
        dtypes = [np.dtype(draw(st.sampled_from(kinds))) for _ in range(arity)]
    out = np.dtype(bool) if family in ("compare", "logical") else np.result_type(*dtypes)
    if family == "unary" and out.kind in "iu" and OPS[op].dtype == "float":
        out = np.dtype(np.float32)
    shapes = draw(st.sampled_from([[(3, 4)] * arity, [(3, 4), (4,)][:arity], [(), (2, 3)][:arity]]))
    arrays = [_values(draw, s, d) for s, d in zip(shapes, dtypes)]
    return op, {"dtype": out}, dtypes, arrays


@settings(max_examples=400, deadline=None)
@given(_elementwise_case())
def test_a_prepared_elementwise_call_gives_the_kernels_bytes(case):
    op, attrs, dtypes, arrays = case
    with np.errstate(all="ignore"):
        try:
            want = KERNELS[op](attrs, *arrays)
        except (TypeError, ValueError):  # the op is not defined for these dtypes (bitwise on floats, ...)
            return
        call = prepared(op, attrs, dtypes)
        assert call is not None
        _same_bytes(call(*arrays), want)


@settings(max_examples=200, deadline=None)
@given(st.data(), st.sampled_from(FLOATS + INTS + (np.bool_,)), st.sampled_from(FLOATS + INTS + (np.bool_,)))
def test_prepared_casts_wheres_and_nots_give_the_kernels_bytes(data, source, target):
    x, y = _values(data.draw, (3, 4), source), _values(data.draw, (4,), target)
    cond = _values(data.draw, (3, 1), np.bool_)
    attrs = {"dtype": np.dtype(target)}
    with np.errstate(all="ignore"):
        _same_bytes(prepared("cast", attrs, (x.dtype,))(x), KERNELS["cast"](attrs, x))
        _same_bytes(prepared("where", attrs, (cond.dtype, x.dtype, y.dtype))(cond, x, y),
                    KERNELS["where"](attrs, cond, x, y))
        _same_bytes(prepared("logical_not", {}, (cond.dtype,))(cond), KERNELS["logical_not"]({}, cond))


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(FLOATS), st.sampled_from([(1, 65), (3, 5), (2, 3, 4), (4,), (2, 0)]))
def test_a_prepared_softmax_gives_the_kernels_bytes_signed_zeros_and_nans_included(data, dtype, shape):
    x = _values(data.draw, shape, dtype)
    axis = data.draw(st.integers(0, len(shape) - 1))
    attrs = {"axis": axis, "dtype": np.dtype(dtype)}
    call = prepared("softmax", attrs, (np.dtype(dtype),))
    with np.errstate(all="ignore"):
        _same_bytes(call(x), KERNELS["softmax"](attrs, x))


@pytest.mark.parametrize("op", ["log_softmax", "softmax_grad", "matmul", "sum"])
def test_ops_without_a_prepared_form_say_so(op):
    assert prepared(op, {"dtype": np.dtype(np.float32), "axis": 0}, (np.dtype(np.float32),) * 2) is None


def test_a_softmax_of_another_dtype_than_its_input_has_no_prepared_form():
    assert prepared("softmax", {"axis": 0, "dtype": np.dtype(np.float64)}, (np.dtype(np.float32),)) is None
