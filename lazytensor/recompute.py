"""Values recomputed for backward instead of kept: `recomputed(name, fn, *inputs, **kwargs)` is
fn(*inputs, **kwargs) with one gradient record that keeps only the inputs.

Backward runs fn again on the kept inputs and differentiates that (the `recompute` rule in
lazytensor/autograd.py): the same ops on the same values, so the same gradient bytes as recording fn op
by op, while the values fn makes on the way are freed as soon as the forward pass has read them. Used
where PyTorch's fused kernels keep less than a chain of lazytensor's ops would: GELU keeps its input,
not the three values its formula makes; layer norm with a weight keeps its input, not the normalized
value (backward makes it again: one more layer-norm kernel per call, for a (B, T, C) value less per
call until backward reaches it).

`fn` must make its result from `inputs` and the keyword arguments alone, the same nodes every time:
backward replay (lazytensor/backward_replay.py) compares these records by fn and the arguments.
"""
from . import grad_mode
from .runtime import devices
from .grad_mode import Remake
from .tensor import Tensor


def recomputed(name, fn, *inputs, gradient=None, remade=True, **kwargs):
    """fn(*inputs, **kwargs); when it records gradients, as one record named `name` that keeps `inputs`.
    `gradient(g, *inputs, **kwargs)`, where given, makes the inputs' gradients from the output's
    instead of differentiating fn again: one formula where fn's ops would keep values of their own
    (the fuser makes one kernel of an expression whose every value has one reader). `remade`: other
    records that need the output (a product's weight gradient reads its input) keep the inputs'
    way of making it again, not the value (see `remade_saved`)."""
    if not grad_mode.is_grad_enabled() or not any(t.requires_grad for t in inputs):
        return fn(*inputs, **kwargs)
    with grad_mode.set_grad_enabled(False):
        out = fn(*inputs, **kwargs)
    attrs = {"fn": fn, "name": name, **kwargs}
    if gradient is not None:
        attrs["gradient"] = gradient
    grad_mode.record_recomputed(out, inputs, attrs, remade)
    return out


def keywords(attrs):
    """The keyword arguments a recomputed record's function was called with (its attrs less its own)."""
    return {k: v for k, v in attrs.items() if k not in ("fn", "name", "gradient")}


def remade_saved(order):
    """Put a node in place of every Remake the records of `order` (a backward's tensors) saved: the
    value's own node where it has its value (realized and still held), else a new pending node made by
    running its record's function again on that record's saved inputs, once per value. A value
    computed in the realization that runs the backward is thus freed once the forward pass has read
    it, and made again when its gradient readers run.

    Only where the default device is an accelerator: its memory is what a budget limits, and there a
    recomputation costs a kernel launch. Where every kernel runs on the host, a value that still exists
    is read as it is (recomputing GELU's output cost a small step 2.4% more kernel time on an AMD EPYC
    Zen 4: bench/RESULTS.md)."""
    made, keep = {}, devices.chain()[0].is_host
    for t in order:
        fn = t._grad_fn
        if fn is None or fn.saved is None:
            continue
        for s in fn.saved:
            if type(s) is Remake:
                fn.saved = tuple([_node_of(s, made, keep) if type(s) is Remake else s for s in fn.saved])
                break


def _node_of(remake, made, keep):
    node = made.get(id(remake))
    if node is not None:
        return node
    out, record = remake.out(), remake.record()
    released = record is None or record.saved is None
    if out is not None and (out.buffer is not None or released or keep):
        node = out
    elif released:
        raise RuntimeError("backward(): trying to backward through the graph a second time (its saved values "
                           "were released by the first backward); pass retain_graph=True to the first "
                           "backward() if you need to")
    else:
        inputs = [Tensor(_node_of(s, made, keep) if type(s) is Remake else s) for s in record.saved]
        with grad_mode.set_grad_enabled(False):
            node = record.attrs["fn"](*inputs, **keywords(record.attrs))._node
    made[id(remake)] = node
    return node
