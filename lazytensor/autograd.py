"""Reverse-mode autodiff over the lazy graph: the walk over the recorded GradFns and every op's rule.

Ops record a GradFn on their output when an input requires grad (lazytensor/grad_mode.py). `backward()`
walks those records (iteratively) and builds lazy gradient nodes; it computes nothing and moves nothing
itself. The rules use Tensor methods, so this module is loaded after the op modules.
"""
import functools
import math

from . import backward_replay
from .creation import ones_like, zeros_like
from .dtypes import bool_
from .elementwise import fresh_operand_scalars, where
from .grad_mode import is_grad_enabled, set_grad_enabled
from .kernels.ops import names
from .recompute import keywords, remade_saved
from .runtime.replay.refusals import BACKWARD, EXPLICIT, refuse
from .tensor import Tensor


class _Pieces:
    """Gradient contributions that are zero-padded reads of disjoint slices (a split, q/k/v): placed by one
    `place_slices` node when the gradient is used, instead of padded one by one and added."""

    def __init__(self, first):
        self.shape, self.dtype = first.shape, first.dtype
        self.parts = [(first._node.attrs["slices"], first._node.inputs[0])]

    def take(self, pg):
        """Add `pg` if it is one more such piece; False if it is not (the caller adds it normally)."""
        if not _is_piece(pg) or pg.shape != self.shape or pg.dtype != self.dtype:
            return False
        slices = pg._node.attrs["slices"]
        if not all(_disjoint(slices, other, self.shape) for other, _ in self.parts):
            return False
        self.parts.append((slices, pg._node.inputs[0]))
        return True

    def tensor(self):
        attrs = {"shape": self.shape, "slices": tuple(s for s, _ in self.parts), "dtype": self.dtype.np}
        pieces = [Tensor(n) for _, n in self.parts]
        return Tensor._from_op("place_slices", pieces, attrs, self.shape, self.dtype)


def _is_piece(t):
    node = t._node
    return node.op == "pad_slice" and node.buffer is None and node.inputs and all(
        (s[2] if len(s) > 2 else 1) in (None, 1) for s in node.attrs["slices"])


def _disjoint(a, b, shape):
    """Whether two unit-step slicings of `shape` read no common element (apart along some dim)."""
    for s, t, n in zip(a, b, shape):
        lo1, hi1, _ = slice(*s).indices(n)
        lo2, hi2, _ = slice(*t).indices(n)
        if hi1 <= lo2 or hi2 <= lo1:
            return True
    return False


def _accumulate(acc, pg, create_graph):
    """acc + pg, gathering disjoint slice gradients into one `place_slices` node (not while building a
    differentiable gradient: place_slices has no gradient of its own)."""
    if not create_graph:
        if isinstance(acc, _Pieces):
            if acc.take(pg):
                return acc
            acc = acc.tensor()
        elif _is_piece(acc) and _is_piece(pg):
            pieces = _Pieces(acc)
            if pieces.take(pg):
                return pieces
    return acc + pg


def _topo(root, stop=()):
    """The tensors whose gradients a backward from `root` needs, inputs first; the walk does not go
    past a tensor whose id is in `stop` (a recomputed record's inputs: lazytensor/recompute.py)."""
    order, seen, stack = [], set(), [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        fn = t._grad_fn
        if fn is not None and id(t) not in stop:
            for p in fn.parents:
                if p.requires_grad and id(p) not in seen:
                    stack.append((p, False))
    return order


_POST_BACKWARD = []


class HookHandle:
    """What register_post_backward_hook returns: `remove()` unregisters the hook."""

    def __init__(self, fn):
        self.fn = fn

    def remove(self):
        if self.fn in _POST_BACKWARD:
            _POST_BACKWARD.remove(self.fn)


def register_post_backward_hook(fn):
    """Call `fn()` after every backward() has accumulated its gradients (data-parallel training
    averages them there); returns a handle whose remove() unregisters it."""
    _POST_BACKWARD.append(fn)
    return HookHandle(fn)


def backward(tensor, gradient=None, retain_graph=None, create_graph=False):
    """Accumulate d(tensor)/d(leaf) into every leaf's .grad, as lazy tensors. As in PyTorch, the graph's
    saved values and inputs are released afterwards unless `retain_graph` (default: `create_graph`), so
    that no record keeps the forward's intermediates alive, and a second backward through released
    records raises. A backward repeating an earlier one's structure makes
    the same nodes from its recording (lazytensor/backward_replay.py)."""
    if not tensor.requires_grad:
        raise RuntimeError("backward(): this tensor does not require grad and has no grad_fn; set "
                           "requires_grad=True on the inputs you want gradients for")
    if gradient is None:
        if tensor.numel() != 1:
            raise RuntimeError(f"backward(): a gradient can be created implicitly only for a single-element "
                               f"output, this one has shape {tensor.shape}; pass gradient=")
    elif not isinstance(gradient, Tensor) or gradient.shape != tensor.shape:
        raise ValueError(f"backward(): gradient must be a tensor of shape {tensor.shape}")
    retain = create_graph if retain_graph is None else retain_graph
    order = _topo(tensor)
    if not create_graph:  # (the rules read the inputs with their history then, not saved values)
        remade_saved(order)
    if gradient is None and not create_graph:
        backward_replay.build(tensor, order, retain, lambda: _by_rules(tensor, order, None, retain, False))
    else:
        refuse(BACKWARD, EXPLICIT)
        _by_rules(tensor, order, gradient, retain, create_graph)
    for hook in list(_POST_BACKWARD):
        hook()


def _by_rules(tensor, order, gradient, retain, create_graph):
    """backward's gradient nodes built by the rules below, over `order` (_topo(tensor))."""
    with set_grad_enabled(create_graph), fresh_operand_scalars():
        implicit = gradient is None
        if implicit:
            gradient = ones_like(tensor)
        _walk(order, {id(tensor): gradient}, set() if implicit else {id(gradient)}, retain, create_graph)


def _walk(order, grads, handed, retain, create_graph, stop=()):
    """Run the rules over `order` from the last tensor back, starting from the gradients in `grads`
    (id -> tensor); leaves get their .grad. The gradients of the tensors whose ids are in `stop` are left
    in `grads` (returned), their records not run. `handed`: ids of gradient tensors someone holds."""
    for t in reversed(order):
        key = id(t)
        if key in stop:
            continue
        g = grads.pop(key, None)
        if g is None:
            continue
        if isinstance(g, _Pieces):
            g = g.tensor()
        fn = t._grad_fn
        if fn is None:
            if t.grad is not None:
                t.grad = t.grad + g
                continue
            if id(g) in handed:  # a rule handed one tensor to several leaves (add's): a handle each
                g = g.detach()
            handed.add(id(g))
            t.grad = g
            continue
        if fn.saved is None:
            raise RuntimeError("backward(): trying to backward through the graph a second time (its saved "
                               "values were released by the first backward); pass retain_graph=True to "
                               "the first backward() if you need to")
        check_saved(fn, t)
        if create_graph:  # differentiate through the gradient: use the tensors with their history
            inputs, out = list(fn.parents), t
        else:
            inputs, out = [Tensor(node) for node in fn.saved], Tensor(fn.out)
        parents = fn.parents
        if not retain:  # released as PyTorch releases saved tensors: the inputs' values can go
            fn.saved = None
            fn.parents = ()
        for parent, pg in zip(parents, RULES[fn.op](inputs, out, fn.attrs, g)):
            if pg is None or not parent.requires_grad:
                continue
            if pg._node.dtype != parent._node.dtype:
                pg = pg.to(parent.dtype)
            key = id(parent)
            grads[key] = pg if key not in grads else _accumulate(grads[key], pg, create_graph)
    return grads


# Which inputs a rule's PyTorch counterpart saves for its gradient, by op: (index, parents) -> saved?
_OTHER_NEEDS = lambda i, ps: ps[1 - i].requires_grad  # noqa: E731 (mul, matmul: each input for the other's)
_SAVED_INPUTS = {"mul": _OTHER_NEEDS, "matmul": _OTHER_NEEDS,
                 "div": lambda i, ps: i == 1 or ps[1].requires_grad,
                 "pow": lambda i, ps: i == 0 or ps[1].requires_grad,
                 **{op: (lambda i, ps: True) for op in ("log", "log1p", "sin", "cos", "abs", "erf")}}


def _replayed(inputs, out, attrs, g):
    raise RuntimeError("backward(): this tensor is a result an lt.jit replay handed back, and a replay keeps no "
                       "gradient history. Call backward inside the compiled function (compile the whole training "
                       "step), or call the forward without lt.jit (lt.compile runs a module's training forward "
                       "uncompiled)")


def check_saved(fn, out):
    """PyTorch's error when a value the record `fn` (of tensor `out`) saved for its gradient was changed in
    place after the op ran: its output (ops that read their result, lazytensor/inplace.py) or an input.
    (The values here are never overwritten, so the gradient would be right; the error keeps a program that
    runs here running under PyTorch.)"""
    if fn.output_changed is not None:
        raise _changed_error(out, f"output 0 of {fn.name}", fn.output_changed, fn.output_changed - 1)
    rule = _SAVED_INPUTS.get(fn.op)
    if rule is None:
        return
    parents = fn.parents
    for i, (p, v) in enumerate(zip(fn._parents, fn.versions)):
        if p._version != v and rule(i, parents):
            raise _changed_error(p, f"input {i} of {fn.name}", p._version, v)


def _changed_error(t, which, now, expected):
    return RuntimeError(f"one of the variables needed for gradient computation has been modified by an inplace "
                        f"operation: [{t.type()} {list(t.shape)}], which is {which}, is at version {now}; expected "
                        f"version {expected} instead. Change a copy (y = y.clone()) or compute it without the "
                        f"in-place method (y = y.mul(2))")


# ---- vector-Jacobian products: (inputs, out, attrs, grad) -> one gradient (or None) per input ----------

def unbroadcast(g, shape):
    """Sum `g` down to `shape` (undo NumPy broadcasting)."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    inner = tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    if lead or inner:
        # summing away only the leading axes gives `shape` itself: no reshape node after the sum
        g = g.sum(dim=tuple(range(lead)) + inner, keepdim=bool(inner))
    return g.reshape(*shape)


def _binary(fn):
    @functools.wraps(fn)
    def vjp(inputs, out, attrs, g):
        a, b = inputs
        ga, gb = fn(a, b, out, g)
        return (None if ga is None else unbroadcast(ga, a.shape), None if gb is None else unbroadcast(gb, b.shape))
    return vjp


def _unary(fn):
    return lambda inputs, out, attrs, g: (fn(inputs[0], out, g),)


def _zero(inputs, out, attrs, g):
    return tuple(None for _ in inputs)


def _pow_grads(a, b, out, g):
    ga = g * b * a ** (b - 1)
    gb = g * out * where((a == 0) & (b >= 0), 0.0, a.log())  # 0 ** b with b >= 0: no slope in b
    return ga, gb


def _max_min_grads(a, b, out, g):
    half = g * 0.5
    ga = where(a == b, half, where(a == out, g, 0.0))
    gb = where(a == b, half, where(b == out, g, 0.0))
    return ga, gb


def _expand_reduced(g, attrs, shape):
    if not attrs["keepdims"]:
        g = g.reshape(*(1 if d in attrs["axes"] else n for d, n in enumerate(shape)))
    return g.broadcast_to(shape)


def _count(shape, axes):
    return math.prod(shape[d] for d in axes)


def _sum(inputs, out, attrs, g):
    return (_expand_reduced(g, attrs, inputs[0].shape),)


def _mean(inputs, out, attrs, g):
    return (_expand_reduced(g, attrs, inputs[0].shape) / _count(inputs[0].shape, attrs["axes"]),)


def _prod(inputs, out, attrs, g):
    (a,) = inputs
    return (_expand_reduced(g * out, attrs, a.shape) / a,)


def _centered(a, attrs):
    return a - a.mean(dim=attrs["axes"], keepdim=True)


def _var(inputs, out, attrs, g):
    (a,) = inputs
    n = _count(a.shape, attrs["axes"]) - attrs["correction"]
    return (_expand_reduced(g, attrs, a.shape) * _centered(a, attrs) * (2.0 / n),)


def _std(inputs, out, attrs, g):
    (a,) = inputs
    n = _count(a.shape, attrs["axes"]) - attrs["correction"]
    return (_expand_reduced(g / out, attrs, a.shape) * _centered(a, attrs) * (1.0 / n),)


def _extreme(inputs, out, attrs, g):
    (a,) = inputs
    kept = _expand_reduced(out, attrs, a.shape)
    mask = (a == kept).to(a.dtype)
    count = mask.sum(dim=attrs["axes"], keepdim=True)
    return (_expand_reduced(g, attrs, a.shape) * mask / count,)


def _matmul(inputs, out, attrs, g):
    a, b = inputs
    if a.ndim == 1 and b.ndim == 1:
        return (g * b, g * a)
    if a.ndim > 2 and b.ndim == 2:
        # A weight shared by every matrix of the stack: its gradient is one product over all rows.
        k, m = b.shape
        return (g @ b.mT, a.reshape(-1, k).mT @ g.reshape(-1, m))
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(-1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = g2.unsqueeze(-2)
    if b.ndim == 1:
        g2 = g2.unsqueeze(-1)
    ga = g2 @ b2.mT
    gb = a2.mT @ g2
    ga = unbroadcast(ga, a2.shape)
    gb = unbroadcast(gb, b2.shape)
    return (ga.reshape(*a.shape), gb.reshape(*b.shape))


def _permute(inputs, out, attrs, g):
    dims = attrs["dims"]
    inverse = [0] * len(dims)
    for i, d in enumerate(dims):
        inverse[d] = i
    return (g.permute(*inverse),)


def _slice(inputs, out, attrs, g):
    (a,) = inputs
    if "squeeze" in attrs:  # the gradient gets back the axes the slice dropped
        g = g.reshape(*(len(range(*slice(*s).indices(n))) for s, n in zip(attrs["slices"], a.shape)))
    return (Tensor._from_op("pad_slice", (g,), {"slices": attrs["slices"], "shape": a.shape}, a.shape, g.dtype),)


def _cat(inputs, out, attrs, g):
    axis, grads, start = attrs["axis"], [], 0
    for t in inputs:
        grads.append(g.narrow(axis, start, t.shape[axis]))
        start += t.shape[axis]
    return tuple(grads)


def _scatter(op):
    def vjp(inputs, out, attrs, g):
        x, *indices = inputs
        gx = Tensor._from_op(op, (g, *indices), {**attrs, "shape": x.shape}, x.shape, g.dtype)
        return (gx,) + tuple(None for _ in indices)
    return vjp


def _scatter_along(inputs, out, attrs, g):
    x, src, index = inputs
    written = Tensor._from_op("scatter_along", (zeros_like(x, dtype=bool_), ones_like(index, dtype=bool_), index),
                              attrs, x.shape, bool_)
    return g.masked_fill(written, 0), g.gather(attrs["axis"], index), None


def _cast(inputs, out, attrs, g):
    (a,) = inputs
    return (g.to(a.dtype) if a.dtype.is_floating_point else None,)


def _where(inputs, out, attrs, g):
    cond, x, y = inputs
    return (None, unbroadcast(g.where(cond, 0.0), x.shape), unbroadcast(_zeros_where(cond, g), y.shape))


def _zeros_where(cond, g):
    return where(cond, 0.0, g)


def _softmax_family(grad_op, composite):
    """One `grad_op` node (kernels/reference/softmax.py) from the output and its gradient; while
    building a differentiable gradient (create_graph), the same formula in ops that have gradients."""
    def vjp(inputs, out, attrs, g):
        if is_grad_enabled():
            return (composite(out, g, attrs["axis"]),)
        return (Tensor._from_op(grad_op, (out, g), attrs, out.shape, out.dtype),)
    return vjp


def _layer_norm(inputs, out, attrs, g):
    """One `layer_norm_grad` node from the input and the gradient; under create_graph, its formula
    (kernels/reference/layer_norm.py) in ops that have gradients."""
    (x,) = inputs
    if not is_grad_enabled():
        return (Tensor._from_op("layer_norm_grad", (x, g), attrs, x.shape, x.dtype),)
    d = attrs["axes"]
    c = x - x.mean(dim=d, keepdim=True)
    r = ((c * c).mean(dim=d, keepdim=True) + attrs["eps"]).rsqrt()
    xhat = c * r
    return (((g - g.mean(dim=d, keepdim=True)) - xhat * (g * xhat).mean(dim=d, keepdim=True)) * r,)


def _conv_product(inputs, out, attrs, g):
    """A convolution's gradients: the weight's one product over every image with the windows, the input's
    one `conv_input_grad` node (under create_graph: col2im of W^T @ g, in ops that have gradients);
    the windows get none of their own (the input's gradient already accounts for them)."""
    x, cols, w = inputs
    G, O = attrs["groups"], w.shape[0]
    N, _, Ho, Wo = g.shape
    groups = (G,) if G > 1 else ()  # one group: 2-D products, which the CPU splits between its threads
    gp = g.permute(1, 0, 2, 3).reshape(*groups, O // G, N * Ho * Wo)
    dw = (gp @ cols.reshape(*groups, -1, N * Ho * Wo).mT).reshape(*w.shape)
    if is_grad_enabled():
        dcols = (w.reshape(*groups, O // G, -1).mT @ gp).reshape(*cols.shape)
        dx = Tensor._from_op("col2im", (dcols,), attrs, x.shape, g.dtype)
    else:
        dx = Tensor._from_op("conv_input_grad", (w, g), attrs, x.shape, g.dtype)
    return (dx, None, dw)


def _recompute(inputs, out, attrs, g):
    """A recomputed record's gradients (lazytensor/recompute.py): its function run again on the saved
    inputs, recording, and that graph differentiated back to them: the nodes recording it op by op
    would have made, made from the inputs instead of from kept intermediates. While building a
    differentiable gradient (create_graph) the function runs on the inputs with their history. A record
    given its own `gradient` formula gets that instead."""
    kwargs = keywords(attrs)
    if "gradient" in attrs:
        return attrs["gradient"](g, *inputs, **kwargs)
    create = is_grad_enabled()
    if not create:
        for x in inputs:  # fresh handles on the saved values (_walk made them for this call)
            x.requires_grad = x.dtype.is_floating_point or x.dtype.is_complex
    with set_grad_enabled(True):
        y = attrs["fn"](*inputs, **kwargs)
    stop = {id(x) for x in inputs}
    if not y.requires_grad:
        return tuple(None for _ in inputs)
    grads = _walk(_topo(y, stop), {id(y): g}, set(), create, create, stop)
    result, given = [], set()
    for x in inputs:
        pg = grads.get(id(x)) if id(x) not in given else None  # an input passed twice gets its gradient once
        given.add(id(x))
        result.append(pg.tensor() if isinstance(pg, _Pieces) else pg)
    return tuple(result)


_SQRT_PI_2 = 2.0 / math.sqrt(math.pi)

VJP = {
    "add": _binary(lambda a, b, out, g: (g, g)),
    # Negate and divide after summing over broadcast dimensions: the same value, but the extra ops then
    # run on the (often much smaller) operand shape instead of the full output.
    "sub": _binary(lambda a, b, out, g: (g, -unbroadcast(g, b.shape))),
    "mul": _binary(lambda a, b, out, g: (g * b, g * a)),
    "div": _binary(lambda a, b, out, g: (g / b, -(unbroadcast(g * out, b.shape) / b))),
    "pow": _binary(_pow_grads),
    "maximum": _binary(_max_min_grads),
    "minimum": _binary(_max_min_grads),
    "floordiv": _binary(lambda a, b, out, g: (None, None)),
    "mod": _binary(lambda a, b, out, g: (g, -g * (a / b).floor())),
    "neg": _unary(lambda a, out, g: -g),
    "abs": _unary(lambda a, out, g: g * a.sign()),
    "sqrt": _unary(lambda a, out, g: g / (out * 2.0)),
    "rsqrt": _unary(lambda a, out, g: g * out * out * out * -0.5),
    "exp": _unary(lambda a, out, g: g * out),
    "expm1": _unary(lambda a, out, g: g * (out + 1.0)),
    "log": _unary(lambda a, out, g: g / a),
    "log1p": _unary(lambda a, out, g: g / (a + 1.0)),
    "tanh": _unary(lambda a, out, g: g * (1.0 - out * out)),
    "sin": _unary(lambda a, out, g: g * a.cos()),
    "cos": _unary(lambda a, out, g: -g * a.sin()),
    "tan": _unary(lambda a, out, g: g * (1.0 + out * out)),
    "asin": _unary(lambda a, out, g: g * (1.0 - a * a).rsqrt()),
    "acos": _unary(lambda a, out, g: -g * (1.0 - a * a).rsqrt()),
    "atan": _unary(lambda a, out, g: g / (1.0 + a * a)),
    "log2": _unary(lambda a, out, g: g / (a * math.log(2.0))),
    "log10": _unary(lambda a, out, g: g / (a * math.log(10.0))),
    "asinh": _unary(lambda a, out, g: g * (a * a + 1.0).rsqrt()),
    "acosh": _unary(lambda a, out, g: g * (a * a - 1.0).rsqrt()),
    "atanh": _unary(lambda a, out, g: g / (1.0 - a * a)),
    "reciprocal": _unary(lambda a, out, g: -g * out * out),
    "atan2": _binary(lambda a, b, out, g: (g * b / (a * a + b * b), -g * a / (a * a + b * b))),
    "hypot": _binary(lambda a, b, out, g: (g * a / out, g * b / out)),
    "logaddexp": _binary(lambda a, b, out, g: (g * (a - out).exp(), g * (b - out).exp())),
    "sinh": _unary(lambda a, out, g: g * a.cosh()),
    "cosh": _unary(lambda a, out, g: g * a.sinh()),
    "erf": _unary(lambda a, out, g: g * (a * a * -1.0).exp() * _SQRT_PI_2),
    "sigmoid": _unary(lambda a, out, g: g * out * (1.0 - out)),
    "relu": _unary(lambda a, out, g: g.where(a > 0, 0.0)),
    "square": _unary(lambda a, out, g: g * a * 2.0),
    "sign": _zero, "floor": _zero, "ceil": _zero,
    "cast": _cast,
    "where": _where,
    "sum": _sum, "mean": _mean, "prod": _prod, "var": _var, "std": _std, "amax": _extreme, "amin": _extreme,
    "matmul": _matmul,
    "layer_norm": _layer_norm,
    "softmax": _softmax_family("softmax_grad", lambda y, g, d: y * (g - (g * y).sum(dim=d, keepdim=True))),
    "log_softmax": _softmax_family("log_softmax_grad",
                                   lambda y, g, d: g - y.exp() * g.sum(dim=d, keepdim=True)),
    "reshape": lambda inputs, out, attrs, g: (g.reshape(*inputs[0].shape),),
    "permute": _permute,
    "expand": lambda inputs, out, attrs, g: (unbroadcast(g, inputs[0].shape),),
    "slice": _slice,
    "cat": _cat,
    "contiguous": lambda inputs, out, attrs, g: (g,),
    "tril": lambda inputs, out, attrs, g: (g.tril(attrs["k"]),),
    "triu": lambda inputs, out, attrs, g: (g.triu(attrs["k"]),),
    "take": _scatter("scatter_take"),
    "take_along": _scatter("scatter_take_along"),
    "index": _scatter("scatter_index"),
    # scatter-adds (index_add, scatter_add, and the gradients of take/take_along): read back at the indices
    "scatter_take": lambda inputs, out, attrs, g: (g.index_select(attrs["axis"], inputs[1]), None),
    "scatter_take_along": lambda inputs, out, attrs, g: (g.gather(attrs["axis"], inputs[1]), None),
    # scatter: x's gradient where nothing was written over it; src's read back at the indices
    "scatter_along": _scatter_along,
    # a running sum's gradient: the running sum of the gradient from the other end
    "cumsum": lambda inputs, out, attrs, g: (g.flip(attrs["axis"]).cumsum(attrs["axis"]).flip(attrs["axis"]),),
    "im2col": lambda inputs, out, attrs, g: (
        Tensor._from_op("col2im", (g,), {**attrs, "shape": inputs[0].shape}, inputs[0].shape, g.dtype),),
    "conv_product": _conv_product,
    "col2im": lambda inputs, out, attrs, g: (
        Tensor._from_op("im2col", (g,), {**attrs, "pad_value": 0.0}, inputs[0].shape, g.dtype),),
    "cumprod": lambda inputs, out, attrs, g: (
        Tensor._from_op("cumprod_grad", (inputs[0], g), attrs, inputs[0].shape, inputs[0].dtype),),
}


# the ops' rules, recomputed records' (lazytensor/recompute.py), and a jit replay's results', which have no
# history to go back through (lazytensor/compiled.py)
RULES = {**VJP, "recompute": _recompute, "replayed": _replayed}

_missing = names(grad="rule") - VJP.keys()
if _missing:  # an op marked differentiable must not silently become a constant
    raise ImportError(f"ops marked differentiable in kernels/ops.py have no gradient rule here: {sorted(_missing)}")
