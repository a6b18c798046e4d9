"""Where compiled kernels are kept between processes: one root for every kind (numba, fused, CUDA).

`LAZYTENSOR_CACHE_DIR`, else `$XDG_CACHE_HOME/lazytensor`, else `~/.cache/lazytensor`. Nothing compiled
is ever written next to the installed source: a file there outlives `pip uninstall` and can shadow a
later install of the package.
"""
import os


def cache_root():
    """The root of every on-disk kernel cache (read from the environment at each call)."""
    return os.environ.get("LAZYTENSOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "lazytensor")


def cache_path(kind):
    """The folder for one kind of compiled artifact, e.g. cache_path("cuda")."""
    return os.path.join(cache_root(), kind)
