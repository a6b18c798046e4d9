"""Special functions for numba kernels: erf in float64 with Cephes' formulas (as the reference), and
branch-free exp and erf for results that are rounded to float32 (they vectorize; within one unit).

erf differs from the reference only in the exponential: libm's exp here, NumPy's there; both are
within an ulp of exact, so results may differ in the last unit (measured in tests/test_numba_backend.py).
"""
import math

import numba as nb
import numpy as np
from numba.core import types
from numba.core.extending import intrinsic

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


_LOG2E = 1.4426950408889634
_LN2_HI = 0.6931471803691238   # ln 2 split so that k * _LN2_HI is exact for |k| < 2^20 (Cody-Waite)
_LN2_LO = 1.9082149292705877e-10


@nb.njit(cache=True, inline="always")
def exp_for_float32(x):
    """exp(x) in float64 accurate to about 1e-8 relative: enough that, rounded to float32, it is within
    one unit of the correctly rounded value (measured over the whole float32 range in the tests). Plain
    arithmetic and selects, no call, so loops over contiguous arrays vectorize (libm's exp does not)."""
    xc = min(max(x, -104.0), 89.0)
    k = math.floor(xc * _LOG2E + 0.5)
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (
        1.0 / 720.0 + r * (1.0 / 5040.0 + r * (1.0 / 40320.0))))))))
    y = p * _f64_from_bits((np.int64(k) + 1023) << 52)
    y = np.inf if x > 89.0 else y
    y = 0.0 if x < -104.0 else y
    return y if x == x else x


@nb.njit(cache=True, inline="always")
def erf_for_float32(x):
    """erf(x) for results rounded to float32: Cephes' two rational forms both evaluated and one selected
    (no branch, no call, so it vectorizes), with exp_for_float32 in the erfc form; beyond |x| = 8 the
    float32 result is +-1 and the rational form is evaluated at 8."""
    ax = abs(x)
    z = x * x
    small = x * _polevl(z, T) / _p1evl(z, U)
    axc = min(ax, 8.0)
    erfc = exp_for_float32(-(axc * axc)) * _polevl(axc, P) / _p1evl(axc, Q)
    large = 1.0 - erfc
    large = -large if x < 0.0 else large
    y = small if ax <= 1.0 else large
    return y if x == x else x


@nb.njit(nogil=True, cache=True, error_model="numpy")
def erf_into_float32(x, out):
    """out[i] = erf(x[i]) for flat float32 arrays, through erf_for_float32 (vectorizes; within one unit)."""
    for i in range(x.shape[0]):
        out[i] = np.float32(erf_for_float32(np.float64(x[i])))
