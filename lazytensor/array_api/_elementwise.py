"""The Array API's elementwise functions: lazytensor's elementwise ops under the standard's names
(binary ones take a Python number on either side)."""
from .. import elementwise as ew
from ..tensor import Tensor
from ._dtypes import copy_of

_UNARY = {
    "abs": "abs", "acos": "acos", "acosh": "acosh", "asin": "asin", "asinh": "asinh", "atan": "atan",
    "atanh": "atanh", "bitwise_invert": "bitwise_invert", "ceil": "ceil", "conj": "conj", "cos": "cos",
    "cosh": "cosh", "exp": "exp", "expm1": "expm1", "floor": "floor", "imag": "imag", "log": "log",
    "log1p": "log1p", "log2": "log2", "log10": "log10", "logical_not": "logical_not", "negative": "neg",
    "real": "real", "reciprocal": "reciprocal", "round": "round", "sign": "sign", "signbit": "signbit",
    "sin": "sin", "sinh": "sinh", "square": "square", "sqrt": "sqrt", "tan": "tan", "tanh": "tanh",
    "trunc": "trunc",
}
_BINARY = {
    "add": "add", "atan2": "atan2", "bitwise_and": "bitwise_and", "bitwise_left_shift": "bitwise_left_shift",
    "bitwise_or": "bitwise_or", "bitwise_right_shift": "bitwise_right_shift", "bitwise_xor": "bitwise_xor",
    "copysign": "copysign", "divide": "div", "equal": "eq", "floor_divide": "floordiv", "greater": "gt",
    "greater_equal": "ge", "hypot": "hypot", "less": "lt", "less_equal": "le", "logaddexp": "logaddexp",
    "logical_and": "logical_and", "logical_or": "logical_or", "logical_xor": "logical_xor", "maximum": "maximum",
    "minimum": "minimum", "multiply": "mul", "nextafter": "nextafter", "not_equal": "ne", "pow": "pow",
    "remainder": "mod", "subtract": "sub",
}


def _unary(name, op):
    def fn(x, /):
        return ew.unary(op, x)
    fn.__name__ = name
    fn.__doc__ = ew.UNARY_FUNCTIONS[op].__doc__
    return fn


def _binary(name, op):
    def fn(x1, x2, /):
        return ew.binary(op, x1, x2)
    fn.__name__ = name
    fn.__doc__ = ew.BINARY_FUNCTIONS[op].__doc__
    return fn


FUNCTIONS = {**{n: _unary(n, op) for n, op in _UNARY.items()}, **{n: _binary(n, op) for n, op in _BINARY.items()}}


def positive(x, /):
    """+x: the same values (a new array)."""
    return copy_of(x)


def isnan(x, /):
    return ew.isnan(x)


def isinf(x, /):
    return ew.isinf(x)


def isfinite(x, /):
    return ew.isfinite(x)


def clip(x, /, min=None, max=None):  # noqa: A002  (the standard's names)
    """x clamped into [min, max] (arrays or numbers, broadcast with x; either may be None), in x's dtype."""
    out = ew.clip(x, min, max)
    return out if out.dtype == x.dtype else ew.cast(out, x.dtype)


def where(condition, x1, x2, /):
    """x1 where condition holds, else x2 (arrays or numbers, broadcast together)."""
    if not isinstance(x1, Tensor) and not isinstance(x2, Tensor):
        raise TypeError("where: at least one of x1 and x2 must be an array")
    return ew.where(condition, x1, x2)
