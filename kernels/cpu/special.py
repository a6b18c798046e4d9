"""erf in float64 with Cephes' formulas (as the reference), compiled with numba.

The only difference from the reference is the exponential: libm's exp here, NumPy's there; both are
within an ulp of exact, so results may differ in the last unit (measured in tests/test_numba_backend.py).
"""
import math

import numba as nb
import numpy as np

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


@nb.njit(cache=True)
def erf_into(x, out):
    """out[i] = round(erf(float64(x[i]))) for flat arrays."""
    for i in range(x.shape[0]):
        out[i] = erf_scalar(np.float64(x[i]))
