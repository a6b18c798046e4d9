"""Seeded fills (uniform, normal, randint): each work item computes its own Philox words, so the bytes
equal kernels/reference/random.py's. Key and stream are runtime scalars (k0, k1, s0, s1)."""
from .spec import KernelSpec, cached, ctype

_SCALARS = (("k0", "i"), ("k1", "i"), ("s0", "i"), ("s1", "i"))
_WORD = "lt_philox_word({j}, (u32)k0, (u32)k1, (u32)s0, (u32)s1)"
CF, NORMAL_SCALE = repr(1.0 / 240.0), "1.0003721"


def key_scalars(seed, stream):
    """The four 32-bit words the fill kernels take, from a 64-bit seed and stream number."""
    seed, stream = int(seed), int(stream)
    return [seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF, stream & 0xFFFFFFFF, (stream >> 32) & 0xFFFFFFFF]


@cached
def uniform(n, dtype):
    """y = lo + (hi - lo) * u in float64, rounded once; u from 24 bits (float32) or 53 bits (float64)."""
    if str(dtype) == "float64":
        u = ["  const u64 w0 = " + _WORD.format(j="2 * (u64)gid") + ";",
             "  const u64 w1 = " + _WORD.format(j="2 * (u64)gid + 1") + ";",
             "  const double u = (double)(((w0 >> 5) << 26) | (w1 >> 6)) * 1.1102230246251565e-16;"]
    else:
        u = ["  const u32 w = " + _WORD.format(j="(u64)gid") + ";",
             "  const real u = (real)(w >> 8) * (real)5.960464477539063e-08;"]
    body = u + [f"  y[gid] = ({ctype(dtype)})(lo + (hi - lo) * u);"]
    return KernelSpec("uniform", [("y", dtype, True)], _SCALARS + (("lo", "f"), ("hi", "f")), n, "\n".join(body))


@cached
def normal(n, dtype):
    """mean + std * z with z from 12 words (see NUMERICS.md): float64 + - * only, in the reference's order."""
    body = ["  u64 lt_sum = 0;",
            "  for (int q = 0; q < 12; ++q) lt_sum += " + _WORD.format(j="12 * (u64)gid + (u64)q") + ";",
            "  const double w = (double)lt_sum * 2.3283064365386963e-10 - 6.0;",
            "  const double cube = w * w * w - 3.0 * w;",
            f"  const double z = {NORMAL_SCALE} * (w + {CF} * cube);",
            f"  y[gid] = ({ctype(dtype)})(mean + sd * z);"]
    return KernelSpec("normal", [("y", dtype, True)], _SCALARS + (("mean", "f"), ("sd", "f")), n, "\n".join(body))


@cached
def randint(n, dtype, low, high):
    """low + floor(word * (high - low) / 2^32) in 64-bit integers."""
    body = ["  const u64 w = " + _WORD.format(j="(u64)gid") + ";",
            f"  y[gid] = ({ctype(dtype)})((i64){int(low)}LL + (i64)((w * (u64){int(high) - int(low)}ULL) >> 32));"]
    return KernelSpec("randint", [("y", dtype, True)], _SCALARS, n, "\n".join(body))
