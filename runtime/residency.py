"""Where a realized node's value lives. One function per state transition.

A node without a Buffer is PENDING. A Buffer is HOST (a host array only), DEVICE (a device copy only),
or BOTH (equal copies on each side).
"""
import enum

import numpy as np


class Residency(enum.Enum):
    PENDING = "pending"
    DEVICE = "device"
    HOST = "host"
    BOTH = "both"


class Buffer:
    """A realized value: a host array and/or a device allocation, with the residency state they imply.

    `host_exclusive` is True when nothing else can see the host array's memory, so a host write may
    modify it in place.
    """

    __slots__ = ("host", "device", "backend", "state", "host_exclusive")

    def __init__(self):
        self.host = None
        self.device = None
        self.backend = None
        self.state = Residency.PENDING
        self.host_exclusive = False

    @classmethod
    def on_host(cls, array, exclusive):
        """PENDING -> HOST: a value computed on (or given from) the host."""
        buf = cls()
        buf.host = array
        buf.host_exclusive = bool(exclusive)
        buf.state = Residency.HOST
        return buf

    def share_host(self):
        """Hand the host array out (a view for the user): from now on writes must copy first."""
        assert self.state in (Residency.HOST, Residency.BOTH), self.state
        self.host_exclusive = False
        view = self.host.view()
        view.flags.writeable = False
        return view

    def writable_host(self):
        """The host array, copied first unless this buffer owns it exclusively. HOST state only."""
        assert self.state is Residency.HOST, self.state
        if not (self.host_exclusive and self.host.flags.writeable):
            self.host = np.array(self.host, copy=True)
            self.host_exclusive = True
        return self.host
