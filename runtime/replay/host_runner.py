"""A compiled step's host kernels called from a list prepared once: arrays in slots, no Buffers between.

A `Program` (runtime/replay/capture.py) replays through the executors: per kernel a residency
check, a Buffer for the result, a profiling hook, the backend's choice among its kernels, and the
kernel's own checks (bench/RESULTS.md, 'Figures behind the code's choices'). When
every step of a program runs on host backends (the CPU device), a `HostRunner` resolves each step once to
a callable on host arrays (`HostBackend.prepared`: the kernel the backend would pick for these shapes
and dtypes), and a replay is a loop over (callable, operand slots, result slot), generated as one Python
function once the plan has replayed GENERATE_AFTER times: the same kernels on the same arrays in the
same order, so the same bytes as the executors'. Only the values the caller gets back become Buffers.
A replay while profiling, or with a bound value not on the host, goes through the executors (the
caller's fallback).

Steps that read only the program's constants (a causal mask's `tril(ones)`, `arange`, fills made from
attributes) give the same values at every replay: the first replay keeps them, and
later replays skip those steps (constant folding). A constant is private to its program (a value alive
before the call is bound, not constant), so nothing can change it between replays; a folded value is
never handed back as the caller's own (a caller that asks for one, eager repeats for a node someone holds,
gets it shared, so a write to it copies first), and only values up to FOLD_MAX_BYTES are kept, so a replay
holds at most a few small arrays more than the eager call between steps.
"""
from .. import executor
from ..residency import Buffer, host_view
from .runner import Runner

FOLD_MAX_BYTES = 1 << 20  # the largest value a host runner keeps between replays as a folded constant
# Replays after which a plan's calls run as one generated function. Generating costs once per call
# (compiling the source) what a few tens of replays save (bench/RESULTS.md, 'Figures behind the code's
# choices'); a step replayed twice is most likely a training loop's, which runs thousands.
GENERATE_AFTER = 2


def supports(program):
    """Whether every step of `program` is a host kernel or a view of a host value."""
    return all(step.kind == "view" or (step.kind in ("node", "host_group") and step.runs_on.is_host
                                      and step.follow is None and step.launches is None)
               for step in program.steps)


class HostRunner(Runner):
    """The prepared calls of one Program whose steps all run on the host. `run(slots, stream0)` replays
    into `slots` (Buffers of the bound and constant values in, the outputs' Buffers out); a step the
    calls cannot take (a random kernel, whose streams are the replay's; a group the fuser declines this
    time) goes through `executor(step, operand Buffers, stream0)`. A group reading 0-d values (a scale
    computed in the step) takes them from its operand arrays, after its inputs, as its parameters."""

    def __init__(self, program, executor, fold=True):
        # the executors' side of the calls, apart from the runner: the calls hold it, and a runner no
        # longer kept is then freed at once (no cycle for the collector to find)
        self._through = _ThroughExecutors(executor)
        self.skipped, self.can_update, self.updated = 0, False, 0  # no step skipped, no state overwritten
        self._keep = set(program.outputs)
        self._calls = []
        self._replay, self._runs = None, 0  # the calls as one generated function once hot (_generated)
        self._ids = {}  # result slot -> (node id, op) naming its Buffer (None: a view, named by its source)
        for step in program.steps:
            call, self._ids[step.out] = self._prepare(step)
            out = step.out
            if step.extra_outs:  # a kernel with several results: its call returns them all, in order
                out = (step.out,) + step.extra_outs
                for s, extra in zip(step.extra_outs, step.what.extras):
                    self._ids[s] = (extra.id, extra.op)
            self._calls.append((call, step.ins, out, step.drop))
        # the kernels called as prepared (views are no kernels; the executors run the rest)
        self.launched = sum(step.kind != "view" and not self._through_executors(step)
                            for step in program.steps)
        made = {s for step in program.steps for s in (step.out,) + step.extra_outs}
        self._inputs = [s for s in range(program.n_slots) if s not in made]
        self._views = {step.out: step.ins[0] for step in program.steps if step.kind == "view"}
        self._folded = _foldable(program, self._keep) if fold else {}
        self._constants, self._kept_all = {}, False
        # the first replay keeps every folded value: the ones later steps read, and the ones a caller whose
        # `keep` names them gets (eager repeats: a node someone holds), shared, so a write to it copies
        self._folded_outs = {program.steps[k].out for k in self._folded}
        for k in self._folded:
            call, ins, out, drop = self._calls[k]
            self._calls[k] = (self._keeping(call, out), ins, out, drop)

    def _keeping(self, call, out):
        constants = self._constants

        def keep(*args):
            value = constants[out] = call(*args)
            return value
        return keep

    def _fold(self):
        """From the second replay on: drop the folded steps (the values the first kept stand in)."""
        folded = self._folded
        self._calls = [call for k, call in enumerate(self._calls) if k not in folded]
        self._replay = None
        self.skipped = sum(kind != "view" for kind in folded.values())
        self.launched -= sum(kind == "prepared" for kind in folded.values())
        self._folded = None

    @staticmethod
    def _through_executors(step):
        # a random kernel: its streams are the replay's
        return step.stream is not None

    def _prepare(self, step):
        what, backend = step.what, step.runs_on
        if step.kind == "view":
            return (lambda src: host_view(src, what)), None
        if step.kind == "node" and step.stream is None:
            return backend.prepared(what, step.dtypes), (what.id, what.op)
        root, through = step.node, self._through
        if not self._through_executors(step):
            recipe, params, n_in = what.recipe, list(what.params), len(what.inputs)
            reads = [hasattr(p, "op") for p in params]  # 0-d operand nodes: their values follow the inputs
            reads = reads if any(reads) else None
            lean = []  # the backend's prepared call for these operands' shapes (the same at every replay)

            def fused(*arrays):
                given = params
                if reads is not None:
                    values = iter(arrays[n_in:])
                    given = [next(values).item() if read else p for p, read in zip(params, reads)]
                if not lean:
                    lean.append(backend.prepared_fused(recipe, root, [a.shape for a in arrays[:n_in]]))
                if lean[0] is not None:
                    return lean[0](arrays[:n_in], given)
                out = backend.launch_fused(recipe, root, arrays[:n_in], given)
                return out if out is not None else through(step, arrays)
            return fused, (root.id, root.op)
        return (lambda *arrays: through(step, arrays)), (root.id, root.op)

    def replay(self, slots, stream0, execute=None, donors=None):
        """The runners' one interface (runtime/replay/runner.py); a host runner calls its own executor
        for what its calls cannot take and writes over no donor."""
        return self.run(slots, stream0)

    def run(self, slots, stream0):
        """Replay the calls into `slots`; False (slots untouched) where the executors must run instead:
        a bound or constant value not on the host."""
        if not self.ready(slots):
            return False
        values = self.values(slots, stream0, self._keep)
        for s, (value, exclusive) in values.items():
            node_id, op = self._ids[s] or (self._source_id(s, slots), "data")
            slots[s] = Buffer.host_result(node_id, op, value, exclusive)
        return True

    def ready(self, slots):
        """Whether `values` can run on `slots`: every bound or constant value they hold is on the host."""
        for s in self._inputs:
            buf = slots[s]
            if buf is not None and not buf.on_host:
                return False
        return True

    def values(self, slots, stream0, keep):
        """Run the calls on the host arrays of `slots`' Buffers: {slot in `keep`: (array, whether it shares
        memory with no operand)}, every other value dropped after its last reader. Only where `ready`
        said yes for these slots."""
        arrays = [None] * len(slots)
        for s in self._inputs:
            buf = slots[s]
            if buf is not None:
                arrays[s] = buf.host
        if self._kept_all and self._folded:
            self._fold()
        for s, value in self._constants.items():
            arrays[s] = value
        self._through.stream0 = stream0
        self._runs += 1
        if self._replay is None and self._runs > GENERATE_AFTER:
            self._replay = _generated(self._calls)
        exclusive = (self._replay or _looped)(self._calls, arrays, keep)
        self._kept_all = True
        for s in self._folded_outs:
            if s in keep:  # not made by this replay's calls (from the second on), and never the caller's alone
                arrays[s] = self._constants[s]
                exclusive[s] = False
        return {s: (arrays[s], excl) for s, excl in exclusive.items()}

    def _source_id(self, s, slots):
        while s in self._views:
            s = self._views[s]
        return self._ids[s][0] if s in self._ids else slots[s].node_id


class _ThroughExecutors:
    """Runs a step through the executors on host arrays, with the streams of the replay under way."""

    __slots__ = ("executor", "stream0")

    def __init__(self, executor):
        self.executor, self.stream0 = executor, 0

    def __call__(self, step, arrays):
        operands = [Buffer.host_result(-1, "data", a, False) for a in arrays]
        made = self.executor(step, operands, self.stream0)
        return tuple(buf.host for buf in made) if step.extra_outs else made.host


def _foldable(program, keep):
    """{step index: "view", "prepared" or "executors"} of the steps computed from constants alone: no
    bound, dynamic or random input, a result no larger than FOLD_MAX_BYTES that is not handed back."""
    known = {s for s, _ in program.consts}
    folded = {}
    for k, step in enumerate(program.steps):
        if (step.kind not in ("view", "node", "host_group") or step.stream is not None or step.out in keep
                or step.extra_outs):
            continue
        if not all(s in known for s in step.ins):
            continue
        if step.kind != "view" and step.node.nbytes > FOLD_MAX_BYTES:
            continue
        known.add(step.out)
        folded[k] = ("view" if step.kind == "view" else
                     "executors" if HostRunner._through_executors(step) else "prepared")
    return folded


def _looped(calls, arrays, keep):
    """Run `calls` on `arrays` in order: each call on its slots' arrays, its result stored in its slot (a
    tuple of slots takes its results in order), each slot not in `keep` emptied after its last reader.
    Returns {slot in `keep`: exclusive_result}."""
    exclusive = {}
    for call, ins, out, drop in calls:
        args = [arrays[s] for s in ins]
        value = call(*args)
        if type(out) is tuple:  # a kernel with several results
            for s, v in zip(out, value):
                arrays[s] = v
                if s in keep:
                    exclusive[s] = executor.exclusive_result(v, args)
        else:
            arrays[out] = value
            if out in keep:
                exclusive[out] = executor.exclusive_result(value, args)
        for s in drop:
            if s not in keep:
                arrays[s] = None
    return exclusive


def _generated(calls):
    """`calls` as one Python function doing what `_looped(calls, ...)` does, without unpacking, argument
    lists and loop control per call (a few hundred per training step; bench/RESULTS.md, 'Figures behind the
    code's choices')."""
    lines = ["def replay(calls, a, keep):", "    exclusive = {}"]
    names = {"exclusive_result": executor.exclusive_result}
    for k, (call, ins, out, drop) in enumerate(calls):
        names[f"c{k}"] = call
        args = "".join(f"a[{s}], " for s in ins)
        if type(out) is tuple:  # a kernel with several results
            lines.append(f"    {''.join(f'a[{s}], ' for s in out)}= c{k}({args})")
            lines.extend(f"    if {s} in keep: exclusive[{s}] = exclusive_result(a[{s}], ({args}))" for s in out)
        else:
            lines.append(f"    v = a[{out}] = c{k}({args})")
            lines.append(f"    if {out} in keep: exclusive[{out}] = exclusive_result(v, ({args}))")
        lines.extend(f"    if {s} not in keep: a[{s}] = None" for s in drop)
    lines.append("    return exclusive")
    exec(compile("\n".join(lines), "<host runner>", "exec"), names)
    return names["replay"]
