"""Fused elementwise kernels: a recipe (a small program over inputs and parameters) rendered to Python
source and compiled with numba, cached in memory and on disk.

Every instruction computes in float64 (or bool) and rounds to its node's dtype exactly as the reference
does at each node's store, so a fused chain gives the reference's bits; only the transcendentals may
differ in the last unit (libm here, NumPy's implementations there).

A recipe is `(ndim, instructions)` where each instruction is one of
  ("in", k, dtype)            element of array input k (already broadcast to the output shape)
  ("param", k, dtype)         scalar parameter k
  (op, dtype, i, j, ...)      op applied to earlier instructions i, j, ...
and the last instruction is the result.
"""
import hashlib
import importlib.util
import os
import sys
import threading

import numpy as np

_EXPR = {
    "add": "({0} + {1})", "sub": "({0} - {1})", "mul": "({0} * {1})", "div": "({0} / {1})",
    "neg": "(-{0})", "abs": "abs({0})", "square": "({0} * {0})", "sqrt": "math.sqrt({0})",
    "rsqrt": "(1.0 / math.sqrt({0}))", "exp": "math.exp({0})", "log": "math.log({0})",
    "tanh": "math.tanh({0})", "sin": "math.sin({0})", "cos": "math.cos({0})", "tan": "math.tan({0})",
    "asin": "math.asin({0})", "acos": "math.acos({0})", "atan": "math.atan({0})", "sinh": "math.sinh({0})",
    "cosh": "math.cosh({0})", "erf": "erf_scalar({0})", "sigmoid": "(1.0 / (1.0 + math.exp(-{0})))",
    "eq": "({0} == {1})", "ne": "({0} != {1})", "lt": "({0} < {1})", "le": "({0} <= {1})",
    "gt": "({0} > {1})", "ge": "({0} >= {1})", "where": "({1} if {0} else {2})",
    "logical_not": "(not {0})", "logical_and": "({0} and {1})", "logical_or": "({0} or {1})",
    "logical_xor": "({0} != {1})",
}
OPS = frozenset(_EXPR) | {"cast"}
TRANSCENDENTAL = frozenset({"exp", "log", "tanh", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
                            "cosh", "erf", "sigmoid"})


def _store(dtype, expr):
    """The value as the reference stores it: rounded to float32, or float64, or bool."""
    if dtype == "float32":
        return f"np.float64(np.float32({expr}))"
    if dtype == "float64":
        return f"np.float64({expr})"
    if dtype == "bool":
        return f"bool({expr})"
    raise ValueError(f"fused kernels do not handle {dtype}")


def render(recipe):
    """Python source of the kernel `kernel(out, in0, ..., p0, ...)` for `recipe`."""
    ndim, instrs = recipe
    n_in = sum(1 for i in instrs if i[0] == "in")
    n_par = sum(1 for i in instrs if i[0] == "param")
    idx = ", ".join(f"i{d}" for d in range(ndim))
    args = ["out"] + [f"a{k}" for k in range(n_in)] + [f"p{k}" for k in range(n_par)]
    lines = ["import math", "import numba as nb", "import numpy as np",
             "from lazytensor.kernels.cpu.special import erf_scalar", "",
             "@nb.njit(cache=True, error_model='numpy')", f"def kernel({', '.join(args)}):"]
    indent = "    "
    for d in range(ndim):
        lines.append(f"{indent}for i{d} in range(out.shape[{d}]):")
        indent += "    "
    for n, ins in enumerate(instrs):
        if ins[0] == "in":
            lines.append(f"{indent}v{n} = {_store(ins[2], f'a{ins[1]}[{idx}]')}")
        elif ins[0] == "param":
            lines.append(f"{indent}v{n} = {_store(ins[2], f'p{ins[1]}')}")
        elif ins[0] == "cast":
            src, target = f"v{ins[2]}", ins[1]
            lines.append(f"{indent}v{n} = {_store(target, f'({src} != 0)' if target == 'bool' else src)}")
        else:
            expr = _EXPR[ins[0]].format(*(f"v{a}" for a in ins[2:]))
            lines.append(f"{indent}v{n} = {_store(ins[1], expr)}")
    lines.append(f"{indent}out[{idx}] = v{len(instrs) - 1}")
    return "\n".join(lines) + "\n"


def cache_dir():
    """Where rendered kernels (and numba's compiled code beside them) are kept between processes."""
    base = os.environ.get("LAZYTENSOR_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "lazytensor")
    return os.path.join(base, "fused")


_compiled = {}
_lock = threading.Lock()


def compiled(recipe):
    """The numba dispatcher for `recipe` (rendered to a file once, so numba can cache it on disk)."""
    fn = _compiled.get(recipe)
    if fn is not None:
        return fn
    with _lock:
        source = render(recipe)
        digest = hashlib.sha256(source.encode()).hexdigest()[:20]
        directory = cache_dir()
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, f"k_{digest}.py")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                f.write(source)
            os.replace(tmp, path)
        name = f"lazytensor_fused_{digest}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _compiled[recipe] = fn = module.kernel
        return fn


def run(recipe, out_shape, out_dtype, arrays, params):
    """Evaluate `recipe` over `arrays` (broadcast here to `out_shape`) and scalar `params`."""
    out = np.empty(out_shape, out_dtype)
    views = [np.broadcast_to(a, out_shape) for a in arrays]
    compiled(recipe)(out, *views, *params)
    return out
