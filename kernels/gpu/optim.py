"""The fused AdamW update, in the reference's float64 operation order (kernels/reference/optim.py), and
clip_grad_norm_'s sum of squares (strided partials in parallel, then one work item combining them)."""
from ..reference.reduce import partials
from .elementwise import expression
from .reduce import CHUNK
from .spec import KernelSpec, cached, ctype


def _adamw_body(dtype, beta1, beta2, eps, weight_decay, scale, stores):
    c = ctype(dtype)
    b1, b2, eps, wd = (repr(float(v)) for v in (beta1, beta2, eps, weight_decay))
    one_b1, one_b2 = repr(1.0 - float(beta1)), repr(1.0 - float(beta2))
    # the gradient times its 0-d factor, rounded to the dtype (the bytes of a mul node)
    gradient = {None: "g[gid]", "buffer": f"({c})(g[gid] * s[0])", "scalar": f"({c})(g[gid] * ({c})s)"}[scale]
    return "\n".join([f"  const double g64 = (double){gradient};",
                      f"  const double m64 = {b1} * (double)m[gid] + {one_b1} * g64;",
                      f"  const double v64 = {b2} * (double)v[gid] + {one_b2} * (g64 * g64);",
                      f"  double p64 = (double)p[gid] * (1.0 - lr * {wd});",
                      f"  p64 = p64 - (lr / bias1) * (m64 / (sqrt(v64) / sqrt(bias2) + {eps}));"]
                     + [f"  {target} = ({c}){value};" for target, value in stores])


_INPUTS = ("p", "g", "m", "v")
_SCALARS = (("lr", "f"), ("bias1", "f"), ("bias2", "f"))


def _inputs(dtype, scale):
    return [(name, dtype, False) for name in _INPUTS + (("s",) if scale == "buffer" else ())]


def _scalars(scale):
    return _SCALARS + ((("s", "f"),) if scale == "scalar" else ())


@cached
def adamw(n, dtype, beta1, beta2, eps, weight_decay, scale=None):
    """Reads p, g, m, v (n each) and the runtime scalars lr, bias1, bias2; writes (p', m', v') stacked.
    `scale`: None, or where the gradient's 0-d factor s comes from ("buffer" after v, "scalar" after
    bias2)."""
    body = _adamw_body(dtype, beta1, beta2, eps, weight_decay, scale,
                       [("y[gid]", "p64"), (f"y[{n}LL + gid]", "m64"), (f"y[{2 * n}LL + gid]", "v64")])
    return KernelSpec("adamw", [("y", dtype, True)] + _inputs(dtype, scale), _scalars(scale), n, body)


@cached
def adamw_in_place(n, dtype, beta1, beta2, eps, weight_decay, scale=None):
    """The same update writing p', m', v' to three buffers of their own, which may be p, m and v
    themselves: each work item reads its elements of p, m, v before it writes them (a compiled replay
    updating the optimizer state in place, runtime/replay/device_runner.py). The same bytes as `adamw`."""
    body = _adamw_body(dtype, beta1, beta2, eps, weight_decay, scale,
                       [("yp[gid]", "p64"), ("ym[gid]", "m64"), ("yv[gid]", "v64")])
    buffers = [(name, dtype, True) for name in ("yp", "ym", "yv")] + _inputs(dtype, scale)
    return KernelSpec("adamw_in_place", buffers, _scalars(scale), n, body, aliased=True)


def _chunked_squares(c, square, n, p):
    """The partial's first whole chunks of CHUNK elements, all loaded before they are added in order
    (the loads in flight at once; the same additions, so the same bits: kernels/gpu/reduce.py)."""
    if n < 2 * CHUNK * p:
        return []
    lanes = square.replace("x[k]", "lt_v[lt_u]")
    return [f"    for (; k + {(CHUNK - 1) * p}LL < {n}LL; k += {CHUNK * p}LL) {{",
            f"      {c} lt_v[{CHUNK}];",
            "      #pragma unroll",
            f"      for (int lt_u = 0; lt_u < {CHUNK}; ++lt_u) lt_v[lt_u] = x[k + lt_u * {p}LL];",
            "      #pragma unroll",
            f"      for (int lt_u = 0; lt_u < {CHUNK}; ++lt_u) {{",
            f"        const double sq = (double){lanes};",
            "        acc = k == j && lt_u == 0 ? sq : acc + sq;",
            "      }",
            "    }"]


@cached
def sum_of_squares(sizes, dtype):
    """(partials kernel, combine kernel, scratch bytes) of Σ x_i·x_i over the inputs, as the reference
    computes it: work item (input i, partial j) folds that input's squares j, j + P_i, ... (rounded to
    the dtype) in float64 (P_i = 1: the left fold); then one work item folds each input's partials in
    order, rounds the sum to the dtype and adds the totals left to right in the dtype."""
    c = ctype(dtype)
    square = expression("mul", [dtype, dtype], dtype, ["x[k]", "x[k]"])
    counts = [partials(n) for n in sizes]
    starts = [sum(counts[:i]) for i in range(len(sizes))]
    body = []
    for i, (n, p, start) in enumerate(zip(sizes, counts, starts)):
        head = "if" if i == 0 else "} else if"
        body += [f"  {head} (gid < {start + p}LL) {{",
                 f"    const {c}* __restrict__ x = x{i};",
                 f"    const i64 j = gid - {start}LL;",
                 "    double acc = 0; i64 k = j;",
                 *_chunked_squares(c, square, n, p),
                 f"    for (; k < {n}LL; k += {p}LL)",
                 f"      acc = k == j ? (double){square} : acc + (double){square};",
                 "    part[gid] = acc;"]
    body.append("  }")
    buffers = [("part", "float64", True)] + [(f"x{i}", dtype, False) for i in range(len(sizes))]
    first = KernelSpec("sum_of_squares_partials", buffers, (), sum(counts), "\n".join(body))
    add = expression("add", [dtype, dtype], dtype, ["total", "s"])
    combine = [f"  {c} total = 0;"]
    for i, (p, start) in enumerate(zip(counts, starts)):
        combine += ["  {", f"    double acc = part[{start}LL];",
                    f"    for (i64 j = 1; j < {p}LL; ++j) acc = acc + part[{start}LL + j];",
                    f"    const {c} s = ({c})acc;",
                    "    total = s;" if i == 0 else f"    total = {add};", "  }"]
    combine.append("  y[0] = total;")
    second = KernelSpec("sum_of_squares", [("y", dtype, True), ("part", "float64", False)], (), 1,
                        "\n".join(combine))
    return first, second, sum(counts) * 8
