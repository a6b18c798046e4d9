"""numba's on-disk cache for this package's kernels, kept under the kernel cache root.

numba's `cache=True` writes `.nbi`/`.nbc` files into a `__pycache__` beside the source by default. Inside
site-packages that folder is not pip's: it survives `pip uninstall`, and a later editable install then
finds `lazytensor/` as a namespace package and fails to import. The locator below sends our functions'
cache to `cache_path("numba")` instead; other people's numba functions keep numba's own rules.

numba judges a cached function fresh by its own file's time and size alone, yet our kernels inline
functions from other files (softmax's rows call special32's exp): a change there would leave the
cached machine code stale. So a function's stamp here is that of every source file of the kernels
folder: a change to any of them recompiles every kernel once.
"""
import contextlib
import os

from numba.core import caching, event

from ..cache import cache_path

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the kernels folder

# numba 0.59-0.6x name the classes with a leading underscore; later versions without.
_UserProvided = getattr(caching, "UserProvidedCacheLocator", None) or caching._UserProvidedCacheLocator
_Impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl


def folder_stamp(root):
    """(relative path, modification time, size) of every .py file under `root`, sorted."""
    stamps = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                st = os.stat(path)
                stamps.append((os.path.relpath(path, root), st.st_mtime, st.st_size))
    return tuple(stamps)


_stamp = []  # the kernels folder's stamp, taken once per process


class KernelCacheLocator(_UserProvided):
    """Caches functions defined under the kernels folder in `cache_path("numba")`, fresh while no
    source file of the folder changed."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(cache_path("numba"), self.get_suitable_cache_subpath(py_file))

    def get_source_stamp(self):
        if not _stamp:
            _stamp.append(folder_stamp(_PACKAGE_ROOT))
        return _stamp[0]

    @classmethod
    def from_function(cls, py_func, py_file):
        if not os.path.abspath(py_file).startswith(_PACKAGE_ROOT + os.sep):
            return None
        # skip _UserProvided.from_function, which declines unless NUMBA_CACHE_DIR is set
        return super(_UserProvided, cls).from_function(py_func, py_file)


class _FirstCompile(event.Listener):
    """Calls `callback()` when the first of its compilations starts, then never again."""

    def __init__(self, callback):
        self.callback = callback

    def on_start(self, ev):
        callback, self.callback = self.callback, None
        if callback is not None:
            callback()

    def on_end(self, ev):
        pass


_ANNOUNCED = {"done": False, "blocks": 0}  # the process-wide notice: given yet; first_compile blocks open


class _Announce(event.Listener):
    """Calls `callback()` as the process's first compilation starts, unless a first_compile block is
    open then (its own callback says it instead)."""

    def __init__(self, callback):
        self.callback = callback

    def on_start(self, ev):
        if not _ANNOUNCED["done"]:
            _ANNOUNCED["done"] = True
            if not _ANNOUNCED["blocks"]:
                self.callback()

    def on_end(self, ev):
        pass


def announce_first_compile(callback):
    """`callback()` once per process, as numba starts the first compilation of this process (a kernel
    loaded from the disk cache is none), unless a `first_compile` block says it instead."""
    event.register("numba:compile", _Announce(callback))


@contextlib.contextmanager
def first_compile(callback):
    """Within the block, `callback()` once, as numba starts compiling a function its cache did not
    hold (a kernel loaded from the disk cache is no compilation)."""
    _ANNOUNCED["blocks"] += 1
    try:
        with event.install_listener("numba:compile", _FirstCompile(callback)):
            yield
    finally:
        _ANNOUNCED["blocks"] -= 1


def install():
    """Put the locator first in numba's list (once); every `cache=True` in kernels/cpu relies on it."""
    if KernelCacheLocator not in _Impl._locator_classes:
        _Impl._locator_classes.insert(0, KernelCacheLocator)


install()
