"""KernelSpec, the dialect profiles, and the renderer that turns a spec into source text."""
import functools
import hashlib
import os

import numpy as np

_HERE = os.path.dirname(os.path.abspath(__file__))
_KERNELS = os.path.dirname(_HERE)


class Profile:
    """What a dialect offers: its name, whether it has float64, its prelude file."""

    def __init__(self, name, has_double, prelude, defines="", includes=()):
        self.name, self.has_double, self.prelude_path, self.defines = name, has_double, prelude, defines
        self.includes = tuple(includes) + ("common.inc",)

    def prelude(self):
        """The dialect's own prelude, then the shared files of kernels/gpu/ it takes (`math_double.inc`
        where there is float64) and the code every dialect shares (`common.inc`)."""
        parts = [self.defines]
        for path in (self.prelude_path,) + tuple(os.path.join(_HERE, name) for name in self.includes):
            with open(path) as f:
                parts.append(f.read())
        return "\n".join(parts)

    def __repr__(self):
        return f"Profile({self.name})"


CUDA = Profile("cuda", True, os.path.join(_KERNELS, "cuda", "prelude.cuh"), includes=("math_double.inc",))
METAL = Profile("metal", False, os.path.join(_KERNELS, "metal", "prelude.metal"))
C_EMULATION = Profile("c", True, os.path.join(_HERE, "prelude_c.h"), includes=("math_double.inc",))
# C with float as the wide type: runs kernels generated for a float-only dialect (Metal) on the CPU.
C_EMULATION_F32 = Profile("c", False, os.path.join(_HERE, "prelude_c.h"), defines="#define LT_REAL float\n",
                          includes=("math_double.inc",))
_render_observers = []


def observe_renders(callback):
    """Call `callback(spec)` for every spec rendered from now on. Test doubles of GPU drivers use it to
    find what a kernel name computes; nothing is kept when no one observes."""
    _render_observers.append(callback)

_CTYPES = {"float32": "float", "float64": "double", "int32": "int", "int64": "i64", "bool": "u8",
           "uint32": "u32", "uint64": "u64"}


def _freeze(value):
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, np.dtype):
        return value.name
    return value


def cached(builder):
    """Memoize a kernel builder by its (frozen) arguments: a training step asks for the same kernels
    every step, and building a kernel's text costs far more than looking it up."""
    memo = {}

    @functools.wraps(builder)
    def build(*args, **kwargs):
        key = tuple(tuple(a) if type(a) is list else a for a in args)
        if kwargs:
            key = (key, tuple(kwargs.items()))
        try:
            found = memo.get(key)
        except TypeError:  # a list or dict among the arguments
            key = (_freeze(args), _freeze(kwargs))
            found = memo.get(key)
        if found is None:
            found = memo[key] = builder(*args, **kwargs)
        return found
    build.cache = memo
    return build


_NAMES = {np.dtype(name): name for name in _CTYPES}


def dtype_name(dtype):
    """np.dtype(dtype).name, without NumPy's slow name property for the dtypes kernels handle."""
    return _NAMES.get(dtype) or np.dtype(dtype).name


def handles(dtype):
    """Whether device kernels store and compute this NumPy dtype (not float16/bfloat16: declined)."""
    return dtype in _NAMES


def ctype(dtype):
    """The C type name a dtype is stored as in device buffers (bool as one byte)."""
    name = dtype_name(dtype)
    if name not in _CTYPES:
        raise TypeError(f"device kernels do not handle dtype {name}")
    return _CTYPES[name]


class KernelSpec:
    """One kernel: `buffers` are (name, dtype, writable) in argument order, `scalars` (name, "f"|"i")
    runtime values, `threads` the number of work items, `body` the code run for work item `gid`
    (an i64); `fmad` allows contracting a*b+c into one rounding (only where no bit-identity is promised);
    `aliased`: buffers may overlap (each work item reads its elements before it writes them), so their
    pointers are not declared __restrict__."""

    def __init__(self, kind, buffers, scalars, threads, body, fmad=False, aliased=False):
        self.kind, self.buffers, self.scalars = kind, tuple(buffers), tuple(scalars)
        self.threads, self.body, self.fmad, self.aliased = int(threads), body, fmad, aliased
        text = repr((kind, self.buffers, self.scalars, self.threads, body, fmad)) + (" aliased" if aliased else "")
        self.name = f"lt_{kind}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def __repr__(self):
        return f"KernelSpec({self.name}, threads={self.threads})"


def _param_list_c(spec):
    params = []
    restrict = "" if spec.aliased else " __restrict__"
    for name, dtype, writable in spec.buffers:
        const = "" if writable else "const "
        params.append(f"{const}{ctype(dtype)}*{restrict} {name}")
    params += [f"{'double' if kind == 'f' else 'i64'} {name}" for name, kind in spec.scalars]
    return params


def _render_cuda(spec):
    params = ", ".join(_param_list_c(spec))
    return (f'extern "C" __global__ void {spec.name}({params}) {{\n'
            f"  const i64 gid = (i64)blockIdx.x * (i64)blockDim.x + (i64)threadIdx.x;\n"
            f"  if (gid >= {spec.threads}LL) return;\n"
            f"{spec.body}\n}}\n")


def _render_c(spec):
    params = ", ".join(_param_list_c(spec) + ["i64 lt_begin", "i64 lt_end"])
    return (f"void {spec.name}({params}) {{\n"
            f"  for (i64 gid = lt_begin; gid < lt_end; ++gid) {{\n{spec.body}\n  }}\n}}\n")


def _render_metal(spec):
    params, unpack = [], []
    slot = 0
    for name, dtype, writable in spec.buffers:
        const = "" if writable else "const "
        params.append(f"device {const}{ctype(dtype)}* {name} [[buffer({slot})]]")
        slot += 1
    floats = [n for n, k in spec.scalars if k == "f"]
    ints = [n for n, k in spec.scalars if k == "i"]
    # metalcompute passes buffers only: scalars travel in one float and one int buffer.
    if floats:
        params.append(f"constant float* lt_fscalars [[buffer({slot})]]")
        slot += 1
        unpack += [f"  const real {n} = lt_fscalars[{i}];" for i, n in enumerate(floats)]
    if ints:
        params.append(f"constant int* lt_iscalars [[buffer({slot})]]")
        unpack += [f"  const i64 {n} = lt_iscalars[{i}];" for i, n in enumerate(ints)]
    params.append("uint lt_tid [[thread_position_in_grid]]")
    return (f"kernel void {spec.name}({', '.join(params)}) {{\n"
            f"  const i64 gid = (i64)lt_tid;\n"
            f"  if (gid >= {spec.threads}) return;\n" + "\n".join(unpack) + "\n"
            f"{spec.body}\n}}\n")


_RENDER = {"cuda": _render_cuda, "metal": _render_metal, "c": _render_c}


def render(spec, profile, prelude=True):
    """Source text of `spec` in `profile`'s dialect, with the dialect's prelude unless told not to."""
    if not profile.has_double and _uses_double(spec):
        raise TypeError(f"{spec.name}: {profile.name} has no float64")
    for observe in _render_observers:
        observe(spec)
    text = _RENDER[profile.name](spec)
    return (profile.prelude() + "\n" + text) if prelude else text


def _uses_double(spec):
    return any(np.dtype(d) == np.float64 for _, d, _ in spec.buffers) or "double" in spec.body
