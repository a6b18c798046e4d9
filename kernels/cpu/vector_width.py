"""Full-width vector loops on CPUs with AVX-512: numba's code generator told not to prefer 256 bits.

LLVM tunes most AVX-512 Intel CPUs with "prefer-256-bit", so numba's loops run eight float32 lanes where
the CPU has sixteen. Our kernels' heavy loops are transcendental polynomials (erf, exp) in float32, which
gain from the full width (bench/RESULTS.md, 'Figures behind the code's choices'). Results do not change: no
kernel uses fast-math, so each element is computed by the same operations at any width.

numba fixes the target's features when its CPU context starts (the first function it decorates), for the
whole process: so this must run before that, and it affects every numba function of the process, not
only ours. It does nothing where the user chose (NUMBA_CPU_NAME or NUMBA_CPU_FEATURES), where numba's
context already started, or on a CPU without AVX-512. numba's disk cache keys code by these features, so
the change costs one recompilation of the kernels, not stale code.
"""
from numba.core import config


def _context_started():
    from numba.core.registry import cpu_target
    return "_toplevel_target_context" in vars(cpu_target)


def full_width_features():
    """The host's feature string without the 256-bit preference, or None on a CPU without AVX-512."""
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features()
    if not features.get("avx512f"):
        return None
    return features.flatten() + ",-prefer-256-bit"


def prefer_full_width():
    """Let numba vectorize 512 bits wide on this AVX-512 CPU; returns whether it now does."""
    if config.CPU_NAME is not None or config.CPU_FEATURES is not None or _context_started():
        return False
    features = full_width_features()
    if features is None:
        return False
    config.CPU_FEATURES = features
    return True
