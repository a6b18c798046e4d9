"""Elementwise reference kernels: widen to float64 (or int64), compute, round once at store."""
import math

import numpy as np

F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)

_erf_scalar = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    # NumPy has no erf ufunc; the C library's erf (through math.erf) is the definition.
    return np.asarray(_erf_scalar(x), dtype=F64)


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


# Float-valued unary ops: computed on float64 and rounded once to the output dtype.
UNARY_FLOAT = {
    "sqrt": np.sqrt, "rsqrt": _rsqrt, "exp": np.exp, "log": np.log, "tanh": np.tanh,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "erf": _erf, "sigmoid": _sigmoid,
}
# Dtype-preserving unary ops: defined on ints and floats alike.
UNARY_SAME = {
    "neg": np.negative, "abs": np.abs, "sign": np.sign, "relu": _relu, "square": np.square,
    "floor": np.floor, "ceil": np.ceil,
}
# Ops whose result may differ in the last unit between backends (libm vs device math).
TRANSCENDENTAL = frozenset({"exp", "log", "tanh", "sin", "cos", "tan", "asin", "acos", "atan",
                            "sinh", "cosh", "erf", "sigmoid"})

BINARY_ARITH = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "floordiv": np.floor_divide, "mod": np.mod, "pow": np.power,
    "maximum": np.maximum, "minimum": np.minimum,
}
BINARY_COMPARE = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal,
}
BINARY_LOGICAL = {"logical_and": np.logical_and, "logical_or": np.logical_or,
                  "logical_xor": np.logical_xor}


def compute_dtype(dtype):
    """The wide dtype an elementwise op computes in before rounding to `dtype`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return F64
    if dtype.kind in "iu":
        return I64
    return dtype


def _store(result, out_dtype):
    return np.asarray(result).astype(out_dtype, copy=False)


def _unary(fn):
    def kernel(attrs, x):
        out_dtype = np.dtype(attrs["dtype"])
        with np.errstate(all="ignore"):
            return _store(fn(x.astype(compute_dtype(out_dtype))), out_dtype)
    return kernel


def _binary(fn):
    def kernel(attrs, a, b):
        out_dtype = np.dtype(attrs["dtype"])
        wide = compute_dtype(out_dtype)
        with np.errstate(all="ignore"):
            return _store(fn(a.astype(wide, copy=False), b.astype(wide, copy=False)), out_dtype)
    return kernel


def _compare(fn):
    def kernel(attrs, a, b):
        wide = compute_dtype(np.result_type(a.dtype, b.dtype))
        with np.errstate(all="ignore"):
            return np.asarray(fn(a.astype(wide, copy=False), b.astype(wide, copy=False)))
    return kernel


def _logical(fn):
    def kernel(attrs, a, b):
        return np.asarray(fn(a, b))
    return kernel


def cast(attrs, x):
    return x.astype(np.dtype(attrs["dtype"]))


def logical_not(attrs, x):
    return np.logical_not(x)


def where(attrs, cond, a, b):
    out_dtype = np.dtype(attrs["dtype"])
    return np.asarray(np.where(cond, a.astype(out_dtype, copy=False), b.astype(out_dtype, copy=False)))


ELEMENTWISE_KERNELS = {"cast": cast, "logical_not": logical_not, "where": where}
ELEMENTWISE_KERNELS.update({name: _unary(fn) for name, fn in UNARY_FLOAT.items()})
ELEMENTWISE_KERNELS.update({name: _unary(fn) for name, fn in UNARY_SAME.items()})
ELEMENTWISE_KERNELS.update({name: _binary(fn) for name, fn in BINARY_ARITH.items()})
ELEMENTWISE_KERNELS.update({name: _compare(fn) for name, fn in BINARY_COMPARE.items()})
ELEMENTWISE_KERNELS.update({name: _logical(fn) for name, fn in BINARY_LOGICAL.items()})
