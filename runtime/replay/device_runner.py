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
  Where a pass the op registry names finds a step that can write over its old values itself
  (runtime/replay/passes.py: an AdamW update whose stacked (p', m', v') result only feeds the three
  copies unstacking it), and every value it writes has its donor, it is one launch over the old blocks
  and the steps it makes unnecessary do not run; that replay lays out its scratch without the stacked
  results, so the state is held once at its peak.

This module builds a runner once per Program; each replay is a `DeviceReplay`
(runtime/replay/device_replay.py), which holds what that replay alone touches and runs the actions.

A replay the plan cannot promise to fit in the memory budget, or one run while profiling, goes through
the generic executors instead; so does one whose device memory runs out midway, or whose indices have
no host copy to check (it starts over: nothing a replay writes is visible before it returns). Results
are the same bytes either way: the same kernels run on the same values in the same order.
"""
import collections

from ...kernels.reference.creation import full
from .. import rng
from ..backends.lowering import rng_key_patches, rng_key_words
from ..memory import bucket
from . import device_replay as act, scratch_layout
from .device_replay import DeviceReplay, NoMemory
from .launch_calls import Stand, step_calls
from .passes import in_place_updates
from .runner import Runner


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
        # Steps a replay that overwrites the state can run in place (runtime/replay/passes.py, the passes
        # the op registry names: AdamW's): that replay never makes their stacked results, so it lays out
        # its scratch without them.
        self._in_place_specs = in_place_updates(program, steps, calls, internal, readers)
        stacked = {steps[u.step].out for u in self._in_place_specs}
        self._in_place_chunks = self._chunks if not stacked else scratch_layout.layout(
            {s: v for s, v in internal.items() if s not in stacked}, externals, len(steps), program.peak_added,
            replay_peak)
        self._chunks_in_use = self._chunks
        self.kernels = len(calls)
        # Where each slot's pointer / value goes: (prepared launch, argument index).
        self.ptr_uses, self.value_uses = collections.defaultdict(list), collections.defaultdict(list)
        prepared = {k: [self._prepare(call) for call in raw] for k, raw in calls.items()}
        # Random kernels: their RNG key words, patched at each replay for its fresh streams.
        self._random = [(steps[k].stream, [(prepared[k][i], j, word)
                                           for i, j, word in rng_key_patches(steps[k].launches)])
                        for k in calls if steps[k].stream is not None]
        self._internal_uses = sum(len(self.ptr_uses[s]) for s in internal if s not in scratch)
        used = (set(self.ptr_uses) | set(self.value_uses)) - set(scratch) - set(tags)
        # Values from outside the program (bound, dynamic, constants) that prepared launches use.
        self._inputs = [s for s in sorted(used) if s not in produced]
        self._produced = produced
        self.pointer_inputs = [(s, len(self.ptr_uses[s])) for s in self._inputs if s in self.ptr_uses]
        self.value_inputs = [s for s in self._inputs if s not in self.ptr_uses]
        # The in-place launches are prepared now, after the counts above, which are those of the
        # launches every replay runs.
        self._in_place = {u.step: self._prepare(u.call(steps[u.step], u.news, device))
                          for u in self._in_place_specs}
        self._in_place_skip = {r for u in self._in_place_specs for r in u.skipped}
        for s, k in folded.items():
            value = full(steps[k].what.attrs).item()
            for p, j in self.value_uses[s]:
                p.set_scalar(j, value)
        self._folded = set(folded.values())
        self.folded = len(folded)  # kernels a planned replay need not run
        self.launched, self.skipped = self.kernels, self.folded  # those of the last replay
        self._steps, self._calls, self._prepared, self._internal = steps, calls, prepared, internal
        # Index kernels whose bounds the host checked when captured: checked again at each replay;
        # scatters whose destinations the host grouped: grouped and uploaded again.
        self._checks = {k: (steps[k].ins[1], steps[k].launches) for k in calls if steps[k].kind == "node"
                        and any(launch.host_check is not None for launch in steps[k].launches)}
        self._groups = {k: (steps[k].node,) + group for k, group in groups.items() if k in calls}
        self._tags = collections.defaultdict(list)
        for key, check in tags.items():
            if key[1] in calls:
                self._tags[key[1]].append((check, self.value_uses[key]))
        self.resolved = {s for s in used if s not in internal}
        self._pinned_bytes = self._donor_bytes = None
        self.ptr_at = {}  # slot -> the pointer its prepared launches have now
        self.last_block = {}  # slot -> the block the last replay allocated for its value
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
                self.ptr_uses[v.slot].append((p, i))
        for j, v in enumerate(scalars):
            if isinstance(v, Stand):
                self.value_uses[v.slot].append((p, j))
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
        self._update_allocations = [(s, _allocation(s, steps[k].node)) for s, k in updates.items()]
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
        # values are read last by that launch (passes.in_place_updates), each element before it is written, and
        # nothing before their copies' steps reads the new values. Those launches write the donors
        # first: the updates begin at the first of them.
        first_in_place = min([first] + [u.step for u in self._in_place_specs])
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
        actions, early = [], [(act.generic, steps[k]) for k in hoisted]
        if updating:
            early += [(act.check, self._checks[k]) for k in self._checks if k >= first_update]
            early += [(act.group_ready, self._groups[k]) for k in self._groups if k >= first_update]
        for k, step in enumerate(steps):
            actions.extend((act.open_chunk, chunk) for chunk in opens[k])
            if k in self._checks and not (updating and k >= first_update):
                actions.append((act.check, self._checks[k]))
            if k in self._groups:
                if not (updating and k >= first_update):
                    actions.append((act.group_ready, self._groups[k]))
                actions.append((act.group, self._groups[k]))
            if k in self._tags:
                actions.append((act.tag, self._tags[k]))
            if k in calls:
                s = step.out
                if updating and s in self._updates:
                    pass  # its block: its donor's or its own, set at the first update (_begin_updates)
                elif s not in internal:
                    allocate = (act.allocate, _allocation(s, step.node))
                    (early if updating and k > first_update else actions).append(allocate)
                if k == first_update:
                    at = len(actions)  # what can fail from here on moves here, before the first update
                if in_place and k in self._in_place:
                    actions.append((act.launch_all, (self._in_place[k].launch,)))
                elif not (in_place and k in self._in_place_skip):
                    actions.append((act.launch_all, tuple(p.launch for p in prepared[k])))
                if step.host_copy:
                    actions.append((act.host_copy, (step.ins[0], s)))
            elif k not in hoisted and k not in self._folded:
                actions.append((act.generic, step))
            # inputs stay in their slots (the caller holds them anyway): only results are let go
            drops = tuple(s for s in step.drop if s not in internal and s in self._produced)
            if drops:
                actions.append((act.drop, drops))
            actions.extend((act.close, chunk) for chunk in closes[k])
        if updating:
            actions[at:at] = early + [(act.begin_updates, self._update_allocations)]
        merged = []  # consecutive launches as one action
        for fn, arg in actions:
            if fn is act.launch_all and merged and merged[-1][0] is act.launch_all:
                merged[-1] = (act.launch_all, merged[-1][1] + arg)
            else:
                merged.append((fn, arg))
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
            self._pinned_bytes = sum(bucket(slots[s].nbytes) for s in self._inputs if s in self.ptr_uses)
        if donors is None:
            return self.peak_bytes + self._pinned_bytes <= self.memory.budget
        key = frozenset(donors)
        if self._donor_bytes is None or self._donor_bytes[0] != key:  # the same every replay, as a rule
            pinned = {id(slots[s]) for s in self._inputs if s in self.ptr_uses}
            extra = sum(bucket(b.nbytes) for b in donors.values() if id(b) not in pinned)
            extra += sum(n for s, n in self._update_bytes.items() if s not in donors)
            self._donor_bytes = (key, extra)
        return self.update_peak_bytes + self._pinned_bytes + self._donor_bytes[1] <= self.memory.budget

    def run(self, slots, execute, stream0, donors=None):
        """Replay into `slots` (the external values already in place), random kernels drawing from
        streams `stream0` + their offset; with `donors` (accepted by `accepts_donors` and `fits`), the
        replaced values are written over those Buffers' device blocks. Raises NoMemory when the device
        memory runs out (nothing the replay made is kept, and no donor has been written)."""
        for offset, patches in self._random:
            words = rng_key_words(rng.DEFAULT.seed, stream0 + offset)
            for p, j, word in patches:
                p.set_scalar(j, words[word])
        actions, chunks, hits = self._actions, self._chunks, self._internal_uses
        self.launched, self.skipped = self.kernels, self.folded
        if donors is not None:
            actions = self._update_actions
            if self._writes_in_place(slots, donors):
                actions, chunks = self._in_place_actions, self._in_place_chunks
                unstacked = len(self._in_place_skip)  # the copies not run
                self.launched -= unstacked
                self.skipped += unstacked
                hits -= unstacked  # each read the stacked result
        if chunks is not self._chunks_in_use:  # another layout: its values are re-pointed as it opens
            for chunk in chunks:
                chunk.base = None
            self._chunks_in_use = chunks
        DeviceReplay(self, slots, execute, donors, hits).run(actions, chunks)

    def _writes_in_place(self, slots, donors):
        """Whether the AdamW updates write p, m, v over their old blocks themselves this replay: each
        update's p, m, v have their donors, those are the old values it reads, and no step after it
        reads them (accepts_donors noted where each bound Buffer is read last). The other replaced
        values (the .grad's) may have none: those get blocks of their own (_begin_updates)."""
        if self._in_place_actions is None:
            return False
        last_read = self._donor_reads
        for u in self._in_place_specs:
            for new, old in zip(u.news, u.olds):
                buf = donors.get(new)
                if buf is None or buf is not slots[old] or last_read(id(buf), -1) > u.step:
                    return False
        return True

    def point(self, s, ptr):
        """Slot `s`'s prepared launches read (or write) it at `ptr` (patched only when it moved)."""
        if self.ptr_at.get(s) != ptr:
            for p, i in self.ptr_uses[s]:
                p.set_pointer(i, ptr)
            self.ptr_at[s] = ptr


def _allocation(slot, node):
    """What `device_replay.allocate` needs to make slot `slot`'s Buffer for `node`'s value."""
    return (slot, node.id, node.op, node.shape, node.dtype, node.nbytes)
