"""Elementwise ops: unary math, broadcasting binary arithmetic and comparisons, where, clip, casts, and
composites (isnan/isinf/isfinite, nan_to_num, lerp)."""
import contextlib

import numpy as np

from . import dtypes
from .creation import tensor
from .runtime import hostio
from .tensor import Tensor
from .kernels.ops import OPS


def broadcast_shapes(op, *shapes):
    """NumPy broadcasting of `shapes`; ValueError naming the op and every shape otherwise."""
    if len(shapes) == 2:  # a binary op's operands (most calls): pairwise, no sets
        a, b = shapes
        if a == b or not b:  # equal, or a 0-d operand (a Python number's)
            return tuple(a)
        if not a:
            return tuple(b)
        n = max(len(a), len(b))
        out = []
        for x, y in zip((1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)):
            if x == y or y == 1:
                out.append(x)
            elif x == 1:
                out.append(y)
            else:
                break  # the general rule below names the sizes
        else:
            return tuple(out)
    elif all(s == shapes[0] for s in shapes):
        return tuple(shapes[0])
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            listed = " and ".join(str(tuple(s)) for s in shapes)
            raise ValueError(f"{op}: shapes {listed} cannot be broadcast together "
                             f"(sizes {sorted(sizes)} at dimension {i})")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def scalar(value, dtype):
    """A Python number as a realized 0-d host value of `dtype` (it reaches every kernel as a parameter,
    so it costs no kernel and no copy); OverflowError now if the value does not fit."""
    dt = dtypes.as_dtype(dtype)
    if isinstance(value, (np.generic, np.ndarray)) and np.ndim(value) == 0:
        value = value.item()
    try:
        checked = np.array(value, dtype=dt.np)
    except OverflowError:
        raise OverflowError(f"the Python number {value!r} does not fit in {dt}") from None
    return Tensor(hostio.data_node(checked, exclusive=True))


_OPERAND_SCALARS = {}   # (NumPy dtype, type, value) -> the realized 0-d node of a Python number operand
_OPERAND_SCALARS_MAX = 1024
_fresh = [0]  # > 0 inside fresh_operand_scalars()


@contextlib.contextmanager
def fresh_operand_scalars():
    """Inside the block every Python number operand gets a node of its own (the backward rules)."""
    _fresh[0] += 1
    try:
        yield
    finally:
        _fresh[0] -= 1


def operand_scalar(value, dtype):
    """`scalar(value, dtype)` for a Python number operand of an op, its realized node shared with the
    earlier operands of the same number and dtype: a loop's `y * 0.999` builds no new leaf per step. The
    node is only ever read (no tensor a user holds wraps it), so sharing it changes no value. Float zeros
    (whose sign a cache key would lose) and NaN (unequal to itself) are made anew, and so is every number
    of a backward pass's rules (`fresh_operand_scalars`: a recorded pass remakes the nodes it made, so
    the rules make the same graph recorded or not)."""
    t = type(value)
    if (t is not float and t is not int and t is not bool or value == 0 and t is float or value != value
            or _fresh[0]):
        return scalar(value, dtype)
    key = (dtype.np, t, value)
    node = _OPERAND_SCALARS.get(key)
    if node is None:
        if len(_OPERAND_SCALARS) >= _OPERAND_SCALARS_MAX:
            _OPERAND_SCALARS.clear()
        node = _OPERAND_SCALARS[key] = scalar(value, dtype)._node
    return Tensor(node)


def as_tensor_operand(x):
    if isinstance(x, Tensor):
        return x
    if isinstance(x, (list, tuple, np.ndarray)):
        return tensor(x)
    return None


def _operands(op, a, b):
    """Both operands as tensors of the promoted dtype's inputs, plus that dtype."""
    if type(a) is Tensor and type(b) is float and a._node.dtype.kind == "f":  # x * 0.5: the float's width
        dt = dtypes.from_np(a._node.dtype)
        return a, operand_scalar(b, dt), dt
    ta, tb = as_tensor_operand(a), as_tensor_operand(b)
    if ta is None and tb is None:
        raise TypeError(f"{op}: at least one operand must be a tensor")
    if ta is not None and tb is not None:
        dt = dtypes.promote(ta.dtype, tb.dtype)
    elif ta is not None:
        dt = dtypes.promote_with_scalar(ta.dtype, b)
        tb = operand_scalar(b, dt)
    else:
        dt = dtypes.promote_with_scalar(tb.dtype, a)
        ta = operand_scalar(a, dt)
    return ta, tb, dt


def binary(op, a, b):
    """Build a broadcasting binary op node."""
    ta, tb, dt = _operands(op, a, b)
    shape = broadcast_shapes(op, ta.shape, tb.shape)
    record = OPS[op]
    if record.family == "compare":
        out = dtypes.bool_
    elif record.family == "logical":
        if ta.dtype != dtypes.bool_ or tb.dtype != dtypes.bool_:
            raise TypeError(f"{op}: needs bool tensors, got {ta.dtype} and {tb.dtype}")
        out = dtypes.bool_
    elif record.dtype == "div":
        out = dt if dt.is_floating_point or dt.is_complex else dtypes.DEFAULT_FLOAT
    else:
        if dt == dtypes.bool_ and not record.bool_inputs:
            raise TypeError(f"{op}: not defined for two bool tensors; cast one first, e.g. x.int()")
        if op.startswith("bitwise_") and (dt.is_floating_point or dt.is_complex):
            raise TypeError(f"{op}: needs integer or bool tensors, got {ta.dtype} and {tb.dtype}")
        if op == "pow" and dt.np.kind in "iu" and isinstance(b, (int, np.integer)) and b < 0:
            raise ValueError(f"pow: integer tensors cannot be raised to the negative integer power {b}; "
                             f"use a float exponent or cast the tensor to float")
        out = dt
    return Tensor._from_op(op, (ta, tb), {"dtype": out.np}, shape, out)


def unary(op, x):
    """Build a unary op node; float-valued ops give the default float on integer inputs."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: expected a tensor, got {type(x).__name__}")
    record = OPS.get(op)
    if record is None or record.family != "unary":
        raise ValueError(f"unknown unary op {op!r}")
    if record.dtype == "float":
        out = x.dtype if x.dtype.is_floating_point or x.dtype.is_complex else dtypes.DEFAULT_FLOAT
    elif record.dtype == "real":  # abs, real, imag: a complex value's real width, else the input's
        if x.dtype == dtypes.bool_ and op == "abs":
            raise TypeError(f"{op}: not defined for bool tensors; cast first, e.g. x.int()")
        out = dtypes.REAL_OF.get(x.dtype, x.dtype)
    elif record.dtype == "bool":
        if x.dtype != dtypes.bool_:
            raise TypeError(f"{op} / ~: needs a bool tensor, got {x.dtype}")
        out = dtypes.bool_
    elif record.dtype == "bool_of":
        if x.dtype.is_complex:
            raise TypeError(f"{op}: needs a real tensor, got {x.dtype}")
        out = dtypes.bool_
    else:
        if x.dtype == dtypes.bool_ and not record.bool_inputs:
            raise TypeError(f"{op}: not defined for bool tensors; cast first, e.g. x.int()")
        if op == "bitwise_invert" and (x.dtype.is_floating_point or x.dtype.is_complex):
            raise TypeError(f"{op}: needs an integer or bool tensor, got {x.dtype}")
        out = x.dtype
    return Tensor._from_op(op, (x,), {"dtype": out.np}, x.shape, out)


def cast(x, dtype):
    """`x` converted to `dtype` (float to int truncates toward zero, as NumPy and PyTorch do)."""
    dt = dtypes.as_dtype(dtype)
    if dt == x.dtype:
        return x
    return Tensor._from_op("cast", (x,), {"dtype": dt.np}, x.shape, dt)


def where(condition, x, y):
    """Elements of `x` where `condition` is True, else of `y`; all three broadcast together."""
    cond = as_tensor_operand(condition)
    if cond is None or cond.dtype != dtypes.bool_:
        got = cond.dtype if cond is not None else type(condition).__name__
        raise TypeError(f"where: condition must be a bool tensor, got {got}")
    if as_tensor_operand(x) is None and as_tensor_operand(y) is None:  # two Python numbers
        dt = dtypes.promote_with_scalar(dtypes.scalar_dtype(x), y)
        x, y = scalar(x, dt), scalar(y, dt)
    tx, ty, dt = _operands("where", x, y)
    shape = broadcast_shapes("where", cond.shape, tx.shape, ty.shape)
    return Tensor._from_op("where", (cond, tx, ty), {"dtype": dt.np}, shape, dt)


def clip(x, min=None, max=None):
    """Clamp into [min, max]; either bound may be None. NaN stays NaN."""
    out = x
    if min is not None:
        out = binary("maximum", out, min)
    if max is not None:
        out = binary("minimum", out, max)
    return out


def _unary_fn(record):
    def fn(x):
        return unary(record.name, x)
    fn.__name__ = record.name
    fn.__doc__ = f"Elementwise {record.doc}."
    return fn


def _binary_fn(record):
    def fn(a, b):
        return binary(record.name, a, b)
    fn.__name__ = record.name
    fn.__doc__ = f"Elementwise {record.doc}, with NumPy broadcasting."
    return fn


def _functions(families, make):
    """{name: function} for every record of `families`, under its name and its aliases."""
    out = {}
    for record in OPS.values():
        if record.family in families:
            fn = make(record)
            out.update({name: fn for name in (record.name,) + record.aliases})
    return out


UNARY_FUNCTIONS = _functions({"unary"}, _unary_fn)
BINARY_FUNCTIONS = _functions({"binary", "compare", "logical"}, _binary_fn)
logical_not = UNARY_FUNCTIONS["logical_not"]


def isnan(x):
    """True where x is NaN (x != x: never for integers and bools)."""
    return binary("ne", x, x)


def isinf(x):
    """True where x is +inf or -inf (never for integers and bools; complex: either part)."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        return binary("ne", x, x)
    return binary("eq", unary("abs", x), float("inf"))


def isfinite(x):
    """True where x is neither NaN nor infinite."""
    return logical_not(binary("logical_or", isnan(x), isinf(x)))


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> `nan`, +inf -> `posinf` (default: the dtype's largest value), -inf -> `neginf` (its lowest)."""
    if not x.dtype.is_floating_point:
        return x.clone()  # nothing to replace, but a new tensor, as PyTorch's
    info = np.finfo(x.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = where(isnan(x), nan, x)
    out = where(binary("eq", x, float("inf")), posinf, out)
    return where(binary("eq", x, float("-inf")), neginf, out)


def lerp(start, end, weight):
    """start + weight * (end - start), by PyTorch's formula (from `end` when |weight| >= 0.5)."""
    diff = end - start
    if not isinstance(weight, Tensor):
        return start + weight * diff if abs(weight) < 0.5 else end - diff * (1.0 - weight)
    return where(unary("abs", weight) < 0.5, start + weight * diff, end - diff * (1.0 - weight))
