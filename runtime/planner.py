"""The planner: a realization's pending graph -> its `Schedule` (runtime/schedule.py), before anything runs.

One planner serves `realize` and `lt.plan()`: the fusion groups (runtime/fusion.py), the constants that
follow their consumer (runtime/constants.py), and for each node or group the first backend of the chain
that placement (runtime/placement.py) gives it to, with the copies its operands need. Operands are
stand-ins (`PlannedValue`) whose residency follows the schedule: a value a device computes is on that
device only, an uploaded or downloaded value is on both sides.

Memory is planned as far as the budget decides it alone: a device step whose result and operands cannot
all be held at once within the budget (they are pinned while it runs; anything else can be evicted)
moves down the chain, after the uploads that did fit, as the run would. What depends on the rest of the
device's memory (which value the evictor picks) is not planned: when the run evicts, the executor plans
the remaining steps again from the values as they are. The copies are those of values; a device's own
bookkeeping copies (a scatter's index groupings, its status word: reasons `index-grouping`,
`status-read`, `status-reset`) are in the transfer log only.
"""
import math

import numpy as np

from . import constants, devices, fusion, parallel, placement, remat
from .copies import upload_reason
from .graph import Node, postorder
from .locking import serialized
from .memory import bucket
from .residency import home_of
from .schedule import Copy, Schedule, Step


class PlannedValue:
    """A node's value as the schedule expects it when a kernel reads it (what backends and placement ask)."""

    __slots__ = ("node_id", "shape", "dtype", "on_host", "on_device", "backend", "identity", "_host", "nbytes",
                 "held", "home")

    def __init__(self, node, on_host, on_device, backend, identity, host=None, nbytes=None, home=None):
        self.node_id, self.shape, self.dtype = node.id, node.shape, node.dtype  # a tuple, a NumPy dtype
        self.on_host, self.on_device, self.backend = on_host, on_device, backend
        self.identity, self._host, self.home = identity, host, home  # home: Buffer.home
        self.nbytes = node.nbytes if nbytes is None else nbytes
        self.held = None  # its size class on a device (memory.bucket), found when first asked

    @classmethod
    def of(cls, node):
        """The value of a realized node as it is now (its Buffer is its identity)."""
        buf = node.buffer
        return cls(node, buf.on_host, buf.on_device, buf.backend, buf, buf.host, home=buf.home)

    @property
    def size(self):
        return math.prod(self.shape)

    @property
    def host(self):
        # A value the host will compute but has not: zeros of its shape stand in for it (lowering reads
        # host index values to check their bounds and group a scatter's destinations; zeros are in
        # range, and the executor remakes such launches from the real indices).
        if self._host is None and self.on_host:
            self._host = np.zeros(self.shape, self.dtype)
        return self._host


@serialized
def plan(roots):
    """The Schedule `realize(roots)` would run now; computes nothing, moves nothing. Its steps hold no
    node (a plan is a description). Under a budget the values would exceed, late readers may be rewired
    to values made again (runtime/remat.py): the graph then computes the same bytes, and the realization
    runs that plan."""
    chain = devices.chain()
    order = remat.ordered(roots, chain)
    with parallel.planning(order):
        result = schedule(order, roots, chain, devices.fusing_backend(chain) if order else None)
    for step in result.steps:
        step.release()
    return result


def lone_from(fuser):
    """Elements from which a lone elementwise node runs as a generated kernel (fusion.groups): when the
    fuser's kernels are cut in pieces for several CPU threads in this run (numba's); else None."""
    return 2 * parallel.MIN_PIECE if fuser.in_pieces and parallel.splitting() else None


def schedule(order, roots, chain, fuser):
    """The Schedule computing `order` (pending nodes, inputs first) for `roots` on backends `chain`,
    fused groups run by `fuser` (None: no fusion)."""
    groups, absorbed = fusion.groups(order, roots, lone_from(fuser), fuser.fuses_rows) \
        if fuser is not None else ({}, ())
    deferred = constants.deferrable(order, roots, groups, absorbed) if order and not chain[0].is_host else set()
    planner = _Planner(chain)
    values = planner.values
    for node in order:
        if id(node) in absorbed or node in deferred or node in values:
            continue  # computed inside its group's kernel, where its first consumer runs, or made early
        group = groups.get(node)
        if deferred:
            inputs = constants.consumed(node, group)
            planner.constants(constants.due(inputs, deferred), inputs)
        if group is None:
            planner.node(node)
        else:
            planner.group(group, fuser)
    return Schedule(planner.steps)


class _Planner:
    def __init__(self, chain):
        self.chain, self.steps, self.values = chain, [], {}
        self.offered = {}  # backend -> matrices offered it for the first time in this schedule
        self.refused = []  # devices whose budget cannot hold the step being placed

    def value(self, node):
        planned = self.values.get(node)
        if planned is None:
            planned = self.values[node] = PlannedValue.of(node)
        return planned

    def node(self, node, follow=None, counted=True):
        values = self.values
        operands = [values.get(inp) or self.value(inp) for inp in node.inputs]
        copies, offers = [], ()
        for backend in self.chain:
            if backend.offload == "policy":
                offered = self.offered.setdefault(backend, [])
                before = len(offered)
                kernel = placement.choose(backend, node, operands, offered)
                if len(offered) > before:
                    offers += ((placement.gemv_matrix(operands), backend),)
            else:
                kernel = placement.choose(backend, node, operands)
            if kernel is None:
                continue
            nbytes = node.nbytes
            if not backend.is_host and not self._fits(nbytes, operands, backend, copies):
                continue
            self._place(node, node.op, operands, backend, copies, follow=follow, counted=counted,
                        launches=kernel if kernel is not True else None, offers=offers, nbytes=nbytes)
            return
        raise AssertionError(f"no backend can run {node}")  # the last host backend runs everything

    def constants(self, due, inputs):
        """Deferred constants placed where the consumer's operands are (runtime/constants.py)."""
        if not due:
            return
        device = constants.consumer_device([self.value(inp) for inp in inputs
                                            if inp in self.values or inp.buffer is not None])
        for node in due:
            if device is None:
                self.node(node)
            else:
                with placement.following(node, device.name):
                    self.node(node, follow=device.name)

    def group(self, group, fuser):
        """The device if it takes the group and its memory can be had; the members one by one if it takes
        it but its budget cannot hold the group's operands and result at once (each member needs less,
        and stays on the device where it fits); else the first host fuser that takes it, else the
        members one by one (counted as the group's one kernel)."""
        # the views its extras read that the order makes later (fusion._before) come first
        for early in self._unplanned([a for x in group.extras for a in x.inputs
                                      if a is not group.root and a.buffer is None and a not in self.values]):
            self.node(early)
        operands = [self.value(n) for n in group.inputs] + \
            [self.value(p) for p in group.params if isinstance(p, Node)]
        copies = []
        if not fuser.is_host and placement.takes_group(fuser, group, operands):
            if self._fits(group.root.nbytes, operands, fuser, copies, refuse=False):
                self._place(group.root, group.label, operands, fuser, copies, group=group)
                return
            for member in self._unplanned(list(group.made)):
                self.node(member, counted=member is group.root)
            return
        shapes = [n.shape for n in group.inputs]
        for host in devices.host_fusers(fuser, self.chain):
            if placement.host_fuser_takes(host, group.recipe, group.root, shapes):
                self._place(group.root, group.label, operands, host, copies, group=group)
                return
        for member in self._unplanned(list(group.made)):
            self.node(member, counted=member is group.root)

    def _unplanned(self, roots):
        """The pending nodes needed for `roots` that no step computes yet, inputs first (a declined
        group's members)."""
        return postorder(roots, lambda node: node.buffer is None and node not in self.values)

    def _fits(self, nbytes, operands, backend, copies, refuse=True):
        """Whether a device step's result and data operands can be held at once within the budget (the
        operands are pinned while it runs; anything else can be evicted); if so, the copies of the
        operands it must upload are planned (in `copies`), else (with `refuse`) the refusal is noted."""
        held, counted, upload = bucket(nbytes), [], []
        for v in operands:
            if v.shape == () and v.on_host:  # is_param: travels as a kernel parameter
                continue
            if v not in counted:  # x * x holds x once
                counted.append(v)
                if v.held is None:
                    v.held = bucket(v.nbytes)
                held += v.held
                if not (v.on_device and v.backend is backend):
                    upload.append(v)
        if held > backend.memory.budget:
            if refuse:
                self.refused.append(backend)
                backend.memory.refused_need(held)
            return False
        for v in upload:
            if v.on_device:  # on another device: through the host, and that device forgets it
                if not v.on_host:
                    copies.append(self._download(v, "device-switch"))
            copies.append(Copy("h2d", v.node_id, v.nbytes, upload_reason(v, backend), backend.name))
            v.on_device, v.backend, v.home = True, backend, None
        return True

    def _place(self, node, label, operands, backend, copies, group=None, launches=None, follow=None, offers=(),
               counted=True, nbytes=None):
        if backend.is_host:
            for v in operands:
                if not v.on_host:
                    copies.append(self._download(v, "host-kernel"))
            result = PlannedValue(node, True, False, None, node, nbytes=nbytes, home=home_of(operands))
            for extra in group.extras if group is not None else ():  # the other values its kernel makes
                self.values[extra] = PlannedValue(extra, True, False, None, extra, home=result.home)
        else:
            result = PlannedValue(node, placement.keeps_host_copy(node, operands), True, backend, node, nbytes=nbytes)
        self.values[node] = result
        kind = "node" if group is None else "host_group" if backend.is_host else "device_group"
        refused = ()
        if self.refused:
            refused, self.refused = tuple(self.refused), []
        self.steps.append(Step(kind, label, node, backend, copies, group, launches, follow, offers, counted, refused))

    @staticmethod
    def _download(v, reason):
        v.on_host = True
        return Copy("d2h", v.node_id, v.nbytes, reason, v.backend.name)
