"""CPU kernels compiled with numba (cached on disk under the kernel cache root, so a second process starts
warm). The cache locator is installed here, before any kernel module decorates a function."""
from . import numba_cache  # noqa: F401
