"""Repeated realizations on the CPU replayed: an eager realization whose pending graph has the structure
of one seen twice before runs that one's kernels from a host runner (runtime/replay/host_runner.py), with no
fusion planning, backend choice or per-node dispatch. `lt.jit` replays a whole decorated function; this
replays what an undecorated training loop realizes at every step (the graph is still built in Python).

The structure of a realization is its signature: for each pending node, in the scheduler's order, its
op, attributes, shape and dtype and where each input comes from (an earlier pending node, or the k-th
distinct realized value read, with that value's shape and dtype), the positions of the values asked
for, and what decides placement beside them (the backend chain, the fuser, the thread count, the
matmul library setting). A random op's stream counts relative to the realization's first one (each
step's dropout masks draw new streams), and its seed as whether it is the generator's seed now. Equal
signatures plan the same kernels on the same backends, so the replay computes the same bytes as the
eager run would; random steps draw their nodes' own (seed, stream). The first sighting runs eagerly,
the second runs eagerly with a `capture.Recorder` binding the realized values read, and later ones
replay.

A realization whose structure changes in a few nodes only from one time to the next (a decode loop with
its context full: `cat` appends a token to the sequence and `idx[:, -block:]` slices the last positions,
so those two nodes' shapes and bounds change at every step while the model's forward pass does not) is
split where its signature items differ from the last realization with the same ops: what the changed
nodes read that depends on none of them runs first (replayed like any realization), then the changed
nodes (planned), then the rest, whose signature is the same each time (replayed) (`_changed`, `_parts`,
`_split`); later realizations with the same ops split at the same places without the whole signature
(`_splits`). Where more than half the nodes change (a context still growing: every attention shape
changes), the realization is planned whole; shapes are never abstracted, so a replay is always of the
shapes it was captured with.

A replay hands a value to each node the eager run would have computed (not absorbed into a fused kernel)
that something outside the realization still holds (a tensor, a gradient record, a pending consumer
outside it): weak references say which, once the realization's own references are let go (`_held`).
Those nodes get their Buffers and lose their inputs as in the eager run; every other intermediate is
dropped after its last reader, as the eager run drops it. Not replayed: realizations on a device (their
placement depends on residency and memory), while a `lt.jit` capture or a profile is active, and those
runtime/replay/refusals.py lists for "repeats" (ones smaller than MIN_NODES, any whose attributes cannot
be compared, ...; LAZYTENSOR_REPLAY=0 turns it off), each counted in `lt.counters()["replay_refusals"]`.
"""
import weakref

from ...kernels.cpu import gemm
from .. import config, executor, parallel, remat
from ..counters import COUNTERS
from ..residency import Buffer
from . import capture, capturing, host_runner
from .cache import Bounded
from .refusals import HOST_VALUES, OFF, OUTSIDE, REPEATS, SMALL, UNCOMPARABLE, refuse
from .signature import Key, frozen, random_relative

# Realizations of fewer nodes are planned every time. Planning costs more than a signature and a replay
# at every size (bench/RESULTS.md, 'Small work against PyTorch eager'), so small repeats replay too.
MIN_NODES = 2
REPLAYS = 64     # replayable signatures kept (least recently used dropped): a loop's step and its small reads
SIGHTINGS = 64   # signatures seen once or twice, remembered to capture on the second sighting
# As many sightings as replays: a loop cycling through L structures (a decode loop's growing context run
# sample after sample) then either keeps all L replays (L <= REPLAYS) or never sees one twice while it is
# remembered (L > SIGHTINGS); with more sightings than replays, L in between captured recordings that were
# dropped before their first replay, at every pass.

_replays = Bounded(REPLAYS)   # signature -> _Replay
_seen = Bounded(SIGHTINGS)    # signature -> times seen (1 or 2)
_last = Bounded(SIGHTINGS)    # the ops of a realization, in order -> the signature items it last had
_splits = Bounded(REPLAYS)    # the ops of a realization split last time -> where it changed (_Split)
# Rests of a split not replayed in a row before the split is forgotten: the first two are the rest's
# sightings (planned, then captured); more mean the changing part moved elsewhere.
SPLIT_MISSES = 4


def clear():
    """Forget every signature and recording (tests; a change of a setting the signature does not cover)."""
    _replays.clear()
    _seen.clear()
    _last.clear()
    _splits.clear()


class _Replay:
    """A captured realization: its host runner, (slot, leaf index) of each bound value, the slots,
    {order position: slot of its value} for each node the eager run computed, its kernel count, and
    where its random steps' streams start relative to its first random op's (None: it has none)."""

    __slots__ = ("runner", "bound", "n_slots", "results", "kernels", "stream_shift")

    def __init__(self, runner, bound, n_slots, results, kernels, stream_shift):
        self.runner, self.bound, self.n_slots, self.results, self.kernels = runner, bound, n_slots, results, kernels
        self.stream_shift = stream_shift


def realize(order, roots, chain, fuser):
    """Run the realization of `order` (the scheduler's order of the pending nodes for `roots`) on host
    backends `chain`: replayed where its signature has a plan, else planned and run (and
    captured on the second sighting). Returns the Schedule that ran, or None where it replayed."""
    eager = executor.run
    if len(order) < MIN_NODES or not config.get("LAZYTENSOR_REPLAY"):
        refuse(REPEATS, SMALL if len(order) < MIN_NODES else OFF)
        return eager(order, roots, chain, fuser)
    ops = tuple([node.op for node in order])
    memo = _splits.get(ops)
    if memo is not None:  # split last time: split where it changed then, without the whole signature
        parts = _parts(_wiring(order), memo.changed)
        if parts is not None:
            return _split(order, roots, chain, fuser, parts, memo, ops)
        _splits.pop(ops)
    try:
        key, leaves, first_stream = signature(order, roots, chain, fuser, ops)
        replay = _replays.get(key)
        seen = 0 if replay is not None else _seen.pop(key, 0)
    except (TypeError, ValueError):  # an attribute value that cannot be compared (an array)
        refuse(REPEATS, UNCOMPARABLE)
        return eager(order, roots, chain, fuser)
    if replay is not None:
        if _replay(replay, order, key.items, leaves, first_stream):
            return None
        return eager(order, roots, chain, fuser)
    changed = _changed(key.items, len(order), ops)
    if changed is not None:
        parts = _parts([[j for j in item[4] if type(j) is int] for item in key.items[:len(order)]], changed)
        if parts is not None:
            memo = _Split(changed)
            _splits.put(ops, memo)
            return _split(order, roots, chain, fuser, parts, memo, ops)
    seen += 1
    if seen < 2:
        if not key.storable():
            refuse(REPEATS, UNCOMPARABLE)
            return eager(order, roots, chain, fuser)
        _seen.put(key, seen)
        return eager(order, roots, chain, fuser)
    return _capture(key, order, roots, leaves, chain, fuser, first_stream)


def signature(order, roots, chain, fuser, ops=None):
    """(its Key, the distinct realized Buffers read in order of first read, the stream of its first random
    op or None); `ops`, the order's ops, where the caller has them."""
    pos = {}
    leaves, leaf_at = [], {}
    items = []
    first_stream = None
    for i, node in enumerate(order):
        attrs = node.attrs
        if "stream" in attrs:
            # a random op: its stream relative to the realization's first one, and whether it was drawn
            # under the generator's seed now (a replay draws under that seed)
            if first_stream is None:
                first_stream = attrs["stream"]
            attrs = random_relative(attrs, first_stream)
        ins = []
        for inp in node.inputs:
            j = pos.get(inp)
            if j is not None:
                ins.append(j)
                continue
            buf = inp.buffer
            k = leaf_at.get(id(buf))
            if k is None:
                k = leaf_at[id(buf)] = len(leaves)
                leaves.append(buf)
            ins.append((-1 - k, inp.shape, inp.dtype))
        pos[node] = i
        items.append((node.op, frozen(attrs) if attrs else (), node.shape, node.dtype, tuple(ins)))
    items.append(tuple(pos[r] for r in roots if r in pos))
    items.append((tuple(chain), fuser, parallel.num_threads(), parallel.MIN_PIECE, gemm.host_blas()))
    # hashed by the ops and the shapes of the values read: realizations whose shapes differ (a growing
    # context) do not share a hash, so a lookup compares with few kept signatures item by item
    if ops is None:
        ops = tuple([node.op for node in order])
    return Key(tuple(items), (ops, tuple([buf.shape for buf in leaves]))), leaves, first_stream


class _Split:
    """Where a realization's structure changed (positions of its order), and how many times in a row the
    rest of it was not replayed since (a split that no longer leaves a steady rest is forgotten)."""

    __slots__ = ("changed", "misses")

    def __init__(self, changed):
        self.changed, self.misses = changed, 0


def _changed(items, n, ops):
    """The positions whose signature items differ from the last realization with the same `ops` (a growing
    context's `cat` and the slice of its last positions: their attributes or shapes), or None where
    nothing did, or something besides the nodes did (the values asked for, the settings). Either way
    `items` becomes the last realization of its ops."""
    last = _last.get(ops)
    _last.put(ops, items)
    if last is None or len(last) != len(items) or last[n:] != items[n:]:
        return None
    try:
        changed = [i for i in range(n) if items[i] != last[i]]
    except (TypeError, ValueError):  # an attribute that cannot be compared (an array)
        _last.pop(ops)
        return None
    return changed or None


def _wiring(order):
    """For each node of `order`, the positions of the inputs it reads from `order`."""
    pos = {node: i for i, node in enumerate(order)}
    return [[pos[inp] for inp in node.inputs if inp in pos] for node in order]


def _parts(wiring, changed):
    """(steady, changing): the positions of the nodes the `changed` ones read (through any path) that
    depend on none of them, and of the changed ones with what they read that does; None where splitting
    is not worth it (more than half the nodes change, or too little would be left to replay)."""
    n = len(wiring)
    read = [False] * n  # the changed nodes and every node they read
    for i in changed:
        read[i] = True
    for i in range(n - 1, -1, -1):
        if read[i]:
            for j in wiring[i]:
                read[j] = True
    tainted = [False] * n  # the nodes that depend on a changed one
    for i in changed:
        tainted[i] = True
    for i in range(n):
        if not tainted[i]:
            for j in wiring[i]:
                if tainted[j]:
                    tainted[i] = True
                    break
    steady = [i for i in range(n) if read[i] and not tainted[i]]
    changing = [i for i in range(n) if read[i] and tainted[i]]
    if len(changing) * 2 > n or n - len(steady) - len(changing) < MIN_NODES:
        return None
    return steady, changing


def _split(order, roots, chain, fuser, parts, memo, ops):
    """Run `order` in three realizations: the `steady` positions (what the changing part reads that depends
    on nothing changing: replayed from its third sighting), then the `changing` ones (planned), then the
    rest, which has the same signature each time and so is replayed too. Each node is computed once, by
    the kernels the one realization would use, except that no fused kernel spans two parts."""
    steady, changing = parts
    first = [order[i] for i in steady]
    second = [order[i] for i in changing]
    asked = set(roots)
    ends = []
    for part in (first, second):
        inside = set(part)
        wanted = {node: None for node in part if node in asked}  # a dict: ordered, each node once
        for node in order:
            if node not in inside:
                for inp in node.inputs:
                    if inp in inside:
                        wanted[inp] = None
        ends.append(list(wanted))
    order.clear()  # each part's list now holds its nodes: a node nothing else holds goes with its part
    if first:
        realize(first, ends[0], chain, fuser)
    ran = executor.run(second, ends[1], chain, fuser)
    del ends
    rest = remat.ordered(roots, chain)
    if not rest:
        return ran
    ran = realize(rest, roots, chain, fuser)
    memo.misses = 0 if ran is None else memo.misses + 1
    if memo.misses > SPLIT_MISSES:
        _splits.pop(ops)
    return ran


def _capture(key, order, roots, leaves, chain, fuser, first_stream):
    """Run the realization as the scheduler does with a Recorder told every kernel, and keep its plan
    under `key` when every kernel ran on the host and the plan can take them."""
    position = {node.id: i for i, node in enumerate(order)}
    recorder = capture.Recorder()
    for k, buf in enumerate(leaves):
        recorder.bind(buf, k)
    try:
        with capturing.into(recorder):
            ran = executor.run(order, roots, chain, fuser)
    finally:
        recorder.close()
    program = capture.Program(recorder.steps, recorder.sources, [], [], 0, chain)
    if recorder.refused is not None or program.consts or program.dynamic or not host_runner.supports(program):
        refuse(REPEATS, recorder.refused or HOST_VALUES)
        return ran
    results = {}
    for step in recorder.steps:
        made = [(step.node, step.out)]
        if step.extra_outs:  # the other values a fused group's kernel made
            made += zip(step.what.extras, step.extra_outs)
        for node, s in made:
            i = position.get(node.id)
            if i is None:
                refuse(REPEATS, OUTSIDE)  # a kernel for a node outside the order: not a plan of this realization
                return ran
            results[i] = s
    # a replay's random steps draw from stream stream0 + (their stream - the Recorder's start): with this
    # shift added to the replayed realization's first stream, each draws its node's own stream
    shift = None if first_stream is None else recorder.start_stream - first_stream
    _replays.put(key, _Replay(program.host_runner(), program.bound, program.n_slots, results, len(program),
                            shift))
    return ran


def _replay(replay, order, key, leaves, first_stream):
    """Replay `replay` for `order`; True, or False (nothing run) when a value read is not on the host.
    A replay that runs takes the order's nodes from the list (see `_held`)."""
    slots = [None] * replay.n_slots
    for s, k in replay.bound:
        slots[s] = leaves[k]
    if not replay.runner.ready(slots):
        return False
    held = _held(order, key, replay.results)
    keep = {s for i, s in replay.results.items() if held[i] is not None}
    stream0 = 0 if first_stream is None else first_stream + replay.stream_shift
    values = replay.runner.values(slots, stream0, keep)
    for i, s in replay.results.items():
        node = held[i]
        if node is not None:
            value, exclusive = values[s]
            node.bind(Buffer.host_result(node.id, node.op, value, exclusive))
    COUNTERS.kernels += replay.kernels - replay.runner.skipped  # folded constants are not computed again
    COUNTERS.replayed_realizations += 1
    return True


def _held(order, key, results):
    """For each position of `order`, its node where something outside the realization still holds it (a
    tensor, a gradient record, a consumer outside the order), else None; found from weak references.

    Consumers are visited before their inputs: the order's list lets go of each node, a node nothing else
    holds goes at once (and with it its hold on its inputs), a held one the eager run computes (in
    `results`) lets go of its inputs as the eager run's result does, and a held fused member keeps its
    inputs, which are then held too, as in the eager run. The list ends empty of nodes.
    """
    n = len(order)
    held = [None] * n
    for j in key[n]:  # the values asked for
        held[j] = order[j]
    for i in range(n - 1, -1, -1):
        ref = weakref.ref(order[i])
        order[i] = None
        node = held[i] if held[i] is not None else ref()
        if node is not None:
            held[i] = node
            if i in results:
                node.inputs = ()
    return held
