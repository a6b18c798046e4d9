"""Float32 matrix products through BLIS (the `blis` package) for the sizes where NumPy's OpenBLAS is slow.

On the training step's products (a dimension of 64-256, the other of ~1000; under 2^25 multiply-adds)
OpenBLAS's float32 speed moves between 13 and 43 GFLOP/s with the operands' layout and address, and
its weight-gradient products (a transposed operand, long inner dimension) stay at 14-20; BLIS's runs at
33-40 on all of them. From 2^25 multiply-adds up the two are alike and NumPy keeps them
(bench/RESULTS.md); below 2^18 (a 64 x 64 x 64 product) BLIS's call costs more than it saves (~10 us
against NumPy's ~3), so NumPy keeps those too. The products are the same sums in another order: matmul
is in the tolerance class. Without the `blis` package every product stays with NumPy.
"""
import numpy as np

try:
    from blis.py import gemm as _blis_gemm
except ImportError:  # an install without the wheel: NumPy computes every product
    _blis_gemm = None

MIN_MACS, MAX_MACS = 1 << 18, 1 << 25
_F32 = np.dtype(np.float32)


def prefers_blis(m, k, n, dtype):
    """Whether an (m, k) @ (k, n) product of `dtype` goes to BLIS (float32, MIN_MACS <= m k n < MAX_MACS)."""
    return _blis_gemm is not None and dtype == _F32 and MIN_MACS <= m * k * n < MAX_MACS


def _operand(a):
    """`a` as a C-contiguous array and whether BLIS reads it transposed (a transposed view is not copied)."""
    if a.flags.c_contiguous:
        return a, False
    if a.T.flags.c_contiguous:
        return a.T, True
    return np.ascontiguousarray(a), False


def matmul_into(a, b, out):
    """out = a @ b for 2-D float32 `a`, `b` and a C-contiguous float32 `out`, by BLIS (releases the GIL)."""
    (a, trans_a), (b, trans_b) = _operand(a), _operand(b)
    _blis_gemm(a, b, out=out, trans1=trans_a, trans2=trans_b, alpha=1.0, beta=0.0)
    return out
