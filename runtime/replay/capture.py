"""Capture and replay: the kernels one call ran, recorded once, then run again on new values with no graph
building, autograd, fusion planning or backend choice (the API's `lt.jit` decides when).

While a `Recorder` is active the executor reports every kernel it runs (its backend, a copy of its node
without inputs, the operand Buffers, the result Buffer). Values get numbered slots: a kernel's result, a
value held by a tensor when the call began ("bound": the caller supplies it at each replay), a host value
recomputed at each replay ("dynamic": an optimizer's learning rate), or anything else read (a constant,
kept). A `Program` runs the steps through the executors, so uploads, downloads, pinned
reads, memory budgets and the transfer log behave as in the eager run; an intermediate is dropped after
its last reader, as the eager run drops it.
"""
import collections
import functools
import threading
import weakref

import numpy as np

from .. import copies, counters, devices, executor, next_reads, parallel, placement, rng
from ..backends.lowering import for_indices
from ..graph import Node
from ..next_reads import NextReads
from ..prefetch import Prefetcher
from ..locking import computing
from ..residency import Buffer, host_view, is_param
from ..schedule import GROUPS, KERNELS, Step
from ..transfers import LOG
from . import device_runner, host_runner, refusals


def template(node):
    """A copy of `node` for replays: op, attrs, shape, dtype and id, without inputs or value (so the
    program holds no value of the captured call alive)."""
    copy = Node.__new__(Node)
    copy.id, copy.op, copy.inputs, copy.attrs = node.id, node.op, (), node.attrs
    copy.shape, copy.dtype, copy.buffer, copy.used = node.shape, node.dtype, None, False
    return copy


class GroupTemplate:
    """A fused group for replays: root and extras templates, recipe, label; `inputs` only counts them,
    and a 0-d operand node among the parameters becomes its template (its value comes from a slot)."""

    __slots__ = ("root", "extras", "recipe", "inputs", "params", "label")

    def __init__(self, group):
        self.root, self.recipe, self.label = template(group.root), group.recipe, group.label
        self.extras = tuple(template(x) for x in group.extras)
        self.inputs = [None] * len(group.inputs)
        self.params = [template(p) if isinstance(p, Node) else p for p in group.params]

    @property
    def made(self):
        return (self.root,) + self.extras


def recorded_step(kind, backend, what, ins, out, operands=()):
    """The Step (runtime/schedule.py) a capture records for a kernel that ran: `what` a node or group
    template; a device kernel also keeps its launches, how its operands were passed (`params`: 0-d host
    values as scalars), their shapes and dtypes, whether its result kept a host copy, and the device a
    constant followed its consumer to and ran on (runtime/constants.py), which a replay places it on
    again."""
    on_device = kind in ("node", "device_group") and not backend.is_host
    return Step.recorded(
        kind, backend, what, ins, out,
        launches=backend.last_launches() if on_device and kind == "node" else None,
        follow=placement.followed(what) if kind == "node" and not backend.is_host else None,
        params=tuple(is_param(b) for b in operands) if on_device else (),
        shapes=tuple(b.shape for b in operands), dtypes=tuple(b.dtype for b in operands),
        host_copy=on_device and kind == "node" and placement.keeps_host_copy(what, operands))


class Exchange:
    """What an "exchange" step runs: copies.exchange's arguments after the buffer, and the bytes of
    its result (for runtime/replay/device_runner.py's memory model)."""

    __slots__ = ("args", "nbytes")

    def __init__(self, args, nbytes):
        self.args, self.nbytes = args, nbytes




class Recorder:
    """Collects the steps of one call, made by one thread (other threads' kernels are not its)."""

    def __init__(self):
        self.thread = threading.get_ident()
        self.bound, self._bound_refs = {}, []
        self.steps, self.sources, self.refused, self.reason = [], [], None, None
        self.disturbed = False  # another thread computed during the capture (capturing.other_thread_computes)
        self._slots, self._refs, self._dynamic, self.hooks = {}, {}, {}, []
        self.seed, self.start_stream = rng.DEFAULT.seed, rng.DEFAULT.next_stream
        # The most device memory the captured (eager) call added, less the copies it uploaded: a
        # replay's plan may use as much (runtime/replay/device_runner.py).
        self._watch, self.peak_added = PeakWatch(devices.chain()[0]), None

    def close(self):
        """The call ended (returned or raised): stop watching device memory."""
        if self._watch is not None:
            self.peak_added, self._watch = self._watch.close(), None

    def bind(self, buffer, key):
        """A value the caller supplies at each replay under `key` (a tensor's value when the call began;
        the first key given for a buffer counts). Held weakly: it is forgotten when it dies."""
        if id(buffer) not in self.bound:
            self.bound[id(buffer)] = key
            bound = self.bound  # the callback holds the dict, not the recorder (no cycle through it)
            self._bound_refs.append(weakref.ref(buffer, lambda _, k=id(buffer): bound.pop(k, None)))

    # ---- what the engine reports -----------------------------------------------------------------
    def refuse(self, refusal, detail=None):
        """The call did something a replay cannot repeat (runtime/replay/refusals.py: a host read or
        write, say); the first stays: `refused` (the Refusal) and `reason` (its text)."""
        if self.refused is None:
            self.refused, self.reason = refusal, refusal.says(detail)

    def made(self, buffer):
        """Whether `buffer` is a value this capture's kernels (or host views) made."""
        slot = self._slots.get(id(buffer))
        return slot is not None and self.sources[slot] == ("kernel",)

    def dynamic(self, buffer, fn):
        """Host value `buffer` (0-d, made during the call) is `fn()` at each replay."""
        self._dynamic[id(buffer)] = (buffer, fn)

    def on_replay(self, hook):
        """`hook()` runs at each replay before the kernels (Python-side state such as step counters);
        it returns a function that undoes it, called if the replay fails."""
        self.hooks.append(hook)

    def kernel(self, kind, backend, what, operands, result, extras=()):
        what = GroupTemplate(what) if kind in GROUPS else template(what)
        step = recorded_step(kind, backend, what, [self.slot(b) for b in operands], self._result_slot(result), operands)
        step.extra_outs = tuple(self._result_slot(b) for b in extras)
        if kind == "node" and "stream" in what.attrs and "seed" in what.attrs:
            if what.attrs["seed"] != self.seed:
                self.refuse(refusals.RESEEDED)
            step.stream = what.attrs["stream"] - self.start_stream
        self.steps.append(step)

    def view(self, source, what, result):
        """`result` is a host view of `source.host` made without a kernel (optimizers' (p, m, v)):
        `what` = (index, shape), as residency.host_view takes it."""
        self.steps.append(Step.recorded("view", None, what, [self.slot(source)], self._result_slot(result)))

    def exchange(self, what, source, result):
        """`result` is copies.exchange(source, *what): a collective, repeated at each replay."""
        self.steps.append(Step.recorded("exchange", None, Exchange(what, result.nbytes), [self.slot(source)],
                                        self._result_slot(result)))

    # ---- slots -------------------------------------------------------------------------------------
    def slot(self, buf):
        """The slot of a value read: known, or new and external (bound, dynamic or a constant)."""
        slot = self._slots.get(id(buf))
        if slot is not None:
            return slot
        key = self.bound.get(id(buf))
        if key is not None:
            source = ("bound", key)
        elif id(buf) in self._dynamic:
            source = ("dynamic", self._dynamic[id(buf)][1], buf.dtype)
        else:
            source = ("const", buf)
        return self._new_slot(buf, source)

    def _result_slot(self, buf):
        return self._new_slot(buf, ("kernel",))

    def _new_slot(self, buf, source):
        slot = len(self.sources)
        self.sources.append(source)
        key = id(buf)
        self._slots[key] = slot
        # A dead buffer's id may be reused by a new one: forget it when it dies.
        slots = self._slots  # the callback holds the dict, not the recorder (no cycle through it)
        self._refs[slot] = weakref.ref(buf, lambda _, key=key, slot=slot: _forget(slots, key, slot))
        return slot

    def program(self, outputs, chain, replaced=()):
        """The Program replaying the steps; `outputs` are the Buffers the caller wants back, in order;
        those at positions `replaced` are new values of state (see Program)."""
        out_slots = [self.slot(b) for b in outputs]
        self.close()
        return Program(self.steps, self.sources, out_slots, self.hooks,
                       rng.DEFAULT.next_stream - self.start_stream, chain, self.peak_added, replaced)


class ReplayError(RuntimeError):
    """A replay could not run as recorded (memory could not be had on the device and no host backend
    can run a fused group)."""


class Program:
    """Recorded steps over slots. `run(bound)` replays them; `bound` maps each bound key to its Buffer.

    The outputs at positions `replaced` are new values of state the caller keeps (parameters, optimizer
    moments, .grad's): a replay may write one over the old value's device block when the caller hands
    that Buffer over as nobody else's (`run`'s `donors`; runtime/replay/device_runner.py decides where it can)."""

    def __init__(self, steps, sources, outputs, hooks, streams, chain, peak_added=None, replaced=()):
        # A slot at two output positions (a returned tensor that is also state) is never overwritten.
        self._replaced = {i: outputs[i] for i in replaced if outputs.count(outputs[i]) == 1}
        self.replaced_slots = set(self._replaced.values())
        steps = _state_slices_early(steps, {outputs[i] for i in replaced})
        self.steps, self.outputs, self.hooks, self.streams, self.chain = steps, outputs, hooks, streams, chain
        self.peak_added = peak_added  # device bytes the captured call added at most (None: not known)
        self.n_slots = len(sources)
        self.consts = [(s, src[1]) for s, src in enumerate(sources) if src[0] == "const"]
        self.bound = [(s, src[1]) for s, src in enumerate(sources) if src[0] == "bound"]
        self.dynamic = [(s, src[1], src[2]) for s, src in enumerate(sources) if src[0] == "dynamic"]
        self.bound_keys = sorted({key for _, key in self.bound}, key=repr)
        keep = set(outputs)
        last = {}
        for k, step in enumerate(steps):
            for s in step.ins:
                last[s] = k
        drops = {}
        for s, k in last.items():
            if s not in keep:
                drops.setdefault(k, []).append(s)
        for k, step in enumerate(steps):
            step.drop = tuple(drops.get(k, ()))
            for out in (step.out,) + step.extra_outs:
                if out not in keep and out not in last:
                    step.drop += (out,)  # a result nobody reads (kept by the eager run only as long)
        kernels = [step for step in steps if step.kind in KERNELS]
        self.split = parallel.worth_splitting([step.node for step in kernels],
                                              [shape for step in kernels for shape in step.shapes])
        # {step index: output positions of replaced state whose new value that step makes}
        made_by = {out: k for k, step in enumerate(steps) for out in (step.out,) + step.extra_outs}
        # kernels with several results replay through the executors or a host runner only
        self._several = any(step.extra_outs for step in steps)
        self._made_at = collections.defaultdict(list)
        for i, s in self._replaced.items():
            if s in made_by:
                self._made_at[made_by[s]].append(i)
        # the runner (runtime/replay/runner.py): a DeviceRunner, built after the first replay, or a HostRunner,
        # built at the first (False: none)
        self._runner = None
        self._kernels = sum(step.kind in KERNELS for step in steps)

    def __len__(self):
        return self._kernels

    def host_runner(self, fold=True):
        """A runtime.replay.host_runner.HostRunner of these steps (all on the host: host_runner.supports), running
        through this program's executors what its prepared calls cannot (with `fold`: constants folded)."""
        return host_runner.HostRunner(self, functools.partial(_execute, chain=self.chain), fold)

    @property
    def updates_in_place(self):
        """Whether a replay can write replaced state over the old values (a device runner that can): only
        then are `run`'s donors worth finding."""
        return bool(self._runner) and self._runner.can_update

    @computing
    def run(self, bound, donors=None, made=None):
        """Replay: Python hooks, fresh random streams, then every step. Returns the output Buffers.
        `bound` is emptied once its Buffers are in their slots (each is then dropped after its last
        reader). `donors` ({output position: Buffer}) are old values of replaced state that nothing else
        holds. `made(position, Buffer)`, where the executors run the steps, is told each new value of
        replaced state as soon as it is made, so that the caller can let the old one go, as the eager
        run does once the old value's last reader ran."""
        undo = [hook() for hook in self.hooks]
        stream0 = rng.DEFAULT.next_stream
        rng.DEFAULT.next_stream += self.streams
        try:
            slots = [None] * self.n_slots
            for s, buf in self.consts:
                slots[s] = buf
            for s, key in self.bound:
                slots[s] = bound[key]
            bound.clear()
            for s, fn, dtype in self.dynamic:
                slots[s] = _host_value(np.asarray(fn(), dtype=dtype))
            kernels = len(self)
            with parallel.kernels_session((), worth=self.split):
                if self._run_planned(slots, stream0, donors):
                    kernels -= self._runner.skipped
                else:
                    watch = PeakWatch(self.chain[0]) if self._runner is None else None
                    made_at = self._made_at if made is not None else {}
                    memories = [b.memory for b in self.chain if not b.is_host]
                    reads = NextReads(self.steps, slots) if memories else None
                    prefetcher = Prefetcher(lambda step: [slots[s] for s in step.ins]) if memories else None
                    pressed = sum(m.evictions for m in memories)
                    try:
                        with next_reads.guiding(memories, reads):
                            for k, step in enumerate(self.steps):
                                if reads is not None:
                                    reads.at = k
                                    prefetcher.reading(step)
                                out = _execute(step, [slots[s] for s in step.ins], stream0, self.chain)
                                if step.extra_outs:
                                    for s, extra in zip(step.extra_outs, out[1:]):
                                        slots[s] = extra
                                        if reads is not None:
                                            reads.made(s, extra)
                                    out = out[0]
                                slots[step.out] = out
                                if reads is not None:
                                    reads.made(step.out, out)
                                for s in step.drop:
                                    slots[s] = None
                                if reads is not None and sum(m.evictions for m in memories) != pressed:
                                    prefetcher.ahead(self.steps, k)  # the budget binds in this replay
                                for i in made_at.get(k, ()):
                                    made(i, slots[self.outputs[i]])
                    finally:
                        peak = watch.close() if watch is not None else None
                        if prefetcher is not None:
                            prefetcher.finish()
                    if watch is not None:  # the plan is laid out knowing what this replay held at its peak
                        self._runner = device_runner.DeviceRunner(self, self.chain[0], peak)
        except BaseException:
            rng.DEFAULT.next_stream = stream0
            for fn in reversed(undo):
                if fn is not None:
                    fn()
            raise
        counters.COUNTERS.realizations += 1
        counters.COUNTERS.kernels += kernels
        return [slots[s] for s in self.outputs]

    def _run_planned(self, slots, stream0, donors):
        """Replay through the host runner (on the CPU) or the device runner (laid out after the first
        replay, which the executors run) when there is one and it fits the budget, overwriting the donors'
        blocks where it can; False if the executors must run the steps."""
        if self._runner is None and self.chain[0].is_host and host_runner.supports(self):
            self._runner = self.host_runner()
        elif self._runner is None and (self._several or not device_runner.supports(self.chain[0])):
            self._runner = False
        runner = self._runner
        if not runner or LOG.profiling:
            return False
        donors = {self._replaced[i]: buf for i, buf in donors.items() if i in self._replaced} if donors else None
        if not runner.replay(slots, stream0, lambda step, operands: _execute(step, operands, stream0, self.chain),
                             donors):
            return False
        counters.COUNTERS.prepared_kernels += runner.launched
        counters.COUNTERS.updated_in_place += runner.updated
        return True


def _state_slices_early(steps, state):
    """`steps` with each slice making new state (an output slot in `state`) moved to right after the step
    making the value it slices. The caller's tensor takes its new value, and lets the old one go, once
    that slice is made (`Program.run`'s `made`); the eager step it was captured from makes an optimizer's
    updates first and their slices after them all, but its tensors point at their pending slices before
    the updates run, so each old value goes with its update. Made in the captured order, a replay held the
    old state and the new until the last update had run (the state twice over at the step's end)."""
    made_at = {step.out: k for k, step in enumerate(steps)}
    early = {}
    for step in steps:
        if step.kind == "node" and step.node.op == "slice" and step.out in state and len(step.ins) == 1:
            source = made_at.get(step.ins[0])
            if source is not None and getattr(steps[source].node, "op", None) != "slice":
                early.setdefault(source, []).append(step)
    if not early:
        return steps
    moved = {id(step) for group in early.values() for step in group}
    ordered = []
    for k, step in enumerate(steps):
        if id(step) not in moved:
            ordered.append(step)
        ordered.extend(early.get(k, ()))
    return ordered


class PeakWatch:
    """The most device memory a stretch of work added on `device` (None on the host), less what it
    uploaded (copies of values that existed before it, which the same work replayed uploads too)."""

    def __init__(self, device):
        self._memory = None if device.is_host else device.memory
        if self._memory is not None:
            self._scope = self._memory.open_peak_scope()
            self._start = self._memory.resident_bytes - _uploaded(device.name)

    def close(self):
        if self._memory is None:
            return None
        self._memory.close_peak_scope(self._scope)
        return self._scope[0] - self._start - _uploaded(self._memory.backend.name)


def _forget(slots, key, slot):
    if slots.get(key) == slot:
        del slots[key]


def _uploaded(device_name):
    return sum(total[1] for (direction, _, device), total in LOG.copies.items()
               if direction == "h2d" and device == device_name)


def _host_value(array):
    return Buffer.host_result(-1, "data", array, True)


def _execute_node(step, what, operands, backend, chain):
    # Launches pass 0-d host operands by value: reusable only if each operand is passed as when captured
    # (under a tight budget a producer may have run on the host then and on the device now, or back).
    launches = None
    if step.launches is not None and all(is_param(b) == p for b, p in zip(operands, step.params)):
        launches = for_indices(step.launches, operands[1] if len(operands) > 1 else None)
    if launches is None and not backend.is_host:  # placed again from these values
        launches = placement.choose(backend, what, operands)
        if launches is None:
            return executor.run_down_chain(what, operands, chain[1:])
    if launches is not None and launches is not True:
        backend.reuse_launches(what, launches)
    buf = executor.run_node(what, operands, backend)
    return buf if buf is not None else executor.run_down_chain(what, operands, chain[1:])


def _execute(step, operands, stream0, chain):
    kind, backend, what = step.kind, step.runs_on, step.what
    if kind == "view":
        src = operands[0]
        if not src.on_host:  # captured where the optimizer ran on the host; under another budget it ran on a device
            copies.download(src, "host-kernel")
        return Buffer.host_result(src.node_id, "data", host_view(src.host, what), False)
    if kind == "exchange":
        return copies.exchange(operands[0], *what.args)
    if kind == "node":
        if step.stream is not None:
            what = template(what)
            what.attrs = {**what.attrs, "seed": rng.DEFAULT.seed, "stream": stream0 + step.stream}
        if step.follow is not None:
            with placement.following(what, step.follow):
                return _execute_node(step, what, operands, backend, chain)
        return _execute_node(step, what, operands, backend, chain)
    if kind == "host_group":  # the Buffers of the group's values; the root's alone unless it has extras
        made = executor.fused_on_host(what, operands, backend)
    else:
        buf = executor.group_on_device(what, operands, backend)
        made = None if buf is None else [buf]
    if made is None:  # memory could not be had on the device, or a GPU fuser declined this time
        for fuser in devices.host_fusers(chain[0], chain):
            made = executor.fused_on_host(what, operands, fuser)
            if made is not None:
                break
        else:
            raise ReplayError(f"a compiled step could not run {what.label} where it ran when captured, and no "
                              f"host backend runs fused kernels; call the function without lt.jit")
    return made if step.extra_outs else made[0]
