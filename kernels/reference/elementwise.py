"""Elementwise reference kernels: widen to float64 (or int64), compute, round once at store."""
import numpy as np

from ..ops import OPS

F64 = np.dtype(np.float64)
I64 = np.dtype(np.int64)
C128 = np.dtype(np.complex128)
U64 = np.dtype(np.uint64)

# Cephes erf/erfc (S. L. Moshier, public domain): rational approximations, relative error ~1e-16.
_ERF_T = (9.60497373987051638749E0, 9.00260197203842689217E1, 2.23200534594684319226E3,
          7.00332514112805075473E3, 5.55923013010394962768E4)
_ERF_U = (3.35617141647503099647E1, 5.21357949780152679795E2, 4.59432382970980127987E3,
          2.26290000613890934246E4, 4.92673942608635921086E4)
_ERFC_P = (2.46196981473530512524E-10, 5.64189564831068821977E-1, 7.46321056442269912687E0,
           4.86371970985681366614E1, 1.96520832956077098242E2, 5.26445194995477358631E2,
           9.34528527171957607540E2, 1.02755188689515710272E3, 5.57535335369399327526E2)
_ERFC_Q = (1.32281951154744992508E1, 8.67072140885989742329E1, 3.54937778887819891062E2,
           9.75708501743205489753E2, 1.82390916687909736289E3, 2.24633760818710981792E3,
           1.65666309194161350182E3, 5.57535340817727675546E2)
_ERFC_R = (5.64189583547755073984E-1, 1.27536670759978104416E0, 5.01905042251180477414E0,
           6.16021097993053585195E0, 7.40974269950448939160E0, 2.97886665372100240670E0)
_ERFC_S = (2.26052863220117276590E0, 9.39603524938001434673E0, 1.20489539808096656605E1,
           1.70814450747565897222E1, 9.60896809063285878198E0, 3.36907645100081516050E0)


def _polevl(x, coefs):
    acc = np.full_like(x, coefs[0])
    for c in coefs[1:]:
        acc *= x
        acc += c
    return acc


def _p1evl(x, coefs):
    acc = x + coefs[0]
    for c in coefs[1:]:
        acc *= x
        acc += c
    return acc


def _erf(x):
    """erf in float64 by Cephes' formulas: x*T(x^2)/U(x^2) below 1, else 1 - erfc(|x|) with its sign."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    ax = np.abs(x)
    small = ax <= 1.0
    xs = x[small]
    zs = xs * xs
    out[small] = xs * _polevl(zs, _ERF_T) / _p1evl(zs, _ERF_U)
    for mask, (num, den) in (((ax > 1.0) & (ax < 8.0), (_ERFC_P, _ERFC_Q)),
                             ((ax >= 8.0) & (ax <= 26.7), (_ERFC_R, _ERFC_S))):
        a = ax[mask]
        erfc = np.exp(-(a * a)) * _polevl(a, num) / _p1evl(a, den)
        out[mask] = np.copysign(1.0 - erfc, x[mask])
    far = ax > 26.7  # exp(-x^2) underflows: erf is +-1, also at infinity
    out[far] = np.copysign(1.0, x[far])
    nan = np.isnan(x)
    out[nan] = x[nan]
    return out


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _relu(x):
    return np.maximum(x, np.zeros((), x.dtype))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _expm1(z):
    """np.expm1; for complex z = x + iy (NumPy has no complex expm1): expm1(x)cos(y) - 2sin^2(y/2) +
    i e^x sin(y), with C99's cexp special cases carried over (as the Array API standard lists them)."""
    if z.dtype.kind != "c":
        return np.expm1(z)
    x, y = z.real, z.imag
    re = np.expm1(x) * np.cos(y) - 2.0 * np.sin(y / 2) ** 2
    im = np.exp(x) * np.sin(y)
    im = np.where(y == 0, y, im)  # a real argument keeps an exact zero imaginary part
    re = np.where((x == 0) & (y == 0), 0.0, re)  # e^(+-0) - 1 is +0, as 1 - 1 is
    neg_inf, pos_inf = np.isneginf(x), np.isposinf(x)
    re = np.where(neg_inf, -1.0, np.where(pos_inf & ~np.isfinite(y), np.inf, re))
    im = np.where(neg_inf, np.where(np.isfinite(y), np.copysign(0.0, np.sin(y)), 0.0), im)
    return _complex(re, im, z.dtype)  # not re + 1j * im: inf * 0j would make NaNs


def _complex(re, im, dtype):
    out = np.empty(np.shape(re), dtype)
    out.real, out.imag = re, im
    return out


def _floor_divide(a, b):
    """NumPy's floor_divide, except where it differs from IEEE's floor(a / b) on infinities (the Array
    API standard's special cases): an infinite a over a finite nonzero b is that signed infinity, a
    finite a over an infinite b is a signed zero (NumPy: NaN, and -1 or 0)."""
    out = np.floor_divide(a, b)
    if out.dtype.kind != "f":
        return out
    inf_a = np.isinf(a) & np.isfinite(b) & (b != 0)
    inf_b = np.isfinite(a) & np.isinf(b)
    if inf_a.any() or inf_b.any():
        out = np.where(inf_a | inf_b, np.floor(a / b), out)
    return out


def _power(a, b):
    """NumPy's power, except (-inf) ** y and (-0.0) ** y for y > 0 not an odd integer: +inf and +0.0
    (C99's pow, the Array API standard, PyTorch). NumPy's SIMD loops on AVX-512 CPUs give NaN and -0.0
    there when y is one value broadcast, so without this the answer depended on the CPU and the shapes."""
    out = np.power(a, b)
    if out.dtype.kind != "f":
        return out
    even = (b > 0) & (np.fmod(b, 2) != 1)  # NaN compares False: a NaN y keeps NumPy's NaN
    if not even.any():
        return out
    fix = even & np.signbit(a) & ((a == 0) | np.isinf(a))
    return np.where(fix, -a, out) if fix.any() else out


def compute_dtype(dtype):
    """The wide dtype an elementwise op computes in before rounding to `dtype`."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return F64
    if dtype.kind == "c":
        return C128
    if dtype == U64:
        return U64  # beyond int64's range
    if dtype.kind in "iu":
        return I64
    return dtype


def _store(result, out_dtype):
    return np.asarray(result).astype(out_dtype, copy=False)


def _unary(fn, native_ok):
    def kernel(attrs, x):
        out_dtype = np.dtype(attrs["dtype"])
        with np.errstate(all="ignore"):
            if native_ok and x.dtype == out_dtype:
                return _store(fn(x), out_dtype)
            # abs(complex) is real, signbit(float) is bool: those compute in the input's wide type
            wide = compute_dtype(x.dtype if x.dtype.kind == "c" or out_dtype.kind == "b" else out_dtype)
            return _store(fn(x.astype(wide)), out_dtype)
    return kernel


def _binary(fn, native_ok):
    def kernel(attrs, a, b):
        out_dtype = np.dtype(attrs["dtype"])
        with np.errstate(all="ignore"):
            if native_ok and a.dtype == out_dtype and b.dtype == out_dtype:
                return _store(fn(a, b), out_dtype)
            wide = compute_dtype(out_dtype)
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
    with np.errstate(over="ignore"):  # a float beyond the target's range rounds to infinity (IEEE)
        return x.astype(np.dtype(attrs["dtype"]))


def logical_not(attrs, x):
    return np.asarray(np.logical_not(x))


def where(attrs, cond, a, b):
    out_dtype = np.dtype(attrs["dtype"])
    return np.asarray(np.where(cond, a.astype(out_dtype, copy=False), b.astype(out_dtype, copy=False)))


# The reference's own definitions; every other elementwise op is the NumPy function its record names.
_DEFINED_HERE = {"erf": _erf, "sigmoid": _sigmoid, "relu": _relu, "rsqrt": _rsqrt, "floordiv": _floor_divide,
                 "expm1": _expm1}
# The op record's `native`: correctly rounded (or exact) ops computed in the output dtype directly give
# the same bits as widening to float64 and rounding once (double rounding is innocuous since
# 53 >= 2 * 24 + 2), so the kernels skip the widening when operands already have the output dtype.
_BUILD = {"unary": lambda fn, op: _unary(fn, op.native), "binary": lambda fn, op: _binary(fn, op.native),
          "compare": lambda fn, op: _compare(fn), "logical": lambda fn, op: _logical(fn)}

ELEMENTWISE_KERNELS = {"cast": cast, "logical_not": logical_not, "where": where}
_FUNCTIONS = {}  # op -> (family, the NumPy function, native): what `prepared` specializes
for _op in OPS.values():
    if _op.family in _BUILD and _op.name not in ELEMENTWISE_KERNELS:
        _fn = _power if _op.name == "pow" else (  # NumPy's power, with C99's special cases
            _DEFINED_HERE[_op.name] if _op.numpy is None else getattr(np, _op.numpy))
        ELEMENTWISE_KERNELS[_op.name] = _BUILD[_op.family](_fn, _op)
        _FUNCTIONS[_op.name] = (_op.family, _fn, _op.native)


def prepared(op, attrs, dtypes):
    """A callable on operands of `dtypes` making what ELEMENTWISE_KERNELS[op](attrs, ...) makes (the same
    NumPy calls in the same dtypes: the same bytes), with what the kernel decides per call decided here,
    for a replay that calls it many times; the caller holds NumPy's floating-point warnings off (the
    engine's realizations do). None for an op it has no such form for."""
    asarray = np.asarray
    if op == "cast":
        out = np.dtype(attrs["dtype"])
        return lambda a: a.astype(out)
    if op == "where":
        out = np.dtype(attrs["dtype"])
        return lambda c, a, b: asarray(np.where(c, a.astype(out, copy=False), b.astype(out, copy=False)))
    if op == "logical_not":
        return lambda a: asarray(np.logical_not(a))
    if op not in _FUNCTIONS:
        return None
    family, fn, native = _FUNCTIONS[op]
    out = np.dtype(attrs["dtype"]) if family in ("unary", "binary") else None
    if family == "unary":
        (x,) = dtypes
        if native and x == out:
            return lambda a: asarray(fn(a)).astype(out, copy=False)
        wide = compute_dtype(x if x.kind == "c" or out.kind == "b" else out)
        return lambda a: asarray(fn(a.astype(wide))).astype(out, copy=False)
    if family == "binary":
        if native and dtypes[0] == out and dtypes[1] == out:
            return lambda a, b: asarray(fn(a, b)).astype(out, copy=False)
        wide = compute_dtype(out)
        return lambda a, b: asarray(fn(a.astype(wide, copy=False), b.astype(wide, copy=False))).astype(out, copy=False)
    if family == "compare":
        wide = compute_dtype(np.result_type(*dtypes))
        return lambda a, b: asarray(fn(a.astype(wide, copy=False), b.astype(wide, copy=False)))
    return lambda a, b: asarray(fn(a, b))  # logical
