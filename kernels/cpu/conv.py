"""A convolution's output and its input's gradient on the CPU, image by image (definitions:
kernels/reference/window.py conv_product, conv_input_grad). Each image's products are one-thread calls
of NumPy's OpenBLAS by address (kernels/cpu/blas.py), the images split between numba's threads: the
output is written in its final layout (no transposing copy), and the input's gradient goes through a
scratch block of one image's windows that stays in cache, added back by the col2im of
kernels/cpu/window.py (so the windows of all images are never written out). Products are in the
tolerance class; the sums of col2im are the reference's order."""
import numba as nb
import numpy as np

from . import host_cache
from .blas import _NO_TRANS, _ROW_MAJOR, _TRANS, _as, _call_at
from .common import one_piece
from .window import _col2im_rows, _geometry


@nb.njit(nogil=True, cache=True)
def _product_images(address, ints, w, cols, out, groups, lo, hi):
    """out[n] = W_g @ cols_g[:, n] per group, for images lo <= n < hi; cols (K, N, L) C-contiguous."""
    O, Kg = w.shape
    K, N, L = cols.shape
    Og = O // groups
    one, zero = out.dtype.type(1.0), out.dtype.type(0.0)
    cell = np.empty_like(ints)
    item = np.uint64(out.itemsize)
    for n in range(lo, hi):
        for grp in range(groups):
            _call_at(address, (_ROW_MAJOR, _NO_TRANS, _NO_TRANS, _as(Og, cell), _as(L, cell), _as(Kg, cell), one,
                               w.ctypes.data + np.uint64(grp * Og * Kg) * item, _as(Kg, cell),
                               cols.ctypes.data + np.uint64((grp * Kg * N + n) * L) * item, _as(N * L, cell), zero,
                               out.ctypes.data + np.uint64((n * O + grp * Og) * L) * item, _as(L, cell)))


@nb.njit(parallel=True, nogil=True, cache=True)
def _product_in_pieces(address, ints, w, cols, out, groups, bounds):
    for p in nb.prange(bounds.shape[0] - 1):
        _product_images(address, ints, w, cols, out, groups, bounds[p], bounds[p + 1])


@nb.njit(nogil=True, cache=True)
def _input_grad_images(address, ints, w, g, out, geometry, groups, Ho, Wo, lo, hi):
    """out[n] = col2im(W^T @ g[n]) for images lo <= n < hi; g (N, O, Ho Wo) C-contiguous, out (N, C, H, W)."""
    O, Kg = w.shape
    L = Ho * Wo
    C = out.shape[1]
    kh, kw = geometry[0], geometry[1]
    Og = O // groups
    one, zero = out.dtype.type(1.0), out.dtype.type(0.0)
    cell = np.empty_like(ints)
    item = np.uint64(out.itemsize)
    scratch = np.empty((C, kh, kw, 1, Ho, Wo), out.dtype)  # one image's windows: stays in cache
    for n in range(lo, hi):
        for grp in range(groups):
            _call_at(address, (_ROW_MAJOR, _TRANS, _NO_TRANS, _as(Kg, cell), _as(L, cell), _as(Og, cell), one,
                               w.ctypes.data + np.uint64(grp * Og * Kg) * item, _as(Kg, cell),
                               g.ctypes.data + np.uint64((n * O + grp * Og) * L) * item, _as(L, cell), zero,
                               scratch.ctypes.data + np.uint64(grp * Kg * L) * item, _as(L, cell)))
        _col2im_rows(scratch, out[n:n + 1], geometry, 0, C)


@nb.njit(parallel=True, nogil=True, cache=True)
def _input_grad_in_pieces(address, ints, w, g, out, geometry, groups, Ho, Wo, bounds):
    for p in nb.prange(bounds.shape[0] - 1):
        _input_grad_images(address, ints, w, g, out, geometry, groups, Ho, Wo, bounds[p], bounds[p + 1])


def conv_product(attrs, cols, w, pieces=one_piece, library=None):
    """(N, O, Ho, Wo): the convolution's output from its windows `cols` (C, kh, kw, N, Ho, Wo)."""
    C, kh, kw, N, Ho, Wo = cols.shape
    O = w.shape[0]
    out = host_cache.empty((N, O, Ho, Wo), cols.dtype)
    address, int_type = library
    bounds = pieces(N, O * w.shape[1] * Ho * Wo)
    bounds = np.array([0, N], np.int64) if bounds is None else bounds
    _product_in_pieces(address, np.zeros(1, int_type), np.ascontiguousarray(w).reshape(O, -1),
                       np.ascontiguousarray(cols).reshape(C * kh * kw, N, Ho * Wo), out.reshape(N, O, Ho * Wo),
                       attrs["groups"], bounds)
    return out


def conv_input_grad(attrs, w, g, pieces=one_piece, library=None):
    """(N, C, H, W): the gradient of the convolution's input from its weight and output gradient `g`."""
    N, O, Ho, Wo = g.shape
    out = host_cache.empty(attrs["shape"], g.dtype)
    address, int_type = library
    bounds = pieces(N, O * w[0].size * Ho * Wo)
    bounds = np.array([0, N], np.int64) if bounds is None else bounds
    _input_grad_in_pieces(address, np.zeros(1, int_type), np.ascontiguousarray(w).reshape(O, -1),
                          np.ascontiguousarray(g).reshape(N, O, Ho * Wo), out, _geometry(attrs), attrs["groups"],
                          Ho, Wo, bounds)
    return out
