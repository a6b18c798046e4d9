"""Planned rematerialization: a device realization whose values would not fit its budget makes some of
them a second time for their late readers instead of holding them (or spilling them) in between.

Before a device realization runs, its order (inputs first) is simulated: each value is held from the
step that makes it to its last reader (to the end for a root), on top of what the device holds already.
While that peak is above the budget, the largest value read both before and after the peak (not at it)
is considered: its late readers can read a copy made again just before the first of them, from inputs
that are still held then (or that are made again too, a few steps back, through ops that compute the
same bytes from the same inputs). It is made again when that costs no more time, on the device profile
of runtime/device_model.py, than spilling it would (a download and an upload), times the recompute
ratio (`set_recompute_ratio`; 1 by default): at 1 a training step's attention probabilities (a product
of two head matrices it keeps anyway, a scale, a mask, a softmax) are made again and a large product's
output is spilled; at 2 a layer's MLP input is made again through its layer norm and product too,
trading kernel time for fewer bytes across the link. A value only read after the peak is left where it
is made: a tensor may hold it, and it must then be made where the program made it.

Same kernels, same inputs: the values are byte-identical to those of the run without a budget. What the
simulation misses (values other tensors hold, host steps) the evictor still handles (runtime/memory.py).
"""
import numbers
import weakref

from .device_model import copy_seconds, kernel_seconds, kernel_work, profile_named
from .counters import COUNTERS
from .graph import Node, pending_order
from .memory import bucket
from ..kernels.ops import OPS

# Ops made again from their inputs with the same bytes (no random stream, no effect, no host call).
_FAMILIES = frozenset({"unary", "binary", "compare", "logical", "select", "cast", "softmax", "layer_norm",
                       "matmul", "movement", "fill", "reduce"})
_INDEX = frozenset({"take", "take_along", "index"})
_WORTH_BYTES = 256 * 1024   # smaller values are not worth a second kernel
# On the host, a value whose last consumers are moved up to read it from cache: smaller ones (a tiny GPT's
# 1 MiB activations) fit a core's L2 (1-2 MiB on current Xeons and Zens) either way, and the reordering
# costs Python time per node (bench/RESULTS.md, 'Figures behind the code's choices').
HOST_WORTH_BYTES = 2 * 1024 * 1024
_CHAIN = 8                  # at most this many ops made again for one value
_ROUNDS = 512               # values made again per realization, at most
_CHOICES = 8                # acceptable values compared per round (the first, largest first)

# Nodes made by `rematerialize` (a value made again is not made a third time: its readers are close).
_COPIES = weakref.WeakSet()

# The device profile a plan's choices are priced on (the only GPU measured so far is an H200).
PROFILE = "h200"

# How many times the time of its copies (out and back) making a value again may take (set_recompute_ratio).
_RATIO = {"value": 1.0}


def set_recompute_ratio(ratio):
    """Make a value again when its kernels take at most `ratio` times the time its spill would copy
    (a download and an upload); 0 spills whatever the budget cannot hold. Returns the ratio now in force."""
    if isinstance(ratio, bool) or not isinstance(ratio, numbers.Real):
        raise TypeError(f"recompute_ratio must be a number, got {type(ratio).__name__}")
    if not ratio >= 0:  # NaN too
        raise ValueError(f"recompute_ratio must be 0 or more (0: never make a value again), got {ratio!r}")
    _RATIO["value"] = float(ratio)
    return _RATIO["value"]


def _remakeable(node):
    record = OPS.get(node.op)
    return record is not None and (record.family in _FAMILIES or node.op in _INDEX)


def ordered(roots, chain):
    """The order a realization of `roots` on backends `chain` runs its pending nodes in: inputs first,
    the last readers of big values moved up (graph.pending_order); on a device, values made again where
    its budget cannot hold the rest (`rematerialize`). On the host the move is for the cache: a weight's
    gradient read its layer's output gradient from memory at the end of the backward pass, not from cache
    right after it was made (a small GPT's compiled step at one thread ran faster: bench/RESULTS.md),
    and only values that would leave a core's cache are worth it there (`HOST_WORTH_BYTES`)."""
    device = chain[0]
    if device.is_host:
        return pending_order(roots, early=True, worth=HOST_WORTH_BYTES)
    order = pending_order(roots, early=True)
    if not order:
        return order
    memory = device.memory
    # The values the order reads that the device holds now count in the simulation (held until their
    # last reader), not in the room: whether the evictor has spilled them so far must not change
    # which values are made again, or each eviction's re-plan would undo the last plan's choices.
    inputs = _inputs_held(order, device)
    room = memory.budget - memory.resident_bytes + sum(bucket(b.nbytes) for b in inputs)
    return rematerialize(order, roots, room)


def _inputs_held(order, device):
    """The distinct Buffers on `device` that nodes of `order` read and that no node of `order` makes."""
    held = {}
    for node in order:
        for inp in node.inputs:
            buf = inp.buffer
            if buf is not None and buf.backend is device and id(buf) not in held:
                held[id(buf)] = buf
    return list(held.values())


def rematerialize(order, roots, room):
    """`order` (pending nodes, inputs first), with values made again for their late readers while the
    simulated peak of the values it makes and reads is above `room` bytes; returns the order to run (the
    same list when nothing is worth doing). Late readers are rewired to the new nodes."""
    inputs = {}
    for node in order:
        for inp in node.inputs:
            if inp.buffer is not None:
                inputs[id(inp.buffer)] = inp.buffer.nbytes
    # even holding every value to the end fits (a size class is at most 1/16 and 512 B above its request)
    made = sum(n.nbytes for n in order) + sum(inputs.values())
    if made * 17 // 16 + 512 * (len(order) + len(inputs)) <= room:
        return order
    profile = profile_named(PROFILE)
    rootset = set(roots)
    tried = set()
    for _ in range(_ROUNDS):
        held, peak_at, readers = _simulate(order, rootset)
        if held <= room:
            break
        choice = _best(order, peak_at, readers, rootset, tried, profile)
        if choice is None:
            break
        order = _apply(order, choice, readers)
    return order


def _simulate(order, rootset):
    """(peak bytes, its position, readers: node -> positions of the steps reading it) of `order`."""
    readers = {}
    for k, node in enumerate(order):
        for inp in node.inputs:
            positions = readers.get(inp)
            if positions is None:
                readers[inp] = [k]
            elif positions[-1] != k:
                positions.append(k)
    end = len(order)
    change = [0] * (end + 1)
    for k, node in enumerate(order):
        size = bucket(node.nbytes)
        change[k] += size
        positions = readers.get(node)
        last = end if node in rootset or positions is None else positions[-1]
        change[min(last + 1, end)] -= size
    # values made before: held from the start to their last reader (several nodes may share a Buffer)
    lasts = {}
    for inp, positions in readers.items():
        buf = inp.buffer
        if buf is not None:
            key = id(buf)
            lasts[key] = max(lasts.get(key, (0, -1)), (bucket(buf.nbytes), positions[-1]))
    for size, last in lasts.values():
        change[0] += size
        change[min(last + 1, end)] -= size
    held, peak, peak_at = 0, -1, 0
    for k in range(end):
        held += change[k]
        if held > peak:
            peak, peak_at = held, k
    return peak, peak_at, readers


def _best(order, peak_at, readers, rootset, tried, profile):
    """Of the largest values held across position `peak_at` and not read there whose late readers can
    get them made again no slower than spilling them (times the recompute ratio), the one made again
    in the least time per byte (of the first `_CHOICES` such, largest first): (value, first late
    position, the nodes to make), or None. (At a ratio of 2, largest first alone made products again
    where the cheap values left room enough: 1.06x modeled at 385 MB for the seed-size step.)"""
    candidates = []
    for node in order[:peak_at]:
        if node in rootset or node in tried or node.nbytes < _WORTH_BYTES or node in _COPIES or not _remakeable(node):
            continue
        positions = readers.get(node)
        if not positions or positions[0] > peak_at or positions[-1] <= peak_at or peak_at in positions:
            continue
        candidates.append(node)
    candidates.sort(key=lambda n: -n.nbytes)
    choices = []
    for value in candidates:
        late = _first_late(order, readers, value, peak_at)
        chain = None if late is None else _chain(value, late, readers, rootset)
        remake = None if chain is None else sum(_seconds(profile, n) for n in chain)
        if remake is None or remake > _RATIO["value"] * 2 * copy_seconds(profile, value.nbytes):
            tried.add(value)  # not worth it here, nor at a later peak
            continue
        choices.append((remake / value.nbytes, len(choices), value, late, chain))
        if len(choices) == _CHOICES:
            break
    if not choices:
        return None
    _, _, value, late, chain = min(choices)
    tried.add(value)
    return value, late, chain


def _first_late(order, readers, value, peak_at):
    """The position of `value`'s first late reader: the first after `peak_at`, or earlier, an
    elementwise reader whose own readers are all late (the fuser may make one kernel of it and them,
    which must then read one value, not the value and its copy); None when that is not after `peak_at`."""
    positions = readers[value]
    late = next(p for p in positions if p > peak_at)
    for k in reversed([p for p in positions if p < late]):
        if not _joins(order[k], late, readers, order, 3):
            break
        late = k
    return late if late > peak_at else None


def _joins(node, late, readers, order, depth):
    """Whether elementwise `node`'s readers are all at or after position `late`, or are such nodes."""
    record = OPS.get(node.op)
    if record is None or not record.elementwise:
        return False
    for k in readers.get(node, ()):
        if k < late and (depth == 0 or not _joins(order[k], late, readers, order, depth - 1)):
            return False
    return bool(readers.get(node))


def _chain(value, late, readers, rootset, depth=4):
    """The nodes to make again (inputs first, `value` last) so that `value` exists at position `late`:
    its inputs that are not held then are made again too, `depth` levels back; None if that cannot be."""
    chain = []
    for inp in value.inputs:
        if inp.buffer is not None or inp in rootset:
            continue  # realized (held by whoever holds this graph), or held to the end
        if readers[inp][-1] >= late:
            continue  # still held then
        if depth == 0 or not _remakeable(inp):
            return None
        more = _chain(inp, late, readers, rootset, depth - 1)
        if more is None:
            return None
        chain += [n for n in more if n not in chain]
    chain.append(value)
    return chain if len(chain) <= _CHAIN else None


def _seconds(profile, node):
    """The modeled time of `node`'s kernel on `profile`."""
    inputs = list({id(i): (i.shape, i.dtype) for i in node.inputs}.values())
    read, written, flops = kernel_work(node.op, node.shape, node.dtype, inputs)
    return kernel_seconds(profile, node.op, read, written, flops)[0]


def _apply(order, choice, readers):
    """`order` with the chain made again before position `late`, and the readers from there on rewired."""
    value, late, chain = choice
    copies = {}
    for node in chain:
        copy = Node(node.op, [copies.get(i, i) for i in node.inputs], node.attrs, node.shape, node.dtype)
        copy.used = True
        copies[node] = copy
        _COPIES.add(copy)
    for k in readers[value]:
        if k >= late:
            reader = order[k]
            reader.inputs = tuple(copies[value] if i is value else i for i in reader.inputs)
    COUNTERS.remade += len(chain)
    return order[:late] + [copies[n] for n in chain] + order[late:]
