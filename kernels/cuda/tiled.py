"""The register-tiled float32 matmul (matmul_tiled.cu) as a launchable kernel description."""
import hashlib
import math
import os
import string

from .. import settings
from ..gpu.spec import cached


_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matmul_tiled.cu")


def _batch_offset(batch, strides):
    """C expression for the element offset of batch entry z (blockIdx.z) under broadcast `strides`."""
    terms, rest = [], "z"
    for d in range(len(batch) - 1, -1, -1):
        idx = f"(({rest}) % {batch[d]}LL)" if d else f"({rest})"
        if strides[d]:
            terms.append(f"{idx} * {strides[d]}LL")
        rest = f"({rest}) / {batch[d]}LL"
    return " + ".join(terms) or "0"


class TiledMatmul:
    """A float32 batched matmul kernel with its own launch geometry (2-D tiles, batch in z)."""

    kind = "matmul_tiled"
    fmad = True
    scalars = ()

    def __init__(self, batch, n, k, m, a_strides, b_strides):
        self.batch = tuple(int(b) for b in batch)
        nbatch = math.prod(self.batch)
        self.values = dict(N=int(n), K=int(k), M=int(m), A_BASE=_batch_offset(self.batch, a_strides),
                           B_BASE=_batch_offset(self.batch, b_strides))
        text = repr(sorted(self.values.items()))
        self.name = "lt_matmul_tiled_" + hashlib.sha256(text.encode()).hexdigest()[:16]
        self.grid = (-(-int(m) // 64), -(-int(n) // 64), nbatch)
        self.block = (256, 1, 1)
        self.threads = nbatch * int(n) * int(m)
        self.buffers = (("y", "float32", True), ("a", "float32", False), ("b", "float32", False))

    def source(self, profile):
        with open(_TEMPLATE) as f:
            body = string.Template(f.read()).substitute(NAME=self.name, **self.values)
        return profile.prelude() + "\n" + body


@cached
def tiled_matmul(batch, n, k, m, a_strides, b_strides, dtype):
    """The tiled kernel for float32 products big enough to fill its 64x64 tiles; None otherwise (the
    one-thread-per-output kernel): fewer than 4096 outputs, a side under 16 (a matrix-vector product
    would leave 63 of 64 rows of each tile idle), or more than 65535 stacked products (grid z)."""
    if dtype != "float32" or settings.get("cuda_matmul") == "naive":
        return None
    if n * m < 4096 or min(n, m) < 16 or math.prod(batch) > 65535:
        return None
    return TiledMatmul(batch, n, k, m, a_strides, b_strides)
