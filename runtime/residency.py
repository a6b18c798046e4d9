"""Where a realized node's value lives. One method per state transition; illegal transitions assert.

A node without a Buffer is PENDING. A Buffer is HOST (a host array only), DEVICE (a device copy only),
or BOTH (equal copies on each side). A device result has no host array until its first host read.
"""
import enum

import numpy as np


class Residency(enum.Enum):
    PENDING = "pending"
    DEVICE = "device"
    HOST = "host"
    BOTH = "both"


HOST, DEVICE, BOTH = Residency.HOST, Residency.DEVICE, Residency.BOTH


class Buffer:
    """A realized value: a host array and/or a device block, with the residency state they imply.

    `host_exclusive` is True when nothing else can see the host array's memory, so a host write may
    modify it in place. `node_id`/`op` name the value in transfer records. `nodes` counts the nodes it
    was bound to (Node.bind; lowered only where the engine saw one go: lt.jit's donor search): where
    it is 1, the Buffer is no other node's. `home`: the device the evictor spilled its copy from, until
    it is uploaded again (placement brings such values back when there is room: docs/RESIDENCY.md).
    """

    __slots__ = ("host", "device", "backend", "state", "host_exclusive", "node_id", "op", "shape", "dtype",
                 "nodes", "home", "__weakref__")

    def __init__(self, node_id, op, shape, dtype):
        self.host = None
        self.device = None
        self.backend = None
        self.state = Residency.PENDING
        self.host_exclusive = False
        self.nodes = 0
        self.home = None
        self.node_id, self.op, self.shape, self.dtype = node_id, op, tuple(shape), np.dtype(dtype)

    @classmethod
    def host_result(cls, node_id, op, array, exclusive):
        """A HOST Buffer of `array`, a value computed (or given) on the host: what
        `Buffer(node_id, op, array.shape, array.dtype).set_host_result(array, exclusive)` makes, without
        converting a shape and dtype an ndarray already has in normal form (one per kernel run)."""
        buf = cls.__new__(cls)
        buf.device = buf.backend = buf.home = None
        buf.node_id, buf.op, buf.shape, buf.dtype = node_id, op, array.shape, array.dtype
        buf.host, buf.host_exclusive, buf.state = array, bool(exclusive), HOST
        buf.nodes = 0
        return buf

    @property
    def nbytes(self):
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n

    @property
    def identity(self):
        """The value this buffer holds (a planned stand-in names its buffer here; see runtime/planner.py)."""
        return self

    # ---- PENDING -> ... -------------------------------------------------------------------------
    def set_host_result(self, array, exclusive):
        """PENDING -> HOST: a value computed on (or given from) the host."""
        assert self.state is Residency.PENDING, self.state
        self.host, self.host_exclusive, self.state = array, bool(exclusive), HOST
        return self

    def set_device_result(self, block, backend):
        """PENDING -> DEVICE: a value computed on a device; no host array exists yet."""
        assert self.state is Residency.PENDING, self.state
        self.device, self.backend, self.state = block, backend, DEVICE
        return self

    # ---- copies -----------------------------------------------------------------------------------
    def add_device_copy(self, block, backend):
        """HOST -> BOTH: an upload finished."""
        assert self.state is HOST, self.state
        self.device, self.backend, self.state = block, backend, BOTH

    def add_host_copy(self, array):
        """DEVICE -> BOTH: a download finished."""
        assert self.state is DEVICE, self.state
        self.host, self.host_exclusive, self.state = array, True, BOTH

    def drop_device_copy(self):
        """BOTH -> HOST: forget the device copy (eviction after download, or a host write). Returns it."""
        assert self.state is BOTH, self.state
        block, backend = self.device, self.backend
        self.device, self.backend, self.state = None, None, HOST
        return block, backend

    def overwrite_on_device(self):
        """DEVICE or BOTH -> DEVICE: a kernel is about to write a new value over the device copy (a
        compiled replay updating state nobody else holds); a host copy would be stale, so it goes."""
        assert self.state in (DEVICE, BOTH), self.state
        self.host, self.host_exclusive, self.state = None, False, DEVICE

    # ---- host side ---------------------------------------------------------------------------------
    def share_host(self):
        """Hand the host array out (a read-only view for the user): from now on writes must copy first."""
        assert self.state in (HOST, BOTH), self.state
        self.host_exclusive = False
        view = self.host.view()
        view.flags.writeable = False
        return view

    def writable_host(self):
        """The host array, copied first unless this buffer owns it exclusively. HOST state only."""
        assert self.state is HOST, self.state
        if not (self.host_exclusive and self.host.flags.writeable):
            self.host = np.array(self.host, copy=True)
            self.host_exclusive = True
        return self.host

    @property
    def on_host(self):
        return self.state in (HOST, BOTH)

    @property
    def on_device(self):
        return self.state in (DEVICE, BOTH)


def home_of(operands):
    """The device a host kernel's result belongs to: the first `home` among its operands (a value made on
    the host from state the evictor spilled is that state's successor, and returns with it), else None."""
    for b in operands:
        if b.home is not None:
            return b.home
    return None


def is_param(value):
    """A 0-d value already on the host travels as a kernel parameter, not as a copy (a Buffer or a
    planned stand-in for one)."""
    return value.shape == () and value.on_host


def host_view(array, what):
    """`array[index]`, reshaped to `shape` unless it is None, for what = (index, shape): a host value's
    view taken without a kernel (an optimizer's slices of its packed state, say)."""
    index, shape = what
    view = array[index]
    return view if shape is None else view.reshape(shape)
