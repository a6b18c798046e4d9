"""What CPU this is, in words: the model name and, on Linux, the vendor, family and model numbers.

Hypervisors often show only a family name ("AMD EPYC"), yet the generations behind one name differ
enough to change which BLAS is faster (kernels/cpu/gemm.py); the family and model numbers tell them apart.
"""
import os
import platform

_FIELDS = ("model name", "vendor_id", "cpu family", "model")


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


def cpu_description():
    """e.g. "AMD EPYC (AuthenticAMD family 25 model 1), 2 cores, Linux x86_64"."""
    info = _cpuinfo()
    name = info.get("model name") or platform.processor() or "unknown CPU"
    if "cpu family" in info:
        name += f" ({info.get('vendor_id', '?')} family {info['cpu family']} model {info.get('model', '?')})"
    return f"{name}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"
