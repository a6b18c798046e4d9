"""Run KernelSpecs on the CPU by rendering them as C and compiling with the system's C compiler.

This is how the device kernel descriptions are checked against the reference kernels where no GPU
exists (tests, and the CUDA backend's emulated driver): same bodies, same operation order, no
contraction of a*b+c unless the spec allows it.
"""
import atexit
import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading


from .spec import C_EMULATION, C_EMULATION_F32, render

_lock = threading.Lock()
_loaded = {}
_dir = None


def compiler():
    """Path of the C compiler, or None."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc") or shutil.which("clang")


def _build(source, fmad):
    global _dir
    if _dir is None:
        _dir = tempfile.mkdtemp(prefix="lazytensor-cemu-")
        atexit.register(shutil.rmtree, _dir, ignore_errors=True)  # a process's kernels are its own
    key = hashlib.sha256((source + str(fmad)).encode()).hexdigest()[:20]
    so = os.path.join(_dir, f"k{key}.so")
    if not os.path.exists(so):
        src = os.path.join(_dir, f"k{key}.c")
        with open(src, "w") as f:
            f.write(source)
        cmd = [compiler(), "-O2", "-std=gnu99", "-shared", "-fPIC", "-fno-fast-math",
               f"-ffp-contract={'fast' if fmad else 'off'}", "-o", so, src, "-lm"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"C emulation of a kernel did not compile:\n{done.stderr}\n{source}")
    return ctypes.CDLL(so)


def function(spec, float_only=False):
    """A callable(buffers, scalars) running `spec` over all its work items; `float_only` emulates a
    dialect without float64 (the wide type `real` is float)."""
    with _lock:
        fn = _loaded.get((spec.name, float_only))
        if fn is None:
            lib = _build(render(spec, C_EMULATION_F32 if float_only else C_EMULATION), spec.fmad)
            fn = getattr(lib, spec.name)
            fn.restype = None
            _loaded[spec.name, float_only] = fn
    kinds = [k for _, k in spec.scalars]

    def run(buffers, scalars=()):
        args = [ctypes.c_void_p(b if isinstance(b, int) else b.ctypes.data) for b in buffers]
        args += [ctypes.c_double(float(v)) if k == "f" else ctypes.c_longlong(int(v))
                 for v, k in zip(scalars, kinds)]
        fn(*args, ctypes.c_longlong(0), ctypes.c_longlong(spec.threads))
    return run

