"""Host reads and host writes: the only places a value crosses to the user's side.

A read realizes the node and returns its host array. A write produces a new node holding the new value,
so tensors derived from the old node keep the old value (value semantics).
"""
import numpy as np

from .counters import COUNTERS
from .graph import Node
from .residency import Buffer
from .scheduler import realize


def host_array(node, trigger):
    """Realize `node` and return its host array (internal: callers must not write into it)."""
    realize([node])
    COUNTERS.host_reads[trigger] += 1
    return node.buffer.host


def export_array(node, trigger):
    """Realize `node` and return a read-only view of its value for the user."""
    realize([node])
    COUNTERS.host_reads[trigger] += 1
    return node.buffer.share_host()


def data_node(array, exclusive):
    """A realized leaf holding `array` on the host."""
    return Node("data", (), {}, array.shape, array.dtype, Buffer.on_host(array, exclusive))


def write_items(node, key, value, trigger="setitem"):
    """`node[key] = value` on the host. Returns the node that now holds the result (maybe `node`)."""
    realize([node])
    COUNTERS.host_writes[trigger] += 1
    buf = node.buffer
    if node.used:
        # Someone derived a value from this node: leave it alone and write into a fresh copy.
        target = np.array(buf.host, copy=True)
        target[key] = value
        return data_node(target, exclusive=True)
    buf.writable_host()[key] = value
    return node


def replace_value(array, trigger):
    """A whole-tensor host write (fill_, copy_ from host data): a new node holding `array`."""
    COUNTERS.host_writes[trigger] += 1
    return data_node(array, exclusive=True)


def peek_host(node):
    """The host array of an already realized node, without realizing or counting a read; else None."""
    buf = node.buffer
    return None if buf is None else buf.host
