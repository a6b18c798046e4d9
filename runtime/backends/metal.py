"""The Metal backend on metalcompute: float32 kernels on Apple GPUs, results back on the host per call.

On unified memory, keeping results on the device measured as a tie or a loss for the seed system
(command buffers are awaited per call; the copy saved is a memcpy), so this backend behaves like a host
backend: it takes host arrays, runs the kernel, and returns a host array viewing the shared Metal
buffer. float64 never leaves the CPU, and neither does anything whose reference definition needs
float64 arithmetic (transcendentals, the AdamW step, normal fills). Kernels are the shared
descriptions of kernels/gpu/ rendered as MSL; compiled functions are cached per source.
"""
import platform
import sys
import weakref

import numpy as np

from ...kernels.gpu import METAL, render
from ...kernels.gpu import elementwise as gew
from .. import config
from ..offload_tables import METAL_THRESHOLDS
from .base import HostBackend
from .lowering import OUT, LoweringDevice, lower, scalar_values


def unavailable_reason():
    """Why Metal cannot run here, or None when it can."""
    if sys.platform != "darwin" or platform.machine() != "arm64":
        return "Metal needs macOS on Apple silicon"
    try:
        import metalcompute  # noqa: F401
    except ImportError:
        return "metalcompute is not installed (pip install 'lazytensor[metal]')"
    return None


class MetalBackend(LoweringDevice, HostBackend):
    """Float32 kernels through metalcompute; a host backend in the chain (see the module doc)."""

    name = "metal"
    thresholds = METAL_THRESHOLDS
    fuses = True

    def __init__(self, mc=None, offload="policy"):
        if mc is None:
            import metalcompute as mc
        self.mc, self.offload = mc, config.offload_mode("metal", offload)
        self.device = mc.Device()
        self.description = (f"{getattr(self.device, 'deviceName', 'Apple GPU')} via metalcompute "
                            "(float32; results return to the host after each call)")
        self.gemv_offers = weakref.WeakValueDictionary()
        self._functions = {}

    def lower(self, node, operands):
        return lower(node, operands, has_double=False)

    def _function(self, spec):
        fn = self._functions.get(spec.name)
        if fn is None:
            # metalcompute compiles with fast math on; see docs/NUMERICS.md for what that may change.
            fn = self._functions[spec.name] = self.device.kernel(render(spec, METAL)).function(spec.name)
        return fn

    def launch_fused(self, recipe, root, arrays, params):
        """A fused elementwise group (runtime/fusion.py) as one float32 kernel, or None to decline it:
        float64 or wide ops (which groups it is given under the policy: runtime/placement.py)."""
        if not self.can_fuse(recipe, root, [a.shape for a in arrays]):
            return None
        spec = gew.fused(root.shape, recipe, [a.shape for a in arrays], [False] * len(params), has_double=False)
        out = self.device.buffer(max(root.nbytes, 1))
        handle = self._run(spec, [out] + [np.ascontiguousarray(a) for a in arrays], params)
        del handle  # metalcompute waits for a run when its handle is released
        return np.frombuffer(out, dtype=root.dtype, count=root.size).reshape(root.shape)

    def can_fuse(self, recipe, root, shapes):
        return gew.fused_supported(recipe, has_double=False)

    def _run(self, spec, bufs, values):
        """Start `spec` on `bufs`, its scalar `values` packed into a float and an int buffer (metalcompute
        passes buffers only); returns the run's handle."""
        floats = [v for v, (_, k) in zip(values, spec.scalars) if k == "f"]
        ints = [v for v, (_, k) in zip(values, spec.scalars) if k == "i"]
        if floats:
            bufs.append(np.array(floats, dtype=np.float32))
        if ints:
            bufs.append(np.array([int(v) & 0xFFFFFFFF for v in ints], dtype=np.uint32).view(np.int32))
        return self._function(spec)(spec.threads, *bufs)

    def launch(self, node, args):
        launches = self.planned_launches(node, args)
        out = self.device.buffer(max(node.nbytes, 1))
        handles = []
        for launch in launches:
            bufs = []
            for operand in launch.operands:
                if operand is OUT:
                    bufs.append(out)
                elif isinstance(operand, np.ndarray):
                    bufs.append(np.ascontiguousarray(operand))
                else:
                    bufs.append(np.ascontiguousarray(args[operand]))
            handles.append(self._run(launch.spec, bufs, scalar_values(launch, node, args)))
        del handles  # metalcompute waits for a run when its handle is released
        return np.frombuffer(out, dtype=node.dtype, count=node.size).reshape(node.shape)
