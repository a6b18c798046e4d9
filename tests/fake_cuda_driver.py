"""A stand-in for NVIDIA's `cuda.bindings.driver` on machines without a GPU: the calls
CudaBindingsDriver makes, with host memory as device memory. A launch decodes the kernel-parameter
array exactly as the driver would (an array of pointers to each argument's bytes) and runs the kernel
as C from the description its name was rendered from. Modules are real NVRTC cubins, only not run.

It checks the binding layer's calls, return-value unpacking and argument marshalling; not the GPU.
"""
import ctypes
import enum

import numpy as np

from lazytensor.kernels.gpu import c_emulation
from lazytensor.kernels.gpu.spec import observe_renders

RENDERED = {}  # every spec rendered since this double was imported, by kernel name
observe_renders(lambda spec: RENDERED.__setitem__(spec.name, spec))

calls = []
_memory = {}


class CUdevice_attribute(enum.IntEnum):
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def _ok(*values):
    return (0,) + values


def cuInit(flags):
    return _ok()


def cuDeviceGet(ordinal):
    return _ok(0)


def cuDeviceGetAttribute(attr, dev):
    return _ok(9 if attr == CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR else 0)


def cuDevicePrimaryCtxRetain(dev):
    return _ok("context")


def cuCtxSetCurrent(ctx):
    return _ok()


def cuStreamCreate(flags):
    return _ok("stream")


def cuDeviceGetName(length, dev):
    return _ok(b"Fake GPU (host memory)".ljust(length, b"\0"))


def cuGetErrorName(err):
    return _ok(b"CUDA_ERROR_FAKE")


def cuMemAlloc(nbytes):
    block = np.zeros(int(nbytes), np.uint8)
    _memory[block.ctypes.data] = block
    return _ok(block.ctypes.data)


cuMemHostAlloc = lambda nbytes, flags: cuMemAlloc(nbytes)  # noqa: E731


def cuMemFree(ptr):
    del _memory[int(ptr)]
    return _ok()


def cuMemcpyHtoDAsync(dst, src, nbytes, stream):
    ctypes.memmove(int(dst), int(src), int(nbytes))
    return _ok()


def cuMemcpyDtoHAsync(dst, src, nbytes, stream):
    ctypes.memmove(int(dst), int(src), int(nbytes))
    return _ok()


def cuStreamSynchronize(stream):
    return _ok()


def cuMemGetInfo():
    return _ok(8 * 2 ** 30, 16 * 2 ** 30)


def cuModuleLoadData(image_address):
    header = ctypes.string_at(int(image_address), 4)
    assert header == b"\x7fELF", "expected a cubin"
    return _ok("module")


def cuModuleGetFunction(module, name):
    return _ok(RENDERED[name.decode()])


def cuLaunchKernel(spec, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    n = len(spec.buffers) + len(spec.scalars)
    addresses = np.frombuffer(ctypes.string_at(int(params), 8 * n), np.uint64)
    ptrs = [int(np.frombuffer(ctypes.string_at(int(a), 8), np.uint64)[0]) for a in addresses[:len(spec.buffers)]]
    scalars = []
    for address, (_, kind) in zip(addresses[len(spec.buffers):], spec.scalars):
        raw = ctypes.string_at(int(address), 8)
        scalars.append(np.frombuffer(raw, np.float64 if kind == "f" else np.int64)[0])
    assert gx * bx >= spec.threads and (gy, gz, by, bz) == (1, 1, 1, 1)
    calls.append(spec.kind)
    c_emulation.function(spec)(ptrs, scalars)
    return _ok()


def cuEventCreate(flags):
    return _ok("event")


def cuEventRecord(event, stream):
    return _ok()


def cuEventSynchronize(event):
    return _ok()


def cuEventElapsedTime(start, end):
    return _ok(0.001)
