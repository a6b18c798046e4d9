"""lazytensor: a lazy tensor engine with deferred host readback.

Every operation builds a graph node; values are computed only when something reads them on the host
(printing, .numpy(), .item(), element access, bool/float/int) or when lt.realize() is called.
"""
import functools as _functools
import math as _math
import types as _types

from .dtypes import (DType, bfloat16, bool_ as bool, complex64, complex128, float16, float32, float64,  # noqa: A004
                     int8, int16, int32, int64, uint8)
from .errors import AxisError
from .tensor import Tensor
from .runtime.residency import Residency
from .creation import (arange, empty, eye, from_numpy, full, full_like, linspace, ones, ones_like, tensor,
                       zeros, zeros_like)
from .elementwise import (BINARY_FUNCTIONS as _BIN, UNARY_FUNCTIONS as _UN, cast, clip, isfinite, isinf, isnan, lerp,
                          logical_not, nan_to_num, where)
from .reductions import (all, amax, amin, any, argmax, argmin, logsumexp, max, mean, min, prod, std,  # noqa: A004
                         sum, var)
from .linalg import addmm, baddbmm, bmm, diag, einsum, matmul, norm, outer
from .shape_ops import (broadcast_to, cat, chunk, expand, flatten, flip, meshgrid, permute, repeat, reshape, roll,
                        split, squeeze, stack, tile, transpose, unbind, unsqueeze)
from .indexing import (gather, index_add, index_select, masked_fill, narrow, scatter, scatter_add, take_along_axis,
                       tril, triu)
from .activations import log_softmax, softmax
from .sorting import argsort, cumprod, cumsum, multinomial, sort, topk
from .graph_view import graph
from . import methods  # noqa: F401  (binds the functions above onto Tensor; loads the gradient rules)
from .grad_mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
from .random import (Generator, get_rng_state, initial_seed, manual_seed, normal, rand, rand_like, randint, randn,
                     randn_like, randperm, set_rng_state, uniform)
from .device_spec import device
from . import accelerator, cuda
from . import torch_methods as _torch_methods, inplace as _inplace
from .torch_methods import addcdiv, addcmul, allclose, isclose
from .evaluation import counters, host_copy, plan, realize, reset_counters
from .compiled import JitWarning, jit
from .serialization import load, save
from .device_api import (check_settings, clear_transfer_log, device_profiles, devices, get_device, get_num_threads,
                         kernel_cache_dir, memory_budget, parse_bytes, profile, register_device, residency_stats,
                         set_device, set_memory_budget, set_num_threads, set_transfer_log_capacity, setting,
                         transfer_log, transfer_log_capacity, tune_host_malloc, when_compiling)

globals().update(_UN)
globals().update(_BIN)
_torch_methods.bind()
_inplace.bind()
add, sub, subtract = _torch_methods.add, _torch_methods.sub, _torch_methods.sub
mm = _torch_methods.mm
equal = _torch_methods.equal  # PyTorch's: one bool (elementwise: a == b, lt.eq)
t = _torch_methods.t
clamp = clip
concatenate = cat
float = float32  # noqa: A001  (lt.float is float32, as torch.float is)
double = float64
half = float16
long = int64

short = int16
cfloat, cdouble = complex64, complex128
inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None

from . import legacy as _legacy  # noqa: E402
from .legacy import TYPED as _TYPED  # noqa: E402
(FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor, ShortTensor, CharTensor, ByteTensor,
 BoolTensor) = _TYPED.values()
_legacy.bind()
from . import autograd  # noqa: E402
autograd.Variable = _legacy.Variable

from . import version  # noqa: E402
__version__ = version.__version__

from . import array_api, backends, distributed, distributions, nn, onnx, optim, utils  # noqa: E402  (they import the API above)
one_hot = nn.functional.one_hot
from .torch_compile import compile  # noqa: E402,A004
from . import sparse  # noqa: E402
from .sparse import SparseTensor, sparse_coo_tensor, spmm  # noqa: E402
sparse.bind()
mm = _functools.wraps(_torch_methods.mm)(
    lambda a, b: sparse.mm(a, b) if isinstance(a, SparseTensor) else _torch_methods.mm(a, b))
from . import amp  # noqa: E402
from .amp import autocast, is_autocast_enabled  # noqa: E402
from . import cpu  # noqa: E402
cpu.amp = _types.SimpleNamespace(autocast=_functools.partial(autocast, "cpu"))
cuda.amp = _types.SimpleNamespace(autocast=_functools.partial(autocast, "cuda"), GradScaler=amp.GradScaler,
                                  custom_fwd=amp.custom_fwd, custom_bwd=amp.custom_bwd)
