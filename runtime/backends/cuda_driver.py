"""CUDA drivers behind one small interface: alloc/free, upload/download, pinned host memory, compile +
load a kernel, launch on the one compute stream, synchronize, mem_get_info, event timing; and the
name the device takes (`device_name`). `upload_beside` queues an upload on a second stream (a prefetch,
runtime/prefetch.py) and returns a token; `wait_beside(token)` makes the compute stream wait for that
copy (the reader's kernels, or the next user of its block, are queued after it); `synchronize` waits
for both streams.

- `PycudaDriver`: pycuda (the `[cuda]` extra; built from source against cuda.h).
- `CudaBindingsDriver`: NVIDIA's `cuda-bindings` wheel (needs only the driver's libcuda.so.1).
- `EmulatedDriver`: no GPU at all: host memory and the kernels compiled as C
  (kernels/gpu/c_emulation.py); for testing the CUDA backend's engine side. Never chosen automatically.

Kernels are compiled by NVRTC (kernels/cuda/nvrtc.py) to a cubin for the device's sm_XX, cached on disk.
LAZYTENSOR_CUDA_DRIVER=auto|pycuda|cuda-bindings|emulated picks one (auto: pycuda, then cuda-bindings).
"""
import ctypes
import functools
import time

import numpy as np

from ...kernels.cuda import nvrtc
from ...kernels.cuda.tiled import tiled_matmul
from ...kernels.gpu import C_EMULATION, CUDA, c_emulation, render
from .. import config
from ..backends.arena import OutOfDeviceMemory
from ..config import parse_bytes

BLOCK = 256


def _grid(spec):
    return max(1, -(-spec.threads // BLOCK))


class PreparedLaunch:
    """One kernel launch whose argument lists are built once: `launch()` queues it as it stands, and a
    replay changes an argument in place with `set_pointer(i, ptr)` / `set_scalar(j, value)`."""

    __slots__ = ("driver", "fn", "spec", "ptrs", "scalars")

    def __init__(self, driver, fn, spec, ptrs, scalars):
        self.driver, self.fn, self.spec, self.ptrs, self.scalars = driver, fn, spec, list(ptrs), list(scalars)

    def set_pointer(self, i, ptr):
        self.ptrs[i] = ptr

    def set_scalar(self, j, value):
        self.scalars[j] = value

    def launch(self):
        self.driver.launch(self.fn, self.spec, self.ptrs, self.scalars)


class _EmulatedLaunch(PreparedLaunch):
    """A prepared launch of the emulated driver: `launch()` calls the compiled kernel on the argument
    lists as they stand (the lists are changed in place, so the call is built once)."""

    __slots__ = ("launch",)

    def __init__(self, driver, fn, spec, ptrs, scalars):
        super().__init__(driver, fn, spec, ptrs, scalars)
        self.launch = functools.partial(fn, self.ptrs, self.scalars)


class _BindingsLaunch:
    """A cuda-bindings launch from a parameter block built once: each argument lives in a one-element
    array whose address the block holds, so changing an argument is one store."""

    __slots__ = ("driver", "fn", "holders", "params", "params_ptr", "dims", "kinds", "n_ptrs")

    def __init__(self, driver, fn, spec, ptrs, scalars):
        self.driver, self.fn, self.n_ptrs = driver, fn, len(ptrs)
        self.kinds = [k for _, k in spec.scalars]
        self.holders = [np.array([v]) for v in _arg_arrays([0] * len(ptrs), spec, [0] * len(scalars))]
        self.params = np.array([h.ctypes.data for h in self.holders], dtype=np.uint64)
        self.params_ptr = self.params.ctypes.data  # the block never moves: its address, found once
        grid, block = getattr(spec, "grid", None) or (_grid(spec), 1, 1), getattr(spec, "block", None) or (BLOCK, 1, 1)
        self.dims = (*grid, *block)
        for i, p in enumerate(ptrs):
            self.set_pointer(i, p)
        for j, v in enumerate(scalars):
            self.set_scalar(j, v)

    def set_pointer(self, i, ptr):
        if isinstance(ptr, int):  # a stand-in is replaced before the first launch
            self.holders[i][0] = ptr

    def set_scalar(self, j, value):
        if isinstance(value, (int, float, np.number)):
            self.holders[self.n_ptrs + j][0] = value if self.kinds[j] == "f" else int(value)

    def launch(self):
        d = self.driver
        d._ok(d.cu.cuLaunchKernel(self.fn, *self.dims, 0, d.stream, self.params_ptr, 0))


class EmulatedDriver:
    """Host memory posing as device memory; kernels run as compiled C. Testing only, not acceleration."""

    profile = C_EMULATION
    kind = "emulated"
    device_name = "cuda"  # it rehearses the CUDA device, under that name
    tiled_matmul = None

    def __init__(self, capacity=2 ** 30):
        if c_emulation.compiler() is None:
            raise RuntimeError("the emulated CUDA driver needs a C compiler (cc) to run kernels")
        self._c = c_emulation
        self.capacity, self.used = int(capacity), 0
        self._arrays = {}
        self.arch = "emulated"
        self.description = "emulated CUDA driver (kernels compiled as C, run on the CPU; not acceleration)"
        self._beside = {}  # token -> (ptr, host): copies "in flight" on the copy stream
        self._tokens = 0
        self.beside_waits = 0

    def alloc(self, nbytes):
        if self.used + nbytes > self.capacity:
            raise OutOfDeviceMemory(nbytes)
        block = np.empty(max(int(nbytes), 1), np.uint8)
        self._arrays[block.ctypes.data] = block
        self.used += block.nbytes
        return block.ctypes.data

    def free(self, ptr):
        if any(p == ptr for p, _ in self._beside.values()):
            raise RuntimeError("a device block was freed while a copy into it was in flight (no wait_beside)")
        self.used -= self._arrays.pop(ptr).nbytes

    def upload(self, ptr, host):
        ctypes.memmove(ptr, host.ctypes.data, host.nbytes)

    def upload_beside(self, ptr, host):
        """The copy is made only when waited for (or at synchronize); until then the block holds NaN
        bytes, so a kernel or download that reads it without `wait_beside` computes with garbage, as it
        could on a GPU."""
        ctypes.memset(ptr, 0xFF, host.nbytes)
        self._tokens += 1
        self._beside[self._tokens] = (ptr, host)
        return self._tokens

    def wait_beside(self, token):
        self.beside_waits += 1
        self._copy_beside(token)

    def _copy_beside(self, token):
        copy = self._beside.pop(token, None)  # None: a synchronize made it already
        if copy is not None:
            ctypes.memmove(copy[0], copy[1].ctypes.data, copy[1].nbytes)

    def download(self, out, ptr):
        ctypes.memmove(out.ctypes.data, ptr, out.nbytes)

    def pinned_empty(self, nbytes):
        return np.empty(nbytes, np.uint8)

    def function(self, spec):
        return self._c.function(spec)

    def launch(self, fn, spec, ptrs, scalars):
        fn(ptrs, scalars)

    def prepare(self, fn, spec, ptrs, scalars):
        return _EmulatedLaunch(self, fn, spec, ptrs, scalars)

    def synchronize(self):
        for token in list(self._beside):
            self._copy_beside(token)

    def event(self):
        # Kernels and copies finish before their call returns: the host clock is the stream's.
        return time.perf_counter()

    def elapsed_ms(self, start, end):
        return (end - start) * 1e3

    def mem_get_info(self):
        return self.capacity - self.used, self.capacity


def _compile(spec, arch):
    source = spec.source(CUDA) if hasattr(spec, "source") else render(spec, CUDA)
    return nvrtc.compile_cached(source, spec.name, arch, "cubin", spec.fmad)


def _arg_arrays(ptrs, spec, scalars):
    """Kernel arguments as typed NumPy scalars, in the spec's parameter order."""
    args = [np.uint64(p) for p in ptrs]
    args += [np.float64(v) if k == "f" else np.int64(int(v)) for v, (_, k) in zip(scalars, spec.scalars)]
    return args


class CudaBindingsDriver:
    """NVIDIA's cuda-bindings (cuda.bindings.driver), one context on device 0, a compute stream and a
    copy stream for prefetches."""

    profile = CUDA
    kind = "cuda-bindings"
    device_name = "cuda"
    tiled_matmul = staticmethod(tiled_matmul)

    def __init__(self):
        try:
            from cuda.bindings import driver as cu
        except ImportError:  # cuda-python before 12.6 named the module cuda.cuda
            from cuda import cuda as cu
        self.cu = cu
        self._ok(cu.cuInit(0))
        dev = self._ok(cu.cuDeviceGet(0))
        attr = cu.CUdevice_attribute
        major = self._ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = self._ok(cu.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        self.arch = f"sm_{major}{minor}"
        if (major, minor) < (7, 5):
            raise RuntimeError(f"compute capability {major}.{minor} is older than 7.5")
        self.ctx = self._ok(cu.cuDevicePrimaryCtxRetain(dev))
        self._ok(cu.cuCtxSetCurrent(self.ctx))
        self.stream = self._ok(cu.cuStreamCreate(0))
        name = self._ok(cu.cuDeviceGetName(256, dev))
        name = bytes(name).split(b"\0")[0].decode()
        self.description = f"{name} ({self.arch}) via cuda-bindings"
        self._keep = []
        self.copy_stream = None  # made on the first upload_beside

    def _ok(self, result):
        err, *rest = result
        if int(err) != 0:
            name = self.cu.cuGetErrorName(err)[1]
            if int(err) == 2:  # CUDA_ERROR_OUT_OF_MEMORY
                raise OutOfDeviceMemory(0)
            raise RuntimeError(f"CUDA driver error {int(err)} {name!r}")
        return rest[0] if len(rest) == 1 else (tuple(rest) if rest else None)

    def alloc(self, nbytes):
        return int(self._ok(self.cu.cuMemAlloc(max(int(nbytes), 1))))

    def free(self, ptr):
        self._ok(self.cu.cuMemFree(ptr))

    def upload(self, ptr, host):
        self._ok(self.cu.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, self.stream))
        self._keep.append(host)  # the copy reads it later; released at the next wait

    def upload_beside(self, ptr, host):
        if self.copy_stream is None:
            self.copy_stream = self._ok(self.cu.cuStreamCreate(0))
        self._ok(self.cu.cuMemcpyHtoDAsync(ptr, host.ctypes.data, host.nbytes, self.copy_stream))
        done = self._ok(self.cu.cuEventCreate(int(self.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)))
        self._ok(self.cu.cuEventRecord(done, self.copy_stream))
        self._keep.append(host)  # the copy reads it later; released at the next synchronize (both streams)
        return done

    def wait_beside(self, token):
        self._ok(self.cu.cuStreamWaitEvent(self.stream, token, 0))
        self._ok(self.cu.cuEventDestroy(token))  # its resources go once the wait has passed it

    def download(self, out, ptr):
        self._ok(self.cu.cuMemcpyDtoHAsync(out.ctypes.data, ptr, out.nbytes, self.stream))
        self.synchronize()

    def pinned_empty(self, nbytes):
        ptr = int(self._ok(self.cu.cuMemHostAlloc(max(int(nbytes), 1), 0)))
        return np.ctypeslib.as_array((ctypes.c_uint8 * max(int(nbytes), 1)).from_address(ptr))[:nbytes]

    def function(self, spec):
        image = np.frombuffer(_compile(spec, self.arch), np.uint8)
        module = self._ok(self.cu.cuModuleLoadData(image.ctypes.data))
        return self._ok(self.cu.cuModuleGetFunction(module, spec.name.encode()))

    def launch(self, fn, spec, ptrs, scalars):
        values = _arg_arrays(ptrs, spec, scalars)
        holders = [np.array([v]) for v in values]
        params = np.array([h.ctypes.data for h in holders], dtype=np.uint64)
        grid, block = getattr(spec, "grid", None) or (_grid(spec), 1, 1), getattr(spec, "block", None) or (BLOCK, 1, 1)
        self._ok(self.cu.cuLaunchKernel(fn, *grid, *block, 0, self.stream, params.ctypes.data, 0))

    def prepare(self, fn, spec, ptrs, scalars):
        return _BindingsLaunch(self, fn, spec, ptrs, scalars)

    def synchronize(self):
        self._ok(self.cu.cuStreamSynchronize(self.stream))
        if self.copy_stream is not None:
            self._ok(self.cu.cuStreamSynchronize(self.copy_stream))
        self._keep.clear()

    def mem_get_info(self):
        free, total = self._ok(self.cu.cuMemGetInfo())
        return int(free), int(total)

    def event(self):
        ev = self._ok(self.cu.cuEventCreate(0))
        self._ok(self.cu.cuEventRecord(ev, self.stream))
        return ev

    def elapsed_ms(self, start, end):
        self._ok(self.cu.cuEventSynchronize(end))
        return float(self._ok(self.cu.cuEventElapsedTime(start, end)))


class PycudaDriver:
    """pycuda, one retained primary context on device 0, a compute stream and a copy stream."""

    profile = CUDA
    kind = "pycuda"
    device_name = "cuda"
    tiled_matmul = staticmethod(tiled_matmul)

    def __init__(self):
        import pycuda.driver as drv
        self.drv = drv
        drv.init()
        dev = drv.Device(0)
        major, minor = dev.compute_capability()
        if (major, minor) < (7, 5):
            raise RuntimeError(f"compute capability {major}.{minor} is older than 7.5")
        self.arch = f"sm_{major}{minor}"
        self.ctx = dev.retain_primary_context()
        self.ctx.push()
        self.stream = drv.Stream()
        self.description = f"{dev.name()} ({self.arch}) via pycuda"
        self._allocs, self._keep = {}, []
        self.copy_stream = None  # made on the first upload_beside

    def alloc(self, nbytes):
        try:
            a = self.drv.mem_alloc(max(int(nbytes), 1))
        except self.drv.MemoryError:
            raise OutOfDeviceMemory(nbytes) from None
        self._allocs[int(a)] = a
        return int(a)

    def free(self, ptr):
        self._allocs.pop(ptr).free()

    def upload(self, ptr, host):
        self.drv.memcpy_htod_async(ptr, host, self.stream)
        self._keep.append(host)

    def upload_beside(self, ptr, host):
        if self.copy_stream is None:
            self.copy_stream = self.drv.Stream()
        self.drv.memcpy_htod_async(ptr, host, self.copy_stream)
        done = self.drv.Event(self.drv.event_flags.DISABLE_TIMING)
        done.record(self.copy_stream)
        self._keep.append(host)
        return done

    def wait_beside(self, token):
        self.stream.wait_for_event(token)

    def download(self, out, ptr):
        self.drv.memcpy_dtoh_async(out, ptr, self.stream)
        self.synchronize()

    def pinned_empty(self, nbytes):
        return self.drv.pagelocked_empty(max(int(nbytes), 1), np.uint8)[:nbytes]

    def function(self, spec):
        return self.drv.module_from_buffer(_compile(spec, self.arch)).get_function(spec.name)

    def launch(self, fn, spec, ptrs, scalars):
        values = [np.intp(p) for p in ptrs] + _arg_arrays([], spec, scalars)
        grid = getattr(spec, "grid", None) or (_grid(spec), 1, 1)
        block = getattr(spec, "block", None) or (BLOCK, 1, 1)
        fn(*values, grid=grid[:2] if grid[2] == 1 else grid, block=block, stream=self.stream)

    def prepare(self, fn, spec, ptrs, scalars):
        return PreparedLaunch(self, fn, spec, ptrs, scalars)

    def synchronize(self):
        self.stream.synchronize()
        if self.copy_stream is not None:
            self.copy_stream.synchronize()
        self._keep.clear()

    def mem_get_info(self):
        return self.drv.mem_get_info()

    def event(self):
        ev = self.drv.Event()
        ev.record(self.stream)
        return ev

    def elapsed_ms(self, start, end):
        end.synchronize()
        return end.time_since(start)


def open_driver(kind=None, memory=None):
    """The driver LAZYTENSOR_CUDA_DRIVER (or `kind`) names; raises with the reason when it cannot start.
    `memory` sizes the emulated driver's memory (default LAZYTENSOR_VIRTUAL_MEMORY, else 1 GiB)."""
    kind = (kind or config.get("LAZYTENSOR_CUDA_DRIVER")).strip().lower()
    if kind == "emulated":
        return EmulatedDriver(parse_bytes(memory) if memory else config.get("LAZYTENSOR_VIRTUAL_MEMORY"))
    if kind not in ("auto", "pycuda", "cuda-bindings"):
        raise ValueError(f"LAZYTENSOR_CUDA_DRIVER must be auto, pycuda, cuda-bindings or emulated, got {kind!r}")
    if not nvrtc.available():
        raise RuntimeError("NVRTC is missing: pip install nvidia-cuda-nvrtc-cu12 (or nvidia-cuda-nvrtc for CUDA 13)")
    errors = []
    for name, cls in (("pycuda", PycudaDriver), ("cuda-bindings", CudaBindingsDriver)):
        if kind not in ("auto", name):
            continue
        try:
            return cls()
        except ImportError:
            errors.append(f"{name} is not installed")
        except Exception as exc:  # a driver present but unusable: report why, run on the CPU
            errors.append(f"{name}: {exc}")
    raise RuntimeError("; ".join(errors) + " (pip install 'lazytensor[cuda]' or cuda-bindings)")
