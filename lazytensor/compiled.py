"""`lt.jit`: compile a function of tensors (typically a whole training step) by recording the kernels of
one call and replaying them on later calls whose guards match.

For each distinct guard (the arguments' tensor shapes, dtypes and requires_grad, the other arguments'
values, the default dtype, the device, grad mode), the first call runs eagerly (a warm-up: optimizers
create their state), the second runs eagerly while the engine records every kernel (runtime/replay/capture.py),
and later calls replay the record: no graph, no autograd, no planning, only the kernels in order on the
new values. Tensors that were alive before the call and that the call replaced (parameters, optimizer
state, `.grad`) get the replay's values, in their own tensor objects (on a device whose replays run
from a device runner, written over the old values' device blocks when no one else holds an old value:
a tensor sharing its node, a kept `.grad`, another node on its Buffer; weak references tell, `_donors`); a `.grad` the
call replaced without reading it (`zero_grad` dropped it) is dropped when the replay starts, as the eager
call drops it (so a replay that fails leaves it dropped, as a failing eager call would), and is never
a donor; where the executors run the replay, each tensor takes its new value as soon as it is made,
so that the old one goes after its last reader, as in the eager call (a replay that fails later leaves
the state updated so far, as a failing eager call would); the random generator advances as the eager
call would; optimizers' Python counters advance by hooks they register (`on_replay`). The check for
other holders is made when the call starts: a thread that takes a new reference to a parameter while
another thread's replay runs may see the updated value.

A replay runs no Python of the function. So a capture is refused (a one-line `JitWarning`, and the
function then runs eagerly for that guard) when the call reads or writes values on the host (`.item()`,
printing, `copy_` from host data, `.to()`), reseeds the generator, or keeps new tensors anywhere but in
its return value and in `.grad` (the entries of runtime/replay/refusals.py for "jit"; each refusal is
counted in `lt.counters()["replay_refusals"]`). Python numbers computed inside the function are constants of the
capture: pass values that change (a learning rate of your own, a step count) as tensors or arguments.
When the function computes no gradient itself (a forward), a replay's results require grad where the
eager call's did but have no history: backward from them raises a RuntimeError that says so (compile
the whole step, backward included, or call the forward eagerly).
"""
import collections
import functools
import gc
import warnings
import weakref

import numpy as np

from . import dtypes, grad_mode
from .runtime import devices, hostio, scheduler
from .runtime.replay import capturing, refusals
from .runtime.replay.cache import Bounded
from .runtime.replay.capture import Recorder
from .tensor import Tensor

MAX_CACHED = 8  # guards kept per compiled function; the least recently used one goes first

_modules_called = None  # while capturing: the modules whose forward ran (their train/eval mode is a guard)


class JitWarning(UserWarning):
    """A compiled function could not be captured and runs eagerly for these inputs."""


def note_module(module):
    """Called by Module.__call__: while capturing, the module's mode becomes a guard."""
    if _modules_called is not None and capturing.current() is not None:
        _modules_called.append(module)


def on_replay(hook):
    """While capturing: `hook()` runs at each replay before the kernels (e.g. an optimizer's step
    counters) and returns a function undoing it (called if the replay fails) or None."""
    recorder = capturing.current()
    if recorder is not None:
        recorder.on_replay(hook)


def dynamic(tensor, fn):
    """While capturing: the 0-d host tensor `tensor`, made inside the call, is `fn()` at each replay."""
    recorder = capturing.current()
    if recorder is not None:
        recorder.dynamic(tensor._node.buffer, fn)


def jit(fn=None, *, warmup=1):
    """Decorate a function of tensors (`@lt.jit` or `@lt.jit(warmup=...)`): `warmup` eager calls per
    guard, then one captured call, then replays. `f.eager(...)` calls the function undecorated;
    `f.stats()` tells what it did; `f.reset()` drops every capture."""
    if fn is None:
        return lambda f: CompiledFunction(f, warmup)
    return CompiledFunction(fn, warmup)


MAX_VARIANTS = 4  # captures kept per guard, told apart by the state they found (which tensors had a .grad)


class _Entry:
    """One guard's state: calls so far, its captures (`variants`), or why it runs eagerly; captures
    refused while another thread computed (`retries`)."""

    __slots__ = ("calls", "variants", "eager", "keep", "retries")

    def __init__(self, keep):
        self.calls, self.variants, self.eager, self.keep, self.retries = 0, [], None, keep, 0


# A capture refused while another thread computed may have seen that thread's doing: it is tried again,
# this many times, before the refusal holds for good.
_RETRIES_WHEN_DISTURBED = 3


class _Variant:
    """One capture: its program; the tensors it binds (`bound`: key -> (weakref, read its .grad?)) and
    their shapes and dtypes; the modules and their modes; the tensors whose value (`rebinds`) or .grad
    (`regrads`, with whether they had one) it replaces, and of those the ones whose old .grad it does not
    read (`unread_grads`: (weakref, output position or None); `unread_at`: those positions); for each
    output position the tensor it replaces and whether as its .grad (`made`); the return value's
    structure; the tensors that shared a bound value with the one it is bound through (`sharing`: a guard
    that they still do, since the call may have read it through any of them)."""

    __slots__ = ("program", "bound", "specs", "modules", "rebinds", "regrads", "unread_grads", "unread_at", "made",
                 "structure", "n_outs", "with_history", "sharing")


class CompiledFunction:
    """The callable `lt.jit` returns."""

    def __init__(self, fn, warmup):
        if warmup < 0:
            raise ValueError(f"lt.jit: warmup must be >= 0, got {warmup}")
        functools.update_wrapper(self, fn)
        self.fn, self.warmup = fn, warmup
        self._cache = Bounded(MAX_CACHED)
        self._counts = collections.Counter()

    def __get__(self, obj, objtype=None):  # as a method: bind like a function would
        return self if obj is None else functools.partial(self.__call__, obj)

    def eager(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def reset(self):
        self._cache.clear()

    def stats(self):
        """Counts of eager, captured and replayed calls, and of guards cached now."""
        return {**{k: self._counts[k] for k in ("eager", "captured", "replayed", "refused")},
                "cached": len(self._cache)}

    def __call__(self, *args, **kwargs):
        if capturing.anywhere():  # inside another capture (or another thread's): run eagerly
            self._counts["eager"] += 1
            return self.fn(*args, **kwargs)
        arg_tensors, keep = [], []
        key = (_signature(args, arg_tensors, keep), _signature(kwargs, arg_tensors, keep),
               dtypes.DEFAULT_FLOAT.name, tuple(id(b) for b in devices.chain()), grad_mode.is_grad_enabled())
        entry = self._cache.get(key)
        if entry is None:
            entry = _Entry(keep)
            self._cache.put(key, entry)
        entry.calls += 1
        if entry.eager is not None or entry.calls <= self.warmup:
            self._counts["eager"] += 1
            return self.fn(*args, **kwargs)
        for variant in entry.variants:
            bound = _bind(variant, arg_tensors)
            if bound is not None:
                self._counts["replayed"] += 1
                return _replay(variant, bound)
        # First capture, or every one missed: a state tensor died or changed shape, a module changed
        # mode, a .grad appeared or went (each such state keeps a capture of its own).
        return self._capture(entry, args, kwargs, arg_tensors)

    def _capture(self, entry, args, kwargs, arg_tensors):
        global _modules_called
        scheduler.realize([t._node for t in arg_tensors])  # inputs are values the replay binds
        recorder, refs, nodes, grads, buffer_ids, holders, grad_of, specs = _state_before(arg_tensors)
        chain = devices.chain()
        _modules_called = []
        try:
            with capturing.into(recorder):
                result = self.fn(*args, **kwargs)
                structure, outs = _structure(result, []), _tensors_in(result)
                alive = [ref() for ref in refs]  # None: died in the call (a .grad zero_grad dropped, say)
                rebound = [j for j, t in enumerate(alive) if t is not None and t._node is not nodes[j]()]
                regrads = [j for j, t in enumerate(alive) if t is not None and _grad_changed(t.grad, grads[j])]
                wanted = outs + [alive[j] for j in rebound] + \
                    [alive[j].grad for j in regrads if alive[j].grad is not None]
                scheduler.realize([t._node for t in wanted])
        finally:
            recorder.close()
            modules, _modules_called = _modules_called, None
        self._counts["captured"] += 1
        if recorder.refused is None:
            kept = _escaped(alive, wanted, recorder)
            if kept is not None:
                recorder.refuse(refusals.KEPT_TENSORS, kept)
        if recorder.refused is not None:
            refusals.refuse(refusals.JIT, recorder.refused)
            self._counts["refused"] += 1
            if recorder.disturbed and entry.retries < _RETRIES_WHEN_DISTURBED:
                entry.retries += 1  # another thread computed meanwhile: this capture only, try again
                return result
            entry.eager = recorder.reason
            warnings.warn(f"lt.jit({getattr(self.fn, '__qualname__', 'function')}): {recorder.reason}; "
                          f"it runs eagerly for these inputs", JitWarning, stacklevel=3)
            return result
        regrad_values = [alive[j].grad for j in regrads]
        targets = [t._node.buffer for t in outs] + [alive[j]._node.buffer for j in rebound] + \
            [g._node.buffer for g in regrad_values if g is not None]
        program = recorder.program(targets, chain, replaced=range(len(outs), len(targets)))
        # A value held by several tensors is bound through the one the call replaced, if any; a value
        # that was some tensor's .grad is bound as that tensor's .grad (accumulation reads it anew).
        replaced = set(rebound)
        variant = _Variant()
        variant.bound, variant.specs, variant.sharing = {}, {}, []
        for key in program.bound_keys:
            if key[0] == "alive":
                sharing = holders[buffer_ids[key[1]]]
                j = next((h for h in sharing if h in replaced), key[1])
                k = grad_of.get(j)
                variant.bound[key] = (refs[j], False) if k is None else (refs[k], True)
                variant.specs[key] = specs[j] if alive[j] is None else (alive[j].shape, alive[j]._node.dtype)
                if k is None and len(sharing) > 1:
                    # which holder the call read through is not known: the capture stands while they share
                    variant.sharing.append((refs[j], [refs[h] for h in sharing if h != j]))
        variant.modules = [(weakref.ref(m), m.training) for m in dict.fromkeys(modules)]
        n = variant.n_outs = len(outs)
        # a forward (no gradient computed inside) whose results the caller may differentiate: its replays'
        # results say they have no history when backward reaches them (a step's loss stays a plain value)
        variant.with_history = () if regrads else tuple(i for i, t in enumerate(outs) if t._grad_fn is not None)
        variant.rebinds = [(refs[j], n + k) for k, j in enumerate(rebound)]
        k = n + len(rebound)
        variant.regrads = []
        for j, g in zip(regrads, regrad_values):
            variant.regrads.append((refs[j], None if g is None else k, grads[j] is not None))
            k += g is not None
        read = {ref for ref, via_grad in variant.bound.values() if via_grad}
        variant.unread_grads = [(ref, k) for ref, k, had in variant.regrads if had and ref not in read]
        variant.unread_at = frozenset(k for _, k in variant.unread_grads)
        variant.made = {**{k: (ref, False) for ref, k in variant.rebinds},
                        **{k: (ref, True) for ref, k, _ in variant.regrads if k is not None}}
        variant.structure, variant.program = structure, program
        entry.variants.insert(0, variant)
        del entry.variants[MAX_VARIANTS:]
        return result


def _state_before(arg_tensors):
    """Before a capture: a Recorder binding every value a live tensor holds, and what is known of those
    tensors, all by weak reference (holding them would keep values alive that the eager call frees, such
    as the gradients `zero_grad` drops): their references, their nodes, their .grad's, their Buffers'
    ids, the tensors holding each Buffer, for a tensor that is another's .grad that other's index, and
    their shapes and dtypes."""
    gc.collect()  # a garbage tensor must not pass for state
    alive = _live_tensors()
    # Every value a tensor holds now becomes a Buffer, so the capture can bind it to its tensor: a
    # pending one (last call's .grad, say) would be computed inside the capture from inputs a replay
    # cannot supply.
    scheduler.realize([t._node for t in alive if t._node.buffer is None])
    refs = [weakref.ref(t) for t in alive]
    nodes = [weakref.ref(t._node) for t in alive]
    grads = [None if t.grad is None else weakref.ref(t.grad) for t in alive]
    buffer_ids = [id(t._node.buffer) if t._node.buffer is not None else None for t in alive]
    specs = [(t.shape, t._node.dtype) for t in alive]
    owner = {}
    for k, t in enumerate(alive):
        if t.grad is not None:
            owner.setdefault(id(t.grad), k)
    grad_of = {j: owner[id(t)] for j, t in enumerate(alive) if id(t) in owner}
    recorder = Recorder()
    for i, t in enumerate(arg_tensors):
        recorder.bind(t._node.buffer, ("arg", i))
    holders = collections.defaultdict(list)
    for j, t in enumerate(alive):
        if buffer_ids[j] is not None:
            holders[buffer_ids[j]].append(j)
            recorder.bind(t._node.buffer, ("alive", j))
    return recorder, refs, nodes, grads, buffer_ids, holders, grad_of, specs


def _live_tensors():
    """Every Tensor the collector tracks. By type, not isinstance: that would ask a dead weak proxy (or a
    module with deprecated attributes) for its __class__."""
    return [o for o in gc.get_objects() if issubclass(type(o), Tensor)]


def _grad_changed(grad, before):
    """Whether `.grad` is another tensor (or None) than `before`, a weak reference (None: it was None)."""
    if before is None:
        return grad is not None
    return grad is None or grad is not before()


def _signature(obj, tensors, keep):
    """The guard of one argument: tensors by shape, dtype and requires_grad (collected into `tensors`),
    containers by their items, numbers and strings by value, anything else by identity (kept alive)."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return ("tensor", obj.shape, obj._node.dtype, obj.requires_grad)
    if isinstance(obj, (list, tuple)):
        return (type(obj).__name__,) + tuple(_signature(o, tensors, keep) for o in obj)
    if isinstance(obj, dict):
        return ("dict",) + tuple((k, _signature(v, tensors, keep)) for k, v in obj.items())
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return (type(obj).__name__, obj)
    if isinstance(obj, np.ndarray):
        raise TypeError("lt.jit: pass NumPy arrays as tensors (lt.tensor(array)); a compiled function's "
                        "host data would be a constant of its capture")
    keep.append(obj)
    return ("object", id(obj))


def _structure(obj, counter):
    """The return value with each tensor replaced by its output index (a placeholder tuple)."""
    if isinstance(obj, Tensor):
        counter.append(None)
        return ("__out__", len(counter) - 1)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_structure(o, counter) for o in obj)
    if isinstance(obj, dict):
        return {k: _structure(v, counter) for k, v in obj.items()}
    return obj


def _tensors_in(obj):
    if isinstance(obj, Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors_in(o)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors_in(v)]
    return []


def _rebuild(structure, outputs):
    if isinstance(structure, tuple) and len(structure) == 2 and structure[0] == "__out__":
        return outputs[structure[1]]
    if isinstance(structure, (list, tuple)):
        return type(structure)(_rebuild(o, outputs) for o in structure)
    if isinstance(structure, dict):
        return {k: _rebuild(v, outputs) for k, v in structure.items()}
    return structure


def _escaped(alive, wanted, recorder):
    """What the call kept if it kept tensors its kernels made somewhere a replay would not update (only
    the return value and `.grad` are: refusals.KEPT_TENSORS), else None. Tensors other threads made
    meanwhile are theirs, not the call's."""
    old, known = {id(t) for t in alive if t is not None}, set()
    stack = list(wanted)
    while stack:  # the returned values' autograd records hold their inputs: a replay returns leaves
        t = stack.pop()
        if id(t) not in known:
            known.add(id(t))
            if t._grad_fn is not None:
                stack.extend(t._grad_fn.parents)
    gc.collect()
    kept = [o for o in _live_tensors() if id(o) not in old and id(o) not in known and o._node.buffer is not None
            and recorder.made(o._node.buffer)]
    if not kept:
        return None
    shapes = ", ".join(str(t.shape) for t in kept[:3])
    return f"{len(kept)} new tensor(s) outside its return value and .grad (shapes {shapes})"


def _bind(variant, arg_tensors):
    """The tensors holding this call's bound values, by key, or None when a guard of `variant` fails."""
    for ref, training in variant.modules:
        module = ref()
        if module is None or module.training != training:
            return None
    for ref, _, had_grad in variant.regrads:
        t = ref()
        if t is None or (t.grad is not None) != had_grad:
            return None
    bound, pending = {}, []
    for key in variant.program.bound_keys:
        if key[0] == "arg":
            t = arg_tensors[key[1]]
        else:
            ref, via_grad = variant.bound[key]
            t = ref()
            if t is not None and via_grad:
                t = t.grad
        if t is None:
            return None
        if key[0] == "alive" and (t.shape, t._node.dtype) != variant.specs[key]:
            return None
        if t._node.buffer is None:
            pending.append(t._node)
        bound[key] = t
    for ref, _ in variant.rebinds:
        if ref() is None:
            return None
    if pending:
        scheduler.realize(pending)
    for ref, others in variant.sharing:  # tensors that held one value at the capture and no longer do
        t = ref()
        if t is None or any(o() is not None and o()._node.buffer is not t._node.buffer for o in others):
            return None
    return bound


def _replay(variant, bound):
    program = variant.program
    # The donors first: gathering the bound tensors' nodes would hold them, and they would look shared.
    donors = _donors(variant) if program.updates_in_place else None
    # The .grad's the call replaced without reading them (zero_grad dropped them) go now, as the eager
    # call drops them before its kernels (they are no donors: the new ones get blocks of their own).
    for ref, _ in variant.unread_grads:
        t = ref()
        if t is not None:
            t.grad = None
    def made(k, buf):  # the tensor lets its old value go now: the slots hold that to its last reader
        ref, as_grad = variant.made[k]
        t = ref()
        if t is not None and as_grad:
            if t.grad is None or t.grad._node.buffer is not buf:  # the same Buffer: a donor written over
                t.grad = Tensor(hostio.value_node(buf))
        elif t is not None and t._node.buffer is not buf:
            t._node = hostio.value_node(buf)
    buffers = program.run({key: t._node.buffer for key, t in bound.items()}, donors, made)
    outs = [Tensor(hostio.value_node(b)) for b in buffers[:variant.n_outs]]
    for i in variant.with_history:  # the eager call's results required grad: a replay's say they have none
        outs[i].requires_grad, outs[i]._grad_fn = True, grad_mode.GradFn("replayed", (), {}, outs[i]._node)
    for ref, k in variant.rebinds:
        t = ref()
        if t is not None and t._node.buffer is not buffers[k]:  # the same Buffer: updated in place
            t._node = hostio.value_node(buffers[k])
    for ref, k, _ in variant.regrads:
        t = ref()
        if t is not None and (k is None or t.grad is None or t.grad._node.buffer is not buffers[k]):
            t.grad = None if k is None else Tensor(hostio.value_node(buffers[k]))
    return _rebuild(variant.structure, outs)


def _donors(variant):
    """{output position: Buffer} of the state a replay may overwrite: each value the call replaces (a
    parameter's or moment's, a .grad) that no one else can see, found by letting go. The tensor lets go
    of its node (for a .grad, the owner lets go of the grad tensor too): where a weak reference then says
    nothing else held it, and its Buffer was bound to no other node, the value is a donor, handed back
    at once on a new node (a new grad tensor) of the same Buffer; else it is handed back as it was."""
    donors = {}
    for ref, k in variant.rebinds:
        t = ref()
        if t is None or t._node.buffer.nodes != 1:
            continue
        buf, node = t._node.buffer, weakref.ref(t._node)
        t._node = None  # the tensor's own reference let go: the weak one now says whether any other is left
        if node() is not None:
            t._node = node()
            continue
        buf.nodes -= 1  # that node is gone
        t._node = hostio.value_node(buf)
        donors[k] = buf
    for ref, k, _ in variant.regrads:
        t = ref()
        if (k is None or k in variant.unread_at or t is None or t.grad is None
                or t.grad._node.buffer.nodes != 1):
            continue
        buf, grad, node = t.grad._node.buffer, weakref.ref(t.grad), weakref.ref(t.grad._node)
        t.grad = None
        if grad() is not None:
            t.grad = grad()
        elif node() is not None:  # another tensor shares the node; no one saw the grad tensor itself go
            t.grad = Tensor(node())
        else:
            buf.nodes -= 1
            t.grad = Tensor(hostio.value_node(buf))
            donors[k] = buf
    return donors
