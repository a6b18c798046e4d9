"""The numba backend: compiled CPU kernels for the ops where NumPy is slow.

It takes float32 products of 2^18 to 2^25 multiply-adds with a rank-2 right operand and runs them in
BLIS where BLIS is this machine's faster library at those sizes (kernels/cpu/gemm.py: it is on some
CPUs, not on others; measured once per machine). With more than one CPU thread (runtime/parallel.py),
the kernels run pieces of their rows side by side on numba's threads, and it also takes the large
float matrix products, cut by rows (or batch) into one-thread calls of NumPy's OpenBLAS run the same
way (kernels/cpu/blas.py), since OpenBLAS's own threads would fight numba's.

At any size it accepts float32/float64 sum/mean/var/std reductions (bit-identical to the reference: the
same folds, blocked ones included), layer_norm and its gradient (bit-identical), the random fills (the
reference's transforms over compiled Philox words: the same bits), the AdamW update and clip_grad_norm_'s
sum of squares (bit-identical), the scatter-adds of index_select/embedding and gather (take_along)
gradients (bit-identical: index order, float64; NumPy's np.add.at costs more than a compiled call at
every size) and fused elementwise and row groups (runtime/fusion.py; with the batched products they read,
and bias adds with their products, where those products would be cut in pieces: the same BLAS calls; a
tree only a sum over its leading axes reads, folded into those column sums as it is made; a batched
product whose consumer views it permuted is written in that layout, its node's `layout`), a convolution's
output and input gradient image by image (products: the tolerance class). From `MIN_ELEMENTS` up:
amax/amin (bit-identical: exact; a zero or NaN result defers to NumPy), softmax/log_softmax and their
gradients along any axis (one kernel each, within a few units of the reference: exp and log; the gradient
of softmax is bit-identical), erf (may differ from the reference in the last unit: libm's exp vs NumPy's
in float64, for float32 values erf_in_float32, computed in float32 eight lanes wide: within one unit),
im2col and col2im (bit-identical: the same copies and sums in the same order), place_slices (the gradient
of a split or q/k/v: copies, a large transposed piece in tiles on several threads).
Everything else goes on down the chain to the NumPy backend.
"""
import functools
import math

import numpy as np

from ...kernels.cpu import blas
from ...kernels.cpu import conv as cpu_conv
from ...kernels.cpu import fused as cpu_fused
from ...kernels.cpu import gemm
from ...kernels.cpu import host_cache
from ...kernels.cpu import index as cpu_index
from ...kernels.cpu import layer_norm as cpu_layer_norm
from ...kernels.cpu import movement as cpu_movement
from ...kernels.cpu import optim as cpu_optim
from ...kernels.cpu import philox as cpu_philox
from ...kernels.cpu import reduce as cpu_reduce
from ...kernels.cpu import softmax as cpu_softmax
from ...kernels.cpu import special as cpu_special
from ...kernels.cpu import special32 as cpu_special32
from ...kernels.cpu import window as cpu_window
from ...kernels.cpu.fused_rows import OUT, trailing
from ...kernels import ops
from ...kernels.reference import KERNELS
from ...kernels.reference.optim import side_by_side
from .. import fusion, parallel
from .base import HostBackend

MIN_ELEMENTS = 8192  # below this, a compiled call's dispatch costs more than NumPy's temporaries save
# except for these folds, whose compiled call costs less than the reference's at every size, with the
# same bytes, so they are taken at any size; so are layer norm, its gradient and the random fills (the
# same bytes too), whose references are chains of NumPy calls (bench/RESULTS.md, the 'Standalone
# measurements' of the small-work and of the decode-loop changes)
_FOLDS = frozenset({"sum", "mean", "var", "std"})
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_LAYER_NORM = ops.names(family="layer_norm")
_SOFTMAX = ops.names(family="softmax")
_RANDOM = ops.names(family="random")
_ADAMW = frozenset({"adamw", "adamw_many"})
_WINDOW = frozenset({"im2col", "col2im"})
_CONV = frozenset({"conv_product", "conv_input_grad"})


def _sum(node, x):
    """`node`'s float sum of `x`: the blocked float64 folds, never -0.0, rounded once."""
    wide = cpu_reduce.fold_sum(x, node.attrs["axes"], parallel.pieces, blocked=True) + 0.0
    return wide.astype(node.dtype).reshape(node.shape)


def _count(shape, axes):
    n = 1
    for d in axes:
        n *= shape[d]
    return n


@functools.lru_cache(maxsize=1024)  # asked for every product, in accepts and again in launch
def _matmul_route(a_shape, b_shape, out_shape, a_dtype, b_dtype, dtype, blas_choice):
    """How this backend computes a product of these operands (`blas_choice`: gemm.host_blas()):
    ("blis",) whole on this thread; ("split", items, work per item, cblas library, whole) in pieces of
    rows under a rank-2 weight, else of the batch, when `parallel.pieces` cuts them, and as one piece
    where `whole` (MKL's products: faster than NumPy's on one thread too); None: not taken."""
    if dtype not in _FLOATS or a_dtype != dtype or b_dtype != dtype or 0 in out_shape:
        return None
    if len(a_shape) < 2 or len(b_shape) < 2:
        return None
    if len(b_shape) != 2 and a_shape[:-2] != b_shape[:-2]:
        return None  # only a stacked activation under a rank-2 weight, or equal batches, cut in pieces
    size = math.prod(out_shape)
    n = out_shape[-1]
    if len(b_shape) == 2 and gemm.prefers_blis(size // n, a_shape[-1], n, dtype, blas_choice):
        return ("blis",)
    library = gemm.gemm_library(dtype, blas_choice)
    if a_shape[-1] == 0 or library is None:
        return None
    whole = blas_choice == "mkl"
    if len(b_shape) == 2:
        return ("split", size // n, a_shape[-1] * n, library, whole)
    per_batch = out_shape[-2] * n
    return ("split", size // per_batch, per_batch * a_shape[-1], library, whole)


def _route(node, a, b):
    return _matmul_route(a.shape, b.shape, node.shape, a.dtype, b.dtype, node.dtype, gemm.host_blas())


def _split_matmul(route, node, a, b):
    """The product through BLIS where kernels/cpu/gemm.py prefers it (whole, on this thread), else in
    pieces of rows (or of the batch) side by side on numba's threads, each a one-thread call of NumPy's
    OpenBLAS or of MKL where chosen (kernels/cpu/blas.py). The same products as the reference, possibly
    rounded differently (another library, or another blocking for a smaller piece: matmul is in the
    tolerance class)."""
    out = _product_out(node, len(b.shape) != 2)
    k = a.shape[-1]
    if route[0] == "blis":
        gemm.matmul_into(a.reshape(-1, k), b, out.reshape(-1, out.shape[-1]))
        return out
    _, items, work, library, _ = route
    bounds = parallel.pieces(items, work)
    if bounds is None:  # one piece: MKL's on one thread, or a replay on one thread of a step captured on several
        bounds = np.array([0, items], np.int64)
    if len(b.shape) == 2:
        a = a.reshape(-1, k)
        if route[4] and _swapped_faster(a, b):
            return _matmul_swapped(a, b, out, library)
        blas.matmul_rows(a, b, out.reshape(-1, out.shape[-1]), bounds, library)
    else:
        blas.matmul_batches(a, b, out, bounds, library)
    return out


def _swapped_faster(a, b):
    """Whether MKL computes a @ b faster as (b.T @ a.T).T: `a` read transposed and `b` not (a weight's
    gradient, dy.T @ x, summed over a long batch of rows) with more rows in the result than columns; with
    fewer rows than columns swapping was slower (bench/RESULTS.md, 'Figures behind the code's choices')."""
    return a.shape[0] > b.shape[1] and blas.layout(a)[1] and not blas.layout(b)[1]


def _matmul_swapped(a, b, out, library):
    """out = a @ b computed as the rows of b.T @ a.T (in pieces of those rows), then copied transposed."""
    m, n = a.shape[0], b.shape[1]
    product = host_cache.empty((n, m), out.dtype)
    bounds = parallel.pieces(n, m * a.shape[1])
    blas.matmul_rows(b.T, a.T, product, np.array([0, n], np.int64) if bounds is None else bounds, library)
    np.copyto(out.reshape(m, n), product.T)
    return out


def _product_out(node, batched):
    """The result array of a product: C-contiguous, or for a batched one whose node names a `layout`
    (the permutation its consumer views it through: lazytensor/shape_ops.py), laid out so that view is
    C-contiguous (head-split attention's products, whose permuted result is then reshaped without a copy)."""
    return blas.product_out(node.shape, node.dtype, node.attrs.get("layout") if batched else None)


class NumbaBackend(HostBackend):
    """Host backend with numba kernels for a few hot ops."""

    name = "numba"
    fuses = True
    fuses_rows = True
    in_pieces = True
    OPS = ops.with_kernel("numba")  # the records that name a numba kernel; fused groups come on their own

    def accepts(self, node, operands):
        if node.op not in self.OPS:
            return False
        if node.op in _RANDOM:
            return True
        if node.op == "matmul":
            route = _route(node, *operands)
            return route is not None and (route[0] == "blis" or route[4]
                                          or parallel.pieces(route[1], route[2]) is not None)
        if node.op in _ADAMW:
            return node.dtype in _FLOATS and all(b.dtype in _FLOATS for b in operands)
        if node.op == "sum_of_squares":
            return node.dtype in _FLOATS and all(b.dtype == node.dtype for b in operands)
        if node.op == "place_slices":
            return (node.dtype in _FLOATS and node.size >= MIN_ELEMENTS
                    and all(b.dtype == node.dtype for b in operands))
        if node.op == "scatter_take":
            g, index = operands
            return node.dtype in _FLOATS and g.dtype == node.dtype and index.dtype.kind == "i"
        if node.op == "scatter_take_along":
            g, index = operands
            axis = node.attrs["axis"]
            return (node.dtype in _FLOATS and g.dtype == node.dtype and index.dtype.kind == "i"
                    and len(g.shape) == len(node.shape) == len(index.shape)
                    and all(d == axis or g.shape[d] == node.shape[d] for d in range(len(g.shape))))
        if node.op in _LAYER_NORM:
            return (node.dtype in _FLOATS
                    and _count(node.shape, node.attrs["axes"]) > 0
                    and all(b.dtype == node.dtype and b.shape == node.shape for b in operands))
        if node.op in _SOFTMAX:  # not bit-identical (exp, log): below the floor, the reference's bytes
            return (node.dtype in _FLOATS and node.size >= MIN_ELEMENTS
                    and all(b.dtype == node.dtype and b.shape == node.shape for b in operands))
        if node.op in _WINDOW:
            return node.dtype in _FLOATS and operands[0].dtype == node.dtype and node.size >= MIN_ELEMENTS
        if node.op in _CONV:  # products by address in NumPy's OpenBLAS
            return (node.dtype in _FLOATS and all(b.dtype == node.dtype for b in operands)
                    and blas.gemm_address(node.dtype) is not None)
        if len(operands) != 1:
            return False
        x = operands[0]
        if x.dtype not in _FLOATS or node.dtype not in _FLOATS:
            return False
        size = 1
        for d in x.shape:
            size *= d
        if size < MIN_ELEMENTS and node.op not in _FOLDS:
            return False
        if node.op == "erf":
            return True
        return _count(x.shape, node.attrs["axes"]) > 0 and node.size > 0

    def prepared(self, node, dtypes=None):
        if node.op == "sum":  # _compute's sum, without its walk through the other ops
            return lambda x: _sum(node, x)
        if node.op != "matmul":
            return lambda *args: self._compute(node, args)
        route = []  # a replay's operands have the shapes of the capture's: the route is worked out once

        def product(a, b):
            if not route:
                route.append(_route(node, a, b))
            return _split_matmul(route[0], node, a, b)
        return product

    def launch(self, node, args):
        return self._compute(node, args)

    def _compute(self, node, args):
        if node.op in _RANDOM:  # the reference's transforms over the compiled generator's words
            return KERNELS[node.op](node.attrs, lambda seed, stream, n: cpu_philox.words(seed, stream, n,
                                                                                         parallel.pieces))
        if node.op == "matmul":
            return _split_matmul(_route(node, *args), node, *args)
        if node.op == "adamw":
            return self._adamw(node, args[:4], args[4:]).reshape(node.shape)
        if node.op == "adamw_many":  # the parameters' values side by side, then one launch
            k = node.attrs["count"]
            return self._adamw(node, side_by_side(args[:4 * k], k), args[4 * k:])
        if node.op == "sum_of_squares":
            return cpu_reduce.sum_of_squares(args, node.dtype)
        if node.op == "scatter_take":
            return self._scatter_take(node, *args)
        if node.op == "scatter_take_along":
            return self._scatter_take_along(node, *args)
        if node.op == "place_slices":
            return cpu_movement.place_slices(node.shape, node.dtype, node.attrs["slices"], args, parallel.pieces)
        if node.op in _LAYER_NORM:
            return cpu_layer_norm.run(node.op, node.attrs["axes"], node.attrs["eps"], args, node.dtype,
                                      parallel.pieces)
        if node.op in _SOFTMAX:
            return cpu_softmax.run(node.op, node.attrs["axis"], args, node.dtype, parallel.pieces)
        if node.op == "im2col":
            return cpu_window.im2col(node.attrs, args[0], node.shape, parallel.pieces)
        if node.op == "col2im":
            return cpu_window.col2im(node.attrs, args[0], parallel.pieces)
        if node.op == "conv_product":
            return cpu_conv.conv_product(node.attrs, args[1], args[2], parallel.pieces, blas.gemm_address(node.dtype))
        if node.op == "conv_input_grad":
            return cpu_conv.conv_input_grad(node.attrs, args[0], args[1], parallel.pieces,
                                            blas.gemm_address(node.dtype))
        x = args[0]
        if node.op == "erf":
            out = host_cache.empty(node.shape, node.dtype)
            flat, dest = np.ascontiguousarray(x).reshape(-1), out.reshape(-1)
            if x.dtype == np.float32 and node.dtype == np.float32:
                whole, in_pieces = cpu_special32.erf_into_float32, cpu_special32.erf_into_float32_in_pieces
            else:
                whole, in_pieces = cpu_special.erf_into, cpu_special.erf_into_in_pieces
            bounds = parallel.pieces(flat.shape[0], 16)
            if bounds is None:
                whole(flat, dest)
            else:
                in_pieces(flat, dest, bounds)
            return out
        attrs = node.attrs
        axes = attrs["axes"]
        if node.op in ("amax", "amin"):
            out = cpu_reduce.extreme(x, axes, node.op == "amax", parallel.pieces)
            if out is None:  # a zero or NaN came out: the reference picks which one, by position
                return KERNELS[node.op](attrs, x)
            return out.astype(node.dtype, copy=False).reshape(node.shape)
        if node.op == "sum":
            return _sum(node, x)
        n = _count(x.shape, axes)
        # sums and means block long folds; a variance's mean is the plain left fold
        mean = (cpu_reduce.fold_sum(x, axes, parallel.pieces, blocked=node.op == "mean") + 0.0) / n
        if node.op == "mean":
            wide = mean
        else:
            with np.errstate(all="ignore"):
                wide = cpu_reduce.fold_sq_dev(x, axes, mean) / max(n - attrs["correction"], 0)
                if node.op == "std":
                    wide = np.sqrt(wide)
        return wide.astype(node.dtype).reshape(node.shape)

    def _adamw(self, node, values, scalars):
        """The (3, n) update of the values (p, g, m, v) with scalars (lr, bias1, bias2[, scale])."""
        lr, bias1, bias2 = scalars[:3]
        scale = scalars[3][()] if len(scalars) > 3 else values[1].dtype.type(1)  # a 0-d array's value, its dtype
        a = node.attrs
        lr, bias1, bias2 = float(lr), float(bias1), float(bias2)
        p, g, m, v = [np.ascontiguousarray(t).reshape(-1) for t in values]
        out = host_cache.empty((3, p.size), node.dtype)
        flat = (p, g, scale, m, v)
        consts = (a["beta1"], a["beta2"], a["eps"], 1.0 - lr * a["weight_decay"], lr / bias1,
                  float(np.sqrt(bias2)))
        bounds = parallel.pieces(p.size, 8)
        if bounds is None:
            cpu_optim.adamw_into(*flat, out, *consts, 0, p.size)
        else:
            cpu_optim.adamw_into_in_pieces(*flat, out, *consts, bounds)
        return out

    def _scatter_take(self, node, g, index):
        axis, shape = node.attrs["axis"], node.attrs["shape"]
        pre = math.prod(shape[:axis])
        post = math.prod(shape[axis + 1:])
        acc = np.zeros((pre, shape[axis], post), np.float64)
        flat = np.ascontiguousarray(index, dtype=np.int64).reshape(-1)
        cpu_index.scatter_rows_into(acc, np.ascontiguousarray(g).reshape(pre, flat.shape[0], post), flat)
        return acc.astype(node.dtype).reshape(shape)

    def _scatter_take_along(self, node, g, index):
        axis, shape = node.attrs["axis"], node.attrs["shape"]
        pre = math.prod(shape[:axis])
        post = math.prod(shape[axis + 1:])
        out = host_cache.zeros(shape, node.dtype)
        k = g.shape[axis]
        index = np.broadcast_to(index, g.shape).reshape(pre, k, post)  # a copy only where it broadcast
        g = np.ascontiguousarray(g).reshape(pre, k, post)
        cpu_index.scatter_along_into(out.reshape(pre, shape[axis], post), g, index.astype(np.int64, copy=False))
        return out

    def can_fuse(self, recipe, root, shapes):
        if fusion.product_recipe(recipe):  # a bias add with its product: where the product runs in pieces
            route = self._product_route(root, shapes)
            return route is not None and route[0] == "split"
        libraries = {self._head_library(recipe, n, root, shapes) for n in fusion.head_products(recipe)}
        libraries |= {self._trailing_library(spec, root, shapes) for spec in trailing(recipe)}
        return None not in libraries and len(libraries) <= 1

    @staticmethod
    def _trailing_library(spec, root, shapes):
        """The BLAS library computing a row group's trailing product a matrix at a time (the library the
        batched product alone would be split over), or None."""
        a, b = (root.shape if k == OUT else tuple(shapes[k]) for k in spec[:2])
        out = root.shape[:-2] + (a[-2], b[-1])
        route = _matmul_route(tuple(a), tuple(b), out, root.dtype, root.dtype, root.dtype, gemm.host_blas())
        return route[3] if route is not None and route[0] == "split" else None

    @staticmethod
    def _head_library(recipe, n, root, shapes):
        """The BLAS library computing product instruction `n` of a row group a matrix at a time (the
        library a batched product of these operands would be split over), or None."""
        instrs = recipe[1]
        a, b = (shapes[instrs[k][1]] for k in instrs[n][2:])
        route = _matmul_route(tuple(a), tuple(b), root.shape, root.dtype, root.dtype, root.dtype, gemm.host_blas())
        return route[3] if route is not None and route[0] == "split" else None

    @staticmethod
    def _product_route(root, shapes):
        x, w = shapes[:2]
        return _matmul_route(tuple(x), tuple(w), root.shape, root.dtype, root.dtype, root.dtype, gemm.host_blas())

    def prepared_fused(self, recipe, root, shapes):
        if fusion.product_recipe(recipe) or fusion.head_products(recipe):
            return None
        return cpu_fused.prepared(recipe, root.shape, root.dtype, shapes, parallel.pieces)

    def launch_fused(self, recipe, root, arrays, params):
        """Run a generated elementwise or row kernel (runtime/fusion.py) producing `root`'s value (its
        batched products computed a matrix at a time inside it), or a bias add with its product: the bias
        added to each block of the product's rows while it is in cache."""
        if fusion.product_recipe(recipe):
            x, w, bias = arrays
            _, items, work, library, _ = self._product_route(root, [x.shape, w.shape])
            bounds = parallel.pieces(items, work)
            if bounds is None:
                bounds = np.array([0, items], np.int64)
            out = host_cache.empty(root.shape, root.dtype)
            k = x.shape[-1]
            blas.matmul_rows_bias(x.reshape(-1, k), w, np.ascontiguousarray(bias), out.reshape(-1, out.shape[-1]),
                                  bounds, library)
            return out
        heads = fusion.head_products(recipe)
        library = self._head_library(recipe, heads[0], root, [a.shape for a in arrays]) if heads else None
        return cpu_fused.run(recipe, root.shape, root.dtype, arrays, params, parallel.pieces, library)
