"""The op families the engine knows, by name, for the API layer and for backend policies."""
from ..kernels.reference.elementwise import (BINARY_ARITH, BINARY_COMPARE, BINARY_LOGICAL, TRANSCENDENTAL,
                                            UNARY_FLOAT, UNARY_SAME)

UNARY_FLOAT_OPS = frozenset(UNARY_FLOAT)      # float-valued: integer inputs give the default float
UNARY_SAME_OPS = frozenset(UNARY_SAME)        # dtype-preserving
BINARY_OPS = frozenset(BINARY_ARITH) | frozenset(BINARY_COMPARE) | frozenset(BINARY_LOGICAL)
TRANSCENDENTAL_OPS = TRANSCENDENTAL
REDUCE_OPS = frozenset({"sum", "prod", "mean", "var", "std", "amax", "amin", "argmax", "argmin"})
SOFTMAX_OPS = frozenset({"softmax", "log_softmax", "softmax_grad", "log_softmax_grad"})  # along one axis
LAYER_NORM_OPS = frozenset({"layer_norm", "layer_norm_grad"})  # over trailing axes
