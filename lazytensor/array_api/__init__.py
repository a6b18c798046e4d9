"""lazytensor as an Array API namespace (the 2024.12 revision): `x.__array_namespace__()` returns this
module, so libraries that dispatch on the standard (scikit-learn, SciPy, array-api-compat, ...) take
lazytensor arrays. It has the standard's signatures (axis=, keepdims=, positional-only arrays) over
lazytensor's own ops, so arrays stay lazy, live on devices and show in the transfer log; it holds no
second implementation of any op.

Functions whose output shape depends on the values (nonzero, unique_*, boolean-mask reads, repeat
with an array of counts) read their inputs on the host. Functions with no kernel of their own (most
of linalg, fft, searchsorted) are lazy nodes that NumPy computes on the host when they are read.
"""
import math as _math
import sys as _sys

from ..dtypes import (bool_ as bool, complex64, complex128, float32, float64, int8, int16, int32,  # noqa: A004
                      int64, uint8, uint16, uint32, uint64)
from ..tensor import Tensor as _Tensor
from . import fft, linalg
from ._creation import (arange, asarray, empty, empty_like, eye, from_dlpack, full, full_like, linspace, meshgrid,
                        ones, ones_like, tril, triu, zeros, zeros_like)
from ._dtypes import astype, can_cast, finfo, iinfo, isdtype, result_type
from ._elementwise import FUNCTIONS as _ELEMENTWISE, clip, isfinite, isinf, isnan, positive, where
from ._info import __array_namespace_info__
from ._manipulation import (broadcast_arrays, broadcast_to, concat, expand_dims, flip, moveaxis, permute_dims,
                            repeat, reshape, roll, squeeze, stack, tile, unstack)
from ._searching import (argmax, argmin, argsort, isin, nonzero, searchsorted, sort, take, take_along_axis,
                         unique_all, unique_counts, unique_inverse, unique_values)
from ._statistical import (all, any, count_nonzero, cumulative_prod, cumulative_sum, diff, max, mean, min,  # noqa: A004
                           prod, std, sum, var)
from .linalg import matmul, matrix_transpose, tensordot, vecdot

__array_api_version__ = "2024.12"

globals().update(_ELEMENTWISE)

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

__all__ = sorted(
    ["__array_api_version__", "__array_namespace_info__", "fft", "linalg", "e", "inf", "nan", "pi", "newaxis",
     "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
     "complex64", "complex128",
     "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace", "meshgrid",
     "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
     "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
     "clip", "isfinite", "isinf", "isnan", "positive", "where",
     "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis", "permute_dims", "repeat",
     "reshape", "roll", "squeeze", "stack", "tile", "unstack",
     "argmax", "argmin", "argsort", "isin", "nonzero", "searchsorted", "sort", "take", "take_along_axis", "unique_all",
     "unique_counts", "unique_inverse", "unique_values",
     "all", "any", "count_nonzero", "cumulative_prod", "cumulative_sum", "diff", "max", "mean", "min", "prod",
     "std", "sum", "var", "matmul", "matrix_transpose", "tensordot", "vecdot"] + list(_ELEMENTWISE))


def _array_namespace(self, /, *, api_version=None):
    """This module: the Array API namespace of lazytensor arrays."""
    if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
        raise ValueError(f"lazytensor implements the Array API 2024.12 (and earlier), not {api_version!r}")
    return _THIS


_THIS = _sys.modules[__name__]
_Tensor.__array_namespace__ = _array_namespace
