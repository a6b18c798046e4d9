"""The engine: graph nodes, buffers and residency, backends, the scheduler, host reads and writes."""
from .graph import Node, pending_order, walk
from .residency import Buffer, Residency
from .counters import COUNTERS
from .scheduler import realize
from . import hostio
from . import host_malloc

host_malloc.tune()  # see host_malloc.py: freed arrays stay in the process for the next step

__all__ = ["Node", "pending_order", "walk", "Buffer", "Residency", "COUNTERS", "realize", "hostio"]
