"""Where compiled kernels are kept between processes: one root for every kind (numba, fused, CUDA).

The root is the `cache_dir` setting (kernels/settings.py; LAZYTENSOR_CACHE_DIR, else
~/.cache/lazytensor). Nothing compiled is ever written next to the installed source: a file there
outlives `pip uninstall` and can shadow a later install of the package.
"""
import os

from . import settings


def cache_root():
    """The root of every on-disk kernel cache (asked for at each call)."""
    return settings.get("cache_dir")


def cache_path(kind):
    """The folder for one kind of compiled artifact, e.g. cache_path("cuda")."""
    return os.path.join(cache_root(), kind)
