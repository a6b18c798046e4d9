"""Seeded random tensors: manual_seed, rand, randn, randint, uniform_, normal_, bernoulli masks.

The same seed and the same program give the same bytes on every backend (Philox4x32-10 by element index;
normals are Irwin-Hall sums of 12 uniform words, exact in float64; see docs/NUMERICS.md).
"""
from . import dtypes
from .creation import _placed, _shape, like_device
from .runtime.rng import DEFAULT
from .tensor import Tensor


def manual_seed(seed):
    """Restart the default generator at `seed`."""
    DEFAULT.manual_seed(seed)


def initial_seed():
    return DEFAULT.seed


def get_rng_state():
    return DEFAULT.get_state()


def set_rng_state(state):
    DEFAULT.set_state(state)


def _float_dtype(op, dtype):
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.DEFAULT_FLOAT
    if not dt.is_floating_point:
        raise TypeError(f"{op}: needs a float dtype, got {dt}")
    return dt


def _draw(op, shape, dt, device, requires_grad=False, **params):
    seed, stream = DEFAULT.take_stream()
    attrs = _placed({"shape": shape, "dtype": dt.np, "seed": seed, "stream": stream, **params}, device)
    out = Tensor._from_op(op, (), attrs, shape, dt)
    return out.requires_grad_(True) if requires_grad else out


def rand(*size, dtype=None, device=None, requires_grad=False):
    """Uniform on [0, 1)."""
    return _draw("uniform", _shape("rand", size), _float_dtype("rand", dtype), device, requires_grad,
                 low=0.0, high=1.0)


def uniform(*size, low=0.0, high=1.0, dtype=None, device=None):
    """Uniform on [low, high)."""
    return _draw("uniform", _shape("uniform", size), _float_dtype("uniform", dtype), device,
                 low=float(low), high=float(high))


def randn(*size, dtype=None, device=None, requires_grad=False):
    """Standard normal (mean 0, variance 1; see kernels/reference/random.py for the exact transform)."""
    return _draw("normal", _shape("randn", size), _float_dtype("randn", dtype), device, requires_grad,
                 mean=0.0, std=1.0)


def normal(mean=0.0, std=1.0, size=(), *, dtype=None, device=None):
    return _draw("normal", _shape("normal", tuple(size) if isinstance(size, (list, tuple)) else (size,)),
                 _float_dtype("normal", dtype), device, mean=float(mean), std=float(std))


def randint(low, high=None, size=(), *, dtype=None, device=None):
    """Integers uniform on [low, high) (PyTorch's argument order; `randint(high, size=...)` also works)."""
    if high is None:
        low, high = 0, low
    if not 0 < high - low <= 2 ** 32:
        raise ValueError(f"randint: needs low < high with high - low <= 2**32, got [{low}, {high})")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    shape = _shape("randint", tuple(size) if isinstance(size, (list, tuple)) else (size,))
    return _draw("randint", shape, dt, device, low=int(low), high=int(high))


def rand_like(x, *, dtype=None):
    return rand(*x.shape, dtype=dtype or x.dtype, device=like_device(x))


def randn_like(x, *, dtype=None):
    return randn(*x.shape, dtype=dtype or x.dtype, device=like_device(x))


def bernoulli_mask(shape, p_keep, dtype, device=None):
    """1 with probability p_keep else 0, as `dtype` (a dropout mask): uniform < p_keep."""
    u = rand(*shape, dtype=dtypes.float32, device=device)
    return (u < p_keep).to(dtype)


def uniform_(t, low=0.0, high=1.0):
    """Fill `t` with uniform values on [low, high) (a new value for this handle; see value semantics)."""
    t._node = uniform(*t.shape, low=low, high=high, dtype=t.dtype, device=like_device(t))._node
    return t


def normal_(t, mean=0.0, std=1.0):
    """Fill `t` with normal values."""
    t._node = normal(mean, std, t.shape, dtype=t.dtype, device=like_device(t))._node
    return t
