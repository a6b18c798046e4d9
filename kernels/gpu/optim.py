"""The fused AdamW update, in the reference's float64 operation order (kernels/reference/optim.py)."""
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
