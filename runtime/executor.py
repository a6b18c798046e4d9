"""The executor: runs a Schedule (runtime/schedule.py) step by step and returns the schedule it ran.

Each step runs on the backend the planner chose, with the launches placement chose there. A device
first gets a block for the result, then uploads the operands not resident there (`copies.upload`,
logged), launches, and keeps the result (state DEVICE, no host array); a host backend downloads
device-only operands first (reason `host-kernel`). When the run leaves the schedule (a device could not
get memory the budget seemed to allow, so the step moves down the chain; or the evictor moved a value),
the remaining steps are planned again from the values as they are, in the order they had
(`Schedule.replanned` counts it).
A fused group's step also gives values to the nodes its kernel makes besides its root (`Group.extras`).
Each step's node drops its inputs once it has run and the step lets go of it, so a value no tensor
holds is freed (device block included) as soon as its last consumer ran. The per-kernel executors
here (`run_node`, `fused_on_host`, `group_on_device`) are also what compiled replays call.
"""
from . import copies, devices, next_reads, placement, planner, remat
from .replay import capturing
from ..kernels.cpu import host_cache
from .backends.arena import OutOfDeviceMemory
from .backends.lowering import for_indices
from .counters import COUNTERS
from .device_model import work_of
from .graph import Node, pending_in_order, pending_order
from .next_reads import NextReads
from .prefetch import Prefetcher
from .residency import Buffer, home_of
from .schedule import Schedule
from .transfers import LOG, now


def run(order, roots, chain, fuser):
    """Plan `order` (the pending nodes for `roots`, inputs first; the list is emptied) and run the
    schedule; returns the Schedule that ran."""
    steps = planner.schedule(order, roots, chain, fuser).steps
    order.clear()  # the steps hold the nodes now, and let go of each once it ran
    memories = [b.memory for b in chain if not b.is_host]
    for memory in memories:
        memory.quiet += 1
    evicted = _evictions(memories)
    ran, replanned, k = [], 0, 0
    prefetcher, pressed = (Prefetcher() if memories else None), evicted()
    try:
        with next_reads.guiding(memories, NextReads(steps) if memories else None) as reads:
            while k < len(steps):
                step = steps[k]
                steps[k] = None
                if reads is not None:
                    reads.at = k
                    prefetcher.reading(step)
                k += 1
                evictions = evicted()
                as_planned = _run_step(step, chain, reads)
                ran.append(step)
                after = evicted()
                if not as_planned or after != evictions:
                    steps = planner.schedule(_remaining(roots, chain, steps, k), roots, chain, fuser).steps
                    replanned, k = replanned + 1, 0
                    if reads is not None:
                        reads.follow(steps)
                elif reads is not None and after != pressed:  # the budget binds in this run
                    prefetcher.ahead(steps, k - 1)
    finally:
        if prefetcher is not None:
            prefetcher.finish()
    done = Schedule(ran, replanned)
    COUNTERS.kernels += done.kernels
    return done


def _remaining(roots, chain, steps, k):
    """The pending nodes to plan again once the run left its schedule at step `k`: in the order the
    schedule had them (with the values it makes again), so that only where they run and what they
    copy follow the values as they are. Ordering what is left anew (`remat.ordered`, for the memory of
    that moment) moved 18% more bytes in a seed-size training step under a budget (bench/RESULTS.md)."""
    rank = {}
    for i in range(k, len(steps)):
        step = steps[i]
        if step is not None and step.node is not None:
            rank.setdefault(step.node, i)
    order = pending_in_order(roots, rank)
    return order if order is not None else remat.ordered(roots, chain)


def _evictions(memories):
    """A function counting the evictions of `memories` so far (what tells the run that memory went
    otherwise than planned)."""
    if not memories:
        return lambda: 0
    if len(memories) == 1:
        return lambda: memories[0].evictions
    return lambda: sum(m.evictions for m in memories)


def _run_step(step, chain, reads=None):
    """Run one step and let go of its node (telling `reads` its value); False when it did not run where
    it was planned."""
    node, backend = step.node, step.runs_on
    if step.offers:
        for position, offered in step.offers:
            placement.remember_offer(offered, node.inputs[position].buffer)
    if step.refused:
        for device in step.refused:
            device.memory.memory_fallbacks += 1  # a request its budget refuses, known before it was made
    if step.group is not None:
        made, where = _run_group(step.group, backend, chain)
        buf = made[0]
        for extra, extra_buf in zip(step.group.extras, made[1:]):  # values the group's kernel also made
            extra.bind(extra_buf)
            if reads is not None:
                reads.made(extra.id, extra_buf)
            extra.inputs = ()
    elif step.follow is not None:
        with placement.following(node, step.follow):
            buf, where = _run_node(node, backend, step.launches, chain)
    else:
        buf, where = _run_node(node, backend, step.launches, chain)
    node.bind(buf)
    if reads is not None:
        reads.made(node.id, buf)
    node.inputs = ()
    step.release()
    if where is not backend:
        step.runs_on = where
        return False
    return True


def _run_node(node, backend, launches, chain):
    operands = [inp.buffer for inp in node.inputs]
    if launches is not None:
        launches = for_indices(launches, operands[1] if len(operands) > 1 else None)
        if launches is not None:
            backend.reuse_launches(node, launches)
    buf = run_node(node, operands, backend)
    if buf is not None:
        report("node", backend, node, operands, buf)
        return buf, backend
    return _down_chain(node, operands, chain[chain.index(backend) + 1:])


def _down_chain(node, operands, chain):
    """(`node`'s value, its backend) from the first backend of `chain` that placement gives it to and
    that gets the memory (what a step whose device ran out of memory runs on)."""
    for backend in chain:
        kernel = placement.choose(backend, node, operands)
        if kernel is None:
            continue
        if kernel is not True:
            backend.reuse_launches(node, kernel)
        buf = run_node(node, operands, backend)
        if buf is not None:
            report("node", backend, node, operands, buf)
            return buf, backend
    raise AssertionError(f"no backend accepted {node}")  # the last host backend accepts everything


def run_down_chain(node, operands, chain):
    """`node`'s value from the first backend of `chain` that placement gives it to and gets the memory."""
    return _down_chain(node, operands, chain)[0]


def _run_group(group, backend, chain):
    """The Buffers of the values a fused group makes (its root's, then its extras'; Group.made) and the
    backend that made them: one kernel where it was planned; if a host fuser declines it, on the next
    host fuser that runs it, else member by member down the chain; if a device cannot get the memory
    for it, member by member down the chain (each needs less at once, and the device's kernels give
    the group's bits, which a host fuser's transcendentals may not)."""
    operands = [n.buffer for n in group.inputs] + [p.buffer for p in group.params if isinstance(p, Node)]
    if backend.is_host:
        made = fused_on_host(group, operands, backend)
        kind = "host_group"
    else:
        buf = group_on_device(group, operands, backend)
        made = None if buf is None else [buf]
        kind = "device_group"
    if made is not None:
        report(kind, backend, group, operands, made[0], made[1:])
        return made, backend
    for fuser in devices.host_fusers(chain[0], chain) if backend.is_host else ():
        if fuser is not backend:
            made = fused_on_host(group, operands, fuser)
            if made is not None:
                report("host_group", fuser, group, operands, made[0], made[1:])
                return made, fuser
    roots = group.made
    for member in pending_order(list(roots)):
        member.buffer, where = _down_chain(member, [inp.buffer for inp in member.inputs], chain)
        if member not in roots:
            member.inputs = ()
    return [node.buffer for node in roots], where


def report(kind, backend, what, operands, buf, extras=()):
    """Tell the capture under way (if this thread makes one) the kernel that ran (`extras`: the Buffers
    of the other values a fused group's kernel made)."""
    recorder = capturing.current()
    if recorder is not None:
        recorder.kernel(kind, backend, what, operands, buf, extras)


def exclusive_result(out, args):
    """Whether a host kernel's result `out` may be written in place later: it shares memory with no
    operand. An array owning its memory shares it only with itself and its views, whose base is that
    array (NumPy points a view of a view at the owner), so identity says it without may_share_memory;
    one over a block of the kernels' host cache shares it with no other array when it alone holds the
    block (`host_cache.exclusive`)."""
    if not out.flags.writeable or any(a is out for a in args):
        return False
    if out.base is None:
        return not any(getattr(a, "base", None) is out for a in args)
    return host_cache.exclusive(out)


def _record(what, operands, backend, start):
    """While profiling: the record of the kernel of `what` (a node, or a fused group), with device time
    where the backend measures it (a device with events writes it after its next wait, so profiling
    does not serialize the device), and its work for the modeled timeline (runtime/device_model.py)."""
    if not LOG.profiling:
        return
    node, label = (what.root, what.label) if hasattr(what, "recipe") else (what, None)
    work = work_of(what, operands)
    if not backend.defer_kernel_record(node, start, label, work):
        backend.synchronize()
        measured = backend.kernel_seconds()
        LOG.kernel(node, backend.name, start, measured if measured is not None else now() - start, label=label,
                   work=work)


def group_on_device(group, operands, backend):
    """A fused group's value computed on device `backend` (operands: the inputs' Buffers, then those of
    its 0-d operand nodes), or None if it cannot get the memory."""
    start = now()
    buf = _run_on_device(group.root, operands, backend, lambda args, out: backend.launch_group(group, args, out))
    if buf is not None:
        _record(group, operands, backend, start)
    return buf


def fused_on_host(group, operands, backend):
    """The Buffers of the values a fused group makes (its root's, then its extras') from a host fuser
    (operands as for group_on_device), or None if it declines the group (a GPU fuser may)."""
    for buf in operands:
        if not buf.on_host:
            copies.download(buf, "host-kernel")
    arrays = [b.host for b in operands[:len(group.inputs)]]
    values = iter(operands[len(group.inputs):])
    params = [next(values).host.item() if hasattr(p, "op") else p for p in group.params]
    start = now()
    out = backend.launch_fused(group.recipe, group.root, arrays, params)
    if out is None:
        return None
    if LOG.profiling:
        LOG.kernel(group.root, backend.name, start, now() - start, label=group.label, work=work_of(group, operands))
    home = home_of(operands)
    made = []
    for node, value in zip(group.made, out if group.extras else (out,)):
        buf = Buffer.host_result(node.id, node.op, value, True)
        buf.home = home
        made.append(buf)
    return made


def run_node(node, operands, backend):
    """`node`'s value computed by `backend` from its operands' Buffers; None if a device cannot get the
    memory for it."""
    start = now() if LOG.profiling else None
    buf = _run_on_host(node, operands, backend) if backend.is_host else _run_on_device(node, operands, backend)
    if buf is not None and start is not None:
        _record(node, operands, backend, start)
    return buf


def _run_on_host(node, operands, backend):
    for b in operands:
        if not b.on_host:
            copies.download(b, "host-kernel")
    args = [b.host for b in operands]
    out = backend.launch(node, args)
    buf = Buffer.host_result(node.id, node.op, out, exclusive_result(out, args))
    buf.home = home_of(operands)
    return buf


def _run_on_device(node, operands, backend, launch=None):
    """Run `node` on a device (by `launch(args, out_block)` if given, else the backend's launch); None
    if it cannot get the memory (the caller moves on down the chain)."""
    memory = backend.memory
    with memory.pinning(operands):
        # The result's block first: if even that cannot be had, nothing is uploaded in vain.
        out = memory.allocate(node.nbytes)
        if out is None:
            return None
        try:
            args = _device_operands(operands, backend)
            if args is None:
                memory.give_back(out, node.nbytes)
                return None
            if launch is None:
                backend.launch(node, args, out)
            else:
                launch(args, out)
        except OutOfDeviceMemory:  # a launch's temporaries could not be had: run it elsewhere
            memory.give_back(out, node.nbytes)
            return None
        except BaseException:
            memory.give_back(out, node.nbytes)
            raise
    buf = Buffer(node.id, node.op, node.shape, node.dtype).set_device_result(out, backend)
    memory.register(buf)
    if placement.keeps_host_copy(node, operands):
        buf.add_host_copy(operands[0].host.reshape(node.shape))
        buf.share_host()
    return buf


def _device_operands(operands, backend):
    """Device views of the operands, uploading those not resident here; None if memory runs out."""
    args, hits, touch, view = [], 0, backend.memory.touch, backend.view
    for b in operands:
        if b.shape == () and b.on_host:  # is_param: travels as a kernel parameter
            args.append(b.host)
            continue
        if b.on_device and b.backend is backend:  # resident: as copies.make_resident, without the call
            touch(b)
            hits += 1
        else:
            LOG.miss(backend.name)
            if not copies.make_resident(b, backend, copies.upload_reason(b, backend)):
                if hits:
                    LOG.hit(backend.name, hits)
                return None
        args.append(view(b.device, b.shape, b.dtype))
    if hits:
        LOG.hit(backend.name, hits)
    return args
