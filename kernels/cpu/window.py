"""im2col and col2im on the CPU (definition: kernels/reference/window.py), compiled, with the channels
split between numba's threads. Each element is the same copy, or the same sum in the same order
(window offsets in row-major order, from zero), as the reference's: bit-identical."""
import numba as nb
import numpy as np

from . import host_cache
from .common import one_piece


@nb.njit(nogil=True, cache=True)
def _im2col_rows(x, out, geometry, pad_value, lo, hi):
    kh, kw, sh, sw, ph, pw, dh, dw = geometry
    N, H, W = x.shape[0], x.shape[2], x.shape[3]
    Ho, Wo = out.shape[4], out.shape[5]
    for c in range(lo, hi):
        for i in range(kh):
            for j in range(kw):
                for n in range(N):
                    for r in range(Ho):
                        h = r * sh + i * dh - ph
                        dst = out[c, i, j, n, r]
                        if h < 0 or h >= H:
                            dst[:] = pad_value
                            continue
                        src = x[n, c, h]
                        for q in range(Wo):
                            w = q * sw + j * dw - pw
                            dst[q] = src[w] if 0 <= w < W else pad_value


@nb.njit(parallel=True, nogil=True, cache=True)
def _im2col_in_pieces(x, out, geometry, pad_value, bounds):
    for p in nb.prange(bounds.shape[0] - 1):
        _im2col_rows(x, out, geometry, pad_value, bounds[p], bounds[p + 1])


@nb.njit(nogil=True, cache=True)
def _col2im_rows(cols, out, geometry, lo, hi):
    kh, kw, sh, sw, ph, pw, dh, dw = geometry
    N, H, W = out.shape[0], out.shape[2], out.shape[3]
    Ho, Wo = cols.shape[4], cols.shape[5]
    for c in range(lo, hi):
        for n in range(N):
            out[n, c] = 0.0
        for i in range(kh):
            for j in range(kw):
                for n in range(N):
                    for r in range(Ho):
                        h = r * sh + i * dh - ph
                        if h < 0 or h >= H:
                            continue
                        src = cols[c, i, j, n, r]
                        dst = out[n, c, h]
                        for q in range(Wo):
                            w = q * sw + j * dw - pw
                            if 0 <= w < W:
                                dst[w] += src[q]


@nb.njit(parallel=True, nogil=True, cache=True)
def _col2im_in_pieces(cols, out, geometry, bounds):
    for p in nb.prange(bounds.shape[0] - 1):
        _col2im_rows(cols, out, geometry, bounds[p], bounds[p + 1])


def _geometry(attrs):
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = attrs["kernel"], attrs["stride"], attrs["padding"], attrs["dilation"]
    return np.array([kh, kw, sh, sw, ph, pw, dh, dw], dtype=np.int64)


def im2col(attrs, x, shape, pieces=one_piece):
    """(C, kh, kw, N, Ho, Wo) windows of the (N, C, H, W) array `x`."""
    x = np.ascontiguousarray(x)
    out = host_cache.empty(shape, x.dtype)
    geometry, pad = _geometry(attrs), x.dtype.type(attrs.get("pad_value", 0.0))
    bounds = pieces(shape[0], out.size // max(shape[0], 1))
    if bounds is None:
        _im2col_rows(x, out, geometry, pad, 0, shape[0])
    else:
        _im2col_in_pieces(x, out, geometry, pad, bounds)
    return out


def col2im(attrs, cols, pieces=one_piece):
    """The (N, C, H, W) sum of the windows `cols` back at their places."""
    cols = np.ascontiguousarray(cols)
    out = host_cache.empty(attrs["shape"], cols.dtype)
    geometry = _geometry(attrs)
    C = cols.shape[0]
    bounds = pieces(C, cols.size // max(C, 1))
    if bounds is None:
        _col2im_rows(cols, out, geometry, 0, C)
    else:
        _col2im_in_pieces(cols, out, geometry, bounds)
    return out
