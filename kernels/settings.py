"""The settings kernels need from outside: where compiled kernels are cached, which NVRTC library to
load, which CUDA matmul to render, which library computes mid-sized float32 products on the CPU, whether
numba's loops may run 512 bits wide, how much idle memory the CPU kernels' result cache keeps. The
kernels read no environment variable; the runtime's configuration (runtime/config.py, the one table of
LAZYTENSOR_* variables) provides these at import."""
import os

_providers = {
    "cache_dir": lambda: os.path.join(os.path.expanduser("~"), ".cache", "lazytensor"),
    "nvrtc_library": lambda: None,   # None: search NVIDIA's wheels and CUDA installs
    "cuda_matmul": lambda: "tiled",
    "host_blas": lambda: "auto",     # which library computes mid-sized float32 products (kernels/cpu/gemm.py)
    "wide_vectors": lambda: True,    # 512-bit numba loops on AVX-512 CPUs (kernels/cpu/vector_width.py)
    "host_cache_bytes": lambda: 2 ** 30,   # idle bytes the CPU kernels' result cache keeps (host_cache.py)
}


def provide(**providers):
    """Replace the functions that answer `get(name)` (each called whenever the setting is needed)."""
    unknown = set(providers) - set(_providers)
    if unknown:
        raise KeyError(f"unknown kernel settings {sorted(unknown)}")
    _providers.update(providers)


def get(name):
    return _providers[name]()
