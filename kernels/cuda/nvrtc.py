"""NVRTC through ctypes: compile CUDA C++ text to PTX or a cubin, no toolkit and no driver needed.

libnvrtc comes from NVIDIA's wheels (`nvidia-cuda-nvrtc-cu12`, preferred, or `nvidia-cuda-nvrtc` for
CUDA 13), a CUDA install on the library path, or the file LAZYTENSOR_NVRTC names. Compiled images are
cached on disk keyed by source, options, architecture and NVRTC version (LAZYTENSOR_CACHE_DIR, default
~/.cache/lazytensor/cuda).
"""
import ctypes
import glob
import hashlib
import os
import sys

from .. import settings
from ..cache import cache_path

_lib = None


class NvrtcError(RuntimeError):
    """A kernel failed to compile; the message carries NVRTC's log."""


def _candidates():
    for base in sys.path:
        # CUDA 12's first: its cubins load on CUDA 12 and 13 drivers alike
        for pattern in ("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", "nvidia/cu12/lib/libnvrtc.so.12",
                        "nvidia/cu13/lib/libnvrtc.so.13"):
            yield from glob.glob(os.path.join(base, pattern))
    yield from ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12")
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            yield from glob.glob(os.path.join(home, "lib64", "libnvrtc.so*"))


def load():
    """The NVRTC library; raises OSError saying what to install when there is none."""
    global _lib
    if _lib is not None:
        return _lib
    override = settings.get("nvrtc_library")
    for path in ([override] if override else _candidates()):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        _lib = lib
        return lib
    raise OSError("NVRTC not found: pip install nvidia-cuda-nvrtc-cu12 (or nvidia-cuda-nvrtc for CUDA 13)")


def available():
    try:
        load()
        return True
    except OSError:
        return False


def version():
    lib = load()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return major.value, minor.value


def _check(lib, status, what):
    if status != 0:
        raise NvrtcError(f"{what}: {lib.nvrtcGetErrorString(status).decode()}")


def compile_source(source, name, arch, output="cubin", fmad=False, extra=()):
    """Compile `source` for `arch` (e.g. "sm_90") into a cubin (bytes) or PTX (bytes, NUL-terminated).

    A cubin is specific to the architecture and loads on any driver that knows it; PTX is
    JIT-compiled by the driver, which refuses PTX newer than itself."""
    lib = load()
    num = arch.split("_")[-1]
    target = f"sm_{num}" if output == "cubin" else f"compute_{num}"
    options = [f"--gpu-architecture={target}", f"--fmad={'true' if fmad else 'false'}", "--std=c++17",
               "-default-device", *extra]
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), f"{name}.cu".encode(), 0, None,
                                       None), "nvrtcCreateProgram")
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        status = lib.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if status != 0:
            raise NvrtcError(f"{name} did not compile for {target} ({' '.join(options)}):\n"
                             f"{log.value.decode(errors='replace')}")
        getsize, get = ((lib.nvrtcGetCUBINSize, lib.nvrtcGetCUBIN) if output == "cubin"
                        else (lib.nvrtcGetPTXSize, lib.nvrtcGetPTX))
        _check(lib, getsize(prog, ctypes.byref(size)), "size")
        image = ctypes.create_string_buffer(size.value)
        _check(lib, get(prog, image), "get image")
        return image.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def cache_dir():
    return cache_path("cuda")


def compile_cached(source, name, arch, output="cubin", fmad=False):
    """compile_source, cached on disk by (source, options, architecture, NVRTC version)."""
    key = hashlib.sha256(repr((source, arch, output, fmad, version())).encode()).hexdigest()[:24]
    path = os.path.join(cache_dir(), f"{name}-{key}.{output}")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        pass
    image = compile_source(source, name, arch, output, fmad)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(image)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home only costs a recompile next time
    return image
