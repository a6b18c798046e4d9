"""Layer normalization over the trailing `axes` (no affine part) and its gradient, defined by the
reference kernels they are made of, so each is the value the composite graph of those ops computes:

    layer_norm(x)         = c * r,    c = x - mean(x),  r = rsqrt(mean(c * c) + eps)
    layer_norm_grad(x, g) = ((g - mean(g)) - xhat * mean(g * xhat)) * r,   xhat = layer_norm(x)

(g = dL/dxhat). Each op rounds to the result dtype as it would as a node (eps too, as a Python number
would be); each mean is the float64 left fold divided by the count, rounded once (at any length:
the `mean` op blocks sums over more than 4096 elements, these do not). No transcendental is involved (rsqrt is 1 / sqrt in float64, both correctly rounded), so the class is bit-identical.
"""
import numpy as np

from .elementwise import ELEMENTWISE_KERNELS as _EW
from .reduce import left_mean


def _parts(attrs, x):
    """(ew attrs, mean function, c, r) for x."""
    dtype = attrs["dtype"]
    ew = {"dtype": dtype}
    red = {"axes": attrs["axes"], "keepdims": True, "dtype": dtype}

    def mean(v):
        return left_mean(red, v)
    c = _EW["sub"](ew, x, mean(x))
    var = mean(_EW["mul"](ew, c, c))
    r = _EW["rsqrt"](ew, _EW["add"](ew, var, np.asarray(attrs["eps"], dtype)))
    return ew, mean, c, r


def layer_norm(attrs, x):
    ew, _, c, r = _parts(attrs, x)
    return _EW["mul"](ew, c, r)


def layer_norm_grad(attrs, x, g):
    ew, mean, c, r = _parts(attrs, x)
    xhat = _EW["mul"](ew, c, r)
    centered_g = _EW["sub"](ew, g, mean(g))
    along = _EW["mul"](ew, xhat, mean(_EW["mul"](ew, g, xhat)))
    return _EW["mul"](ew, _EW["sub"](ew, centered_g, along), r)


LAYER_NORM_KERNELS = {"layer_norm": layer_norm, "layer_norm_grad": layer_norm_grad}
