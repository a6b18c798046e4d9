"""The step as a value: a `Schedule` is the ordered list of kernels one realization runs, each with its
backend, what it computes and the copies of values it needs first.

The planner (runtime/planner.py) makes it, `lt.plan()` prints it, and the executor (runtime/executor.py)
runs it and hands back the schedule it ran. A pending step holds its node (or fused group) and, on a
device, the launches placement chose; the executor lets go of both once the step ran, so a schedule
keeps no value of the realization alive. What a step describes stays: label, node id, backend name,
shape, dtype, copies.

A capture (runtime/replay/capture.py) records the steps it sees run as the same `Step`, wired to slots
instead of nodes (`Step.recorded`), and every replay reads those.
"""


class Copy:
    """One transfer of a value: direction ("h2d"/"d2h"), the node whose value moves, bytes, reason, device."""

    __slots__ = ("direction", "node_id", "nbytes", "reason", "device")

    def __init__(self, direction, node_id, nbytes, reason, device):
        self.direction, self.node_id, self.nbytes = direction, node_id, nbytes
        self.reason, self.device = reason, device

    def key(self):
        return (self.direction, self.node_id, self.nbytes, self.reason, self.device)

    def __eq__(self, other):
        return isinstance(other, Copy) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        return f"{self.direction} node {self.node_id} {self.nbytes} B ({self.reason}, {self.device})"


GROUPS = ("device_group", "host_group")  # the kinds of a fused group's step
KERNELS = ("node",) + GROUPS  # the kinds of a step that runs a kernel


class Step:
    """One kernel of a schedule, or one recorded action of a capture.

    `kind`: "node" (one node's kernel), "device_group" or "host_group" (a fused group's one kernel on a
    device or a host fuser); a recorded step may also be a "view" or an "exchange". `label`: the op, or
    fused(...); `node_id`, `shape`, `dtype`: the value it makes; `runs_on`: the backend object
    (`backend`: its name); `copies`: the transfers made just before it; `follow`: the device a constant
    follows its consumer to (runtime/constants.py), else None; `offers`: (operand position, backend) of a
    matrix a policy offered for the first time (remembered when the step runs); `counted`: whether it
    counts as a kernel of the realization (a declined group's members count as the group's one);
    `refused`: the devices placement gave it to whose budget cannot hold its result and operands at once.
    While pending: `node` (or `group`) and `launches` (a device's, as placement chose them).
    A recorded step (`recorded`) keeps a template in `node`/`group` (no inputs, no value), `what` (the
    template, group template, view index or Exchange it runs), its operand slots `ins`, result slot
    `out` (and `extra_outs`, those of the other values a fused group's kernel makes: `Group.extras`), the
    slots it drops after (`drop`), a random kernel's stream offset, and how its operands were
    passed when captured (`params`, `shapes`, `dtypes`; whether its result kept a host copy)."""

    __slots__ = ("kind", "label", "node_id", "shape", "dtype", "runs_on", "copies", "follow", "offers",
                 "counted", "refused", "node", "group", "launches", "what", "ins", "out", "extra_outs", "drop",
                 "stream", "params", "shapes", "dtypes", "host_copy")

    def __init__(self, kind, label, node, runs_on, copies, group=None, launches=None, follow=None, offers=(),
                 counted=True, refused=()):
        self.kind, self.label, self.node_id = kind, label, node.id
        self.shape, self.dtype, self.runs_on, self.copies = node.shape, node.dtype, runs_on, copies
        self.follow, self.offers, self.counted, self.refused = follow, offers, counted, refused
        self.node, self.group, self.launches = node, group, launches
        self.what = group if group is not None else node
        self.ins = self.out = self.stream = None
        self.drop = self.params = self.shapes = self.dtypes = self.extra_outs = ()
        self.host_copy = False

    @classmethod
    def recorded(cls, kind, runs_on, what, ins, out, launches=None, follow=None, params=(), shapes=(), dtypes=(),
                 host_copy=False):
        """A step as a capture records it: `what` is a node template, a group template (with a `root`
        template), a view's (index, shape) or an Exchange; `runs_on` None for views and exchanges."""
        group = what if kind in GROUPS else None
        node = what.root if group is not None else what
        step = cls.__new__(cls)
        step.kind, step.runs_on, step.what, step.ins, step.out = kind, runs_on, what, ins, out
        step.label = group.label if group is not None else getattr(node, "op", kind)
        step.node_id, step.shape, step.dtype = (getattr(node, a, None) for a in ("id", "shape", "dtype"))
        step.node, step.group, step.launches, step.follow = node, group, launches, follow
        step.copies, step.offers, step.counted, step.refused = (), (), True, ()
        step.drop, step.stream, step.extra_outs = (), None, ()
        step.params, step.shapes, step.dtypes, step.host_copy = params, shapes, dtypes, host_copy
        return step

    @property
    def backend(self):
        return self.runs_on.name if self.runs_on is not None else "host"

    def key(self):
        """What the step is, for comparing a plan with what ran: kernel, node, backend, copies."""
        return (self.label, self.node_id, self.backend, tuple(c.key() for c in self.copies))

    def release(self):
        """Let go of the node, group and launches (the step ran, or it describes a plan)."""
        self.node = self.group = self.launches = self.what = None

    def __repr__(self):
        return f"<Step {self.label} on {self.backend} {self.shape} {self.dtype}>"


class Schedule:
    """The kernels of one realization in order (`steps`; `items` is the same list) and every copy of a
    value they need (`copies`). `replanned` counts the times the run re-planned its remaining steps
    because memory went otherwise than planned (an eviction, or a device that could not get a block)."""

    def __init__(self, steps, replanned=0):
        self.steps, self.replanned = steps, replanned

    @property
    def items(self):
        return self.steps

    @property
    def copies(self):
        return [c for step in self.steps for c in step.copies]

    @property
    def kernels(self):
        """The kernels the realization counts (runtime/counters.py)."""
        return sum(step.counted for step in self.steps)

    def keys(self):
        return [step.key() for step in self.steps]

    def __len__(self):
        return len(self.steps)

    def __str__(self):
        if not self.steps:
            return "plan: nothing to compute (every value asked for is already realized)"
        copies = self.copies
        rows = [f"plan: {len(self.steps)} kernels, {len(copies)} copies ({sum(c.nbytes for c in copies):,} bytes)",
                f"{'#':>4}  {'kernel':<28} {'backend':<8} {'shape':<18} {'dtype':<8} copies before it"]
        for k, step in enumerate(self.steps):
            moves = "; ".join(f"{c.direction} node {c.node_id} ({c.nbytes:,} B, {c.reason})" for c in step.copies)
            label = step.label if len(step.label) <= 28 else step.label[:25] + "..."
            rows.append(f"{k:>4}  {label:<28} {step.backend:<8} {str(step.shape):<18} {str(step.dtype):<8} {moves}")
        return "\n".join(rows)

    __repr__ = __str__
