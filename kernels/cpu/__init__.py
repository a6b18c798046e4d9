"""CPU kernels compiled with numba (cached on disk under the kernel cache root, so a second process starts
warm). numba's target is set first (full-width vectors where the CPU has AVX-512 and the `wide_vectors`
setting allows: vector_width.py), then the cache locator is installed, before any kernel module
decorates a function."""
from .. import settings as _settings
from . import vector_width as _vector_width

if _settings.get("wide_vectors"):
    _vector_width.prefer_full_width()

from . import numba_cache  # noqa: E402,F401
