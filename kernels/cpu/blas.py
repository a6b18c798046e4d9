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

from . import host_cache

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


@nb.njit(cache=True, inline="always")
def _flag(transposed):
    return _TRANS if transposed else _NO_TRANS


@nb.njit(nogil=True, cache=True, inline="always")
def _rows_piece(address, cell, a, trans_a, lda, b, trans_b, ldb, out, lo, hi):
    """out[lo:hi] = a[lo:hi] @ b, one library call."""
    k, n = b.shape[0], out.shape[1]
    row_step = np.uint64((1 if trans_a else lda) * a.itemsize)  # bytes from one row of `a` to the next
    one, zero = a.dtype.type(1.0), a.dtype.type(0.0)
    _call_at(address, (_ROW_MAJOR, _flag(trans_a), _flag(trans_b), _as(hi - lo, cell), _as(n, cell), _as(k, cell),
                       one, a.ctypes.data + np.uint64(lo) * row_step, _as(lda, cell), b.ctypes.data,
                       _as(ldb, cell), zero, out[lo:].ctypes.data, _as(n, cell)))


@nb.njit(parallel=True, nogil=True, cache=True)
def gemm_rows_in_pieces(address, ints, a, trans_a, lda, b, trans_b, ldb, out, bounds):
    """out[lo:hi] = a[lo:hi] @ b for each piece [lo, hi) of `bounds`, the pieces side by side: `a` (M, K)
    and `b` (K, N) read transposed or not (bools) with their leading dimensions (ints), `out` (M, N)
    C-contiguous; `ints` a one-element array of the library's integer type."""
    for p in nb.prange(bounds.shape[0] - 1):
        _rows_piece(address, np.empty_like(ints), a, trans_a, lda, b, trans_b, ldb, out, bounds[p], bounds[p + 1])


@nb.njit(nogil=True, cache=True)
def gemm_rows(address, ints, a, trans_a, lda, b, trans_b, ldb, out):
    """gemm_rows_in_pieces in one piece, on this thread (the same call, without waking numba's pool)."""
    _rows_piece(address, np.empty_like(ints), a, trans_a, lda, b, trans_b, ldb, out, 0, out.shape[0])


@nb.njit(nogil=True, cache=True, inline="always")
def _rows_bias_piece(address, cell, a, trans_a, lda, b, trans_b, ldb, bias, out, first, last, block):
    """out[first:last] = a[first:last] @ b + bias, `block` rows at a time."""
    k, n = b.shape[0], out.shape[1]
    row_step = np.uint64((1 if trans_a else lda) * a.itemsize)
    one, zero = a.dtype.type(1.0), a.dtype.type(0.0)
    for lo in range(first, last, block):
        hi = min(lo + block, last)
        _call_at(address, (_ROW_MAJOR, _flag(trans_a), _flag(trans_b), _as(hi - lo, cell), _as(n, cell),
                           _as(k, cell), one, a.ctypes.data + np.uint64(lo) * row_step, _as(lda, cell),
                           b.ctypes.data, _as(ldb, cell), zero, out[lo:].ctypes.data, _as(n, cell)))
        for i in range(lo, hi):
            row = out[i]
            for j in range(n):
                row[j] = row[j] + bias[j]


@nb.njit(parallel=True, nogil=True, cache=True)
def gemm_rows_bias_in_pieces(address, ints, a, trans_a, lda, b, trans_b, ldb, bias, out, bounds, block):
    """out[lo:hi] = a[lo:hi] @ b + bias for each piece [lo, hi) of `bounds`, side by side, as
    gemm_rows_in_pieces with the bias added to each `block` of rows right after its product, while the
    block is in cache: each element the product's value plus the bias, rounded once as an add rounds."""
    for p in nb.prange(bounds.shape[0] - 1):
        _rows_bias_piece(address, np.empty_like(ints), a, trans_a, lda, b, trans_b, ldb, bias, out, bounds[p],
                         bounds[p + 1], block)


@nb.njit(nogil=True, cache=True)
def gemm_rows_bias(address, ints, a, trans_a, lda, b, trans_b, ldb, bias, out, block):
    """gemm_rows_bias_in_pieces in one piece, on this thread."""
    _rows_bias_piece(address, np.empty_like(ints), a, trans_a, lda, b, trans_b, ldb, bias, out, 0, out.shape[0],
                     block)


@nb.njit(nogil=True, cache=True, inline="always")
def _batches_piece(address, cell, unit, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets, trans_b, ldb, out,
                   out_offsets, ldc, first, last):
    """C_i = A_i @ B_i for first <= i < last, one library call each."""
    one, zero = unit[0], unit[0] - unit[0]
    for i in range(first, last):
        _call_at(address, (_ROW_MAJOR, _flag(trans_a), _flag(trans_b), _as(m, cell), _as(n, cell), _as(k, cell),
                           one, a + np.uint64(a_offsets[i]), _as(lda, cell), b + np.uint64(b_offsets[i]),
                           _as(ldb, cell), zero, out + np.uint64(out_offsets[i]), _as(ldc, cell)))


@nb.njit(parallel=True, nogil=True, cache=True)
def gemm_batches_in_pieces(address, ints, unit, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets, trans_b, ldb,
                           out, out_offsets, ldc, bounds):
    """C_i = A_i @ B_i for every batch i, the pieces [lo, hi) of `bounds` side by side: A_i (m, k) at
    byte address `a + a_offsets[i]`, read with its transpose and leading dimension, B_i (k, n) likewise,
    C_i (m, n) row-major at `out + out_offsets[i]` with leading dimension `ldc`; `unit` a one-element
    array holding 1 in the products' dtype; sizes, leading dimensions and addresses Python ints, the
    transposes bools (converted here: a NumPy scalar argument costs dispatch time each; bench/RESULTS.md,
    'Figures behind the code's choices')."""
    for p in nb.prange(bounds.shape[0] - 1):
        _batches_piece(address, np.empty_like(ints), unit, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets,
                       trans_b, ldb, out, out_offsets, ldc, bounds[p], bounds[p + 1])


@nb.njit(nogil=True, cache=True)
def gemm_batches(address, ints, unit, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets, trans_b, ldb, out,
                 out_offsets, ldc):
    """gemm_batches_in_pieces in one piece, on this thread."""
    _batches_piece(address, np.empty_like(ints), unit, m, n, k, a, a_offsets, trans_a, lda, b, b_offsets, trans_b,
                   ldb, out, out_offsets, ldc, 0, a_offsets.shape[0])


@nb.njit(nogil=True, cache=True)
def gemm_into(address, ints, a, b, out):
    """out = a @ b for one matrix of a batched product, by the call gemm_batches_in_pieces makes for it:
    `a` (M, K) and `b` (K, N) each with rows or columns contiguous (as `layout` takes them), `out`
    (M, N) with its rows contiguous (a laid-out product's matrix has its rows apart); `ints` a
    one-element array of the library's integer type."""
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    cell = np.empty_like(ints)
    trans_a, lda = _layout_in(a)
    trans_b, ldb = _layout_in(b)
    ldc = out.strides[0] // out.itemsize if m > 1 else n
    one, zero = out.dtype.type(1.0), out.dtype.type(0.0)
    _call_at(address, (_ROW_MAJOR, trans_a, trans_b, _as(m, cell), _as(n, cell), _as(k, cell), one, a.ctypes.data,
                       _as(lda, cell), b.ctypes.data, _as(ldb, cell), zero, out.ctypes.data, _as(ldc, cell)))


@nb.njit(nogil=True, cache=True)
def _layout_in(a):
    """(transpose flag, leading dimension) of a 2-D array `layout` would read in place."""
    rows, cols = a.shape
    unit = a.itemsize
    s_row, s_col = a.strides
    if (s_col == unit or cols == 1) and s_row % unit == 0 and s_row // unit >= max(cols, 1):
        return _NO_TRANS, s_row // unit
    return _TRANS, s_col // unit


_cells, _units = {}, {}  # one-element constant arrays, by integer type and by dtype


def _cell(int_type):
    """A one-element array of the library's integer type (the kernels only read its dtype)."""
    cell = _cells.get(int_type)
    if cell is None:
        cell = _cells[int_type] = np.zeros(1, int_type)
    return cell


def _unit(dtype):
    """A one-element array holding 1 in `dtype` (read only)."""
    unit = _units.get(dtype)
    if unit is None:
        unit = _units[dtype] = np.ones(1, dtype)
    return unit


def matmul_rows(a, b, out, bounds, library):
    """out = a @ b in pieces of rows (`a` (M, K), `b` (K, N), `out` C-contiguous (M, N), K >= 1)."""
    address, int_type = library
    a, trans_a, lda = layout(a)
    b, trans_b, ldb = layout(b)
    # One piece runs on this thread, not through numba's pool: entering the pool wakes its threads, and
    # where several processes share the cores (ranks under mpiexec) their spinning costs each a time slice.
    if bounds.shape[0] == 2:
        gemm_rows(address, _cell(int_type), a, trans_a, lda, b, trans_b, ldb, out)
    else:
        gemm_rows_in_pieces(address, _cell(int_type), a, trans_a, lda, b, trans_b, ldb, out, bounds)
    return out


# Rows of a product's result the bias is added to at once: the block stays in cache between its product
# and its add, and each product call packs the weight again: blocks much smaller than this lose to the
# packing, much larger ones to the cache (bench/RESULTS.md, 'Figures behind the code's choices').
BIAS_BLOCK_ROWS = 512


def matmul_rows_bias(a, b, bias, out, bounds, library):
    """out = a @ b + bias in pieces of rows (`a` (M, K), `b` (K, N), `bias` (N,) contiguous, `out`
    C-contiguous (M, N), K >= 1), the bias added to each block of rows while it is in cache."""
    address, int_type = library
    a, trans_a, lda = layout(a)
    b, trans_b, ldb = layout(b)
    if bounds.shape[0] == 2:
        gemm_rows_bias(address, _cell(int_type), a, trans_a, lda, b, trans_b, ldb, bias, out, BIAS_BLOCK_ROWS)
    else:
        gemm_rows_bias_in_pieces(address, _cell(int_type), a, trans_a, lda, b, trans_b, ldb, bias, out, bounds,
                                 BIAS_BLOCK_ROWS)
    return out


def matmul_batches(a, b, out, bounds, library):
    """out[i] = a[i] @ b[i] over the batch dims, in pieces of the batch (`a` (..., M, K), `b` (..., K, N)
    with the same batch dims, K >= 1; all three read or written where they lie, any batch strides; each
    matrix of `out` has unit column stride (rows at a leading dimension) or unit row stride: then its
    transpose b[i].T @ a[i].T is computed, row-major)."""
    address, int_type = library
    m, n = out.shape[-2:]
    unit = out.itemsize
    if not ((out.strides[-1] == unit or n == 1) and out.strides[-2] % unit == 0 and out.strides[-2] >= n * unit):
        # Column-major matrices: C.T = B.T @ A.T, each row-major at the column stride.
        a, b, out = b.swapaxes(-1, -2), a.swapaxes(-1, -2), out.swapaxes(-1, -2)
        m, n = n, m
    ldc = max(out.strides[-2] // unit, n, 1)
    a, trans_a, lda = layout(a)
    b, trans_b, ldb = layout(b)
    args = (address, _cell(int_type), _unit(out.dtype), m, n, a.shape[-1], a.ctypes.data, batch_offsets(a), trans_a,
            lda, b.ctypes.data, batch_offsets(b), trans_b, ldb, out.ctypes.data, batch_offsets(out), ldc)
    if bounds.shape[0] == 2:
        gemm_batches(*args)
    else:
        gemm_batches_in_pieces(*args, bounds)
    return out


def product_out(shape, dtype, dims=None):
    """A batched product's result array: C-contiguous, or stored in the order `dims` (the permutation its
    consumer views it through) and viewed at `shape`, so that view is C-contiguous; C-contiguous where
    that order would not give matrices matmul_batches writes."""
    if dims is None:
        return host_cache.empty(shape, dtype)
    stored, inverse = _laid_out(tuple(shape), tuple(dims))
    out = host_cache.empty(stored, dtype).transpose(inverse)
    return out if writable_by_rows(out) else host_cache.empty(shape, dtype)


@functools.lru_cache(maxsize=256)  # asked at every launch of a product with a layout
def _laid_out(shape, dims):
    """(the shape stored, the permutation that views it at `shape`) for a result laid out as `dims`."""
    return tuple(shape[d] for d in dims), tuple(int(d) for d in np.argsort(dims))


def writable_by_rows(out):
    """Whether each matrix of `out` (its trailing two dims) has unit column stride or unit row stride, the
    other a multiple of the item size at least the matrix's extent: what matmul_batches writes."""
    m, n = out.shape[-2:]
    unit = out.itemsize
    s_row, s_col = out.strides[-2:]
    return (((s_col == unit or n == 1) and s_row % unit == 0 and s_row >= n * unit)
            or ((s_row == unit or m == 1) and s_col % unit == 0 and s_col >= m * unit))


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
