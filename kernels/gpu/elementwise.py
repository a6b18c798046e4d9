"""Elementwise ops as C expressions, and the strided map kernel every copy-like op is built on.

The expressions follow the reference's rule (kernels/reference/elementwise.py): widen to the wide type
(`real`: float64 where the dialect has it; i64 for integers), compute, round once at store. `+ - * /`,
`sqrt` and friends are correctly rounded, so with float32 operands and result they are computed in
float32 directly: the same bits, and much faster on GPUs with few float64 units.
"""
import math

import numpy as np

from ..ops import OPS as _RECORDS
from .spec import KernelSpec, cached, ctype, dtype_name

# The ops with a device expression (their records' `c`), and those that need float64 to match the
# reference, so a float-only dialect declines them for float32.
OPS = frozenset(op.name for op in _RECORDS.values() if op.elementwise and "device" in op.kernels)
NEEDS_WIDE = frozenset(name for name in OPS if _RECORDS[name].wide)


def _kind(dtype):
    return np.dtype(dtype).kind  # f, i, b


def _wide_name(dtype, native):
    k = _kind(dtype)
    if k == "f":
        return ctype(dtype) if native else "real"
    return "i64"


def supported(op, in_dtypes, out_dtype, has_double):
    """Whether `op` has a device expression for these dtypes (floordiv, mod, pow and integer
    transcendentals stay on the CPU, whose NumPy semantics they follow)."""
    if op not in OPS:
        return False
    dts = [np.dtype(d) for d in in_dtypes] + [np.dtype(out_dtype)]
    if any(dtype_name(d) not in ("float32", "float64", "int32", "int64", "bool") for d in dts):
        return False
    if not has_double:
        if any(d == np.float64 for d in dts):
            return False
        if op in NEEDS_WIDE:
            return False  # float32 transcendentals without float64: documented tolerance, see metal docs
    if op in ("div",) and any(_kind(d) != "f" for d in in_dtypes) and _kind(out_dtype) != "f":
        return False
    return True


@cached
def expression(op, in_dtypes, out_dtype, args, profile_double=True):
    """A C expression of type `ctype(out_dtype)` computing `op` on operand expressions `args`."""
    out = np.dtype(out_dtype)
    oc = ctype(out)
    ins = [np.dtype(d) for d in in_dtypes]
    record = _RECORDS[op]
    native = record.native and all(d == out for d in ins) or not profile_double
    if op == "cast":
        if out.kind == "b":
            return f"(u8)(({args[0]}) != 0)"
        return f"({oc})({args[0]})"
    if record.family == "select":
        return record.c.format(*args, t=oc)
    if record.family == "compare":
        wide = "real" if any(d.kind == "f" for d in ins) else "i64"
        return f"(u8)({record.c.format(*(f'(({wide})({a}))' for a in args))})"
    if record.family == "logical":
        return f"(u8)({record.c.format(*(f'(({a}) != 0)' for a in args))})"
    if record.dtype == "bool":
        return record.c.format(*args)
    if out.kind == "b":
        # arithmetic on bools (e.g. maximum of masks) in integers, then back to 0/1
        inner = _arith(record, [f"(i64)({a})" for a in args], "i64", integer=True)
        return f"(u8)(({inner}) != 0)"
    w = _wide_name(out, native)
    wargs = [f"({w})({a})" for a in args]
    return f"({oc})({_arith(record, wargs, w, integer=out.kind != 'f')})"


def _arith(record, args, w, integer):
    template = record.c_int if integer and record.c_int is not None else record.c
    if template is None:
        raise ValueError(f"no device expression for {record.name}")
    return template.format(*args, w=w)


def collapse(shape, strides_list):
    """Merge adjacent dims that every operand walks contiguously and drop size-1 dims: fewer divisions."""
    dims = [(n, [s[d] for s in strides_list]) for d, n in enumerate(shape) if n != 1]
    merged = []
    for n, st in dims:
        if merged:
            pn, pst = merged[-1]
            if all(p == s * n for p, s in zip(pst, st)):
                merged[-1] = (pn * n, st)
                continue
        merged.append((n, st))
    if not merged:
        return (), [() for _ in strides_list]
    shape = tuple(n for n, _ in merged)
    return shape, [tuple(st[k] for _, st in merged) for k in range(len(strides_list))]


def index_code(shape, flat="gid"):
    """Code decomposing `flat` (by default `gid`) into per-dim indices i0..i{R-1} over row-major `shape`."""
    lines, r = [f"  i64 lt_r = {flat};"], len(shape)
    for d in range(r - 1, 0, -1):
        lines.append(f"  const i64 i{d} = lt_r % {shape[d]}LL; lt_r /= {shape[d]}LL;")
    if r:
        lines.append("  const i64 i0 = lt_r;")
    return "\n".join(lines)


def offset_code(offset, strides):
    terms = [str(int(offset))] + [f"i{d} * {int(s)}LL" for d, s in enumerate(strides) if s != 0]
    return " + ".join(terms)


@cached
def strided_map(kind, shape, out, ins, value, scalars=(), keep_dims=False):
    """A kernel writing out[i] = value(v0, v1, ...) for every index i of `shape`.

    `out` and each of `ins` are (dtype, strides, offset) in elements; `value` is a C expression over the
    loaded elements v0.., the scalars s0.. and, with keep_dims, the indices i0.. of `shape`."""
    shape = tuple(int(n) for n in shape)
    threads = math.prod(shape)
    strides = [out[1]] + [x[1] for x in ins]
    if not keep_dims:
        shape, strides = collapse(shape, strides)
    body = [index_code(shape)]
    for k, (dtype, _, off) in enumerate(ins):
        body.append(f"  const {ctype(dtype)} v{k} = x{k}[{offset_code(off, strides[k + 1])}];")
    body.append(f"  y[{offset_code(out[2], strides[0])}] = {value};")
    buffers = [("y", out[0], True)] + [(f"x{k}", x[0], False) for k, x in enumerate(ins)]
    return KernelSpec(kind, buffers, scalars, threads, "\n".join(body))


def contiguous_strides(shape):
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= int(n)
    return tuple(reversed(strides))


def broadcast_strides(in_shape, out_shape):
    """Element strides reading a contiguous `in_shape` array broadcast to `out_shape` (0 where broadcast)."""
    pad = len(out_shape) - len(in_shape)
    base = (0,) * pad + contiguous_strides(in_shape)
    full = (1,) * pad + tuple(in_shape)
    return tuple(0 if full[d] == 1 and out_shape[d] != 1 else base[d] for d in range(len(out_shape)))


def fused_supported(recipe, has_double):
    """Whether a dialect can run the recipe with the reference's numerics (see `supported`)."""
    for ins in recipe[1]:
        if ins[0] in ("in", "param"):
            dts = [ins[2]]
        else:
            dts = [ins[1]]
        if not has_double and ("float64" in dts or ins[0] in NEEDS_WIDE):
            return False
    return True


@cached
def fused(shape, recipe, input_shapes, param_buffers, has_double=True):
    """One kernel for a fused elementwise recipe (runtime/fusion.py): each instruction rounds to its
    node's dtype exactly where the reference stores it, so the result has the unfused kernels' bits.

    `input_shapes[k]` is input k's shape (broadcast to `shape`); `param_buffers[k]` says whether
    parameter k is a 0-d device buffer rather than a runtime scalar."""
    shape = tuple(int(n) for n in shape)
    instrs = recipe[1]
    loads, scalars, lines, dtypes, param_bufs = [], [], [], [], []
    buffers = [("y", instrs[-1][1], True)]
    for n, ins in enumerate(instrs):
        kind = ins[0]
        if kind == "in":
            k, dt = ins[1], ins[2]
            strides = broadcast_strides(input_shapes[k], shape)
            loads.append(f"x{k}[{offset_code(0, strides)}]")
            buffers.append((f"x{k}", dt, False))
            value = loads[-1]
        elif kind == "param":
            k, dt = ins[1], ins[2]
            if param_buffers[k]:
                param_bufs.append((f"p{k}", dt, False))
                value = f"p{k}[0]"
            else:
                scalars.append((f"s{k}", "f" if dt != "bool" else "i"))
                value = f"({ctype(dt)})s{k}"
        elif kind == "cast":
            dt = ins[1]
            value = expression("cast", [dtypes[ins[2]]], dt, [f"t{ins[2]}"], has_double)
        else:
            dt = ins[1]
            args = list(ins[2:])
            value = expression(kind, [dtypes[a] for a in args], dt, [f"t{a}" for a in args], has_double)
        dtypes.append(dt)
        lines.append(f"  const {ctype(dt)} t{n} = {value};")
    body = [index_code(shape)] + lines + [f"  y[gid] = t{len(instrs) - 1};"]
    return KernelSpec("fused", buffers + param_bufs, scalars, math.prod(shape),
                      "\n".join(body))
