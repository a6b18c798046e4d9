"""CPU kernels compiled with numba (cached on disk, so a second process starts warm)."""
