"""What CPU this is, in words: the model name and, on Linux, the vendor, family and model numbers and the
widest SIMD its flags name (a speed figure holds for that CPU only).

Hypervisors often show only a family name ("AMD EPYC"), yet the generations behind one name differ
enough to change which BLAS is faster (kernels/cpu/gemm.py); the family and model numbers tell them apart.
"""
import os
import platform

_FIELDS = ("model name", "vendor_id", "cpu family", "model", "flags")


def _cpuinfo():
    """The first value of each of _FIELDS in /proc/cpuinfo ({} where there is none)."""
    found = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in _FIELDS and key not in found:
                    found[key] = value.strip()
                if len(found) == len(_FIELDS):
                    break
    except OSError:
        pass
    return found


def vector_width(flags):
    """The widest SIMD the CPU flags (a /proc/cpuinfo "flags" line) name: "AVX-512", "AVX2", "AVX", "SSE2",
    or None where the line says nothing (another architecture, no /proc)."""
    have = set(flags.split())
    for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("avx", "AVX"), ("sse2", "SSE2")):
        if flag in have:
            return name
    return None


def cpu_description():
    """e.g. "AMD EPYC (AuthenticAMD family 25 model 17, AVX-512), 2 cores, Linux x86_64"."""
    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in info:
        width = vector_width(info.get("flags", ""))
        name += (f" ({info.get('vendor_id', '?')} family {info['cpu family']} model {info.get('model', '?')}"
                 f"{', ' + width if width else ''})")
    return f"{name}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"
