"""Special functions for numba kernels: erf in float64 with Cephes' formulas (as the reference), and
branch-free exp and erf for results that are rounded to float32 (they vectorize; within one unit).

erf differs from the reference only in the exponential: libm's exp here, NumPy's there; both are
within an ulp of exact, so results may differ in the last unit (measured in tests/test_numba_backend.py).
The float32 forms are polynomials evaluated with FMA, computed in float64 (so their own rounding stays
far below a float32 unit): for results rounded to float32 from float64 arithmetic (sigmoid, operands
that are not float32). Where operand and result are both float32, special32.py's forms compute in
float32 instead, twice as many lanes wide.
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


@nb.njit(parallel=True, nogil=True, cache=True)
def erf_into_in_pieces(x, out, bounds):
    """erf_into over the pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        erf_into(x[lo:hi], out[lo:hi])


@intrinsic
def float_from_bits(typingctx, bits):
    """The float whose IEEE bits are `bits`: float64 for an int64, float32 for an int32 (a free
    reinterpretation, as C's memcpy)."""
    width = {types.int64: types.float64, types.int32: types.float32}.get(bits)
    if width is None:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(width))
    return width(bits), codegen


@intrinsic
def fma(typingctx, a, b, c):
    """a * b + c rounded once, for three float64 or three float32 values (llvm.fma: one instruction where
    the CPU has FMA; it vectorizes)."""
    if not (a == b == c and a in (types.float64, types.float32)):
        return None

    def codegen(context, builder, signature, args):
        t = context.get_value_type(a)
        fn = builder.module.declare_intrinsic("llvm.fma", [t], ir.FunctionType(t, [t] * 3))
        return builder.call(fn, args)
    return a(a, a, a), codegen


@nb.njit(cache=True, inline="always")
def _polynomial(x, c):
    """c[0] x^n + ... + c[n] as two interleaved Horner chains in x^2 with FMA (half the latency)."""
    x2 = x * x
    n = c.shape[0]
    high, low = c[0], c[1]
    for i in range(2, n, 2):
        high = fma(high, x2, c[i])
        if i + 1 < n:
            low = fma(low, x2, c[i + 1])
    return fma(high, x, low) if n % 2 == 0 else fma(low, x, high)


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
    scale = float_from_bits((np.int64(np.int32(k)) + 1023) << 52)
    y = _polynomial(r, _EXP_TAYLOR) * scale
    y = np.inf if x > 89.0 else y
    y = 0.0 if x < -104.0 else y
    return y if x == x else x


# erf(x) / x as a polynomial in x^2 on [0, 1] whose constant is 2/sqrt(pi) (as the reference's near 0),
# and log(erfc(t)) + t^2 as a polynomial in t - 2.5 on [1, 4]: least-squares fits on Chebyshev nodes
# reweighted toward minimax (errors 2e-14 and 4e-13, so that a result rarely lands across a float32
# rounding boundary from the reference's). From 4 on, erfc(t) < 2^-25 (half a unit below 1): erf
# rounds to +-1 in float32.
_ERF_SMALL = np.array([-1.0509065581802007e-07, 1.5325031822535695e-06, -1.4798690800737862e-05,
                      0.00012046652476139074, -0.0008547958483952119, 0.0052239681341929274,
                      -0.02686616925885389, 0.11283791661013187, -0.37612638902937984, 1.1283791670955126])
_ERFC_LOG = np.array([-1.5896454288125422e-10, 1.003841102097938e-09, -3.550489260289922e-09,
                     1.0434011940048709e-08, -1.2505665272104578e-08, -1.551635188365408e-07,
                     1.7688485668561656e-06, -1.2756548711794117e-05, 7.703089410340518e-05,
                     -0.0004209322377976831, 0.0021654768706563065, -0.010858072803955376,
                     0.05610626647925596, -0.3526807509825566, -1.556815272727331])


@nb.njit(cache=True, inline="always")
def erf_for_float32(x):
    """erf(x) for results rounded to float32 (within one unit of the reference: every float32 in [0, 4.5]
    was checked when the fits were made): x * P(x^2) below 1, else +-(1 - exp(L(|x|) - x^2)), both
    polynomials, both evaluated and one selected (no branch, no division, no call, so it vectorizes)."""
    ax = abs(x)
    small = x * _polynomial(x * x, _ERF_SMALL)
    t = min(max(ax, 1.0), 4.0)
    large = 1.0 - exp_for_float32(_polynomial(t - 2.5, _ERFC_LOG) - t * t)
    large = -large if x < 0.0 else large
    y = small if ax <= 1.0 else large
    return y if x == x else x


_TANH_IS_X = 2.0 ** -13   # below it tanh(x) = x (1 - x^2/3 + ...) rounds to x in float32 (x^2/3 < 2^-28)


@nb.njit(cache=True, inline="always")
def tanh_for_float32(x):
    """tanh(x) in float64 for results rounded to float32, within one unit of the reference's (NumPy's
    float64 tanh, rounded): x itself where |x| < 2^-13, else (e - 1) / (e + 1) with e = exp(2|x|) from
    `exp_for_float32` (1e-13 relative, so e - 1 keeps 4e-10 at the cut) and x's sign. Plain arithmetic
    and selects, no call: loops over it vectorize, where a call of libm's tanh per element does not
    (docs/NUMERICS.md has the figures)."""
    ax = abs(x)
    e = exp_for_float32(2.0 * min(ax, 20.0))   # tanh(20) is 1 in float64 already
    t = (e - 1.0) / (e + 1.0)
    t = -t if x < 0.0 else t
    t = x if ax < _TANH_IS_X else t
    return t if x == x else x

