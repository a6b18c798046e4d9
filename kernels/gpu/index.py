"""Index-driven copies: take (index_select / embedding), take_along (gather) and their scatter-add
gradients, one work item per destination, accumulating in index order: deterministic, no atomics.

Indices are read as i64 and negative ones count from the end. Bounds are checked on the host before
launch when the index has a host copy, as the reference raises; an index computed on the device is
checked by the kernel instead (`device_check`): an out-of-range entry is replaced by 0 and reported
in the status buffer `lt_err` as (tag, value), which the backend reads at its next wait.
"""
import math

import numpy as np

from .elementwise import contiguous_strides, index_code
from .spec import KernelSpec, cached, ctype


def _split(shape, axis):
    pre = math.prod(shape[:axis])
    post = math.prod(shape[axis + 1:])
    return pre, post


def _bound(n, device_check, indent="  "):
    """Code normalizing index `j` (negative counts from the end) and, with device_check, reporting
    and neutralizing an out-of-range one."""
    if not device_check:
        return [f"{indent}if (j < 0) j += {n}LL;"]
    return [f"{indent}const i64 lt_raw = j;", f"{indent}if (j < 0) j += {n}LL;",
            f"{indent}if (j < 0 || j >= {n}LL) {{ lt_err[0] = tag; lt_err[1] = lt_raw; j = 0; }}"]


def _checked(buffers, scalars, device_check):
    if device_check:
        return buffers + [("lt_err", "int64", True)], tuple(scalars) + (("tag", "i"),)
    return buffers, tuple(scalars)


@cached
def take(x_shape, x_dtype, index_size, index_dtype, axis, device_check=False):
    """y[pre, i, post] = x[pre, index[i], post] over (PRE, len(index), POST)."""
    pre, post = _split(x_shape, axis)
    n = int(x_shape[axis])
    body = [index_code((pre, index_size, post)), "  i64 j = (i64)ix[i1];"] + _bound(n, device_check) + [
        f"  y[gid] = x0[(i0 * {n}LL + j) * {post}LL + i2];"]
    buffers, scalars = _checked([("y", x_dtype, True), ("x0", x_dtype, False), ("ix", index_dtype, False)], (),
                                device_check)
    return KernelSpec("take", buffers, scalars, pre * index_size * post, "\n".join(body))


@cached
def scatter_take(shape, dtype, index_size, axis, has_double=True):
    """y = zeros(shape); y[pre, index[i], post] += g[pre, i, post], each destination summing its
    contributions in index order. `order` lists index positions grouped by destination (stable), and
    `starts[r]..starts[r+1]` is destination r's run in it (both built on the host)."""
    pre, post = _split(shape, axis)
    n = int(shape[axis])
    wide = "double" if has_double else "float"
    body = [index_code((pre, n, post)),
            f"  {wide} acc = 0;",
            "  for (i64 q = starts[i1]; q < starts[i1 + 1]; ++q) {",
            f"    acc = acc + ({wide})g[(i0 * {index_size}LL + order[q]) * {post}LL + i2];",
            "  }",
            f"  y[gid] = ({ctype(dtype)})acc;"]
    buffers = [("y", dtype, True), ("g", dtype, False), ("order", "int64", False), ("starts", "int64", False)]
    return KernelSpec("scatter_take", buffers, (), pre * n * post, "\n".join(body))


def _bstrides(shape, out_shape):
    st = contiguous_strides(shape)
    return tuple(0 if shape[d] == 1 and out_shape[d] != 1 else st[d] for d in range(len(out_shape)))


@cached
def take_along(x_shape, x_dtype, index_shape, index_dtype, out_shape, axis, device_check=False):
    """y[c] = x[c with c[axis] = index[c]] (index and x broadcast to `out_shape` off the axis)."""
    r = len(out_shape)
    xs, ist = _bstrides(x_shape, out_shape), _bstrides(index_shape, out_shape)
    n = int(x_shape[axis])
    x_terms = [f"i{d} * {xs[d]}LL" for d in range(r) if d != axis and xs[d]] + [f"j * {xs[axis]}LL"]
    i_terms = [f"i{d} * {ist[d]}LL" for d in range(r) if ist[d]] or ["0"]
    body = [index_code(out_shape), f"  i64 j = (i64)ix[{' + '.join(i_terms)}];"] + _bound(n, device_check) + [
        f"  y[gid] = x0[{' + '.join(x_terms)}];"]
    buffers, scalars = _checked([("y", x_dtype, True), ("x0", x_dtype, False), ("ix", index_dtype, False)], (),
                                device_check)
    return KernelSpec("take_along", buffers, scalars, math.prod(out_shape), "\n".join(body))


@cached
def scatter_take_along(shape, dtype, g_shape, index_shape, index_dtype, axis, has_double=True,
                       device_check=False):
    """y = zeros(shape); y[c with c[axis] = index[c']] += g[c'] where c' runs over g's positions along
    the axis in order; every dim off the axis must have equal sizes in `shape` and `g_shape`."""
    r = len(shape)
    gs, ist = contiguous_strides(g_shape), _bstrides(index_shape, g_shape)
    n, k = int(shape[axis]), int(g_shape[axis])
    wide = "double" if has_double else "float"
    g_terms = [f"i{d} * {gs[d]}LL" for d in range(r) if d != axis] + [f"p * {gs[axis]}LL"]
    i_terms = [f"i{d} * {ist[d]}LL" for d in range(r) if d != axis and ist[d]] + [f"p * {ist[axis]}LL"]
    body = [index_code(shape),
            f"  {wide} acc = 0;",
            f"  for (i64 p = 0; p < {k}LL; ++p) {{",
            f"    i64 j = (i64)ix[{' + '.join(i_terms)}];"] + _bound(n, device_check, "    ") + [
            f"    if (j == i{axis}) acc = acc + ({wide})g[{' + '.join(g_terms)}];",
            "  }",
            f"  y[gid] = ({ctype(dtype)})acc;"]
    buffers, scalars = _checked([("y", dtype, True), ("g", dtype, False), ("ix", index_dtype, False)], (),
                                device_check)
    return KernelSpec("scatter_take_along", buffers, scalars, math.prod(shape),
                      "\n".join(body))


def group_by_destination(index, size):
    """(order, starts) for scatter_take: positions of the flattened index sorted stably by destination,
    and each destination's start in that order (length size + 1)."""
    idx = np.asarray(index, dtype=np.int64).reshape(-1)
    idx = np.where(idx < 0, idx + size, idx)
    order = np.argsort(idx, kind="stable").astype(np.int64)
    starts = np.searchsorted(idx[order], np.arange(size + 1), side="left").astype(np.int64)
    return order, starts
