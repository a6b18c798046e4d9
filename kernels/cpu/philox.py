"""Philox4x32-10 words as compiled loops: the reference's counter-based generator (kernels/reference/
random.py) without NumPy's ~40 passes over uint64 arrays per draw. Same integer operations, so the
same words, and through the reference's transforms the same floats."""
import numba as nb
import numpy as np

from . import host_cache
from .common import one_piece

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_MASK = np.uint64(0xFFFFFFFF)
_32 = np.uint64(32)


@nb.njit(nogil=True, cache=True)
def words_into(out, first_block, k0, k1, s0, s1):
    """out[4 * j + lane] = word `lane` of Philox block `first_block + j` under key (k0, k1) and stream
    words (s0, s1), for len(out) words (a multiple of four)."""
    for j in range(out.shape[0] // 4):
        b = np.uint64(first_block + j)
        c0, c1, c2, c3 = b & _MASK, b >> _32, s0, s1
        a0, a1 = k0, k1
        for r in range(10):
            if r:
                a0 = (a0 + _W0) & _MASK
                a1 = (a1 + _W1) & _MASK
            p0 = _M0 * c0
            p1 = _M1 * c2
            c0, c1, c2, c3 = (p1 >> _32) ^ c1 ^ a0, p1 & _MASK, (p0 >> _32) ^ c3 ^ a1, p0 & _MASK
        out[4 * j] = c0
        out[4 * j + 1] = c1
        out[4 * j + 2] = c2
        out[4 * j + 3] = c3


@nb.njit(parallel=True, nogil=True, cache=True)
def words_into_in_pieces(out, k0, k1, s0, s1, bounds):
    """words_into for the blocks [lo, hi) of each piece of `bounds`, side by side on numba's threads."""
    for p in nb.prange(bounds.shape[0] - 1):
        lo, hi = bounds[p], bounds[p + 1]
        words_into(out[4 * lo:4 * hi], lo, k0, k1, s0, s1)


def words(seed, stream, n, pieces=one_piece):
    """The first `n` 32-bit words of stream `stream` under `seed`, as kernels/reference/random.words;
    blocks of four words in the pieces `pieces(blocks, work_per_block)` gives."""
    blocks = (n + 3) // 4
    out = host_cache.empty(4 * blocks, np.uint64)
    k0, k1 = np.uint64(int(seed) & 0xFFFFFFFF), np.uint64((int(seed) >> 32) & 0xFFFFFFFF)
    s0, s1 = np.uint64(int(stream) & 0xFFFFFFFF), np.uint64((int(stream) >> 32) & 0xFFFFFFFF)
    bounds = pieces(blocks, 64)
    if bounds is None:
        words_into(out, 0, k0, k1, s0, s1)
    else:
        words_into_in_pieces(out, k0, k1, s0, s1, bounds)
    return out[:n]
