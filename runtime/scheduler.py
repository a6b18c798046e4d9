"""realize(): order the pending subgraph, run each node on the first backend that accepts it, cut inputs.

Operands are uploaded only when they are not already resident where the kernel runs; results stay
where they were computed. A device that cannot get memory for a kernel passes it down the chain.
"""
import threading

from . import constants, copies, devices, fusion, parallel, policy
from .backends.arena import OutOfDeviceMemory
from .counters import COUNTERS
from .graph import Node, pending_order
from .locking import computing
from .policy import is_param
from .residency import Buffer
from .transfers import LOG, now

recorder = None  # while lt.jit captures a call: its runtime.capture.Recorder, told every kernel run
# runtime/repeats.py's `realize`, installed when it loads (it builds on runtime/capture.py, which needs
# this module): a realization on the host goes through it, to be replayed when it repeats one
replayer = None


def exclusive_result(out, args):
    """Whether a host kernel's result `out` may be written in place later: it shares memory with no
    operand. An array owning its memory shares it only with itself and its views, whose base is that
    array (NumPy points a view of a view at the owner), so identity says it without may_share_memory."""
    return out.base is None and out.flags.writeable and not any(
        a is out or getattr(a, "base", None) is out for a in args)


@computing
def realize(roots):
    """Compute every pending node needed for `roots`. Returns the number of kernels run."""
    order = pending_order(roots)
    if not order:
        return 0
    COUNTERS.realizations += 1
    chain = devices.chain()
    fuser = devices.fusing_backend(chain)
    with parallel.kernels_session(order):
        if replayer is not None and chain[0].is_host and recorder is None and not LOG.profiling:
            return replayer(order, roots, chain, fuser)
        return realize_planned(order, roots, chain, fuser)


def recorded(rec, order, roots, chain, fuser):
    """realize_planned with `rec` told every kernel run (runtime/repeats.py captures a realization so)."""
    global recorder
    recorder = rec
    try:
        return realize_planned(order, roots, chain, fuser)
    finally:
        recorder = None


def realize_planned(order, roots, chain, fuser):
    """Plan the realization of `order` (fusion groups, deferred constants) and run it node by node, each
    on the first backend of `chain` that accepts it. Returns the kernels run."""
    groups, absorbed = fusion.plan(order, roots, lone_from(fuser)) if fuser is not None else ({}, ())
    deferred = constants.deferrable(order, roots, groups, absorbed) if not chain[0].is_host else set()
    kernels = 0
    for i in range(len(order)):
        node = order[i]
        # Release our reference so an intermediate is freed as soon as its last consumer has run.
        order[i] = None
        if id(node) in absorbed or node in deferred:
            continue  # computed inside its group's kernel, or where its first consumer runs
        group = groups.pop(node, None)
        if deferred:
            kernels += _constants_for(constants.consumed(node, group), deferred, chain)
        node.buffer = _run_group(group, fuser, chain) if group is not None else _run(node, chain)
        node.inputs = ()
        kernels += 1
    COUNTERS.kernels += kernels
    return kernels


def lone_from(fuser):
    """Elements from which a lone elementwise node runs as a generated kernel (fusion.plan): when the
    fuser's kernels are cut in pieces for several CPU threads in this run (numba's); else None."""
    return 2 * parallel.MIN_PIECE if fuser.in_pieces and parallel.splitting() else None


def _constants_for(inputs, deferred, chain):
    """Compute the deferred constants among a consumer's inputs, on the device that holds one of its
    other operands when there is one (runtime/constants.py); returns the number of kernels run."""
    due = constants.due(inputs, deferred)
    if not due:
        return 0
    device = constants.consumer_device([inp.buffer for inp in inputs])
    for node in due:
        if device is None:
            node.buffer = _run(node, chain)
        else:
            with policy.following(node, device.name):
                node.buffer = _run(node, chain)
        node.inputs = ()
    return len(due)


def _run_group(group, backend, chain):
    """Run a fused group as one kernel: on the device when it accepts the group, else on the first host
    fuser of the chain that does (a GPU fuser like Metal may decline); with none, its members run one
    by one down the chain as usual."""
    operands = [n.buffer for n in group.inputs] + [p.buffer for p in group.params if isinstance(p, Node)]
    if not backend.is_host and backend.accepts_group(group, operands):
        buf = group_on_device(group, operands, backend)
        if buf is not None:
            _report("device_group", backend, group, operands, buf)
            return buf
    for fuser in devices.host_fusers(backend, chain):
        buf = fused_on_host(group, operands, fuser)
        if buf is not None:
            _report("host_group", fuser, group, operands, buf)
            return buf
    return _run_members(group, chain)


def active_recorder():
    """The Recorder of the call this thread is capturing, or None (another thread's kernels are not its)."""
    return recorder if recorder is not None and recorder.thread == threading.get_ident() else None


def _report(kind, backend, what, operands, buf):
    if recorder is not None and recorder.thread == threading.get_ident():  # active_recorder(), inlined: per kernel
        recorder.kernel(kind, backend, what, operands, buf)


def _record(node, backend, start, label=None):
    """While profiling: the kernel's record, with device time where the backend measures it (a device
    with events writes it after its next wait, so profiling does not serialize the device)."""
    if LOG.profiling and not backend.defer_kernel_record(node, start, label):
        backend.synchronize()
        measured = backend.kernel_seconds()
        LOG.kernel(node, backend.name, start, measured if measured is not None else now() - start, label=label)


def group_on_device(group, operands, backend):
    """A fused group's value computed on device `backend` (operands: the inputs' Buffers, then those of
    its 0-d operand nodes), or None if it cannot get the memory."""
    start = now()
    buf = _run_on_device(group.root, operands, backend, lambda args, out: backend.launch_group(group, args, out))
    if buf is not None:
        _record(group.root, backend, start, group.label)
    return buf


def fused_on_host(group, operands, backend):
    """A fused group's value from a host fuser (operands as for group_on_device), or None if it
    declines the group (a GPU fuser may)."""
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
        LOG.kernel(group.root, backend.name, start, now() - start, label=group.label)
    node = group.root
    return Buffer.host_result(node.id, node.op, out, True)


def _run_members(group, chain):
    """A declined group's nodes run one at a time (its 0-d constants too), inputs before consumers."""
    order = pending_order([group.root])
    for node in order:
        node.buffer = _run(node, chain)
        if node is not group.root:
            node.inputs = ()
    return group.root.buffer


def _run(node, chain):
    operands = [inp.buffer for inp in node.inputs]
    for backend in chain:
        if not backend.accepts(node, operands):
            continue
        buf = run_node(node, operands, backend)
        if buf is not None:
            _report("node", backend, node, operands, buf)
            return buf
    raise AssertionError(f"no backend accepted {node}")  # the last host backend accepts everything


def run_node(node, operands, backend):
    """`node`'s value computed by `backend` from its operands' Buffers; None if a device cannot get the
    memory for it."""
    start = now() if LOG.profiling else None
    buf = _run_on_host(node, operands, backend) if backend.is_host else _run_on_device(node, operands, backend)
    if buf is not None and start is not None:
        _record(node, backend, start)
    return buf


def run_down_chain(node, operands, chain):
    """`node`'s value from the first backend of `chain` that accepts it and gets the memory."""
    for backend in chain:
        if backend.accepts(node, operands):
            buf = run_node(node, operands, backend)
            if buf is not None:
                return buf
    raise AssertionError(f"no backend accepted {node}")


def _run_on_host(node, operands, backend):
    for b in operands:
        if not b.on_host:
            copies.download(b, "host-kernel")
    args = [b.host for b in operands]
    out = backend.launch(node, args)
    return Buffer.host_result(node.id, node.op, out, exclusive_result(out, args))


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
    if keeps_host_copy(node, operands):
        buf.add_host_copy(operands[0].host.reshape(node.shape))
        buf.share_host()
    return buf


def keeps_host_copy(node, operands):
    """Whether a device result also gets a host copy: a reshape of a value the host also holds is free
    there, so both copies are kept (state BOTH) and e.g. reshaped targets stay readable by host-side
    index checks without a download."""
    return node.op == "reshape" and operands[0].on_host


def _device_operands(operands, backend):
    """Device views of the operands, uploading those not resident here; None if memory runs out."""
    args = []
    for b in operands:
        if is_param(b):
            args.append(b.host)
            continue
        (LOG.hit if b.on_device and b.backend is backend else LOG.miss)(backend.name)
        if not copies.make_resident(b, backend):
            return None
        args.append(backend.view(b.device, b.shape, b.dtype))
    return args
