"""numba's on-disk cache for this package's kernels, kept under the kernel cache root.

numba's `cache=True` writes `.nbi`/`.nbc` files into a `__pycache__` beside the source by default. Inside
site-packages that folder is not pip's: it survives `pip uninstall`, and a later editable install then
finds `lazytensor/` as a namespace package and fails to import. The locator below sends our functions'
cache to `cache_path("numba")` instead; other people's numba functions keep numba's own rules.
"""
import os

from numba.core import caching

from ..cache import cache_path

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the kernels folder

# numba 0.59-0.6x name the classes with a leading underscore; later versions without.
_UserProvided = getattr(caching, "UserProvidedCacheLocator", None) or caching._UserProvidedCacheLocator
_Impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl


class KernelCacheLocator(_UserProvided):
    """Caches functions defined under the kernels folder in `cache_path("numba")`."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(cache_path("numba"), self.get_suitable_cache_subpath(py_file))

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(_PACKAGE_ROOT + os.sep):
            return None
        # skip _UserProvided.from_function, which declines unless NUMBA_CACHE_DIR is set
        return super(_UserProvided, cls).from_function(py_func, py_file)


def install():
    """Put the locator first in numba's list (once); every `cache=True` in kernels/cpu relies on it."""
    if KernelCacheLocator not in _Impl._locator_classes:
        _Impl._locator_classes.insert(0, KernelCacheLocator)


install()
