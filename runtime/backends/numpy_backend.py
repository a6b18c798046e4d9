"""The NumPy backend: the portable definition of every op and the oracle for every other backend."""
import numpy as np

from ...kernels.reference import KERNELS
from ...kernels.reference import prepared as prepared_reference
from .base import HostBackend


class NumpyBackend(HostBackend):
    """Runs every op with the reference kernels on host arrays. Always accepts."""

    name = "numpy"

    def accepts(self, node, operands):
        return node.op in KERNELS

    def launch(self, node, args):
        out = KERNELS[node.op](node.attrs, *args)
        if not isinstance(out, np.ndarray) or out.shape != node.shape or out.dtype != node.dtype:
            raise AssertionError(
                f"kernel {node.op} returned {getattr(out, 'shape', None)} {getattr(out, 'dtype', None)}, "
                f"expected {node.shape} {node.dtype}")
        return out

    def prepared(self, node, dtypes=None):
        # launch's result check ran when the step was captured
        lean = prepared_reference(node.op, node.attrs, dtypes) if dtypes else None
        if lean is not None:
            return lean
        kernel, attrs = KERNELS[node.op], node.attrs
        return lambda *args: kernel(attrs, *args)
