"""Gradient recording: whether ops record gradients now, and the record each op leaves on its output.

Whether an op is differentiable is its registry record's `grad` mark (kernels/ops.py): "rule" ops record
a GradFn (their rules are in lazytensor/autograd.py, which refuses to load with one missing); the others
give constants. The walk over the records (`backward`) is in lazytensor/autograd.py.
"""
import contextlib
import weakref

from .kernels.ops import OPS

_state = {"enabled": True}


def is_grad_enabled():
    return _state["enabled"]


class set_grad_enabled(contextlib.ContextDecorator):
    """Turn gradient recording on or off for a block (or, as a decorator, a function)."""

    def __init__(self, mode):
        self.mode = bool(mode)
        self.prev = None

    def __enter__(self):
        self.prev = _state["enabled"]
        _state["enabled"] = self.mode

    def __exit__(self, *exc):
        _state["enabled"] = self.prev
        return False


def no_grad():
    """`with lt.no_grad():` (or `@lt.no_grad()`): ops inside record no gradients."""
    return set_grad_enabled(False)


def enable_grad():
    return set_grad_enabled(True)


def inference_mode(mode=True):
    """PyTorch's inference_mode: `with lt.inference_mode():`, `@lt.inference_mode()` or bare
    `@lt.inference_mode` turn gradient recording off (as no_grad; lazytensor keeps no version counters
    for it to skip). `inference_mode(False)` records as usual."""
    if callable(mode):  # used as a bare decorator
        return set_grad_enabled(False)(mode)
    return set_grad_enabled(not mode)


def is_inference_mode_enabled():
    return not _state["enabled"]


class GradFn:
    """What backward needs of one op: its name, the input tensors, their values then, attrs, its output.

    A saved value is the input's node, or the `Remake` of an input a recomputed record made (its value
    made again from that record's inputs when backward needs it: lazytensor/recompute.py). `remake`:
    this record's own Remake, where its output may be made again instead of kept."""

    __slots__ = ("op", "_parents", "versions", "saved", "attrs", "out", "remake", "output_changed", "__weakref__")

    def __init__(self, op, parents, attrs, out_node):
        self.op = op
        self.parents = parents
        self.output_changed = None  # the version its output tensor was changed to in place, if it was
        # the values as they were, even after host writes
        self.saved = tuple([p._node if p._grad_fn is None or p._grad_fn.remake is None else p._grad_fn.remake
                            for p in parents])
        self.attrs = attrs
        self.out = out_node
        self.remake = None

    @property
    def parents(self):
        """The input tensors as they were when the op ran: a tensor changed in place since is replaced by
        the tensor that stands for its value then (lazytensor/inplace.py)."""
        ps = self._parents
        for p, v in zip(ps, self.versions):
            if p._version != v:
                return tuple(p if p._version == v else p._history[v] for p, v in zip(ps, self.versions))
        return ps

    @parents.setter
    def parents(self, tensors):
        self._parents, self.versions = tensors, tuple([p._version for p in tensors])

    @property
    def name(self):
        """What a user reads: the op, or the name a recomputed record was given (lazytensor/recompute.py)."""
        return self.attrs["name"] if self.op == "recompute" else self.op

    def __repr__(self):
        return f"<GradFn {self.name}>"


def record(out, op, inputs, attrs):
    """Attach a GradFn to `out` if gradients are on, any input requires them and the op has a rule."""
    if not _state["enabled"]:
        return
    for t in inputs:  # a loop, not any(generator): every op of a step passes here
        if t.requires_grad:
            break
    else:
        return
    if OPS[op].grad != "rule":
        return  # not differentiable (comparisons, argmax, integer outputs): the result is a constant
    out.requires_grad = True
    out._grad_fn = GradFn(op, tuple(inputs), attrs, out._node)


def record_recomputed(out, inputs, attrs, remade):
    """Attach one "recompute" GradFn to `out` (made from `inputs` with recording off) that keeps only the
    inputs; `attrs` holds the function (`fn`), its `name` and its keyword arguments. `remade`: records
    that save `out` save its Remake instead of its value."""
    out.requires_grad = True
    fn = out._grad_fn = GradFn("recompute", tuple(inputs), attrs, out._node)
    if remade:
        fn.remake = Remake(fn, out._node)


class Remake:
    """A recomputed record's output as other records save it: weak references to the record (whose saved
    inputs make it again; weak, since the record holds its Remake) and to the node it made, used instead
    where that still has its value. The records that saved it hold their inputs' tensors, and so the
    record, until backward has run them."""

    __slots__ = ("record", "out")

    def __init__(self, record, out_node):
        self.record, self.out = weakref.ref(record), weakref.ref(out_node)
