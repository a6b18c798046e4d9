"""Matrix products: np.matmul in the promoted dtype (BLAS for floats); not in the bit-identical class."""
import math

import numpy as np


def matmul(attrs, a, b):
    dtype = np.dtype(attrs["dtype"])
    a, b = a.astype(dtype, copy=False), b.astype(dtype, copy=False)
    with np.errstate(all="ignore"):  # inf and NaN are results here, as in every other kernel, not warnings
        if a.ndim > 2 and b.ndim == 2:
            # A rank-2 weight under a stacked activation: one (batch*n, k) @ (k, m) product, not `batch` small ones.
            rows = math.prod(a.shape[:-1])  # not -1: an empty stack has no size to infer it from
            return np.matmul(a.reshape(rows, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
        return np.asarray(np.matmul(a, b))


LINALG_KERNELS = {"matmul": matmul}
