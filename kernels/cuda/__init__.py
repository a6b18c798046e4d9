"""CUDA kernel text (prelude.cuh, matmul_tiled.cu) and the NVRTC compiler that builds it at run time."""
