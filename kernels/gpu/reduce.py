"""Axis reductions, one work item per output element folding its slice left to right, or for long
float sums and means (blocked_sum) one work item per strided partial, then one per output.

Matches kernels/reference/reduce.py: float sums, products, means, variances fold in float64 in
row-major order of the reduced axes, starting from the first element, and round once (a sum or mean
adds +0 at the end: never -0.0); sums and means over more than BLOCK_SPAN elements take the reference's
blocked order; integer and bool sums are exact in i64; amax/amin keep the first extreme element (the
first NaN); argmax/argmin return the first position. A dialect without float64
folds in float32 with Kahan compensation instead (not bit-identical, never blocked; see the docs).
"""
import math

import numpy as np

from .. import ops
from ..reference.reduce import partials
from .elementwise import collapse, contiguous_strides, index_code, offset_code
from .spec import KernelSpec, cached, ctype, dtype_name

OPS = ops.names(family="reduce") & ops.with_kernel("device")


def supported(op, in_dtype, out_dtype, has_double):
    dts = {dtype_name(in_dtype), dtype_name(out_dtype)}
    if op not in OPS or not dts <= {"float32", "float64", "int32", "int64", "bool"}:
        return False
    if not has_double and "float64" in dts:
        return False
    if not has_double and op == "prod":
        return False
    return True


def _loops(red_shape, red_strides, base, body, depth="    "):
    """Nested loops over the reduced dims in row-major order; `body` sees `lt_off`."""
    lines, ind = [], "  "
    terms = [base]
    for d, n in enumerate(red_shape):
        lines.append(f"{ind}for (i64 j{d} = 0; j{d} < {n}LL; ++j{d}) {{")
        terms.append(f"j{d} * {red_strides[d]}LL")
        ind += "  "
    lines.append(f"{ind}const i64 lt_off = {' + '.join(terms)};")
    lines += [ind + line for line in body]
    for _ in red_shape:
        ind = ind[:-2]
        lines.append(f"{ind}}}")
    return lines


def _geometry(x_shape, axes):
    """For contiguous `x` reduced over `axes`: the kept dims' shape, the code setting `lt_base` (an
    output's first element, from indices i0.. over the kept dims), the number of outputs, the elements
    per output, and the reduced dims collapsed with their strides."""
    x_shape = tuple(int(n) for n in x_shape)
    axes = tuple(sorted(int(a) for a in axes))
    strides = contiguous_strides(x_shape)
    kept = [d for d in range(len(x_shape)) if d not in axes]
    kept_shape = tuple(x_shape[d] for d in kept)
    base = f"  const i64 lt_base = {offset_code(0, [strides[d] for d in kept])};"
    count = math.prod([x_shape[d] for d in axes])
    red_shape, (red_strides,) = collapse(tuple(x_shape[d] for d in axes), [tuple(strides[d] for d in axes)])
    return kept_shape, base, math.prod(kept_shape), count, red_shape, red_strides


@cached
def axis_reduce(op, x_shape, x_dtype, axes, out_dtype, correction=0, has_double=True):
    """The kernel reducing contiguous `x` over `axes` into a contiguous array of the kept dims."""
    kept_shape, base, threads, count, red_shape, red_strides = _geometry(x_shape, axes)
    body = [index_code(kept_shape), base]
    xc, oc = ctype(x_dtype), ctype(out_dtype)
    floating = np.dtype(x_dtype).kind == "f" or op in ("mean", "var", "std")
    wide = "double" if has_double else "float"
    if op in ("argmax", "argmin"):
        body += _arg(op, red_shape, red_strides, xc, np.dtype(x_dtype).kind == "f")
    elif op in ("amax", "amin"):
        cmp = ">" if op == "amax" else "<"
        nan = np.dtype(x_dtype).kind == "f"  # NaN propagates (floats only: integers have none)
        take = f"!(acc != acc) && (v != v || v {cmp} acc)" if nan else f"v {cmp} acc"
        body.append(f"  {xc} acc = 0; bool lt_first = true;")
        body += _loops(red_shape, red_strides, "lt_base", [
            f"const {xc} v = x0[lt_off];",
            "if (lt_first) { acc = v; lt_first = false; }",
            f"else if ({take}) acc = v;"])
        body.append("  y[gid] = acc;")
    elif not floating:  # integer and bool sums and products: exact in i64
        sym = "+" if op == "sum" else "*"
        body.append(f"  i64 acc = {0 if op == 'sum' else 1};")
        body += _loops(red_shape, red_strides, "lt_base",
                       [f"acc = (i64)((u64)acc {sym} (u64)(i64)x0[lt_off]);"])
        body.append(f"  y[gid] = ({oc})acc;")
    else:
        body += _float_fold(op, red_shape, red_strides, count, correction, wide, oc, has_double)
    buffers = [("y", out_dtype, True), ("x0", x_dtype, False)]
    return KernelSpec(f"reduce_{op}", buffers, (), threads, "\n".join(body))


def blocked(op, x_dtype, count, has_double):
    """Whether a reduction of `count` elements per output takes blocked_sum's two kernels."""
    return (op in ("sum", "mean") and has_double and np.dtype(x_dtype).kind == "f"
            and partials(count) > 1)


@cached
def blocked_sum(op, x_shape, x_dtype, axes, out_dtype):
    """(partials kernel, combine kernel, scratch bytes) of a float `sum` or `mean` of contiguous `x`
    over `axes` in the blocked order: work item (output o, partial j) folds the output's elements j,
    j + P, ... in float64 into scratch[o * P + j]; then one work item per output folds its P partials
    in order and rounds (a mean divides first)."""
    kept_shape, base, outputs, count, red_shape, red_strides = _geometry(x_shape, axes)
    p = partials(count)
    body = [f"  const i64 lt_o = gid / {p}LL;", f"  const i64 lt_j = gid - lt_o * {p}LL;",
            index_code(kept_shape, "lt_o"), base,
            "  double acc = 0;",
            f"  for (i64 lt_k = lt_j; lt_k < {count}LL; lt_k += {p}LL) {{",
            "    i64 lt_q = lt_k; i64 lt_off = lt_base;"]
    for d in range(len(red_shape) - 1, -1, -1):
        body.append(f"    lt_off += (lt_q % {red_shape[d]}LL) * {red_strides[d]}LL; lt_q /= {red_shape[d]}LL;")
    body += ["    const double v = (double)x0[lt_off];",
             "    acc = lt_k == lt_j ? v : acc + v;",
             "  }",
             "  part[gid] = acc;"]
    first = KernelSpec("reduce_partials", [("part", "float64", True), ("x0", x_dtype, False)], (),
                       outputs * p, "\n".join(body))
    result = "(acc + 0.0)" if op == "sum" else f"(acc + 0.0) / (double){count}"  # + 0.0: never -0.0
    combine = [f"  const double* lt_p = part + gid * {p}LL;", "  double acc = lt_p[0];",
               f"  for (i64 j = 1; j < {p}LL; ++j) acc = acc + lt_p[j];",
               f"  y[gid] = ({ctype(out_dtype)})({result});"]
    second = KernelSpec(f"reduce_{op}_partials", [("y", out_dtype, True), ("part", "float64", False)], (),
                        outputs, "\n".join(combine))
    return first, second, outputs * p * 8


def _fold(red_shape, red_strides, sym, value, wide, kahan):
    """Left fold of `value` (an expression of x0[lt_off]) into `acc`, first element as the start."""
    if kahan:  # float-only dialects: compensated sum (products stay plain)
        step = [f"const {wide} v = {value};",
                "if (lt_first) { acc = v; lt_first = false; }",
                "else { const float yk = v - lt_c; const float t = acc + yk; lt_c = (t - acc) - yk; acc = t; }"]
        head = f"  {wide} acc = 0; float lt_c = 0; bool lt_first = true;"
    elif sym == "+" and len(red_shape) == 1 and red_shape[0] >= 2 * CHUNK:
        return _chunked_sum(red_shape[0], red_strides[0], value, wide)
    else:
        step = [f"const {wide} v = {value};",
                f"if (lt_first) {{ acc = v; lt_first = false; }} else acc = acc {sym} v;"]
        head = f"  {wide} acc = {0 if sym == '+' else 1}; bool lt_first = true;"
    return [head] + _loops(red_shape, red_strides, "lt_base", step)


CHUNK = 32  # elements a work item loads before it adds them: loads in flight, the adds still in order


def _chunked_sum(count, stride, value, wide):
    """The left fold of `value` over `count` elements `stride` apart, loading CHUNK elements at a time.

    The same additions in the same order as the plain loop, so the same bits; on a GPU one output per
    work item leaves few work items, and a loop that waits for each load in turn is bound by memory
    latency (bench/RESULTS.md, the H200 run), while CHUNK loads in flight wait
    once per chunk."""
    load = f"x0[lt_base + (lt_j + lt_u) * {stride}LL]"
    chunk_value = value.replace("x0[lt_off]", "lt_v[lt_u]")
    return [f"  {wide} acc = 0; i64 lt_j = 0;",
            f"  for (; lt_j + {CHUNK} <= {count}LL; lt_j += {CHUNK}) {{",
            f"    {wide} lt_v[{CHUNK}];",
            "    #pragma unroll",
            f"    for (int lt_u = 0; lt_u < {CHUNK}; ++lt_u) lt_v[lt_u] = ({wide}){load};",
            "    #pragma unroll",
            f"    for (int lt_u = 0; lt_u < {CHUNK}; ++lt_u) {{",
            f"      const {wide} v = {chunk_value};",
            "      acc = lt_j + lt_u == 0 ? v : acc + v;",
            "    }",
            "  }",
            f"  for (; lt_j < {count}LL; ++lt_j) {{",
            f"    const i64 lt_off = lt_base + lt_j * {stride}LL;",
            f"    const {wide} v = {value};",
            "    acc = lt_j == 0 ? v : acc + v;",
            "  }"]


def _float_fold(op, red_shape, red_strides, count, correction, wide, oc, has_double):
    kahan = not has_double
    x = f"({wide})x0[lt_off]"
    # A sum (and so a mean) stores acc + 0: the fold as if started from +0.0, never -0.0, as the reference.
    if op in ("sum", "prod"):
        lines = _fold(red_shape, red_strides, "+" if op == "sum" else "*", x, wide, kahan and op == "sum")
        return lines + [f"  y[gid] = ({oc})({'acc + 0' if op == 'sum' else 'acc'});"]
    if op == "mean":
        lines = _fold(red_shape, red_strides, "+", x, wide, kahan)
        return lines + [f"  y[gid] = ({oc})((acc + 0) / ({wide}){count});"]
    # var / std: the mean by the left fold, then the left fold of squared deviations
    lines = ["  {"] + _fold(red_shape, red_strides, "+", x, wide, kahan)
    lines += [f"  lt_mu = acc / ({wide}){count};", "  }"]
    lines = [f"  {wide} lt_mu;"] + lines
    dev = f"(({wide})x0[lt_off] - lt_mu) * (({wide})x0[lt_off] - lt_mu)"
    lines += _fold(red_shape, red_strides, "+", dev, wide, kahan)
    denom = max(count - correction, 0)
    result = f"acc / ({wide}){denom}"
    if op == "std":
        result = f"lt_sqrt({result})"
    return lines + [f"  y[gid] = ({oc})({result});"]


def _arg(op, red_shape, red_strides, xc, has_nan):
    # Over several axes only "all of them" occurs (the flattened position); over one axis the position
    # along it. Either way it is the row-major count of reduced elements visited so far.
    cmp = ">" if op == "argmax" else "<"
    lines = [f"  {xc} best = 0; i64 best_at = 0; i64 lt_pos = 0; bool lt_nan = false;"]
    lines += _loops(red_shape, red_strides, "lt_base", [
        f"const {xc} v = x0[lt_off];",
        "if (!lt_nan) {",
        "  if (v != v) { best = v; best_at = lt_pos; lt_nan = true; }" if has_nan else "  if (false) {}",
        f"  else if (lt_pos == 0 || v {cmp} best) {{ best = v; best_at = lt_pos; }}",
        "}",
        "++lt_pos;"])
    lines.append("  y[gid] = best_at;")
    return lines
