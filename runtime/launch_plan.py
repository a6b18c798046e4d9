"""A compiled step's device kernels launched from argument lists built once, over one block of scratch.

A `Program` (runtime/capture.py) replays through the scheduler's executors, which cost tens of
microseconds of Python per kernel (operand residency, block allocation, a Buffer, the launch's argument
list). On a device that can prepare launches (`KernelDevice`: the CUDA drivers) a `LaunchPlan` does that
work once, at the first replay:

- each device kernel of the program becomes a prepared driver launch (`KernelDevice.launch_calls`,
  `group_call`, `prepare`): a replay calls it with no further Python than the call;
- values produced and consumed only by such kernels ("internal"), and the Scratch blocks a node's
  kernels share (a blocked sum's partials), get fixed offsets in one scratch block
  (greedy by size over their lifetimes, as TFLite's arena planner does), allocated from the device's
  memory for the duration of the replay and given back after it, so their pointers never change and the
  budget sees them; internal values have no Buffer at all;
- every other value a prepared launch reads or writes (a bound parameter, a step's output, the result of
  a step the plan does not launch itself: index kernels, host kernels) is a Buffer as in the eager
  run, resolved once per replay and patched into the launches that use it; random kernels get their
  fresh streams' RNG key words patched in.

A replay the plan cannot promise to fit in the memory budget, or one run while profiling, goes through
the generic executors instead; so does one whose device memory runs out midway (it starts over: nothing
a replay writes is visible before it returns). Results are the same bytes either way: the same kernels
run on the same values in the same order.
"""
import collections

from . import copies, rng
from .backends.lowering import rng_key_patches, rng_key_words
from .memory import bucket
from .residency import Buffer
from .transfers import LOG

ALIGN = 256


class _Stand:
    """Stands for slot `slot`'s value while launches are built: a device pointer, or a 0-d value."""

    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    def item(self):
        return self


class _StandArray:
    """A device operand while launches are built: its shape and dtype, and a stand-in pointer."""

    __slots__ = ("ptr", "shape", "dtype")

    def __init__(self, slot, shape, dtype):
        self.ptr, self.shape, self.dtype = _Stand(slot), shape, dtype


class NoMemory(Exception):
    """Device memory ran out during a planned replay (the caller replays through the executors)."""


def supports(device):
    """Whether `device` prepares launches (a plan can replay its kernels)."""
    return hasattr(device, "launch_calls")


def _calls(k, step, device, scratch):
    """The driver calls of step `k` if the plan launches it itself, or None (the executors run it).
    A Scratch block its launches share becomes an internal value of its own, living for that step:
    scratch[("scratch", k, n)] = its bytes."""
    if step.backend is not device or step.kind not in ("node", "device_group"):
        return None
    if step.kind == "node" and (step.launches is None or step.host_copy):
        return None
    args = [_Stand(s) if param else _StandArray(s, shape, dtype)
            for s, param, shape, dtype in zip(step.ins, step.params, step.shapes, step.dtypes)]
    if step.kind == "node":
        mine = {}

        def stand(operand):
            key = ("scratch", k, len(mine))
            mine[key] = operand.nbytes
            return _Stand(key)
        calls = device.launch_calls(step.what, step.launches, args, _Stand(step.out), stand)
        if calls is not None:
            scratch.update(mine)
        return calls
    return [device.group_call(step.what, args, _Stand(step.out))]


def _offsets(intervals):
    """Offsets for (size, first, last) intervals in one block: largest first, each at the lowest gap
    between the placed intervals whose lifetimes overlap its own. Returns (offsets, block size)."""
    order = sorted(range(len(intervals)), key=lambda i: (-intervals[i][0], intervals[i][1]))
    placed, offsets, total = [], [0] * len(intervals), 0
    for i in order:
        size, first, last = intervals[i]
        busy = sorted((offsets[j], offsets[j] + intervals[j][0]) for j in placed
                      if intervals[j][1] <= last and first <= intervals[j][2])
        at = 0
        for lo, hi in busy:
            if at + size <= lo:
                break
            at = max(at, hi)
        offsets[i] = at
        total = max(total, at + size)
        placed.append(i)
    return offsets, total


def _aligned(nbytes):
    return -(-max(nbytes, 1) // ALIGN) * ALIGN


class LaunchPlan:
    """The prepared launches of one Program on one device, the scratch layout, and the actions of a
    replay in order. `run(slots, execute)` replays; `execute(k, operands)` runs step k the generic way."""

    def __init__(self, program, device, replay_peak=None):
        steps, self.device, self.memory = program.steps, device, device.memory
        scratch = {}
        calls = {k: c for k, step in enumerate(steps) if (c := _calls(k, step, device, scratch)) is not None}
        # A launch that took a value made inside the program as a scalar (a 0-d result that was on the
        # host when captured: read, or evicted under a tight budget) runs through the executors, which
        # read it when it exists; a prepared launch could only read values known before the replay.
        produced = {step.out for step in steps}
        calls = {k: c for k, c in calls.items()
                 if not any(param and s in produced for s, param in zip(steps[k].ins, steps[k].params))}
        scratch = {key: n for key, n in scratch.items() if key[1] in calls}
        keep = set(program.outputs)
        readers, as_value = collections.defaultdict(list), set()
        for k, step in enumerate(steps):
            for i, s in enumerate(step.ins):
                readers[s].append(k)
                if step.params and step.params[i]:
                    as_value.add(s)
        internal = {}  # read only as device pointers by prepared launches: scratch, no Buffer
        for k in calls:
            s = steps[k].out
            if s not in keep and s not in as_value and all(r in calls for r in readers[s]):
                internal[s] = (_aligned(_node(steps[k]).nbytes), k, max(readers[s], default=k))
        for key, nbytes in scratch.items():
            internal[key] = (_aligned(nbytes), key[1], key[1])
        last = len(steps) - 1
        externals = [(bucket(max(_node(step).nbytes, 1)), k,
                      last if step.out in keep else max(readers[step.out], default=k))
                     for k, step in enumerate(steps) if step.kind != "view" and step.out not in internal]
        self._chunks = _chunks(internal, externals, len(steps), program.peak_added, replay_peak)
        self.kernels = len(calls)
        # Where each slot's pointer / value goes: (prepared launch, argument index).
        self._ptr_uses, self._value_uses = collections.defaultdict(list), collections.defaultdict(list)
        prepared = {}
        for k, raw in calls.items():
            prepared[k] = []
            for fn, spec, ptrs, scalars in raw:
                p = device.prepare((fn, spec, [0 if isinstance(v, _Stand) else v for v in ptrs],
                                    [0 if isinstance(v, _Stand) else v for v in scalars]))
                for i, v in enumerate(ptrs):
                    if isinstance(v, _Stand):
                        self._ptr_uses[v.slot].append((p, i))
                for j, v in enumerate(scalars):
                    if isinstance(v, _Stand):
                        self._value_uses[v.slot].append((p, j))
                prepared[k].append(p)
        # Random kernels: their RNG key words, patched at each replay for its fresh streams.
        self._random = [(steps[k].stream, [(prepared[k][i], j, word)
                                           for i, j, word in rng_key_patches(steps[k].launches)])
                        for k in calls if steps[k].stream is not None]
        self._internal_uses = sum(len(self._ptr_uses[s]) for s in internal if s not in scratch)
        used = (set(self._ptr_uses) | set(self._value_uses)) - set(scratch)
        # Values from outside the program (bound, dynamic, constants) that prepared launches use.
        self._inputs = [s for s in sorted(used) if s not in produced]
        self._actions = []
        # The most the replay holds at once by the model of the layout (scratch chunks and results over
        # their lifetimes); what the model misses ends a replay with NoMemory, which then starts over.
        self.peak_bytes, _ = _peak([(bucket(c.size), c.first, c.last) for c in self._chunks] + externals,
                                   len(steps))
        opens = collections.defaultdict(list)
        closes = collections.defaultdict(list)
        for chunk in self._chunks:
            opens[chunk.first].append(chunk)
            closes[chunk.last].append(chunk)
        for k, step in enumerate(steps):
            self._actions.extend((self._open, chunk) for chunk in opens[k])
            if k in calls:
                if step.out not in internal:
                    node = _node(step)
                    self._actions.append((self._allocate, (step.out, node.id, node.op, node.shape, node.dtype,
                                                           node.nbytes, self._ptr_uses[step.out])))
                self._actions.extend((p.launch, None) for p in prepared[k])
            else:
                self._actions.append((self._generic, k))
            drops = tuple(s for s in step.drop if s not in internal)
            if drops:
                self._actions.append((self._drop, drops))
            self._actions.extend((self._close, chunk) for chunk in closes[k])
        self._steps = steps
        self._resolved = {s for s in used if s not in internal}
        self._pinned_bytes = None

    # ---- a replay --------------------------------------------------------------------------------
    def fits(self, slots):
        """Whether a replay into `slots` can get its memory within the budget, evicting whatever else is
        resident: the inputs it pins plus the most its scratch and results hold at once. (The inputs'
        sizes are the same at every replay: the guards of lt.jit check their shapes and dtypes.)"""
        if self._pinned_bytes is None:
            self._pinned_bytes = sum(bucket(slots[s].nbytes) for s in self._inputs if s in self._ptr_uses)
        return self.peak_bytes + self._pinned_bytes <= self.memory.budget

    def run(self, slots, execute, stream0):
        """Replay into `slots` (the external values already in place), random kernels drawing from
        streams `stream0` + their offset; raises NoMemory when the device memory runs out (nothing the
        replay made is kept)."""
        self._slots, self._execute, self._pins, self._made = slots, execute, {}, set()
        self._hits = self._internal_uses
        for offset, patches in self._random:
            words = rng_key_words(rng.DEFAULT.seed, stream0 + offset)
            for p, j, word in patches:
                p.set_scalar(j, words[word])
        try:
            for s in self._inputs:  # pinned first: allocating scratch must not evict them
                self._resolve(s, slots[s])
            for act, arg in self._actions:
                if arg is None:
                    act()
                else:
                    act(arg)
        finally:
            for chunk in self._chunks:
                self._close(chunk)
            for buf in self._pins.values():
                self.memory.unpin(buf)
            self._slots = self._execute = self._pins = self._made = None
            if self._hits:
                LOG.hit(self.device.name, self._hits)

    def _open(self, chunk):
        """Allocate a scratch chunk; if its block moved since the last replay, re-point its values."""
        block = self.memory.allocate(chunk.size)
        if block is None:
            raise NoMemory()
        chunk.block = block
        base = block.ptr
        if base != chunk.base:
            for s, offset in chunk.offsets.items():
                for p, i in self._ptr_uses[s]:
                    p.set_pointer(i, base + offset)
            chunk.base = base

    def _close(self, chunk):
        if chunk.block is not None:
            self.memory.give_back(chunk.block, chunk.size)
            chunk.block = None

    def _resolve(self, s, buf):
        """Put slot `s`'s Buffer where its prepared launches read it: on the device (pinned for the
        replay), or its host value for a launch that takes it as a scalar."""
        uses = self._ptr_uses.get(s)
        if uses:
            device = self.device
            if buf.on_device and buf.backend is device:
                self.memory.touch(buf)
                self._hits += len(uses)
            else:
                LOG.miss(device.name)
                self._hits += len(uses) - 1
                if not copies.make_resident(buf, device):
                    raise NoMemory()
            self._pin(buf)
            ptr = device.view(buf.device, buf.shape, buf.dtype).ptr
            for p, i in uses:
                p.set_pointer(i, ptr)
        uses = self._value_uses.get(s)
        if uses:
            if not buf.on_host:
                copies.download(buf, "host-kernel")
            value = buf.host.item()
            for p, j in uses:
                p.set_scalar(j, value)

    def _pin(self, buf):
        if id(buf) not in self._pins:
            self.memory.pin(buf)
            self._pins[id(buf)] = buf

    def _allocate(self, result):
        """A Buffer on the device for a prepared launch's result that someone outside the plan reads."""
        s, node_id, op, shape, dtype, nbytes, uses = result
        block = self.memory.allocate(nbytes)
        if block is None:
            raise NoMemory()
        buf = Buffer(node_id, op, shape, dtype).set_device_result(block, self.device)
        self.memory.register(buf)
        self._pin(buf)
        self._made.add(id(buf))
        self._slots[s] = buf
        ptr = block.ptr
        for p, i in uses:
            p.set_pointer(i, ptr)

    def _generic(self, k):
        step, slots = self._steps[k], self._slots
        buf = slots[step.out] = self._execute(step, [slots[s] for s in step.ins])
        if step.out in self._resolved:
            self._resolve(step.out, buf)
            self._made.add(id(buf))  # a new value: unpinned after its last reader

    def _drop(self, drops):
        # Only a result this replay made is unpinned at its last reader (and so freed): an input's
        # Buffer may also sit in another slot (two tensors holding one value), so inputs stay pinned.
        slots, pins = self._slots, self._pins
        for s in drops:
            buf = slots[s]
            if buf is not None and id(buf) in self._made:
                self._made.discard(id(buf))
                if id(buf) in pins:  # a value read only as a scalar was never pinned
                    self.memory.unpin(pins.pop(id(buf)))
            slots[s] = None


class _Chunk:
    """A block of scratch holding internal values at fixed offsets, allocated from the step that
    makes the first of them to the step that reads the last."""

    __slots__ = ("offsets", "size", "first", "last", "block", "base")

    def __init__(self, members, internal):
        offsets, self.size = _offsets([internal[s] for s in members])
        self.offsets = dict(zip(members, offsets))
        self.first = min(internal[s][1] for s in members)
        self.last = max(internal[s][2] for s in members)
        self.block = self.base = None


def _chunks(internal, externals, n_steps, eager_peak=None, replay_peak=None):
    """Scratch chunks for the internal values {slot: (size, first, last)}, so that a planned replay
    adds no more device memory at its peak than the captured eager call did (`eager_peak` bytes), nor
    than a replay by the executors (one block per value; it added `replay_peak`) where that is more.
    `externals` are the other results as (bytes, made, freed) steps; what the model leaves out (inputs
    held to the end, index temporaries) is the measured replay's excess over its model. One chunk if
    it fits; else the chunk held at the peak is cut where the fewest bytes live across (the values
    living across becoming blocks of their own) until it fits, or every value has its own block."""
    if not internal:
        return []
    one_each, _ = _peak([(bucket(size), first, last) for size, first, last in internal.values()] + externals,
                        n_steps)
    budget = one_each
    if eager_peak is not None and replay_peak is not None:
        budget = max(one_each, eager_peak - (replay_peak - one_each))
    groups = [sorted(internal, key=lambda s: internal[s][1])]
    while True:
        chunks = [_Chunk(g, internal) for g in groups]
        peak, at = _peak([(bucket(c.size), c.first, c.last) for c in chunks] + externals, n_steps)
        if peak <= budget:
            return chunks
        held = [i for i, c in enumerate(chunks) if c.first <= at <= c.last and len(groups[i]) > 1]
        if not held:
            return chunks
        i = max(held, key=lambda i: chunks[i].size)
        groups[i:i + 1] = _cut(groups[i], internal)


def _cut(group, internal):
    """`group` split at the step where the fewest bytes live across: the values before, those after,
    and each value living across on its own."""
    first, last = min(internal[s][1] for s in group), max(internal[s][2] for s in group)
    across = [0] * (last - first + 2)
    for s in group:
        size, a, b = internal[s]
        across[a - first + 1] += size  # lives across every cut c with a < c <= b
        across[b - first + 1] -= size
    best, best_bytes, running = None, None, 0
    for c in range(first + 1, last + 1):
        running += across[c - first]
        if best_bytes is None or running < best_bytes:
            best, best_bytes = c, running
    if best is None:
        return [[s] for s in group]
    before = [s for s in group if internal[s][2] < best]
    after = [s for s in group if internal[s][1] >= best]
    parts = [part for part in (before, after) if part]
    parts += [[s] for s in group if internal[s][1] < best <= internal[s][2]]
    return parts if len(parts) > 1 else [[s] for s in group]


def _peak(blocks, n_steps):
    """The most bytes held at once by (size, allocated before step, freed after step) blocks, and
    the first step where it is held."""
    delta = [0] * (n_steps + 1)
    for size, first, last in blocks:
        delta[first] += size
        delta[last + 1] -= size
    held = peak = at = 0
    for k, d in enumerate(delta):
        held += d
        if held > peak:
            peak, at = held, k
    return peak, at


def _node(step):
    return step.what.root if step.kind in ("device_group", "host_group") else step.what
