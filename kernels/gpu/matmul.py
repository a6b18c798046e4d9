"""Matrix products, one work item per output element: batched, with broadcast batch strides (a rank-2
weight under a rank-3 activation is read in place, never copied per matrix). Not bit-identical to BLAS
(accumulation order, FMA): tolerance documented in docs/NUMERICS.md. CUDA uses the register-tiled
kernel in kernels/cuda/matmul_tiled.cu for float32 when the shapes allow."""
import math

from .elementwise import index_code
from .spec import KernelSpec, cached, ctype


def batch_strides(shape, batch):
    """Element strides of a contiguous (..., r, c) operand's batch dims broadcast to `batch`."""
    r, c = shape[-2], shape[-1]
    lead = tuple(shape[:-2])
    pad = (1,) * (len(batch) - len(lead)) + lead
    strides, acc = [], r * c
    for n in reversed(pad):
        strides.append(acc)
        acc *= n
    strides = list(reversed(strides))
    return tuple(0 if pad[d] == 1 and batch[d] != 1 else strides[d] for d in range(len(batch)))


@cached
def matmul(batch, n, k, m, a_strides, b_strides, dtype, has_double=True):
    """y[b, i, j] = sum_t a[b, i, t] * b[b, t, j]; a is (.., n, k), b (.., k, m), both contiguous
    per matrix, with batch strides `a_strides`/`b_strides` over `batch`."""
    acc = "double" if has_double else "float"
    shape = tuple(batch) + (n, m)
    r = len(batch)
    a_off = " + ".join([f"i{d} * {a_strides[d]}LL" for d in range(r) if a_strides[d]] + [f"i{r} * {k}LL"])
    b_off = " + ".join([f"i{d} * {b_strides[d]}LL" for d in range(r) if b_strides[d]] + [f"i{r + 1}"])
    body = [index_code(shape),
            f"  const i64 lt_a = {a_off};",
            f"  const i64 lt_b = {b_off};",
            f"  {acc} acc = 0;",
            f"  for (i64 t = 0; t < {k}LL; ++t) acc += ({acc})a[lt_a + t] * ({acc})b[lt_b + t * {m}LL];",
            f"  y[gid] = ({ctype(dtype)})acc;"]
    buffers = [("y", dtype, True), ("a", dtype, False), ("b", dtype, False)]
    return KernelSpec("matmul", buffers, (), math.prod(shape), "\n".join(body), fmad=True)
