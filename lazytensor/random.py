"""Seeded random tensors: manual_seed, rand, randn, randint, uniform_, normal_, bernoulli masks.

The same seed and the same program give the same bytes on every backend (Philox4x32-10 by element index;
normals are Irwin-Hall sums of 12 uniform words, exact in float64; see docs/NUMERICS.md).
"""
from . import dtypes
from .creation import _placed, _shape, _size_keyword, like_device
from .runtime.rng import DEFAULT, Generator  # noqa: F401  (lt.Generator, for `generator=` arguments)
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


def _draw(op, shape, dt, device, requires_grad=False, generator=None, **params):
    seed, stream = (DEFAULT if generator is None else generator).take_stream()
    attrs = _placed({"shape": shape, "dtype": dt.np, "seed": seed, "stream": stream, **params}, device)
    out = Tensor._from_op(op, (), attrs, shape, dt)
    return out.requires_grad_(True) if requires_grad else out


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None, **keyword):
    """Uniform on [0, 1)."""
    shape = _shape("rand", size, _size_keyword("rand", keyword))
    return _draw("uniform", shape, _float_dtype("rand", dtype), device, requires_grad, generator, low=0.0, high=1.0)


def uniform(*size, low=0.0, high=1.0, dtype=None, device=None, generator=None):
    """Uniform on [low, high)."""
    return _draw("uniform", _shape("uniform", size), _float_dtype("uniform", dtype), device,
                 generator=generator, low=float(low), high=float(high))


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None, **keyword):
    """Standard normal (mean 0, variance 1; see kernels/reference/random.py for the exact transform)."""
    shape = _shape("randn", size, _size_keyword("randn", keyword))
    return _draw("normal", shape, _float_dtype("randn", dtype), device, requires_grad, generator, mean=0.0, std=1.0)


def normal(mean=0.0, std=1.0, size=(), *, dtype=None, device=None, generator=None):
    return _draw("normal", _shape("normal", tuple(size) if isinstance(size, (list, tuple)) else (size,)),
                 _float_dtype("normal", dtype), device, generator=generator, mean=float(mean), std=float(std))


def randint(low, high=None, size=None, *, dtype=None, device=None, generator=None, requires_grad=False):
    """Integers uniform on [low, high): PyTorch's forms `randint(high, size)`, `randint(low, high, size)`
    and `randint(high, size=...)`."""
    if isinstance(high, (list, tuple)) and size is None:  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: missing the size, e.g. randint(10, (3,)) or randint(0, 10, size=(3,))")
    for name, bound in (("low", low), ("high", high)):
        if isinstance(bound, bool) or not hasattr(bound, "__index__"):
            raise TypeError(f"randint: {name} must be an integer, got {bound!r}")
    if not 0 < high - low <= 2 ** 32:
        raise ValueError(f"randint: needs low < high with high - low <= 2**32, got [{low}, {high})")
    dt = dtypes.as_dtype(dtype) if dtype is not None else dtypes.int64
    shape = _shape("randint", tuple(size) if isinstance(size, (list, tuple)) else (size,))
    if requires_grad:
        raise RuntimeError("randint: integer tensors cannot require gradients")
    return _draw("randint", shape, dt, device, generator=generator, low=int(low), high=int(high))


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0 .. n-1 (int64 unless given): the order that sorts n seeded uniform
    draws, so the same seed gives the same permutation on every backend."""
    if isinstance(n, bool) or not hasattr(n, "__index__") or int(n) < 0:
        raise ValueError(f"randperm: n must be a non-negative integer, got {n!r}")
    if requires_grad:
        raise RuntimeError("randperm: integer tensors cannot require gradients")
    keys = _draw("uniform", (int(n),), dtypes.float64, device, generator=generator, low=0.0, high=1.0)
    out = keys.argsort(stable=True)
    return out if dtype is None else out.to(dtype)


def rand_like(x, *, dtype=None):
    return rand(*x.shape, dtype=dtype or x.dtype, device=like_device(x))


def randn_like(x, *, dtype=None):
    return randn(*x.shape, dtype=dtype or x.dtype, device=like_device(x))


def bernoulli_mask(shape, p_keep, dtype, device=None):
    """1 with probability p_keep else 0, as `dtype` (a dropout mask): uniform < p_keep."""
    u = rand(*shape, dtype=dtypes.float32, device=device)
    return (u < p_keep).to(dtype)


def uniform_(t, low=0.0, high=1.0, generator=None):
    """Fill `t` with uniform values on [low, high) (a new value for this handle; see value semantics)."""
    t._node = uniform(*t.shape, low=low, high=high, dtype=t.dtype, device=like_device(t), generator=generator)._node
    return t


def normal_(t, mean=0.0, std=1.0, generator=None):
    """Fill `t` with normal values."""
    t._node = normal(mean, std, t.shape, dtype=t.dtype, device=like_device(t), generator=generator)._node
    return t
