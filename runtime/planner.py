"""The plan of a realization, before anything runs: each kernel in order, the backend that will run it,
and the copies it needs, from the same decisions `realize` makes (the fusion plan, then the first
backend of the chain that can run each node), asked without side effects (`can_run`, `can_fuse`).

Operands are stand-ins (`PlannedValue`) whose residency follows the plan: a value a device computes is
on that device only, an uploaded or downloaded value is on both sides. The plan assumes memory can be
had: under a budget the run may also evict, or move a kernel down the chain when a device cannot get
memory, and the transfer log then shows what happened instead. The copies are those of values; a
device's own bookkeeping copies (a scatter's index groupings, its status word: reasons
`index-grouping`, `status-read`, `status-reset`) are in the transfer log only.
"""
import math

import numpy as np

from . import constants, devices, fusion, parallel, policy
from .graph import Node, pending_order
from .locking import serialized
from .policy import is_param
from .scheduler import keeps_host_copy, lone_from


class PlannedValue:
    """A node's value as the plan expects it when a kernel reads it (what backends and the policy ask)."""

    __slots__ = ("node_id", "shape", "dtype", "on_host", "on_device", "backend", "identity", "_host")

    def __init__(self, node, on_host, on_device, backend, identity, host=None):
        self.node_id, self.shape, self.dtype = node.id, tuple(node.shape), np.dtype(node.dtype)
        self.on_host, self.on_device, self.backend = on_host, on_device, backend
        self.identity, self._host = identity, host

    @classmethod
    def of(cls, node):
        """The value of a realized node as it is now (its Buffer is its identity)."""
        buf = node.buffer
        return cls(node, buf.on_host, buf.on_device, buf.backend, buf, buf.host)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def host(self):
        # A value the host will compute but has not: zeros of its shape stand in for it (lowering reads
        # host index values to check their bounds; zeros are in range, and the launches are discarded).
        if self._host is None and self.on_host:
            self._host = np.zeros(self.shape, self.dtype)
        return self._host


class Copy:
    """One planned transfer: direction ("h2d"/"d2h"), the node whose value moves, bytes, reason, device."""

    __slots__ = ("direction", "node_id", "nbytes", "reason", "device")

    def __init__(self, direction, node_id, nbytes, reason, device):
        self.direction, self.node_id, self.nbytes = direction, node_id, nbytes
        self.reason, self.device = reason, device

    def __repr__(self):
        return f"{self.direction} node {self.node_id} {self.nbytes} B ({self.reason}, {self.device})"


class Item:
    """One planned kernel: what it computes (`label`: the op, or fused(...) for a group), the node it
    produces, the backend that runs it, its shape and dtype, and the copies made just before it."""

    __slots__ = ("label", "node_id", "backend", "shape", "dtype", "copies")

    def __init__(self, label, node, backend, copies):
        self.label, self.node_id, self.backend = label, node.id, backend.name
        self.shape, self.dtype, self.copies = node.shape, node.dtype, copies

    def __repr__(self):
        return f"<Item {self.label} on {self.backend} {self.shape} {self.dtype}>"


class Plan:
    """The kernels a realization would run, in order (`items`), and every copy of a value they need
    (`copies`)."""

    def __init__(self, items):
        self.items = items

    @property
    def copies(self):
        return [c for item in self.items for c in item.copies]

    def __len__(self):
        return len(self.items)

    def __str__(self):
        if not self.items:
            return "plan: nothing to compute (every value asked for is already realized)"
        rows = [f"plan: {len(self.items)} kernels, {len(self.copies)} copies "
                f"({sum(c.nbytes for c in self.copies):,} bytes)",
                f"{'#':>4}  {'kernel':<28} {'backend':<8} {'shape':<18} {'dtype':<8} copies before it"]
        for k, item in enumerate(self.items):
            moves = "; ".join(f"{c.direction} node {c.node_id} ({c.nbytes:,} B, {c.reason})" for c in item.copies)
            label = item.label if len(item.label) <= 28 else item.label[:25] + "..."
            rows.append(f"{k:>4}  {label:<28} {item.backend:<8} {str(item.shape):<18} {str(item.dtype):<8} {moves}")
        return "\n".join(rows)

    __repr__ = __str__


@serialized
def plan(roots):
    """The Plan of `realize(roots)`; computes nothing, moves nothing, and changes no backend state."""
    order = pending_order(roots)
    with parallel.planning(order):
        return _plan(order, roots)


def _plan(order, roots):
    chain = devices.chain()
    fuser = devices.fusing_backend(chain) if order else None
    groups, absorbed = fusion.plan(order, roots, lone_from(fuser)) if fuser is not None else ({}, ())
    deferred = constants.deferrable(order, roots, groups, absorbed) if order and not chain[0].is_host else set()
    planner = _Planner(chain)
    for node in order:
        if id(node) in absorbed or node in deferred:
            continue
        group = groups.get(node)
        if deferred:
            inputs = constants.consumed(node, group)
            planner.constants(constants.due(inputs, deferred), inputs)
        if group is None:
            planner.node(node)
        else:
            planner.group(group, fuser)
    return Plan(planner.items)


class _Planner:
    def __init__(self, chain):
        self.chain, self.items, self.values = chain, [], {}

    def value(self, node):
        planned = self.values.get(node)
        if planned is None:
            planned = self.values[node] = PlannedValue.of(node)
        return planned

    def node(self, node):
        operands = [self.value(inp) for inp in node.inputs]
        for backend in self.chain:
            if backend.can_run(node, operands):
                self._place(node, node.op, operands, backend)
                return
        raise AssertionError(f"no backend can run {node}")  # the last host backend runs everything

    def constants(self, due, inputs):
        """As scheduler._constants_for: deferred constants placed where the consumer's operands are."""
        if not due:
            return
        device = constants.consumer_device([self.value(inp) for inp in inputs
                                            if inp in self.values or inp.buffer is not None])
        for node in due:
            if device is None:
                self.node(node)
            else:
                with policy.following(node, device.name):
                    self.node(node)

    def group(self, group, fuser):
        """As scheduler._run_group: the device if it takes the group, else the first host fuser that
        does, else the members one by one."""
        operands = [self.value(n) for n in group.inputs] + \
            [self.value(p) for p in group.params if isinstance(p, Node)]
        if not fuser.is_host and fuser.accepts_group(group, operands):
            self._place(group.root, group.label, operands, fuser)
            return
        shapes = [n.shape for n in group.inputs]
        for host in devices.host_fusers(fuser, self.chain):
            if host.can_fuse(group.recipe, group.root, shapes):
                self._place(group.root, group.label, operands, host)
                return
        for member in pending_order([group.root]):
            self.node(member)

    def _place(self, node, label, operands, backend):
        copies = []
        if backend.is_host:
            for v in operands:
                if not v.on_host:
                    copies.append(self._download(v, "host-kernel"))
            result = PlannedValue(node, True, False, None, node)
        else:
            for v in operands:
                if is_param(v) or (v.on_device and v.backend is backend):
                    continue
                if v.on_device and not v.on_host:
                    copies.append(self._download(v, "device-switch"))
                copies.append(Copy("h2d", v.node_id, v.nbytes, "operand-upload", backend.name))
                v.on_device, v.backend = True, backend
            result = PlannedValue(node, keeps_host_copy(node, operands), True, backend, node)
        self.values[node] = result
        self.items.append(Item(label, node, backend, copies))

    @staticmethod
    def _download(v, reason):
        v.on_host = True
        return Copy("d2h", v.node_id, v.nbytes, reason, v.backend.name)
