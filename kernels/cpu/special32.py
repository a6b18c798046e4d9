"""exp and erf of float32 values computed in float32 arithmetic, for loops that then run eight lanes
wide (AVX2) where float64 arithmetic runs four: within one float32 unit of the reference everywhere.

Every float32 input was checked when the constants below were chosen (`tests/test_numba_backend.py`
keeps an even sample and the edges): erf differs from the reference by one unit on 0.7% of the inputs in
[0, 4.5] and exp on 0.8% of those in [-104, 89]; none by more. (The float64 forms of special.py differ
on about one input in a million, at about half this speed.) The constant fits are least-squares fits on
Chebyshev nodes (erfc's exponent: weighted minimax) rounded to float32; the one-unit bound comes from
the exhaustive check, not from them.
"""
import math

import numba as nb
import numpy as np

from .special import float_from_bits, fma

_F = np.float32

_LOG2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693359375)         # ln 2 with few bits, so that k * _LN2_HI is exact (Cody-Waite)
_LN2_LO = _F(math.log(2) - 0.693359375)
# 1/7!, ..., 1/2!: exp(r) = 1 + r + r^2 (1/2! + r/3! + ...) for |r| <= ln2 / 2
_EXP_TAIL = tuple(_F(1.0 / math.factorial(n)) for n in range(7, 1, -1))


@nb.njit(cache=True, inline="always")
def _exp_of_reduced(r):
    """exp(r) for |r| <= ln2 / 2, in [0.7, 1.5]."""
    q = _EXP_TAIL[0]
    for c in _EXP_TAIL[1:]:
        q = fma(q, r, c)
    return fma(r * r, q, r) + _F(1.0)


@nb.njit(cache=True, inline="always")
def _exp_reduced(x):
    """(p, k) with exp(x) = p 2^k, p in [0.7, 1.5] a float32 and k = round(x / ln 2) an int32. The
    caller applies 2^k."""
    k = np.floor(x * _LOG2E + _F(0.5))
    return _exp_of_reduced(fma(k, -_LN2_LO, fma(k, -_LN2_HI, x))), np.int32(k)


@nb.njit(cache=True, inline="always")
def exp_in_float32(x):
    """exp(x) for a float32 x, computed in float32: within one unit of the reference over the whole
    float32 range (0 below -104, inf above 89, NaN for NaN). The scale 2^k is applied as two powers of
    two so that results down to the subnormals round once."""
    # Outside [-104, 89] (and for NaN) the result is selected below; 0 stands in for x there, as the
    # clamped value's tiny intermediates would cost a denormal assist per lane (masked attention rows
    # are half -inf).
    xc = x if (x >= _F(-104.0)) & (x <= _F(89.0)) else _F(0.0)
    p, k = _exp_reduced(xc)
    half = k >> 1
    y = p * float_from_bits(np.int32((half + 127) << 23)) * float_from_bits(np.int32((k - half + 127) << 23))
    y = _F(np.inf) if x > _F(89.0) else y
    y = _F(0.0) if x < _F(-104.0) else y
    return y if x == x else x


# erf(x) = x (c0 + z Q(z)), z = x^2, on |x| <= 1, with c0 = 2/sqrt(pi) split in two floats so that the
# leading term is exact within the FMA; relative error of the fit 4e-11.
_ERF_Q = tuple(_F(c) for c in (-9.68418135016691e-06, 0.0001127300929510966, -0.0008485247963108122,
                                0.005221130792051554, -0.026865476742386818, 0.11283783614635468,
                                -0.37612637877464294))
_C0_HI = _F(2 / math.sqrt(math.pi))
_C0_LO = _F(2 / math.sqrt(math.pi) - float(_C0_HI))
# log(erfc(t)) + t^2 as a polynomial in t - 2.475 of degree 6, fitted on [1, 3.92] (used to 3.95) by
# weighted minimax (Lawson's iterations on Chebyshev nodes) for erf's absolute error: 0.02 of a unit
# before rounding. Past 3.95 erf rounds to 1 in float32 (erfc < half a unit).
_ERFC_M = tuple(_F(c) for c in (0.00018557407020125538, -0.00018383296264801174, 0.002479030517861247,
                                 -0.010964575223624706, 0.056927699595689774, -0.35551995038986206,
                                 -1.547965168952942))
_ERFC_MID = _F(2.475)


@nb.njit(cache=True, inline="always")
def erf_in_float32(x):
    """erf(x) for a float32 x, computed in float32: within one unit of the reference everywhere. Both
    forms are evaluated for |x| and one selected (no branch, no division, no call), so loops vectorize;
    x's sign is applied last. Past 1, erf = 1 - exp(M(t) - t^2) = 1 - p 2^k: the reduced exponent is
    M - (t^2 + k ln2_hi) - k ln2_lo, where t^2 + k ln2_hi, exact inside an FMA, lies within 0.35 of M,
    so it is rounded once at M's magnitude (a float32 M - t^2 would cost up to a quarter of a unit near
    t = 1). Past 3.95 the clamped t gives exactly 1, a NaN comes out of the first form, and a zero
    keeps its sign."""
    ax = abs(x)
    z = x * x
    q = _ERF_Q[0]
    for c in _ERF_Q[1:]:
        q = fma(q, z, c)
    small = fma(ax, _C0_HI, ax * fma(z, q, _C0_LO))
    t = min(max(ax, _F(1.0)), _F(3.95))
    u = t - _ERFC_MID
    m = _ERFC_M[0]
    for c in _ERFC_M[1:]:
        m = fma(m, u, c)
    k = np.floor(fma(-t, t, m) * _LOG2E + _F(0.5))
    r = fma(k, -_LN2_LO, fma(-t, t, k * -_LN2_HI) + m)
    large = _F(1.0) - _exp_of_reduced(r) * float_from_bits(np.int32((np.int32(k) + 127) << 23))
    return np.copysign(large if ax > _F(1.0) else small, x)


@nb.njit(nogil=True, cache=True, error_model="numpy")
def erf_into_float32(x, out):
    """out[i] = erf(x[i]) for flat float32 arrays, through erf_in_float32."""
    for i in range(x.shape[0]):
        out[i] = erf_in_float32(x[i])


@nb.njit(parallel=True, nogil=True, cache=True)
def erf_into_float32_in_pieces(x, out, bounds):
    """erf_into_float32 over the pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        erf_into_float32(x[lo:hi], out[lo:hi])
