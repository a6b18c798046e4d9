"""Softmax, log-softmax and their gradients along one axis: one work item per row (kernels/reference/
softmax.py is the definition). Each step is the elementwise expression the op has as a node (same
widening and rounding), each sum the float64 left fold the reduction kernel does, so the result is
what the composite graph computes on the device. Needs float64 (the folds and transcendentals).
"""
import math

import numpy as np

from .. import ops
from .elementwise import contiguous_strides, expression, index_code, offset_code
from .spec import KernelSpec, cached, ctype

OPS = ops.names(family="softmax") & ops.with_kernel("device")


def _loop(n, stride, body):
    return [f"  for (i64 k = 0; k < {n}LL; ++k) {{", f"    const i64 at = lt_base + k * {stride}LL;"] + \
        [f"    {line}" for line in body] + ["  }"]


def _fold(n, stride, value):
    """`acc` = the float64 left fold of `value` (an expression of `at`) along the row."""
    return ["  double acc = 0; bool lt_first = true;"] + _loop(n, stride, [
        f"const double v = (double)({value});",
        "if (lt_first) { acc = v; lt_first = false; } else acc = acc + v;"])


@cached
def along_axis(op, shape, axis, dtype):
    """The kernel computing `op` along `axis` of contiguous operands of `shape` into a contiguous result
    (inputs: x for softmax/log_softmax; y then g for the gradients)."""
    shape, dt = tuple(int(n) for n in shape), np.dtype(dtype)
    c = ctype(dt)
    strides = contiguous_strides(shape)
    n, stride = shape[axis], strides[axis]
    kept = [d for d in range(len(shape)) if d != axis]
    rows = math.prod([shape[d] for d in kept])
    dts = [dt, dt]

    def ew(name, *args):
        return expression(name, dts[:len(args)], dt, list(args))
    body = [index_code(tuple(shape[d] for d in kept)),
            f"  const i64 lt_base = {offset_code(0, [strides[d] for d in kept])};"]
    if op in ("softmax", "log_softmax"):
        # the row's amax as the reduction kernel has it: NaN propagates
        body += [f"  {c} m = x0[lt_base];"] + _loop(n, stride, [
            f"const {c} v = x0[at];", "if (!(m != m) && (v != v || v > m)) m = v;"])
        shifted = ew("sub", "x0[at]", "m")
        if op == "softmax":
            body += _loop(n, stride, [f"y[at] = {ew('exp', shifted)};"])
            body += _fold(n, stride, "y[at]")
            body += [f"  const {c} total = ({c})acc;"]
            body += _loop(n, stride, [f"y[at] = {ew('div', 'y[at]', 'total')};"])
        else:
            body += _fold(n, stride, ew("exp", shifted))
            body += [f"  const {c} total = ({c})acc;", f"  const {c} lse = {ew('log', 'total')};"]
            body += _loop(n, stride, [f"y[at] = {ew('sub', shifted, 'lse')};"])
        buffers = [("y", dt, True), ("x0", dt, False)]
    elif op == "softmax_grad":  # y * (g - sum(g * y))
        body += _fold(n, stride, ew("mul", "g[at]", "x0[at]"))
        body += [f"  const {c} s = ({c})acc;"]
        body += _loop(n, stride, [f"y[at] = {ew('mul', 'x0[at]', ew('sub', 'g[at]', 's'))};"])
        buffers = [("y", dt, True), ("x0", dt, False), ("g", dt, False)]
    elif op == "log_softmax_grad":  # g - exp(y) * sum(g)
        body += _fold(n, stride, "g[at]")
        body += [f"  const {c} s = ({c})acc;"]
        body += _loop(n, stride, [f"y[at] = {ew('sub', 'g[at]', ew('mul', ew('exp', 'x0[at]'), 's'))};"])
        buffers = [("y", dt, True), ("x0", dt, False), ("g", dt, False)]
    else:
        raise ValueError(f"along_axis: unknown op {op!r}")
    return KernelSpec(op, buffers, (), rows, "\n".join(body))
