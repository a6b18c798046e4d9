"""Host reads and host writes: the only places a value crosses to the user's side.

A read realizes the node and, if only a device holds the value, downloads it once (state BOTH, so
further reads are free). A write brings a device-only value back first, then makes the device forget
its copy; tensors derived from the old value keep it (value semantics).
"""
import numpy as np

from . import copies, scheduler
from .replay import capturing, refusals
from .counters import COUNTERS
from .graph import Node
from .locking import serialized
from .residency import Buffer, host_view


def _host_access(refusal, detail):
    """A capture cannot replay a host access: the value read may steer Python, a written one is new."""
    recorder = capturing.current()
    if recorder is not None:
        recorder.refuse(refusal, detail)


def _on_host(node, reason):
    _host_access(refusals.HOST_READ, reason)
    scheduler.realize([node])
    buf = node.buffer
    if not buf.on_host:
        copies.download(buf, reason)
    return buf


@serialized
def host_array(node, trigger, reason=None):
    """Realize `node` and return its host array (internal: callers must not write into it)."""
    buf = _on_host(node, reason or f"host-read:{trigger}")
    COUNTERS.host_reads[trigger] += 1
    return buf.host


@serialized
def export_array(node, trigger):
    """Realize `node` and return a read-only view of its value for the user."""
    buf = _on_host(node, f"host-read:{trigger}")
    COUNTERS.host_reads[trigger] += 1
    return buf.share_host()


peeks = 0  # calls of peek_host (a recorded backward pass cannot replay a look at a value)


def peek_host(node):
    """The host array of an already realized node, without realizing or counting a read; else None."""
    global peeks
    peeks += 1
    buf = node.buffer
    return buf.host if buf is not None and buf.on_host else None


@serialized
def exchange(node, fn, label, transport):
    """Realize `node` and return a new realized node holding fn(its host value), placed where `node`'s
    value was (copies.exchange): a collective between processes. Inside a capture it is a step of
    the compiled program, run again at each replay (runtime/replay/capture.py)."""
    scheduler.realize([node])
    buf = node.buffer
    backend = buf.backend if buf.on_device else None
    result = copies.exchange(buf, fn, label, transport, backend)
    COUNTERS.host_reads["collective"] += 1
    recorder = capturing.current()
    if recorder is not None:
        recorder.exchange((fn, label, transport, backend), buf, result)
    return value_node(result)


def data_node(array, exclusive):
    """A realized leaf holding `array` on the host."""
    node = Node("data", (), {}, array.shape, array.dtype)
    node.bind(Buffer.host_result(node.id, "data", array, exclusive))
    return node


def host_view_node(node, index, shape=None):
    """A realized leaf viewing `node`'s host array at `index`, reshaped to `shape` if given (no kernel,
    no copy; writes will copy)."""
    leaf = data_node(host_view(node.buffer.host, (index, shape)), exclusive=False)
    leaf.buffer.home = node.buffer.home  # a view of spilled state returns with it
    recorder = capturing.current()
    if recorder is not None:
        recorder.view(node.buffer, (index, shape), leaf.buffer)
    return leaf


def value_node(buffer):
    """A realized leaf holding `buffer` (a value a compiled step computed)."""
    return Node.leaf("data", buffer)


@serialized
def write_items(node, key, value, trigger="setitem"):
    """`node[key] = value` on the host. Returns the node that now holds the result (maybe `node`)."""
    buf = _on_host(node, trigger)
    COUNTERS.host_writes[trigger] += 1
    if node.used:
        # Someone derived a value from this node: leave it alone and write into a fresh copy.
        target = np.array(buf.host, copy=True)
        target[key] = value
        return data_node(target, exclusive=True)
    if buf.on_device:
        buf.backend.memory.forget(buf)  # the host copy is about to change: the device copy is stale
    buf.writable_host()[key] = value
    return node


def replace_value(array, trigger):
    """A whole-tensor host write (fill_, copy_ from host data): a new node holding `array`."""
    _host_access(refusals.HOST_WRITE, trigger)
    COUNTERS.host_writes[trigger] += 1
    return data_node(array, exclusive=True)


@serialized
def place_on_device(node, backend, reason="to-device"):
    """Realize `node` and make sure `backend` holds a copy (True), unless memory cannot be had (False).
    A backend without device memory of its own (Metal, which reads host arrays) needs no copy."""
    _host_access(refusals.PLACEMENT, reason)
    scheduler.realize([node])
    if backend.is_host:
        return True
    return copies.make_resident(node.buffer, backend, reason)


@serialized
def place_on_host(node, reason="to-host"):
    """Realize `node`, download it if only a device has it, and make the device forget its copy."""
    buf = _on_host(node, reason)
    if buf.on_device:
        buf.backend.memory.forget(buf)
