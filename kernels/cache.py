"""Where compiled kernels are kept between processes: one root for every kind (numba, fused, CUDA).

The root is the `cache_dir` setting (kernels/settings.py; LAZYTENSOR_CACHE_DIR, else
~/.cache/lazytensor). Nothing compiled is ever written next to the installed source: a file there
outlives `pip uninstall` and can shadow a later install of the package. A root that cannot be written
(a read-only home, a full disk) costs the disk cache, not the run: one line on stderr names the folder
and LAZYTENSOR_CACHE_DIR, and this process compiles into a temporary folder removed when it exits.
"""
import atexit
import os
import shutil
import sys
import tempfile

from . import settings


_usable = {}  # a configured root -> the folder used for it (itself, or a temporary stand-in)


def cache_root():
    """The root of every on-disk kernel cache (asked for at each call; checked once per folder)."""
    configured = settings.get("cache_dir")
    root = _usable.get(configured)
    if root is None:
        root = _usable[configured] = _writable_or_temporary(configured)
    return root


def kept_between_runs():
    """Whether compiled kernels outlive this process (False: the root could not be written, and a
    temporary stand-in, already announced on stderr, is used)."""
    configured = settings.get("cache_dir")
    return cache_root() == configured


def cache_path(kind):
    """The folder for one kind of compiled artifact, e.g. cache_path("cuda")."""
    return os.path.join(cache_root(), kind)


def _writable_or_temporary(folder):
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
        return folder
    except OSError as exc:
        stand_in = tempfile.mkdtemp(prefix="lazytensor-kernels-")
        atexit.register(shutil.rmtree, stand_in, ignore_errors=True)
        print(f"lazytensor: the kernel cache folder {folder} cannot be written ({exc.strerror or exc}): "
              f"kernels compile anew in this process; set LAZYTENSOR_CACHE_DIR to a writable folder to keep "
              f"them between runs", file=sys.stderr, flush=True)
        return stand_in
