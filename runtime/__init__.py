"""The engine: graph nodes, buffers and residency, backends, the scheduler, host reads and writes."""
from . import config  # first: it gives the kernels their settings (cache folder, ...) before they load
from .graph import Node, pending_order, walk
from .residency import Buffer, Residency
from .counters import COUNTERS
from .scheduler import realize
from . import hostio

__all__ = ["Node", "pending_order", "walk", "Buffer", "Residency", "COUNTERS", "realize", "hostio"]
