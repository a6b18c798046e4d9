"""Layer normalization over trailing axes and its gradient: one work item per row
(kernels/reference/layer_norm.py is the definition). Each step is the elementwise expression the op
has as a node, each mean the float64 left fold divided by the count, so the result is the
reference's, bit for bit. Needs float64 (the folds).
"""
import numpy as np

from .. import ops
from .elementwise import expression
from .spec import KernelSpec, cached, ctype

OPS = ops.names(family="layer_norm") & ops.with_kernel("device")


def _mean(name, n, value):
    """`name` = mean of `value` (an expression of `at`) over the row, rounded like a mean node."""
    return [f"  double {name}_acc = 0;",
            f"  for (i64 k = 0; k < {n}LL; ++k) {{",
            "    const i64 at = lt_base + k;",
            f"    const double v = (double)({value});",
            f"    {name}_acc = k == 0 ? v : {name}_acc + v;",
            "  }"]


def _loop(n, body):
    return [f"  for (i64 k = 0; k < {n}LL; ++k) {{", "    const i64 at = lt_base + k;"] + \
        [f"    {line}" for line in body] + ["  }"]


@cached
def rows(op, n_rows, n, dtype, eps):
    """The kernel for `op` over `n_rows` contiguous rows of `n` elements (inputs: x, and g for the
    gradient); eps is baked in, rounded to the dtype as a Python number operand would be."""
    dt = np.dtype(dtype)
    c = ctype(dt)

    def ew(name, *args):
        return expression(name, [dt] * len(args), dt, list(args))
    eps_lit = repr(float(dt.type(eps)))
    body = [f"  const i64 lt_base = gid * {n}LL;"]
    body += _mean("mu", n, "x0[at]")
    body += [f"  const {c} mu = ({c})(mu_acc / (double){n});"]
    cexpr = ew("sub", "x0[at]", "mu")
    body += _mean("var", n, ew("mul", f"(({c}){cexpr})", f"(({c}){cexpr})"))
    body += [f"  const {c} var = ({c})(var_acc / (double){n});",
             f"  const {c} r = {ew('rsqrt', ew('add', 'var', f'({c}){eps_lit}'))};"]
    xhat = ew("mul", cexpr, "r")
    if op == "layer_norm":
        body += _loop(n, [f"y[at] = {xhat};"])
        buffers = [("y", dt, True), ("x0", dt, False)]
    elif op == "layer_norm_grad":
        body += _mean("a", n, "g[at]")
        body += [f"  const {c} a = ({c})(a_acc / (double){n});"]
        body += _mean("b", n, ew("mul", "g[at]", xhat))
        body += [f"  const {c} b = ({c})(b_acc / (double){n});"]
        dx = ew("mul", ew("sub", ew("sub", "g[at]", "a"), ew("mul", "xh", "b")), "r")
        body += _loop(n, [f"const {c} xh = {xhat};", f"y[at] = {dx};"])
        buffers = [("y", dt, True), ("x0", dt, False), ("g", dt, False)]
    else:
        raise ValueError(f"layer_norm.rows: unknown op {op!r}")
    return KernelSpec(op, buffers, (), n_rows, "\n".join(body))
