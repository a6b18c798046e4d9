"""Repeated backward passes rebuilt from a recording: a `loss.backward()` whose graph has the structure of
one recorded before makes the same gradient nodes from that recording, without running the rules.

A training loop calls backward on a graph of the same structure every step, and the rules
(lazytensor/autograd.py) spend Python time per gradient node on checks, broadcasting, dtype
promotion and rewrites that come out the same every time. What a rule builds depends only on what it
can see: its record (op, attributes, parents), the nodes of the values it saved and of its output, and
through those every pending node below them (the rewrites look at the inputs' ops and whether they are
computed yet), and each realized value's shape, dtype and residency. That is the signature: those
nodes, each with its op, attributes, shape, dtype and inputs' positions (a realized one with its op,
shape, dtype and whether it is on a device), then the records in the walk's order with positions of
their nodes and parents and, for each leaf, whether it has a .grad and where its node is; beside them
the settings the rules read (default float, storage dtypes in use, device chain, `retain_graph`). A
random op's stream counts relative to the first one's and its seed as whether it is the generator's
seed now (dropout masks draw new streams every step). Equal signatures build equal graphs, so the
first backward of a signature runs the rules and records every node they make (its op, attributes,
shape, dtype and inputs: a node of the signature or an earlier one made), and later ones make those
nodes again on this step's nodes: the same graph, node for node, and so the same kernels and bytes.

Not recorded (the rules run every time): what runtime/replay/refusals.py lists for "backward" (each
counted in `lt.counters()["replay_refusals"]`): a backward that realizes, reads or peeks at a value on
the host (a rule whose graph could depend on values), writes one, draws random numbers, or makes a node
from one outside the signature; one with `create_graph` or an explicit `gradient`; graphs of fewer
than MIN_RECORDS records; and any whose attributes cannot be compared. On a device the signature's
residency flags and device chain cover what the rules read of placement (a `*_like` value goes next
to its model's).
`LAZYTENSOR_REPLAY=0` turns it off. Node creation is watched process-wide while a backward records:
another thread building nodes from the same values then only adds nodes nobody reads to the recording.
"""
from . import dtypes
from .runtime import config, devices, graph, hostio, rng
from .runtime.counters import COUNTERS
from .runtime.replay.cache import Bounded
from .runtime.replay.refusals import (BACKWARD, EFFECTS, HOST_VALUES, OFF, OUTSIDE, RANDOM, RELEASED, SMALL,
                                      UNCOMPARABLE, Refusal, refuse)
from .runtime.replay.signature import Key, frozen, random_relative
from .tensor import Tensor

MIN_RECORDS = 16   # smaller backward passes cost little to build; their signature would cost about as much
RECORDINGS = 8     # signatures kept (the least recently used dropped)

_recordings = Bounded(RECORDINGS)  # signature -> _Recording, or the Refusal that kept it from being recorded
_UNSEEN = object()


def clear():
    """Forget every recording (tests)."""
    _recordings.clear()


def build(tensor, order, retain, build_by_rules):
    """Set the .grad's of the leaves of `order` (autograd's walk: the tensors whose gradients backward
    needs, inputs first) for `tensor`'s implicit gradient: from a recording where one matches, else by
    `build_by_rules()`, recording it where it can."""
    if len(order) < MIN_RECORDS or not config.get("LAZYTENSOR_REPLAY"):
        return _refused(SMALL if len(order) < MIN_RECORDS else OFF, build_by_rules)
    try:
        key, world = _signature(order, retain)
        recording = _UNSEEN if key is None else _recordings.get(key, _UNSEEN)
    except (TypeError, ValueError):  # an attribute value that cannot be compared (an array)
        return _refused(UNCOMPARABLE, build_by_rules)
    if key is None:
        return _refused(RELEASED, build_by_rules)
    if recording is _UNSEEN and not key.storable():
        return _refused(UNCOMPARABLE, build_by_rules)
    if recording is not _UNSEEN:
        if isinstance(recording, Refusal):  # the first backward of this signature could not be recorded
            return _refused(recording, build_by_rules)
        recording.replay(world, order)
        COUNTERS.replayed_backwards += 1
        return None
    before = _State(world, order)
    with graph.collecting_made() as made:
        build_by_rules()
    recording = before.recording(made, world, order)
    if isinstance(recording, Refusal):
        refuse(BACKWARD, recording)
    _recordings.put(key, recording)
    return None


def _refused(refusal, build_by_rules):
    refuse(BACKWARD, refusal)
    return build_by_rules()


def _signature(order, retain):
    """(the signature of a backward over `order`, the nodes it covers in its order); (None, None) when a
    record's saved values were released (the rules raise)."""
    roots = []
    for t in order:
        roots.append(t._node)
        fn = t._grad_fn
        if fn is None:
            if t.grad is not None:
                roots.append(t.grad._node)
        elif fn.saved is None:
            return None, None
        else:
            roots.extend(fn.saved)
            roots.append(fn.out)
    pos, world, items = {}, [], []
    first_stream = None
    stack = roots[::-1]
    while stack:  # every node the records reach, inputs first (iteratively: chains may be long)
        n = stack[-1]
        if n in pos:
            stack.pop()
            continue
        if n.buffer is None:
            missing = [i for i in n.inputs if i not in pos]
            if missing:
                stack.extend(missing)
                continue
            attrs = n.attrs
            if "stream" in attrs:
                if first_stream is None:
                    first_stream = attrs["stream"]
                attrs = random_relative(attrs, first_stream)
            items.append((n.op, frozen(attrs) if attrs else (), n.shape, n.dtype, tuple([pos[i] for i in n.inputs])))
        else:
            items.append((n.op, n.shape, n.dtype, n.buffer.on_device))
        pos[n] = len(world)
        world.append(n)
        stack.pop()
    at = {id(t): i for i, t in enumerate(order)}
    records = []
    for t in order:
        fn = t._grad_fn
        if fn is None:
            records.append((pos[t._node], None if t.grad is None else pos[t.grad._node]))
        else:
            records.append((pos[t._node], fn.op, frozen(fn.attrs) if fn.attrs else (),
                            tuple([pos[n] for n in fn.saved]), pos[fn.out],
                            tuple([at.get(id(p), -1) for p in fn.parents])))
    settings = (dtypes.DEFAULT_FLOAT, dtypes.storage_in_use, tuple(devices.chain()), bool(retain))
    return Key((tuple(items), tuple(records), settings), tuple([n.op for n in world])), world


class _State:
    """What a recorded backward may change besides making nodes, as it was before it: the engine's
    counters of realizations, host reads, peeks and writes, the random streams drawn, the nodes' `used`
    marks, the leaves' .grad's and which records still hold their saved values."""

    def __init__(self, world, order):
        self.counts = _counts()
        self.used = [n.used for n in world]
        self.grads = [t.grad for t in order]

    def recording(self, made, world, order):
        """The _Recording of the backward that made `made`, or the Refusal that says why it cannot be
        replayed."""
        counts = _counts()
        if counts != self.counts:
            return RANDOM if counts[-1] != self.counts[-1] else EFFECTS
        made_at = {n: k for k, n in enumerate(made)}
        world_at = {n: j for j, n in enumerate(world)}
        steps = []
        for n in made:
            if n.buffer is not None:  # a constant a rule made (a Python number as a 0-d value)
                buf = n.buffer
                if n.op != "data" or n.inputs or buf.on_device or not buf.host_exclusive:
                    return HOST_VALUES
                steps.append((None, buf.host.copy(), None, None, None))
                continue
            if "stream" in n.attrs:
                return RANDOM
            ins = []
            for i in n.inputs:
                k = made_at.get(i)
                if k is None:
                    k = world_at.get(i)
                    if k is None:
                        return OUTSIDE  # a node from outside the signature
                    k = -1 - k
                ins.append(k)
            steps.append((n.op, tuple(ins), n.attrs, n.shape, n.dtype))
        grads, tensors = [], {}
        for i, t in enumerate(order):
            g = t.grad
            if g is self.grads[i]:
                continue
            if t._grad_fn is not None:
                return EFFECTS
            k = made_at.get(g._node)
            if k is None:
                k = world_at.get(g._node)
                if k is None:
                    return OUTSIDE
                k = -1 - k
            grads.append((i, k, tensors.setdefault(id(g), len(tensors))))
        marked = [-1 - j for j, n in enumerate(world) if n.used and not self.used[j]]
        read = {i for n in made for i in n.inputs}
        marked += [k for k, n in enumerate(made) if n.used and n not in read]  # a second handle (detach)
        released = [i for i, t in enumerate(order) if t._grad_fn is not None and t._grad_fn.saved is None]
        return _Recording(steps, grads, len(tensors), marked, released)


def _counts():
    return (COUNTERS.realizations, sum(COUNTERS.host_reads.values()), sum(COUNTERS.host_writes.values()),
            hostio.peeks, rng.DEFAULT.next_stream)


class _Recording:
    """The nodes a backward made, in order: (op, inputs, attrs, shape, dtype), an input k >= 0 the k-th
    made, k < 0 the signature's node -1 - k; a constant as (None, its host value); the .grad's it set:
    (leaf position, node, which new tensor: leaves given the same tensor share one); the nodes it marked
    as read without making a node read them (`used`: a second handle), numbered as inputs are; the
    records whose saved values it released."""

    __slots__ = ("steps", "grads", "n_tensors", "marked", "released")

    def __init__(self, steps, grads, n_tensors, marked, released):
        self.steps, self.grads, self.n_tensors, self.marked, self.released = steps, grads, n_tensors, marked, released

    def replay(self, world, order):
        made = []
        Node, data_node = graph.Node, hostio.data_node
        for op, ins, attrs, shape, dtype in self.steps:
            if op is None:
                made.append(data_node(ins.copy(), True))
            else:
                made.append(Node(op, [made[k] if k >= 0 else world[-1 - k] for k in ins], attrs, shape, dtype))
        for k in self.marked:
            (made[k] if k >= 0 else world[-1 - k]).used = True
        tensors = [None] * self.n_tensors
        for i, k, which in self.grads:
            g = tensors[which]
            if g is None:
                g = tensors[which] = Tensor(made[k] if k >= 0 else world[-1 - k])
            order[i].grad = g
        for i in self.released:
            fn = order[i]._grad_fn
            fn.saved = None
            fn.parents = ()
