"""Device kernels described once and rendered as CUDA C++, Metal Shading Language or plain C.

A `KernelSpec` says what a kernel computes (its buffers, runtime scalars, thread count and a body in
the small C subset the three dialects share); `render(spec, dialect)` wraps it in a dialect's
signature and prelude. The C dialect runs the same bodies on the CPU, which is how the descriptions
are tested against the reference kernels on machines with no GPU.
"""
from .spec import C_EMULATION, C_EMULATION_F32, CUDA, METAL, KernelSpec, Profile, render  # noqa: F401
