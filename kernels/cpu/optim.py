"""The fused AdamW update as one compiled loop: the reference's float64 formula (kernels/reference/optim.py),
operation for operation, so the results are bit-identical to it. The gradient is read as `g[i] * s`
in its dtype (s = 1 without a scale: x * 1 is x, bit for bit)."""
import math

import numba as nb
import numpy as np


@nb.njit(nogil=True, cache=True, error_model="numpy")
def adamw_into(p, g, s, m, v, out, b1, b2, eps, decay, step_size, sqrt_bias2, lo, hi):
    """out[0, i], out[1, i], out[2, i] = new p, m, v at i for lo <= i < hi (flat arrays; `s` a scalar of
    g's dtype). The loop runs over slices from 0 and divides as NumPy does (no zero-division check): only
    then does LLVM vectorize its float64 square roots and divisions (bench/RESULTS.md, 'Figures behind the
    code's choices')."""
    c1, c2 = 1.0 - b1, 1.0 - b2
    p, g, m, v = p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
    new_p, new_m, new_v = out[0, lo:hi], out[1, lo:hi], out[2, lo:hi]
    for i in range(p.shape[0]):
        gi = np.float64(g[i] * s)
        mi = b1 * np.float64(m[i]) + c1 * gi
        vi = b2 * np.float64(v[i]) + c2 * (gi * gi)
        pi = np.float64(p[i]) * decay
        pi = pi - step_size * (mi / (math.sqrt(vi) / sqrt_bias2 + eps))
        new_p[i] = pi
        new_m[i] = mi
        new_v[i] = vi


@nb.njit(parallel=True, nogil=True, cache=True)
def adamw_into_in_pieces(p, g, s, m, v, out, b1, b2, eps, decay, step_size, sqrt_bias2, bounds):
    """adamw_into over the pieces [lo, hi) of `bounds`, side by side on numba's threads."""
    for k in nb.prange(bounds.shape[0] - 1):
        adamw_into(p, g, s, m, v, out, b1, b2, eps, decay, step_size, sqrt_bias2, bounds[k], bounds[k + 1])
