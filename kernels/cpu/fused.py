"""Fused elementwise kernels: a recipe (a small program over inputs and parameters) rendered to Python
source and compiled with numba, cached in memory and on disk.

Every instruction rounds to its node's dtype exactly as the reference does at each node's store, so a
fused chain gives the reference's bits; only the transcendentals may differ in the last unit (libm or
the forms of special.py and special32.py here, NumPy's implementations there). An instruction computes
in float64 (or bool), except where its operands and result are float32 and its op is correctly rounded
(`+ - * /`, negation, ...: float32 arithmetic then gives the widen-and-round bits), a comparison or a
select, or has a float32 form within one unit (exp, erf): it then computes in float32, and a chain made
only of such instructions runs eight lanes wide (AVX2) instead of four.

A recipe is `(ndim, instructions)` where each instruction is one of
  ("in", k, dtype)            element of array input k (already broadcast to the output shape)
  ("param", k, dtype)         scalar parameter k
  (op, dtype, i, j, ...)      op applied to earlier instructions i, j, ...
and the last instruction is the result. At most one instruction is a row op (ROW_OPS: softmax, layer
norm or their gradients along the last axis, kernels/cpu/fused_rows.py; a layer norm's last operand is
its eps, a parameter); every other one is elementwise.
"""
import functools
import hashlib
import importlib.util
import math
import os
import sys
import threading

import numpy as np

from ..cache import cache_path
from ..ops import OPS as RECORDS
from . import host_cache
from . import column_sums
from .column_sums import column_sum_recipe
from .common import one_piece
from .blas import layout, product_out
from .fused_rows import (IMPORTS as ROW_IMPORTS, OUT, PRODUCT_ARGS, inputs_read, kept_sums, products, row_at,
                         row_kernel_lines, trailing)

# The records' scalar expressions (kernels/ops.py); "cast" is rendered here.
_EXPR = {op.name: op.py for op in RECORDS.values() if op.py is not None}
# sigmoid, and exp and erf of operands that are not float32, whose result is rounded to float32 use the
# branch-free float64 forms of special.py: within one float32 unit like libm, but they vectorize;
# float64 results keep libm.
_EXPR_F32 = {op.name: op.py_f32 for op in RECORDS.values() if op.py_f32 is not None}
# Expressions over float32 operands computed in float32 (the ops whose float32 arithmetic gives the
# reference's bits, comparisons, selects, and exp/erf's float32 forms).
_EXPR_LANE32 = {op.name: op.py_lane32 or op.py for op in RECORDS.values()
                if op.py is not None and (op.py_lane32 or op.native or op.family in ("compare", "select"))}
OPS = frozenset(op.name for op in RECORDS.values() if "fused" in op.kernels)


def _store(dtype, expr):
    """The value as the reference stores it: a float32, or float64, or bool."""
    if dtype == "float32":
        return f"np.float32({expr})"
    if dtype == "float64":
        return f"np.float64({expr})"
    if dtype == "bool":
        return f"bool({expr})"
    raise ValueError(f"fused kernels do not handle {dtype}")


def _lane32(ins, dtypes):
    """Whether instruction `ins` computes in float32: its op has a float32 expression, its float
    operands are float32 and its result is float32 (a bool for a comparison)."""
    op, dtype, operands = ins[0], ins[1], ins[2:]
    if op not in _EXPR_LANE32:
        return False
    if RECORDS[op].family == "select":
        return dtype == "float32" and dtypes[operands[1]] == dtypes[operands[2]] == "float32"
    return dtype in ("float32", "bool") and all(dtypes[a] == "float32" for a in operands)


# The modules whose functions a generated kernel calls (a row op's kernel calls lanes.py's and reduce.py's).
HELPER_FILES = ("special.py", "special32.py", "softmax.py", "layer_norm.py", "lanes.py", "reduce.py", "common.py",
                "blas.py", "column_sums.py")


def _helpers_digest():
    # numba's disk cache follows the generated file only; naming the helpers' version in that file
    # makes a change to a helper produce new kernel files instead of stale cached code.
    digest = hashlib.sha256()
    for name in HELPER_FILES:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), name), "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


_HELPERS = _helpers_digest()


def render(recipe, broadcast=None):
    """Python source of the kernel `kernel(out, in0, ..., p0, ...)` for `recipe` and, for a result of
    at least one dim, its parallel form `kernel_in_pieces(bounds, out, in0, ..., p0, ...)`.

    Inputs arrive C-contiguous with the output's number of dims; `broadcast[k][d]` says input k has
    size 1 along dim d where the output does not (indexed with 0 there). Contiguous arrays and no
    calls in the loop body let LLVM vectorize the innermost loop. A recipe holding a row op renders
    as fused_rows.py says."""
    ndim, instrs = recipe[:2]
    summed = column_sum_recipe(recipe)
    keeps_value = kept_sums(recipe) is not None
    if summed:  # the tree's kernel (`values`), then the folds of its rows (_column_sum_lines)
        instrs = instrs[:-1]
        recipe = (ndim, instrs)
    n_in = inputs_read(recipe)
    n_par = sum(1 for i in instrs if i[0] == "param")
    broadcast = broadcast or ((False,) * ndim,) * n_in
    extra = list(PRODUCT_ARGS) if products(instrs) or trailing(recipe) else []
    extra += [f"x{e}" for e in range(len(trailing(recipe)))]
    args = ["out"] + [f"a{k}" for k in range(n_in)] + [f"p{k}" for k in range(n_par)] + extra
    lines = [f"# generated by lazytensor.kernels.cpu.fused for {', '.join(HELPER_FILES)} {_HELPERS}",
             "import math", "import numba as nb", "import numpy as np",
             "from lazytensor.kernels.cpu.special import erf_for_float32, erf_scalar, exp_for_float32, "
             "tanh_for_float32",
             "from lazytensor.kernels.cpu.special32 import erf_in_float32, exp_in_float32", "",
             "@nb.njit(nogil=True, cache=True, error_model='numpy')",
             f"def {'values' if summed else 'kernel'}({', '.join(args)}):"]
    if row_at(instrs) is None:
        indent = "    "
        for d in range(ndim):
            lines.append(f"{indent}for i{d} in range(out.shape[{d}]):")
            indent += "    "
        lines += [indent + line for line in body(instrs, range(len(instrs)), broadcast)]
        lines.append(f"{indent}out[{', '.join(f'i{d}' for d in range(ndim))}] = v{len(instrs) - 1}")
    else:  # the row form: blocks of rows, the row op between two loops
        lines[5:5] = ROW_IMPORTS
        lines += row_kernel_lines(recipe, broadcast, body)
    if summed:
        lines.insert(4, "from lazytensor.kernels.cpu.column_sums import fold_rows, fold_rows_in_columns")
        kept = _column_sum_lines(args[1:], broadcast, kept=True) if keeps_value else []
        return "\n".join(lines + _column_sum_lines(args[1:], broadcast) + kept) + "\n"
    if ndim:  # the parallel form: pieces of the first dim side by side on numba's threads
        sliced = ["out[lo:hi]"] + [f"a{k}" if broadcast[k][0] else f"a{k}[lo:hi]" for k in range(n_in)]
        sliced += [f"p{k}" for k in range(n_par)] + [_sliced(x) for x in extra]
        lines += ["", "", "@nb.njit(parallel=True, nogil=True, cache=True, error_model='numpy')",
                  f"def kernel_in_pieces(bounds, {', '.join(args)}):",
                  "    for p in nb.prange(bounds.shape[0] - 1):",
                  "        lo, hi = bounds[p], bounds[p + 1]",
                  f"        kernel({', '.join(sliced)})"]
    return "\n".join(lines) + "\n"


def _sliced(arg):
    """A trailing argument as a piece's kernel gets it: a trailing product's result sliced like `out`."""
    return f"{arg}[lo:hi]" if arg.startswith("x") else arg


def _column_sum_lines(args, broadcast, kept=False):
    """For a recipe ending in column sums (runtime/fusion.py): `fold_range(lo, hi, step, scratch, acc,
    a0, ..., p0, ...)` computes the tree's value over slices [lo, hi) of the first dim, `step` at a
    time into `scratch`, folding each block's rows into `acc` (kernels/cpu/column_sums.py); its
    parallel form `kernel_in_pieces(bounds, scratch, rest, acc, ...)` folds the first piece's rows as
    it makes them while the other pieces store theirs into `rest`, then folds `rest`: the rows in order.
    With `kept` (sums a kernel stores its value beside), `fold_range_kept(lo, hi, step, out, acc, ...)`
    and `kernel_in_pieces_kept(bounds, step, out, acc, ...)` do the same with the blocks of `out`
    itself, folded while in cache, instead of scratch."""
    n_in = len(broadcast)

    def sliced(lo, hi):
        return ", ".join([f"a{k}" if broadcast[k][0] else f"a{k}[{lo}:{hi}]" for k in range(n_in)] + args[n_in:])
    rest = ", ".join(args)
    if kept:
        name, held, block, step, stored, tail = ("_kept", "out", "out[c:e]", "step", "out[lo:hi]", "out[first:]")
        params = "bounds, step, out, acc"
    else:
        name, held, block, step = "", "scratch", "scratch[:e - c]", "scratch.shape[0]"
        stored, tail, params = "rest[lo - first:hi - first]", "rest", "bounds, scratch, rest, acc"
    return ["", "", "@nb.njit(nogil=True, cache=True, error_model='numpy')",
            f"def fold_range{name}(lo, hi, step, {held}, acc, {rest}):",
            f"    rows = {held}[0].size // {held}.shape[-1]",
            "    for c in range(lo, hi, step):",
            "        e = min(c + step, hi)",
            f"        block = {block}",
            f"        values(block, {sliced('c', 'e')})",
            "        fold_rows(block, acc, c * rows)",
            "", "", "@nb.njit(parallel=True, nogil=True, cache=True, error_model='numpy')",
            f"def kernel_in_pieces{name}({params}, {rest}):",
            "    first = bounds[1]",
            "    for p in nb.prange(bounds.shape[0] - 1):",
            "        lo, hi = bounds[p], bounds[p + 1]",
            "        if p == 0:",
            f"            fold_range{name}(lo, hi, {step}, {held}, acc, {rest})",
            "        else:",
            f"            values({stored}, {sliced('lo', 'hi')})",
            f"    fold_rows_in_columns({tail}, acc, first * ({held}[0].size // {held}.shape[-1]), bounds.shape[0] - 1)"]


def body(instrs, which, broadcast):
    """The lines computing instructions `which` (indices, in order) of a recipe as `v<n> = ...`, inputs
    read at the loop indices i0, i1, ... (0 along a broadcast dim); a product's element from its matrix
    computed before the loop (`prod<n>`, kernels/cpu/fused_rows.py)."""
    dtypes = [ins[2] if ins[0] in ("in", "param") else ins[1] for ins in instrs]

    def wide(a):
        # a float32 value as an operand of float64 arithmetic
        return f"np.float64(v{a})" if dtypes[a] == "float32" else f"v{a}"

    lines = []
    for n in which:
        ins = instrs[n]
        if ins[0] == "in":
            at = ", ".join("0" if b else f"i{d}" for d, b in enumerate(broadcast[ins[1]]))
            lines.append(f"v{n} = {_store(ins[2], f'a{ins[1]}[{at}]')}")
        elif ins[0] == "param":
            lines.append(f"v{n} = {_store(ins[2], f'p{ins[1]}')}")
        elif ins[0] == "matmul":
            ndim = len(broadcast[0])
            lines.append(f"v{n} = prod{n}[i{ndim - 2}, i{ndim - 1}]")
        elif ins[0] == "cast":
            src, target = f"v{ins[2]}", ins[1]
            lines.append(f"v{n} = {_store(target, f'({src} != 0)' if target == 'bool' else src)}")
        elif _lane32(ins, dtypes):
            expr = _EXPR_LANE32[ins[0]].format(*(f"v{a}" for a in ins[2:]))
            lines.append(f"v{n} = {_store(ins[1], expr)}")
        else:
            table = _EXPR_F32 if ins[1] == "float32" and ins[0] in _EXPR_F32 else _EXPR
            expr = table[ins[0]].format(*(wide(a) for a in ins[2:]))
            lines.append(f"v{n} = {_store(ins[1], expr)}")
    return lines


def cache_dir():
    """Where rendered kernels (and numba's compiled code beside them) are kept between processes."""
    return cache_path("fused")


_compiled = {}
_lock = threading.Lock()


def compiled(recipe, broadcast=None):
    """The module holding the numba dispatchers for `recipe` with inputs broadcast as `broadcast` says
    (`kernel`, `kernel_in_pieces`: rendered to a file once, so numba can cache them on disk)."""
    key = (recipe, broadcast)
    module = _compiled.get(key)
    if module is not None:
        return module
    with _lock:
        source = render(recipe, broadcast)
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
        _compiled[key] = module
        return module


def run(recipe, out_shape, out_dtype, arrays, params, pieces=one_piece, library=None):
    """Evaluate `recipe` over `arrays` (broadcastable to `out_shape`) and scalar `params`, in the pieces
    of the first dim that `pieces(n, work_per_item)` gives, side by side on numba's threads. A recipe
    with products needs `library`, the (address, integer type) of the BLAS gemm that computes them. Returns
    the value, or with trailing products (kernels/cpu/fused_rows.py) the value and then theirs."""
    if column_sum_recipe(recipe):
        if kept_sums(recipe) is not None:
            return _column_sums_kept(recipe, out_shape, out_dtype, arrays, params, pieces)
        return _column_sums(recipe, out_shape, out_dtype, arrays, params, pieces)
    module, shapes, items, work = _launch(recipe, tuple(out_shape), tuple(a.shape for a in arrays))
    out = host_cache.empty(out_shape, out_dtype)
    in_place = _product_operands(recipe)
    inputs = [layout(a)[0] if k in in_place else np.ascontiguousarray(a).reshape(shape)
              for k, (a, shape) in enumerate(zip(arrays, shapes))]
    if in_place:
        params = list(params) + [np.uint64(library[0]), np.zeros(1, library[1])]
    results = [product_out(shape, out_dtype, dims) for shape, dims in _trailing_shapes(recipe, out.shape, shapes)]
    bounds = None if items is None else pieces(items, work)
    if bounds is None:
        module.kernel(out, *inputs, *params, *results)
    else:
        module.kernel_in_pieces(bounds, out, *inputs, *params, *results)
    return (out, *results) if results else out


def prepared(recipe, out_shape, out_dtype, in_shapes, pieces=one_piece):
    """`run` for a recipe of elementwise instructions alone (no product, no column sum) on inputs of
    `in_shapes`, worked out once: a callable (arrays, params) -> value for a replay that makes this call
    at every step, doing only the allocation, the reshapes and the kernel call. None for other recipes."""
    if column_sum_recipe(recipe) or _product_operands(recipe) or trailing(recipe):
        return None
    out_shape = tuple(out_shape)
    module, shapes, items, work = _launch(recipe, out_shape, tuple(tuple(s) for s in in_shapes))
    kernel, kernel_in_pieces, empty, contiguous = module.kernel, module.kernel_in_pieces, host_cache.empty, \
        np.ascontiguousarray

    def call(arrays, params):
        out = empty(out_shape, out_dtype)
        inputs = [contiguous(a).reshape(shape) for a, shape in zip(arrays, shapes)]
        bounds = None if items is None else pieces(items, work)
        if bounds is None:
            kernel(out, *inputs, *params)
        else:
            kernel_in_pieces(bounds, out, *inputs, *params)
        return out
    return call


def _trailing_shapes(recipe, out_shape, shapes):
    """(shape, layout) of each trailing product's result: the leading dims, its left operand's rows and
    its right operand's columns; the layout its consumer reads it in (`recipe[2]`'s third element)."""
    found = []
    for spec in trailing(recipe):
        a, b = (out_shape if k == OUT else shapes[k] for k in spec[:2])
        found.append((out_shape[:-2] + (a[-2], b[-1]), spec[2] if len(spec) > 2 else None))
    return found


def _column_sums(recipe, out_shape, out_dtype, arrays, params, pieces):
    """The column sums a recipe ends in (`out_shape`: the sum's, keepdims or not): its tree's value (the
    inputs' broadcast shape) computed a block of slices at a time and folded as it is made."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    module, shapes, items, work = _launch(recipe, shape, tuple(a.shape for a in arrays))
    inputs = [np.ascontiguousarray(a).reshape(s) for a, s in zip(arrays, shapes)]
    acc = column_sums.accumulators(math.prod(shape[:-1]), shape[-1])
    step = min(column_sums.slices_per_block(shape), shape[0])
    scratch = host_cache.empty((step,) + shape[1:], out_dtype)
    bounds = pieces(items, work)
    if bounds is None:
        module.fold_range(0, shape[0], step, scratch, acc, *inputs, *params)
    else:
        rest = host_cache.empty((shape[0] - bounds[1],) + shape[1:], out_dtype)
        module.kernel_in_pieces(bounds, scratch, rest, acc, *inputs, *params)
    out = host_cache.empty(out_shape, out_dtype)
    column_sums.finish(acc, out.reshape(-1))
    return out


def _column_sums_kept(recipe, out_shape, out_dtype, arrays, params, pieces):
    """A tree's value (`out_shape`) and the column sums over all its axes but the last (recipe[2]'s
    shape), each block of slices folded as the kernel stores it, while it is in cache."""
    out_shape = tuple(out_shape)
    module, shapes, items, work = _launch(recipe, out_shape, tuple(a.shape for a in arrays))
    inputs = [np.ascontiguousarray(a).reshape(s) for a, s in zip(arrays, shapes)]
    out = host_cache.empty(out_shape, out_dtype)
    acc = column_sums.accumulators(math.prod(out_shape[:-1]), out_shape[-1])
    step = min(column_sums.slices_per_block(out_shape), out_shape[0])
    bounds = pieces(items, work)
    if bounds is None:
        module.fold_range_kept(0, out_shape[0], step, out, acc, *inputs, *params)
    else:
        module.kernel_in_pieces_kept(bounds, step, out, acc, *inputs, *params)
    sums = host_cache.empty(kept_sums(recipe), out_dtype)
    column_sums.finish(acc, sums.reshape(-1))
    return out, sums


@functools.lru_cache(maxsize=4096)
def _product_operands(recipe):
    """The inputs a recipe's products read (by BLAS, in place, in any layout BLAS takes)."""
    instrs = recipe[1]
    return frozenset([instrs[k][1] for n in products(instrs) for k in instrs[n][2:]]
                     + [k for spec in trailing(recipe) for k in spec[:2] if k != OUT])


@functools.lru_cache(maxsize=4096)
def _launch(recipe, out_shape, in_shapes):
    """What `run` works out once per recipe and shapes: the module, the inputs' shapes at the output's
    rank, the items and work per item its pieces cut."""
    ndim = len(out_shape)
    shapes = [(1,) * (ndim - len(s)) + tuple(s) for s in in_shapes]
    broadcast = tuple(tuple(s[d] == 1 and out_shape[d] != 1 for d in range(ndim)) for s in shapes)
    size = 1
    for d in out_shape:
        size *= d
    items = None if ndim == 0 or size == 0 else out_shape[0]
    work = 0 if items is None else size // out_shape[0] * len(recipe[1])
    return compiled(recipe, broadcast), shapes, items, work
