"""Float matrix products in pieces on numba's threads: NumPy's own OpenBLAS called from compiled code.

A product split between threads must not use OpenBLAS's own thread pool: its idle threads spin, and so
do numba's, and two spinning pools on the same cores take turns by the scheduler's time slices
(runtime/parallel.py). So each piece (a block of rows of a stacked activation under a rank-2 weight, or
a block of the batch) calls `cblas_sgemm` / `cblas_dgemm` of the OpenBLAS that NumPy loaded (found
through threadpoolctl, by address: numba caches code that takes the address as an argument, not code
that holds a ctypes pointer), while OpenBLAS itself is held to one thread. A batch is read where it lies,
whatever its strides (the matrices' byte offsets, not a copy: heads split out of one q, k, v projection
cannot be merged into one batch dim). NumPy's library, so the same kernels as np.matmul's; a piece's
rows may still be rounded differently from the whole product's (another blocking): matmul is in the
tolerance class.
"""
import ctypes
import functools

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.core.extending import intrinsic

try:
    from threadpoolctl import threadpool_info
except ImportError:  # optional (runtime/parallel.py): no pieces without it
    threadpool_info = None

_ROW_MAJOR, _NO_TRANS, _TRANS = np.int32(101), np.int32(111), np.int32(112)
# Exported names of cblas_?gemm in the OpenBLAS builds NumPy ships (ILP64 builds take 64-bit ints).
_NAMES = (("scipy_cblas_{}gemm64_", np.int64), ("cblas_{}gemm64_", np.int64), ("scipy_cblas_{}gemm", np.int32),
          ("cblas_{}gemm", np.int32))
_library = {}


@intrinsic
def _call_at(typingctx, address, args):
    """Call the C function at integer `address` with the values of tuple `args` (integers, floats;
    pointers passed as integers), returning nothing."""
    sig = types.void(address, args)

    def codegen(context, builder, signature, llargs):
        values = cgutils.unpack_tuple(builder, llargs[1], len(signature.args[1]))
        fnty = ir.FunctionType(ir.VoidType(), [v.type for v in values])
        builder.call(builder.inttoptr(llargs[0], fnty.as_pointer()), values)
        return context.get_dummy_value()
    return sig, codegen


def gemm_address(dtype):
    """(address of cblas_sgemm or cblas_dgemm for `dtype`, its integer type), or None where NumPy's BLAS
    is not an OpenBLAS exporting it (then products are not split)."""
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        return None
    if dtype not in _library:
        _library[dtype] = _find("s" if dtype == np.float32 else "d")
    return _library[dtype]


def _find(letter):
    if threadpool_info is None:
        return None
    # NumPy's first: SciPy's OpenBLAS may be loaded too (numba imports SciPy where it is installed)
    libraries = sorted((i for i in threadpool_info() if i.get("internal_api") == "openblas"),
                       key=lambda i: "numpy" not in i["filepath"])
    for info in libraries:
        try:
            lib = ctypes.CDLL(info["filepath"])
        except OSError:
            continue
        for name, int_type in _NAMES:
            fn = getattr(lib, name.format(letter), None)
            if fn is not None:
                return ctypes.cast(fn, ctypes.c_void_p).value, int_type
    return None


def layout(a):
    """(array, transposed, leading dimension) describing the trailing two dims of `a` as BLAS reads
    them: rows contiguous (not transposed) or columns contiguous (transposed), else a C-contiguous copy."""
    rows, cols = a.shape[-2:]
    unit = a.itemsize
    s_row, s_col = a.strides[-2], a.strides[-1]
    if (s_col == unit or cols == 1) and s_row % unit == 0 and s_row // unit >= max(cols, 1):
        return a, False, s_row // unit
    if (s_row == unit or rows == 1) and s_col % unit == 0 and s_col // unit >= max(rows, 1):
        return a, True, s_col // unit
    a = np.ascontiguousarray(a)
    return a, False, max(cols, 1)


@nb.njit(nogil=True, cache=True)
def _as(value, cell):
    cell[0] = value
    return cell[0]


@nb.njit(parallel=True, nogil=True, cache=True)
def gemm_rows_in_pieces(address, ints, a, trans_a, lda, b, trans_b, ldb, out, bounds):
    """out[lo:hi] = a[lo:hi] @ b for each piece [lo, hi) of `bounds`, the pieces side by side: `a` (M, K)
    and `b` (K, N) read with their transposes and leading dimensions, `out` (M, N) C-contiguous; `ints` a
    one-element array of the library's integer type."""
    k, n = b.shape[0], out.shape[1]
    row_step = np.uint64((1 if trans_a == _TRANS else lda) * a.itemsize)  # bytes from one row of `a` to the next
    one, zero = a.dtype.type(1.0), a.dtype.type(0.0)
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        cell = np.empty_like(ints)
        _call_at(address, (_ROW_MAJOR, trans_a, trans_b, _as(hi - lo, cell), _as(n, cell), _as(k, cell), one,
                           a.ctypes.data + np.uint64(lo) * row_step, lda, b.ctypes.data, ldb, zero,
                           out[lo:].ctypes.data, _as(n, cell)))


@nb.njit(parallel=True, nogil=True, cache=True)
def gemm_batches_in_pieces(address, ints, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets, trans_b, ldb, out,
                           bounds):
    """out[i] = A_i @ B_i for every batch i, the pieces [lo, hi) of `bounds` side by side: A_i (m, k) at
    byte address `a + a_offsets[i]`, read with its transpose and leading dimension, B_i (k, n) likewise,
    `out` C-contiguous (batches, m, n)."""
    one, zero = out.dtype.type(1.0), out.dtype.type(0.0)
    for p in nb.prange(bounds.shape[0] - 1):
        cell = np.empty_like(ints)
        for i in range(bounds[p], bounds[p + 1]):
            _call_at(address, (_ROW_MAJOR, trans_a, trans_b, _as(m, cell), _as(n, cell), _as(k, cell), one,
                               a + np.uint64(a_offsets[i]), lda, b + np.uint64(b_offsets[i]), ldb, zero,
                               out[i].ctypes.data, _as(n, cell)))


def matmul_rows(a, b, out, bounds, library):
    """out = a @ b in pieces of rows (`a` (M, K), `b` (K, N), `out` C-contiguous (M, N), K >= 1)."""
    address, int_type = library
    a, trans_a, lda = layout(a)
    b, trans_b, ldb = layout(b)
    gemm_rows_in_pieces(
        address, np.zeros(1, int_type), a, _TRANS if trans_a else _NO_TRANS, int_type(lda),
        b, _TRANS if trans_b else _NO_TRANS, int_type(ldb), out, bounds)
    return out


def matmul_batches(a, b, out, bounds, library):
    """out[i] = a[i] @ b[i] over the batch dims, in pieces of the batch (`a` (..., M, K), `b` (..., K, N)
    with the same batch dims, any strides: read in place; `out` C-contiguous (B, M, N), K >= 1)."""
    address, int_type = library
    a, trans_a, lda = layout(a)
    b, trans_b, ldb = layout(b)
    m, k, n = out.shape[1], a.shape[-1], out.shape[2]
    gemm_batches_in_pieces(address, np.zeros(1, int_type), int_type(m), int_type(n), int_type(k),
                           a.ctypes.data, batch_offsets(a), _TRANS if trans_a else _NO_TRANS, int_type(lda),
                           b.ctypes.data, batch_offsets(b), _TRANS if trans_b else _NO_TRANS, int_type(ldb),
                           out, bounds)
    return out


def batch_offsets(x):
    """Byte offsets of the matrices of `x` (its trailing two dims) from its first, in C order of its batch
    dims: a batch with any strides is read where it lies (a head-split attention operand, not copied)."""
    return _offsets(x.shape[:-2], x.strides[:-2])


@functools.lru_cache(maxsize=1024)  # a replay asks for the same every step
def _offsets(shape, strides):
    offsets = np.zeros(1, np.int64)
    for size, stride in zip(shape, strides):
        offsets = (offsets[:, None] + np.arange(size, dtype=np.int64) * stride).reshape(-1)
    return offsets
