"""A stand-in for `pycuda.driver` on machines without a GPU: the calls PycudaDriver makes, with host
memory as device memory; a launch reads its arguments as pycuda would pass them (NumPy scalars by
value) and runs the kernel as C from the description its name was rendered from."""
import ctypes

import numpy as np

from lazytensor.kernels.gpu import c_emulation
from lazytensor.kernels.gpu.spec import observe_renders

RENDERED = {}  # every spec rendered since this double was imported, by kernel name
observe_renders(lambda spec: RENDERED.__setitem__(spec.name, spec))

calls = []


class MemoryError(Exception):  # noqa: A001 (pycuda's own name)
    pass


def init():
    pass


class _Context:
    def push(self):
        pass


class Device:
    def __init__(self, ordinal):
        assert ordinal == 0

    def compute_capability(self):
        return 9, 0

    def name(self):
        return "Fake GPU (host memory)"

    def retain_primary_context(self):
        return _Context()


class Stream:
    def synchronize(self):
        pass


class DeviceAllocation:
    def __init__(self, nbytes):
        self._block = np.zeros(nbytes, np.uint8)

    def __int__(self):
        return self._block.ctypes.data

    def free(self):
        self._block = None


def mem_alloc(nbytes):
    return DeviceAllocation(nbytes)


def mem_get_info():
    return 8 * 2 ** 30, 16 * 2 ** 30


def memcpy_htod_async(dst, src, stream=None):
    ctypes.memmove(int(dst), src.ctypes.data, src.nbytes)


def memcpy_dtoh_async(dst, src, stream=None):
    ctypes.memmove(dst.ctypes.data, int(src), dst.nbytes)


def pagelocked_empty(shape, dtype):
    return np.empty(shape, dtype)


class _Function:
    def __init__(self, spec):
        self.spec = spec

    def __call__(self, *args, grid, block, stream):
        spec = self.spec
        assert len(args) == len(spec.buffers) + len(spec.scalars)
        assert all(isinstance(a, np.generic) for a in args), "pycuda passes NumPy scalars by value"
        assert grid[0] * block[0] >= spec.threads
        calls.append(spec.kind)
        c_emulation.function(spec)([int(a) for a in args[:len(spec.buffers)]], list(args[len(spec.buffers):]))


class _Module:
    def __init__(self, image):
        assert image[:4] == b"\x7fELF", "expected a cubin"

    def get_function(self, name):
        return _Function(RENDERED[name])


def module_from_buffer(image):
    return _Module(image)


class Event:
    def record(self, stream=None):
        return self

    def synchronize(self):
        return self

    def time_since(self, other):
        return 0.001
