"""The words benchmarks put in their headers for the CPU (kernels/cpu/machine.py): a speed figure holds
for one CPU only, so the header names its vendor, family, model and widest SIMD."""
from lazytensor.kernels.cpu import machine


def test_the_widest_simd_named_by_the_cpu_flags_is_reported():
    assert machine.vector_width("fpu sse2 avx avx2 avx512f avx512bw") == "AVX-512"
    assert machine.vector_width("fpu sse2 avx avx2 fma") == "AVX2"
    assert machine.vector_width("fpu sse2") == "SSE2"
    assert machine.vector_width("") is None


def test_the_description_names_cores_system_and_architecture():
    text = machine.cpu_description()
    assert " cores, " in text and text.split(", ")[-1].split()[0] in ("Linux", "Darwin", "Windows")
