"""A compiled step's device kernels launched from argument lists built once, over one block of scratch.

A `Program` (runtime/replay/capture.py) replays through the executors, which cost tens of
microseconds of Python per kernel (operand residency, block allocation, a Buffer, the launch's argument
list). On a device that can prepare launches (`KernelDevice`: the CUDA drivers) a `DeviceRunner` does that
work once, at the first replay:

- each device kernel of the program becomes a prepared driver launch (runtime/replay/launch_calls.py,
  `KernelDevice.launch_calls`, `group_call`, `prepare`): a replay calls it with no further Python than
  the call. Index kernels too: bounds the host checked when captured are checked again on the host's
  copy of the new indices, a scatter's grouping is rebuilt there and uploaded (logged as in the eager
  run), a device-checked kernel gets its status tag; a reshape that kept a host copy keeps one again;
- values produced and consumed only by such kernels ("internal"), and the Scratch blocks and uploaded
  groupings a node's kernels share, get fixed offsets in scratch chunks (runtime/replay/scratch_layout.py),
  allocated from the device's memory for the duration of the replay and given back after it, so their
  pointers never change and the budget sees them; internal values have no Buffer at all;
- every other value a prepared launch reads or writes (a bound parameter, a step's output, the result of
  a step the plan does not launch itself: a host kernel) is a Buffer as in the eager run, resolved once
  per replay and patched into the launches that use it (only where its block moved); random kernels get
  their fresh streams' RNG key words patched in; a 0-d fill made from attributes alone is a constant;
- the state a step replaces (parameters, optimizer moments, .grad's) is written over the old values'
  device blocks when the caller hands those over as nobody else's (`donors`; lt.jit hands over no
  .grad that zero_grad dropped): no Buffer, block or pointer change per value, and the step holds one
  copy of its state instead of two. From the first such write on nothing may fail, so what could
  (allocations, host checks, the executors' steps) moves before it, or the plan does not overwrite.
  When the p, m and v of every AdamW update have their donors, an AdamW update
  whose stacked (p', m', v') result only feeds the three copies unstacking it is one launch writing
  p', m', v' over the old p, m, v (which no later step reads), and the copies do not run; that replay
  lays out its scratch without the stacked results, so the state is held once at its peak.

A replay the plan cannot promise to fit in the memory budget, or one run while profiling, goes through
the generic executors instead; so does one whose device memory runs out midway, or whose indices have
no host copy to check (it starts over: nothing a replay writes is visible before it returns). Results
are the same bytes either way: the same kernels run on the same values in the same order.
"""
import collections

from ...kernels.gpu.index import group_by_destination
from ...kernels.reference.creation import full
from .. import copies, rng
from ..backends.lowering import for_indices, rng_key_patches, rng_key_words
from ..memory import bucket
from ..residency import Buffer
from ..transfers import LOG
from . import scratch_layout
from .launch_calls import Stand, adamw_in_place_calls, step_calls
from .runner import Runner


class NoMemory(Exception):
    """Device memory ran out during a planned replay, or an index kernel's indices have no host copy to
    check (the caller replays through the executors)."""


def supports(device):
    """Whether `device` prepares launches (a runner can replay its kernels): the backend contract's
    `prepares_launches`."""
    return device.prepares_launches


class DeviceRunner(Runner):
    """The prepared launches of one Program on one device, the scratch layout, and the actions of a
    replay in order. `run(slots, execute)` replays; `execute(k, operands)` runs step k the generic way."""

    def __init__(self, program, device, replay_peak=None):
        steps, self.device, self.memory = program.steps, device, device.memory
        scratch, groups, tags = {}, {}, {}
        calls = {k: c for k, step in enumerate(steps)
                 if (c := step_calls(k, step, device, scratch, groups, tags)) is not None}
        # A launch that took a value made inside the program as a scalar (a 0-d result that was on the
        # host when captured: read, or evicted under a tight budget) runs through the executors, which
        # read it when it exists; a prepared launch could only read values known before the replay.
        produced = {step.out for step in steps}
        keep = set(program.outputs)
        readers, as_value, by_pointer = collections.defaultdict(list), set(), set()
        for k, step in enumerate(steps):
            for i, s in enumerate(step.ins):
                readers[s].append(k)
                (as_value if step.params and step.params[i] else by_pointer).add(s)
        # A 0-d fill made on the host from attributes alone (a mean's 1.0) that is only ever taken as a
        # scalar is a constant of the plan: its launches get the value once, and it never runs.
        folded = {step.out: k for k, step in enumerate(steps)
                  if step.kind == "node" and step.what.op == "full" and step.what.shape == () and not step.ins
                  and step.runs_on.is_host and step.out not in keep and step.out not in by_pointer}
        while True:
            prepared_calls = {k: c for k, c in calls.items() if not any(
                param and s in produced and s not in folded for s, param in zip(steps[k].ins, steps[k].params))}
            unfold = {s for s in folded if any(r not in prepared_calls for r in readers[s])}
            if not unfold:
                break
            folded = {s: k for s, k in folded.items() if s not in unfold}
        calls = prepared_calls
        scratch = {key: n for key, n in scratch.items() if key[1] in calls}
        internal = {}  # read only as device pointers by prepared launches: scratch, no Buffer
        for k in calls:
            s = steps[k].out
            if (s not in keep and s not in as_value and not steps[k].host_copy
                    and all(r in calls for r in readers[s])):
                internal[s] = (scratch_layout.aligned(steps[k].node.nbytes), k, max(readers[s], default=k))
        for key, nbytes in scratch.items():
            internal[key] = (scratch_layout.aligned(nbytes), key[1], key[1])
        last = len(steps) - 1
        results = [(step.out, bucket(max(step.node.nbytes, 1)), k,
                    last if step.out in keep else max(readers[step.out], default=k))
                   for k, step in enumerate(steps) if step.kind != "view" and step.out not in internal]
        externals = [r[1:] for r in results]
        self._chunks = scratch_layout.layout(internal, externals, len(steps), program.peak_added, replay_peak)
        # AdamW updates a replay that overwrites the state can run in place (_plan_updates): that replay
        # never makes their stacked results, so it lays out its scratch without them.
        self._in_place_specs = _adamw_updates(program, steps, calls, internal, readers)
        stacked = {steps[k].out for k, _, _, _ in self._in_place_specs}
        self._in_place_chunks = self._chunks if not stacked else scratch_layout.layout(
            {s: v for s, v in internal.items() if s not in stacked}, externals, len(steps), program.peak_added,
            replay_peak)
        self._chunks_in_use = self._chunks
        self.kernels = len(calls)
        # Where each slot's pointer / value goes: (prepared launch, argument index).
        self._ptr_uses, self._value_uses = collections.defaultdict(list), collections.defaultdict(list)
        prepared = {k: [self._prepare(call) for call in raw] for k, raw in calls.items()}
        # Random kernels: their RNG key words, patched at each replay for its fresh streams.
        self._random = [(steps[k].stream, [(prepared[k][i], j, word)
                                           for i, j, word in rng_key_patches(steps[k].launches)])
                        for k in calls if steps[k].stream is not None]
        self._internal_uses = sum(len(self._ptr_uses[s]) for s in internal if s not in scratch)
        used = (set(self._ptr_uses) | set(self._value_uses)) - set(scratch) - set(tags)
        # Values from outside the program (bound, dynamic, constants) that prepared launches use.
        self._inputs = [s for s in sorted(used) if s not in produced]
        self._produced = produced
        self._pointer_inputs = [(s, len(self._ptr_uses[s])) for s in self._inputs if s in self._ptr_uses]
        self._value_inputs = [s for s in self._inputs if s not in self._ptr_uses]
        # The in-place AdamW launches are prepared now, after the counts above, which are those of the
        # launches every replay runs.
        self._in_place = {k: self._prepare(adamw_in_place_calls(steps[k], news, device)[0])
                          for k, _, news, _ in self._in_place_specs}
        self._in_place_skip = {r for _, rows, _, _ in self._in_place_specs for r in rows}
        for s, k in folded.items():
            value = full(steps[k].what.attrs).item()
            for p, j in self._value_uses[s]:
                p.set_scalar(j, value)
        self._folded = set(folded.values())
        self.folded = len(folded)  # kernels a planned replay need not run
        self.launched, self.skipped = self.kernels, self.folded  # those of the last replay
        self._steps, self._calls, self._prepared, self._internal = steps, calls, prepared, internal
        # Index kernels whose bounds the host checked when captured: checked again at each replay;
        # scatters whose destinations the host grouped: grouped and uploaded again.
        self._checks = {k: (steps[k].ins[1], steps[k].launches) for k in calls if steps[k].kind == "node"
                        and any(launch.host_check is not None for launch in steps[k].launches)}
        self._groups = {k: (k,) + group for k, group in groups.items() if k in calls}
        self._tags = collections.defaultdict(list)
        for key, check in tags.items():
            if key[1] in calls:
                self._tags[key[1]].append((check, self._value_uses[key]))
        self._resolved = {s for s in used if s not in internal}
        self._pinned_bytes = self._donor_bytes = None
        self._ptr_at = {}  # slot -> the pointer its prepared launches have now
        self._last_block = {}  # slot -> the block the last replay allocated for its value
        # The most the replay holds at once by the model of the layout (scratch chunks and results over
        # their lifetimes); what the model misses ends a replay with NoMemory, which then starts over.
        self.peak_bytes, _ = scratch_layout.peak_of(
            [(bucket(c.size), c.first, c.last) for c in self._chunks] + externals, len(steps))
        self._actions = self._build_actions()
        self._plan_updates(program, results, readers)

    def _prepare(self, call):
        """The prepared driver launch of `call`; where it reads or writes a slot's value, noted."""
        fn, spec, ptrs, scalars = call
        p = self.device.prepare((fn, spec, [0 if isinstance(v, Stand) else v for v in ptrs],
                                 [0 if isinstance(v, Stand) else v for v in scalars]))
        for i, v in enumerate(ptrs):
            if isinstance(v, Stand):
                self._ptr_uses[v.slot].append((p, i))
        for j, v in enumerate(scalars):
            if isinstance(v, Stand):
                self._value_uses[v.slot].append((p, j))
        return p

    def _plan_updates(self, program, results, readers):
        """The replay that writes replaced state (program.replaced_slots: parameters, optimizer moments,
        .grad's) over the old values' device blocks, when the caller hands those over (`run`'s `donors`).
        Every such value must come from a prepared launch, and from the first of those launches on,
        nothing may fail (a replay that fails after overwriting a value could neither start over nor
        leave the state as it was): the scratch chunks and the other results made from there are
        allocated just before it, and the executors' steps from there on (an index kernel of the loss,
        say) run just before it too; if one of those reads a value made from there on, the plan never
        overwrites."""
        self._updates, self._update_actions, self.update_peak_bytes, self.can_update = {}, None, None, False
        self._in_place_actions = self._donor_reads = None
        steps = self._steps
        producer = {steps[k].out: k for k in self._calls}
        updates = {s: producer[s] for s in program.replaced_slots if s in producer}
        if not updates or len(updates) != len(program.replaced_slots):
            return
        first = min(updates.values())
        hoisted = self._hoisted(first)
        if hoisted is None:
            return
        self._updates, self.can_update = updates, True
        self._update_specs = [(s, k, steps[k].node.shape, steps[k].node.dtype) for s, k in updates.items()]
        self._update_bytes = {s: bucket(max(steps[k].node.nbytes, 1)) for s, k in updates.items()}
        # Slots of bound values (only those can hold a donor: the program holds its constants), by the
        # last step that reads each: an old value may be overwritten only after its last reader.
        bound = {s for s, _ in program.bound}
        last_read = sorted((max(ks), s) for s, ks in readers.items() if s in bound)
        self._read_slots, self._read_last = [s for _, s in last_read], [k for k, _ in last_read]
        self._update_actions = self._build_actions(first, hoisted)
        self.update_peak_bytes = self._update_peak(self._chunks, first, results)
        # When every p, m, v is written over its donor, each AdamW update of them is one launch over
        # their blocks at the update's step, and the copies unstacking its result are not run: the old
        # values are read last by that launch (_adamw_updates), each element before it is written, and
        # nothing before their copies' steps reads the new values. Those launches write the donors
        # first: the updates begin at the first of them.
        first_in_place = min([first] + [k for k, _, _, _ in self._in_place_specs])
        if not self._in_place_specs:
            hoisted = None
        elif first_in_place != first:  # else the hoisting found for `first` holds
            hoisted = self._hoisted(first_in_place)
        if hoisted is not None:
            self._in_place_actions = self._build_actions(first_in_place, hoisted, in_place=True)
            self.update_peak_bytes = max(self.update_peak_bytes,
                                         self._update_peak(self._in_place_chunks, first_in_place, results))

    def _hoisted(self, first):
        """The executors' steps from `first` on, which a replay writing over donors from `first` runs
        before it (they may fail); None if one of them reads a value made from there on."""
        steps, hoisted, late = self._steps, [], set()
        for k in range(first, len(steps)):
            step = steps[k]
            checked = self._checks[k][0] if k in self._checks else None  # indices read on the host
            grouped = self._groups[k][1] if k in self._groups else None
            if checked in late or grouped in late:
                return None
            if k in self._folded:
                continue
            if k in self._calls or step.kind == "view":
                late.add(step.out)
            elif any(s in late for s in step.ins):
                return None
            else:
                hoisted.append(k)
        return hoisted

    def _update_peak(self, chunks, first, results):
        """The most a replay writing over donors from step `first` holds at once (its allocations from
        there on made just before it), by the layout's model."""
        blocks = [(bucket(c.size), min(c.first, first), c.last) for c in chunks]
        blocks += [(size, min(k, first), freed) for s, size, k, freed in results if s not in self._updates]
        peak, _ = scratch_layout.peak_of(blocks, len(self._steps))
        return peak

    def _build_actions(self, first_update=None, hoisted=(), in_place=False):
        """The actions of a replay in order; with `first_update`, those of a replay writing the replaced
        state over its old blocks from that step on, the steps `hoisted` run before it (_plan_updates);
        `in_place`: the AdamW updates write p, m, v over their donors themselves."""
        steps, calls, internal, prepared = self._steps, self._calls, self._internal, self._prepared
        updating = first_update is not None
        opens, closes = collections.defaultdict(list), collections.defaultdict(list)
        for chunk in (self._in_place_chunks if in_place else self._chunks):
            opens[min(chunk.first, first_update) if updating else chunk.first].append(chunk)
            closes[chunk.last].append(chunk)
        actions, early = [], [(self._generic, k) for k in hoisted]
        if updating:
            early += [(self._check, self._checks[k]) for k in self._checks if k >= first_update]
            early += [(self._group_ready, self._groups[k]) for k in self._groups if k >= first_update]
        for k, step in enumerate(steps):
            actions.extend((self._open, chunk) for chunk in opens[k])
            if k in self._checks and not (updating and k >= first_update):
                actions.append((self._check, self._checks[k]))
            if k in self._groups:
                if not (updating and k >= first_update):
                    actions.append((self._group_ready, self._groups[k]))
                actions.append((self._group, self._groups[k]))
            if k in self._tags:
                actions.append((self._tag, self._tags[k]))
            if k in calls:
                s = step.out
                if updating and s in self._updates:
                    pass  # its block: its donor's or its own, set at the first update (_begin_updates)
                elif s not in internal:
                    node = step.node
                    allocate = (self._allocate, (s, node.id, node.op, node.shape, node.dtype, node.nbytes))
                    (early if updating and k > first_update else actions).append(allocate)
                if k == first_update:
                    at = len(actions)  # what can fail from here on moves here, before the first update
                if in_place and k in self._in_place:
                    actions.append((_launch_all, (self._in_place[k].launch,)))
                elif not (in_place and k in self._in_place_skip):
                    actions.append((_launch_all, tuple(p.launch for p in prepared[k])))
                if step.host_copy:
                    actions.append((self._host_copy, (step.ins[0], s)))
            elif k not in hoisted and k not in self._folded:
                actions.append((self._generic, k))
            # inputs stay in their slots (the caller holds them anyway): only results are let go
            drops = tuple(s for s in step.drop if s not in internal and s in self._produced)
            if drops:
                actions.append((self._drop, drops))
            actions.extend((self._close, chunk) for chunk in closes[k])
        if updating:
            actions[at:at] = early + [(self._begin_updates, None)]
        merged = []  # consecutive launches as one action
        for act, arg in actions:
            if act is _launch_all and merged and merged[-1][0] is _launch_all:
                merged[-1] = (_launch_all, merged[-1][1] + arg)
            else:
                merged.append((act, arg))
        return merged

    # ---- a replay --------------------------------------------------------------------------------
    def replay(self, slots, stream0, execute, donors=None):
        """The runners' one interface (runtime/replay/runner.py): replay into `slots`, writing replaced
        values over `donors` ({replaced slot: old Buffer nobody else holds}) where it can; False (slots
        as they were) when it cannot run within the budget, and the executors must run the steps."""
        donors = self.accepts_donors(slots, donors) if donors else None
        if donors is not None and not self.fits(slots, donors):
            donors = None
        self.updated = 0
        if donors is None and not self.fits(slots):
            return False
        start = list(slots)
        try:
            self.run(slots, execute, stream0, donors)
        except NoMemory:
            slots[:] = start  # start over through the executors: nothing the runner made is kept
            return False
        self.updated = len(donors) if donors is not None else 0
        return True

    def accepts_donors(self, slots, donors):
        """Those of `donors` ({replaced slot: the Buffer its tensor held, held by no one else}) whose
        value this replay may write over: on this device, of the new value's shape and dtype, read by no
        step from the one that writes the new value on, each given once; None if there are none."""
        if not self._updates or not donors:
            return None
        # The last step reading each bound Buffer (slots in order of their last reader: the dict keeps
        # the latest); a Buffer that is no slot's is read by none.
        last_read = self._donor_reads = dict(zip([id(slots[s]) for s in self._read_slots], self._read_last)).get
        device, accepted = self.device, {}
        for s, k, shape, dtype in self._update_specs:
            buf = donors.get(s)
            if (buf is not None and buf.backend is device and last_read(id(buf), -1) < k and buf.shape == shape
                    and (buf.dtype is dtype or buf.dtype == dtype)):
                accepted[s] = buf
        if len(set(map(id, accepted.values()))) != len(accepted):
            return None
        return accepted or None

    def fits(self, slots, donors=None):
        """Whether a replay into `slots` can get its memory within the budget, evicting whatever else is
        resident: the inputs it pins plus the most its scratch and results hold at once; with `donors`,
        the old values it overwrites are pinned too, and the replaced values it does not write over
        them are allocated before the first that it does. (The inputs' sizes are the same at every
        replay: the guards of lt.jit check their shapes and dtypes.)"""
        if self._pinned_bytes is None:
            self._pinned_bytes = sum(bucket(slots[s].nbytes) for s in self._inputs if s in self._ptr_uses)
        if donors is None:
            return self.peak_bytes + self._pinned_bytes <= self.memory.budget
        key = frozenset(donors)
        if self._donor_bytes is None or self._donor_bytes[0] != key:  # the same every replay, as a rule
            pinned = {id(slots[s]) for s in self._inputs if s in self._ptr_uses}
            extra = sum(bucket(b.nbytes) for b in donors.values() if id(b) not in pinned)
            extra += sum(n for s, n in self._update_bytes.items() if s not in donors)
            self._donor_bytes = (key, extra)
        return self.update_peak_bytes + self._pinned_bytes + self._donor_bytes[1] <= self.memory.budget

    def run(self, slots, execute, stream0, donors=None):
        """Replay into `slots` (the external values already in place), random kernels drawing from
        streams `stream0` + their offset; with `donors` (accepted by `accepts_donors` and `fits`), the
        replaced values are written over those Buffers' device blocks. Raises NoMemory when the device
        memory runs out (nothing the replay made is kept, and no donor has been written)."""
        self._slots, self._execute, self._pins, self._made = slots, execute, {}, set()
        self._donors, self._updating = donors, False
        self._hits = self._internal_uses
        for offset, patches in self._random:
            words = rng_key_words(rng.DEFAULT.seed, stream0 + offset)
            for p, j, word in patches:
                p.set_scalar(j, words[word])
        self.memory.pin_scope(self._pins)  # every Buffer in self._pins stays put until the end
        try:
            if donors is not None:
                for buf in donors.values():  # before anything is allocated: they must stay put
                    self._pin(buf)
            self._resolve_inputs(slots)  # pinned first: allocating scratch must not evict them
            actions, chunks = self._actions, self._chunks
            self.launched, self.skipped = self.kernels, self.folded
            if donors is not None:
                actions = self._update_actions
                if self._writes_in_place(slots, donors):
                    actions, chunks = self._in_place_actions, self._in_place_chunks
                    unstacked = 3 * len(self._in_place)  # the copies not run
                    self.launched -= unstacked
                    self.skipped += unstacked
                    self._hits -= unstacked  # each read the stacked result
            if chunks is not self._chunks_in_use:  # another layout: its values are re-pointed as it opens
                for chunk in chunks:
                    chunk.base = None
                self._chunks_in_use = chunks
            for act, arg in actions:
                if arg is None:
                    act()
                else:
                    act(arg)
        finally:
            if self._updating:  # from the first update on, the donors' device copies are the new values
                touch = self.memory.touch
                for buf in donors.values():
                    buf.overwrite_on_device()
                    touch(buf)
            for chunk in self._chunks_in_use:
                self._close(chunk)
            self.memory.unpin_scope(self._pins)
            self._slots = self._execute = self._pins = self._made = self._donors = None
            if self._hits:
                LOG.hit(self.device.name, self._hits)

    def _writes_in_place(self, slots, donors):
        """Whether the AdamW updates write p, m, v over their old blocks themselves this replay: each
        update's p, m, v have their donors, those are the old values it reads, and no step after it
        reads them (accepts_donors noted where each bound Buffer is read last). The other replaced
        values (the .grad's) may have none: those get blocks of their own (_begin_updates)."""
        if self._in_place_actions is None:
            return False
        last_read = self._donor_reads
        for k, _, news, olds in self._in_place_specs:
            for new, old in zip(news, olds):
                buf = donors.get(new)
                if buf is None or buf is not slots[old] or last_read(id(buf), -1) > k:
                    return False
        return True

    def _open(self, chunk):
        """Allocate a scratch chunk; if its block moved since the last replay, re-point its values."""
        block = self.memory.allocate(chunk.size, chunk.last_block)  # the same block again where it can
        if block is None:
            raise NoMemory()
        chunk.block = chunk.last_block = block
        base = block.ptr
        if base != chunk.base:
            for s, offset in chunk.offsets.items():
                self._point(s, base + offset)
            chunk.base = base

    def _close(self, chunk):
        if chunk.block is not None:
            self.memory.give_back(chunk.block, chunk.size)
            chunk.block = None

    def _resolve_inputs(self, slots):
        """`_resolve` every input, those already resident here (as a rule, all) by a shorter way."""
        device, pins, ptr_at, touch = self.device, self._pins, self._ptr_at, self.memory.touch
        for s, uses in self._pointer_inputs:
            buf = slots[s]
            if buf.backend is not device:  # no copy here (a Buffer has a backend while it has one)
                self._resolve(s, buf)
                continue
            touch(buf)
            self._hits += uses
            pins[id(buf)] = buf
            ptr = buf.device.ptr
            if ptr_at.get(s) != ptr:
                self._point(s, ptr)
            if s in self._value_uses:
                self._resolve_value(s, buf)
        for s in self._value_inputs:
            self._resolve_value(s, slots[s])

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
            self._point(s, buf.device.ptr)
        if s in self._value_uses:
            self._resolve_value(s, buf)

    def _resolve_value(self, s, buf):
        if not buf.on_host:
            copies.download(buf, "host-kernel")
        value = buf.host.item()
        for p, j in self._value_uses[s]:
            p.set_scalar(j, value)

    def _point(self, s, ptr):
        """Slot `s`'s prepared launches read (or write) it at `ptr` (patched only when it moved)."""
        if self._ptr_at.get(s) != ptr:
            for p, i in self._ptr_uses[s]:
                p.set_pointer(i, ptr)
            self._ptr_at[s] = ptr

    def _pin(self, buf):
        self._pins[id(buf)] = buf

    def _allocate(self, result):
        """A Buffer on the device for a prepared launch's result that someone outside the plan reads."""
        s, node_id, op, shape, dtype, nbytes = result
        block = self.memory.allocate(nbytes, self._last_block.get(s))  # the last replay's, if cached
        if block is None:
            raise NoMemory()
        self._last_block[s] = block
        buf = Buffer(node_id, op, shape, dtype).set_device_result(block, self.device)
        self.memory.register(buf)
        self._pin(buf)
        self._made.add(id(buf))
        self._slots[s] = buf
        self._point(s, block.ptr)

    def _begin_updates(self):
        """Before the first update: blocks for the replaced values that have no donor this replay, and
        the donors' blocks where their new values' launches write and are read."""
        donors, slots, ptr_at = self._donors, self._slots, self._ptr_at
        for s, k, shape, dtype in self._update_specs:
            buf = donors.get(s)
            if buf is None:
                node = self._steps[k].node
                self._allocate((s, node.id, node.op, shape, dtype, node.nbytes))
                continue
            slots[s] = buf
            ptr = buf.device.ptr
            if ptr_at.get(s) != ptr:
                self._point(s, ptr)
        self._updating = True

    def _host_copy(self, slots):
        """A reshape of a value the host holds too keeps a host copy of its result, as in the eager run
        (placement.keeps_host_copy): free on the host, and index checks read it there. (A value made by
        prepared launches only, with no Buffer, is on the device only.)"""
        source, result = self._slots[slots[0]], self._slots[slots[1]]
        if source is not None and source.on_host:
            result.add_host_copy(source.host.reshape(result.shape))
            result.share_host()

    def _check(self, check):
        """An index kernel's bounds, checked on the host's copy of its indices (IndexError if one is out
        of range); without a host copy the executors run the replay (they check on the device)."""
        slot, launches = check
        buf = self._slots[slot]
        if buf is None or for_indices(launches, buf) is None:
            raise NoMemory()

    def _group_ready(self, group):
        """A scatter's indices: on the host (else the executors run the replay), and resident on the
        device (pinned) as the eager run makes every operand, though its kernel reads only the grouping."""
        slot, device = group[1], self.device
        buf = self._slots[slot]
        if buf is None or not buf.on_host:
            raise NoMemory()
        if buf.on_device and buf.backend is device:
            self._hits += 1
        else:
            LOG.miss(device.name)
            if not copies.make_resident(buf, device):
                raise NoMemory()
        self._pin(buf)

    def _group(self, group):
        """A scatter's destinations grouped on the host's copy of its indices and uploaded where its
        launch reads them (as the eager launch does)."""
        k, slot, size, order_key, starts_key = group
        order, starts = group_by_destination(self._slots[slot].host, size)
        node, device = self._steps[k].node, self.device
        device.upload_grouping(node, self._ptr_at[order_key], order)
        device.upload_grouping(node, self._ptr_at[starts_key], starts)

    def _tag(self, checks):
        """The device index checks of the next launches, registered for the next status read (as the
        eager launches register them), their tags patched in."""
        for check, uses in checks:
            tag = self.device.add_check(check)
            for p, j in uses:
                p.set_scalar(j, tag)

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
                pins.pop(id(buf), None)  # a value read only as a scalar was never pinned
            slots[s] = None


def _adamw_updates(program, steps, calls, internal, readers):
    """The AdamW updates a replay may run in place: (the update's step, its three row copies' steps, the
    slots of p', m', v' they make, those of the old p, m, v), where the stacked result is read by those
    copies alone, p', m', v' replace state, and the old values are read by no later step."""
    replaced, bound = set(program.replaced_slots), {s for s, _ in program.bound}
    found = []
    for k in calls:
        step = steps[k]
        if step.kind != "node" or step.what.op != "adamw" or step.out not in internal:
            continue
        rows = {}
        for r in readers[step.out]:
            row = _row_taken(steps[r], step.out)
            if row is None or row in rows or r not in calls or steps[r].out not in replaced:
                break
            rows[row] = r
        else:
            olds = (step.ins[0], step.ins[2], step.ins[3])
            if sorted(rows) == [0, 1, 2] and len(set(olds)) == 3 and all(
                    s in bound and max(readers[s]) == k for s in olds):
                unstack = tuple(rows[i] for i in range(3))
                found.append((k, unstack, tuple(steps[r].out for r in unstack), olds))
    return found


def _row_taken(step, source):
    """i if `step` copies row i of slot `source` (a slice that drops the first axis: x[i]), else None."""
    if step.kind != "node" or step.what.op != "slice" or tuple(step.ins) != (source,):
        return None
    attrs = step.what.attrs
    (lo, hi, stride), rest = attrs["slices"][0], attrs["slices"][1:]
    if attrs.get("squeeze") != (0,) or hi != lo + 1 or stride != 1:
        return None
    if any(s != (0, n, 1) for s, n in zip(rest, step.what.shape)) or len(rest) != len(step.what.shape):
        return None
    return lo


def _launch_all(launches):
    for launch in launches:
        launch()
