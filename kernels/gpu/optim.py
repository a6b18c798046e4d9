"""The fused AdamW update, in the reference's float64 operation order (kernels/reference/optim.py), and
clip_grad_norm_'s sum of squares."""
from .elementwise import expression
from .spec import KernelSpec, cached, ctype


@cached
def adamw(n, dtype, beta1, beta2, eps, weight_decay):
    """Reads p, g, m, v (n each) and the runtime scalars lr, bias1, bias2; writes (p', m', v') stacked."""
    c = ctype(dtype)
    b1, b2, eps, wd = (repr(float(v)) for v in (beta1, beta2, eps, weight_decay))
    one_b1, one_b2 = repr(1.0 - float(beta1)), repr(1.0 - float(beta2))
    body = ["  const double g64 = (double)g[gid];",
            f"  const double m64 = {b1} * (double)m[gid] + {one_b1} * g64;",
            f"  const double v64 = {b2} * (double)v[gid] + {one_b2} * (g64 * g64);",
            f"  double p64 = (double)p[gid] * (1.0 - lr * {wd});",
            f"  p64 = p64 - (lr / bias1) * (m64 / (sqrt(v64) / sqrt(bias2) + {eps}));",
            f"  y[gid] = ({c})p64;",
            f"  y[{n}LL + gid] = ({c})m64;",
            f"  y[{2 * n}LL + gid] = ({c})v64;"]
    buffers = [("y", dtype, True), ("p", dtype, False), ("g", dtype, False), ("m", dtype, False),
               ("v", dtype, False)]
    return KernelSpec("adamw", buffers, (("lr", "f"), ("bias1", "f"), ("bias2", "f")), n, "\n".join(body))


@cached
def sum_of_squares(sizes, dtype):
    """One work item folding each input's squares (float64 left fold, rounded) and adding the partial
    totals in the dtype, as the reference does; serial, like the device's full-tensor sums."""
    c = ctype(dtype)
    square = expression("mul", [dtype, dtype], dtype, ["x[k]", "x[k]"])
    body = [f"  {c} total = 0;"]
    add = expression("add", [dtype, dtype], dtype, ["total", "s"])
    for i, n in enumerate(sizes):
        body += ["  {", f"    const {c}* __restrict__ x = x{i};", "    double acc = 0;",
                 f"    for (i64 k = 0; k < {n}LL; ++k)",
                 f"      acc = k == 0 ? (double){square} : acc + (double){square};",
                 f"    const {c} s = ({c})acc;",
                 "    total = s;" if i == 0 else f"    total = {add};",
                 "  }"]
    body.append("  y[0] = total;")
    buffers = [("y", dtype, True)] + [(f"x{i}", dtype, False) for i in range(len(sizes))]
    return KernelSpec("sum_of_squares", buffers, (), 1, "\n".join(body))
