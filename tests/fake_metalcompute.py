"""A stand-in for metalcompute on machines without Metal: the same calls (Device, kernel(source)
.function(name), buffer, fn(count, *buffers) -> handle), with each kernel run as C in single precision
(kernels/gpu/c_emulation.py, `real` = float) from the description its name was rendered from.

It checks the Metal backend's Python side (lowering, buffer and scalar packing, launch counts) and
what float32-only arithmetic does to the numerics; it cannot check Apple's compiler (fast math) or
hardware: bench/device_check_metal.py does that on a Mac.
"""
import re

import numpy as np

from lazytensor.kernels.gpu import c_emulation
from lazytensor.kernels.gpu.spec import observe_renders

RENDERED = {}  # every spec rendered since this double was imported, by kernel name
observe_renders(lambda spec: RENDERED.__setitem__(spec.name, spec))

launches = []


class Function:
    def __init__(self, spec):
        self.spec = spec

    def __call__(self, count, *buffers):
        spec = self.spec
        assert count == spec.threads, (count, spec.threads)
        arrays = [np.frombuffer(b, np.uint8) if isinstance(b, bytearray) else np.ascontiguousarray(b)
                  for b in buffers]
        ptrs, rest = arrays[:len(spec.buffers)], arrays[len(spec.buffers):]
        floats = list(rest.pop(0)) if any(k == "f" for _, k in spec.scalars) else []
        ints = list(rest.pop(0)) if any(k == "i" for _, k in spec.scalars) else []
        assert not rest, "more buffers than the kernel takes"
        scalars = [floats.pop(0) if k == "f" else ints.pop(0) for _, k in spec.scalars]
        c_emulation.function(spec, float_only=True)(ptrs, scalars)
        launches.append(spec.kind)
        return object()


class Library:
    def __init__(self, source):
        assert "#include <metal_stdlib>" in source
        self.names = set(re.findall(r"kernel void (\w+)\(", source))

    def function(self, name):
        assert name in self.names, f"{name} is not in the compiled source"
        return Function(RENDERED[name])


class Device:
    deviceName = "fake Metal device (C emulation in float32)"

    def kernel(self, source):
        return Library(source)

    def buffer(self, size):
        return bytearray(int(size))
