"""place_slices on the host: disjoint pieces (the gradients of a split or of q/k/v) copied into one array,
cut by the leading axis into pieces side by side on numba's threads. The values are the reference's (a
copy rounds nothing; zeros only where no piece lands)."""
import math

import numba as nb
import numpy as np

_TILE = 32  # a transposed piece is copied in square tiles of this side, read and written within cache


@nb.njit(nogil=True, cache=True)
def copy_rows(dst, src, lo, hi, tiled):
    """dst[i] = src[i] for lo <= i < hi, for 3-D `dst` and `src` of one shape and any strides; in tiles
    of the last two axes when `tiled` (src's last axis is not its fastest: a transposed piece)."""
    J, K = dst.shape[1], dst.shape[2]
    for i in range(lo, hi):
        d, s = dst[i], src[i]
        if tiled:
            for j0 in range(0, J, _TILE):
                j1 = min(j0 + _TILE, J)
                for k0 in range(0, K, _TILE):
                    k1 = min(k0 + _TILE, K)
                    for j in range(j0, j1):
                        for k in range(k0, k1):
                            d[j, k] = s[j, k]
        else:
            for j in range(J):
                dr, sr = d[j], s[j]
                for k in range(K):
                    dr[k] = sr[k]


@nb.njit(parallel=True, nogil=True, cache=True)
def copy_rows_in_pieces(dst, src, bounds, tiled):
    """copy_rows over the leading-axis pieces [lo, hi) of `bounds`, side by side."""
    for p in nb.prange(bounds.shape[0] - 1):
        copy_rows(dst, src, bounds[p], bounds[p + 1], tiled)


def place_slices(shape, dtype, slices, pieces, cut):
    """An array of `shape` with each piece at its unit-step `slices` (disjoint) and zeros elsewhere.
    `cut(n, work_per_item)` gives the leading-axis piece bounds for this run's threads (or None): a
    3-D piece is then copied by numba's threads, anything else by NumPy on this thread."""
    covered = sum(p.size for p in pieces) == math.prod(shape)
    out = np.empty(shape, dtype) if covered else np.zeros(shape, dtype)
    for where, piece in zip(slices, pieces):
        dst = out[tuple(slice(*s) for s in where)]
        bounds = cut(piece.shape[0], piece.size // piece.shape[0]) if piece.ndim == 3 and piece.size else None
        if bounds is None:
            dst[...] = piece
        else:
            copy_rows_in_pieces(dst, piece, bounds, piece.strides[2] > piece.strides[1])
    return out
