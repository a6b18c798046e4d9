"""place_slices on the host: disjoint pieces (the gradients of a split or of q/k/v) copied into one array.
A large piece laid out transposed (k's gradient in hand-written attention) is copied in tiles by numba's
threads, each a part of the leading axis; NumPy copies the rest on this thread (copying rows, it was as
fast in a training step as our loop split in two). The values are the reference's: a copy rounds
nothing, and zeros are written only where no piece lands."""
import math

import numba as nb
import numpy as np

from . import host_cache

_TILE = 32  # a transposed piece is copied in square tiles of this side, read and written within cache
# Elements copied per element of work (a computed one's): a transposed piece is cut for threads only
# from 4 * 2 * MIN_PIECE elements (runtime/parallel.py); smaller ones, in a training step's warm cache,
# copied faster whole by NumPy than split (bench/RESULTS.md, 'Figures behind the code's choices').
_COPIES_PER_WORK = 4


@nb.njit(nogil=True, cache=True)
def copy_rows_tiled(dst, src, lo, hi):
    """dst[i] = src[i] for lo <= i < hi, for 3-D `dst` and `src` of one shape and any strides, in square
    tiles of the last two axes, so a transposed `src` is read and `dst` written within cache."""
    J, K = dst.shape[1], dst.shape[2]
    for i in range(lo, hi):
        d, s = dst[i], src[i]
        for j0 in range(0, J, _TILE):
            j1 = min(j0 + _TILE, J)
            for k0 in range(0, K, _TILE):
                k1 = min(k0 + _TILE, K)
                for j in range(j0, j1):
                    for k in range(k0, k1):
                        d[j, k] = s[j, k]


@nb.njit(parallel=True, nogil=True, cache=True)
def copy_rows_tiled_in_pieces(dst, src, bounds):
    """copy_rows_tiled over the leading-axis pieces [lo, hi) of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        copy_rows_tiled(dst, src, bounds[p], bounds[p + 1])


def place_slices(shape, dtype, slices, pieces, cut):
    """An array of `shape` with each piece at its unit-step `slices` (disjoint) and zeros elsewhere.
    `cut(n, work_per_item)` gives the leading-axis piece bounds for this run's threads, or None."""
    covered = sum(p.size for p in pieces) == math.prod(shape)
    out = host_cache.empty(shape, dtype) if covered else host_cache.zeros(shape, dtype)
    for where, piece in zip(slices, pieces):
        dst = out[tuple(slice(*s) for s in where)]
        bounds = None
        if piece.ndim == 3 and piece.size and piece.strides[2] > piece.strides[1]:
            bounds = cut(piece.shape[0], piece.size // piece.shape[0] // _COPIES_PER_WORK)
        if bounds is None:
            dst[...] = piece
        else:
            copy_rows_tiled_in_pieces(dst, piece, bounds)
    return out
