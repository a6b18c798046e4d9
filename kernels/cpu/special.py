"""Special functions for numba kernels: erf in float64 with Cephes' formulas (as the reference), and
branch-free exp and erf for results that are rounded to float32 (they vectorize; within one unit).

erf differs from the reference only in the exponential: libm's exp here, NumPy's there; both are
within an ulp of exact, so results may differ in the last unit (measured in tests/test_numba_backend.py).
The float32 forms are polynomials evaluated with FMA: exp's in float64 (its own rounding far below a
float32 unit: it differs from the reference on 36 of 2.2e9 inputs), erf's in float32 arithmetic (2.8x
faster; within one unit, differing on 1.5% of inputs).
"""
import math

import numba as nb
import numpy as np
from numba.core import types
from numba.core.extending import intrinsic
from llvmlite import ir

from ..reference.elementwise import _ERF_T, _ERF_U, _ERFC_P, _ERFC_Q, _ERFC_R, _ERFC_S

T, U, P, Q, R, S = (np.array(c, np.float64) for c in (_ERF_T, _ERF_U, _ERFC_P, _ERFC_Q, _ERFC_R, _ERFC_S))

@nb.njit(cache=True, inline="always")
def _polevl(x, c):
    acc = c[0]
    for i in range(1, c.shape[0]):
        acc = acc * x + c[i]
    return acc


@nb.njit(cache=True, inline="always")
def _p1evl(x, c):
    acc = x + c[0]
    for i in range(1, c.shape[0]):
        acc = acc * x + c[i]
    return acc


@nb.njit(cache=True, error_model="numpy")
def erf_scalar(x):
    if math.isnan(x):
        return x
    ax = abs(x)
    if ax <= 1.0:
        z = x * x
        return x * _polevl(z, T) / _p1evl(z, U)
    if ax > 26.7:
        return math.copysign(1.0, x)
    if ax < 8.0:
        erfc = math.exp(-(ax * ax)) * _polevl(ax, P) / _p1evl(ax, Q)
    else:
        erfc = math.exp(-(ax * ax)) * _polevl(ax, R) / _p1evl(ax, S)
    return math.copysign(1.0 - erfc, x)


@nb.njit(nogil=True, cache=True)
def erf_into(x, out):
    """out[i] = round(erf(float64(x[i]))) for flat arrays."""
    for i in range(x.shape[0]):
        out[i] = erf_scalar(np.float64(x[i]))


@intrinsic
def _f64_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 `bits` (a free reinterpretation, as C's memcpy)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))
    return types.float64(types.int64), codegen


@intrinsic
def _fma(typingctx, a, b, c):
    """a * b + c rounded once (llvm.fma: one instruction where the CPU has FMA; it vectorizes)."""
    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fn, args)
    return types.float64(types.float64, types.float64, types.float64), codegen


@nb.njit(cache=True, inline="always")
def _polynomial(x, c):
    """c[0] x^n + ... + c[n] as two interleaved Horner chains in x^2 with FMA (half the latency)."""
    x2 = x * x
    n = c.shape[0]
    high, low = c[0], c[1]
    for i in range(2, n, 2):
        high = _fma(high, x2, c[i])
        if i + 1 < n:
            low = _fma(low, x2, c[i + 1])
    return _fma(high, x, low) if n % 2 == 0 else _fma(low, x, high)


_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238   # ln 2 split so that k * _LN2_HI is exact for |k| < 2^20 (Cody-Waite)
_LN2_LO = 1.9082149292705877e-10
_EXP_TAYLOR = np.array([1.0 / math.factorial(n) for n in range(10, -1, -1)])  # degree 10: 2e-13 on |r| < ln2/2


@nb.njit(cache=True, inline="always")
def exp_for_float32(x):
    """exp(x) in float64 accurate to about 1e-13 relative: rounded to float32, it is within one unit of
    the correctly rounded value (measured over the whole float32 range in the tests). Plain
    arithmetic and selects, no call, so loops over contiguous arrays vectorize (libm's exp does not); k
    goes through int32, since AVX2 has no vector conversion of doubles to int64."""
    xc = min(max(x, -104.0), 89.0)
    k = np.floor(xc * _LOG2E + 0.5)
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    y = _polynomial(r, _EXP_TAYLOR) * _f64_from_bits((np.int64(np.int32(k)) + 1023) << 52)
    y = np.inf if x > 89.0 else y
    y = 0.0 if x < -104.0 else y
    return y if x == x else x


@intrinsic
def _fma32(typingctx, a, b, c):
    """a * b + c in float32, rounded once (llvm.fma)."""
    def codegen(context, builder, signature, args):
        single = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fma", [single], ir.FunctionType(single, [single] * 3))
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@intrinsic
def _f32_from_bits(typingctx, bits):
    """The float32 whose IEEE bits are the int32 `bits`."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen


@nb.njit(cache=True, inline="always")
def _polynomial32(x, c):
    """_polynomial in float32 arithmetic (float32 `x` and coefficients)."""
    x2 = x * x
    n = c.shape[0]
    high, low = c[0], c[1]
    for i in range(2, n, 2):
        high = _fma32(high, x2, c[i])
        if i + 1 < n:
            low = _fma32(low, x2, c[i + 1])
    return _fma32(high, x, low) if n % 2 == 0 else _fma32(low, x, high)


# erf(x) / x - 1 as a polynomial in x^2 on [0, 1], and log(erfc(t)) + t^2 as a polynomial in t - 2.5 on
# [1, 4]: least-squares fits on Chebyshev nodes reweighted toward minimax (errors 1.2e-9 and 1.6e-9),
# rounded to float32. From 4 on, erfc(t) < 2^-25 (half a unit below 1): erf rounds to +-1 in float32.
_ERF_SMALL = np.array([7.889114931458607e-05, -0.000802083988673985, 0.005189535208046436,
                      -0.026854444295167923, 0.11283600330352783, -0.3761262595653534, 0.12837916612625122], np.float32)
_ERFC_LOG = np.array([-4.380770590728389e-08, -6.592392765014665e-08, 1.860486008808948e-06,
                     -1.2975650861335453e-05, 7.690925849601626e-05, -0.00042070774361491203,
                     0.002165550133213401, -0.010858165100216866, 0.05610625073313713, -0.3526807427406311,
                     -1.556815266609192], np.float32)
_EXP_TAYLOR32 = np.array([1.0 / math.factorial(n) for n in range(7, -1, -1)], np.float32)
_LOG2E_32, _LN2_HI_32, _LN2_LO_32 = np.float32(_LOG2E), np.float32(0.693145751953125), np.float32(1.428606765330187e-06)


@nb.njit(cache=True, inline="always")
def _exp32_of_negative(x):
    """exp(x) in float32 arithmetic for -18 < x < 0 (erfc's range here: no overflow, no subnormals)."""
    k = np.floor(x * _LOG2E_32 + np.float32(0.5))
    r = _fma32(k, -_LN2_HI_32, x)
    r = _fma32(k, -_LN2_LO_32, r)
    return _polynomial32(r, _EXP_TAYLOR32) * _f32_from_bits((np.int32(k) + np.int32(127)) << np.int32(23))


@nb.njit(cache=True, inline="always")
def erf_for_float32(x):
    """erf of a float32 value (passed widened to float64), computed in float32 arithmetic with FMA:
    x + x * R(x^2) below 1, else +-(1 - exp(L(|x|) - x^2)) with x^2 carried in two parts; both
    evaluated and one selected (no branch, no division, no call, so it vectorizes, eight lanes to a
    vector). Checked on every float32 in [0, 4.5] (and so, by symmetry, in [-4.5, 0]): within one unit
    of the reference everywhere, differing on 1.5% of inputs."""
    xf = np.float32(x)
    ax = abs(xf)
    small = _fma32(xf, _polynomial32(xf * xf, _ERF_SMALL), xf)
    t = min(max(ax, np.float32(1.0)), np.float32(4.0))
    square = t * t
    square_low = _fma32(t, t, -square)
    large = np.float32(1.0) - _exp32_of_negative((_polynomial32(t - np.float32(2.5), _ERFC_LOG) - square) - square_low)
    large = -large if xf < 0 else large
    y = small if ax <= 1.0 else large
    return y if xf == xf else xf


@nb.njit(nogil=True, cache=True, error_model="numpy")
def erf_into_float32(x, out):
    """out[i] = erf(x[i]) for flat float32 arrays, through erf_for_float32 (vectorizes; within one unit)."""
    for i in range(x.shape[0]):
        out[i] = np.float32(erf_for_float32(np.float64(x[i])))
