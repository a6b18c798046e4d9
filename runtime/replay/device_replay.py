"""One replay of a `DeviceRunner`: the Buffers it resolves, pins, allocates and lets go of while its actions run.

A `DeviceRunner` (runtime/replay/device_runner.py) is built once per Program: the prepared launches, the
scratch layout and the actions of a replay in order. Each replay is one `DeviceReplay`, which holds what
that replay alone touches (the slots, the Buffers it pins, the values it made, the donors it writes
over, the operand hits it counts) and the code of the actions. What outlives a replay (where each
prepared launch points now, the blocks the last replay used) stays with the runner.
"""
from ...kernels.gpu.index import group_by_destination
from .. import copies
from ..backends.lowering import for_indices
from ..residency import Buffer
from ..transfers import LOG


class NoMemory(Exception):
    """Device memory ran out during a planned replay, or an index kernel's indices have no host copy to
    check (the caller replays through the executors)."""


class DeviceReplay:
    """Runs one replay's actions (each `(function, argument)`, called as `function(replay, argument)`)
    into `slots`; `execute(step, operands)` runs a step the generic way; `donors` ({replaced slot: old
    Buffer}) are written over from the first update on. Raises NoMemory when the device memory runs out
    (nothing the replay made is kept, and no donor has been written)."""

    __slots__ = ("runner", "device", "memory", "slots", "execute", "pins", "made", "donors", "updating", "hits")

    def __init__(self, runner, slots, execute, donors, hits):
        self.runner, self.device, self.memory = runner, runner.device, runner.memory
        self.slots, self.execute, self.donors, self.hits = slots, execute, donors, hits
        self.pins, self.made, self.updating = {}, set(), False

    def run(self, actions, chunks):
        memory = self.memory
        memory.pin_scope(self.pins)  # every Buffer in self.pins stays put until the end
        try:
            if self.donors is not None:
                for buf in self.donors.values():  # before anything is allocated: they must stay put
                    self.pin(buf)
            self.resolve_inputs()  # pinned first: allocating scratch must not evict them
            for act, arg in actions:
                act(self, arg)
        finally:
            if self.updating:  # from the first update on, the donors' device copies are the new values
                for buf in self.donors.values():
                    buf.overwrite_on_device()
                    memory.touch(buf)
            for chunk in chunks:
                close(self, chunk)
            memory.unpin_scope(self.pins)
            if self.hits:
                LOG.hit(self.device.name, self.hits)

    def resolve_inputs(self):
        """`resolve` every input, those already resident here (as a rule, all) by a shorter way."""
        runner, slots, device, pins = self.runner, self.slots, self.device, self.pins
        ptr_at, touch, value_uses = runner.ptr_at, self.memory.touch, runner.value_uses
        for s, uses in runner.pointer_inputs:
            buf = slots[s]
            if buf.backend is not device:  # no copy here (a Buffer has a backend while it has one)
                self.resolve(s, buf)
                continue
            touch(buf)
            self.hits += uses
            pins[id(buf)] = buf
            ptr = buf.device.ptr
            if ptr_at.get(s) != ptr:
                runner.point(s, ptr)
            if s in value_uses:
                self.resolve_value(s, buf)
        for s in runner.value_inputs:
            self.resolve_value(s, slots[s])

    def resolve(self, s, buf):
        """Put slot `s`'s Buffer where its prepared launches read it: on the device (pinned for the
        replay), or its host value for a launch that takes it as a scalar."""
        runner = self.runner
        uses = runner.ptr_uses.get(s)
        if uses:
            device = self.device
            if buf.on_device and buf.backend is device:
                self.memory.touch(buf)
                self.hits += len(uses)
            else:
                LOG.miss(device.name)
                self.hits += len(uses) - 1
                if not copies.make_resident(buf, device, copies.upload_reason(buf, device)):
                    raise NoMemory()
            self.pin(buf)
            runner.point(s, buf.device.ptr)
        if s in runner.value_uses:
            self.resolve_value(s, buf)

    def resolve_value(self, s, buf):
        if not buf.on_host:
            copies.download(buf, "host-kernel")
        value = buf.host.item()
        for p, j in self.runner.value_uses[s]:
            p.set_scalar(j, value)

    def pin(self, buf):
        self.pins[id(buf)] = buf


# ---- the actions: function(replay, argument) ------------------------------------------------------------
def launch_all(replay, launches):
    for launch in launches:
        launch()


def open_chunk(replay, chunk):
    """Allocate a scratch chunk; if its block moved since the last replay, re-point its values."""
    block = replay.memory.allocate(chunk.size, chunk.last_block)  # the same block again where it can
    if block is None:
        raise NoMemory()
    chunk.block = chunk.last_block = block
    base = block.ptr
    if base != chunk.base:
        point = replay.runner.point
        for s, offset in chunk.offsets.items():
            point(s, base + offset)
        chunk.base = base


def close(replay, chunk):
    if chunk.block is not None:
        replay.memory.give_back(chunk.block, chunk.size)
        chunk.block = None


def allocate(replay, result):
    """A Buffer on the device for a prepared launch's result that someone outside the plan reads."""
    s, node_id, op, shape, dtype, nbytes = result
    runner = replay.runner
    block = replay.memory.allocate(nbytes, runner.last_block.get(s))  # the last replay's, if cached
    if block is None:
        raise NoMemory()
    runner.last_block[s] = block
    buf = Buffer(node_id, op, shape, dtype).set_device_result(block, replay.device)
    replay.memory.register(buf)
    replay.pin(buf)
    replay.made.add(id(buf))
    replay.slots[s] = buf
    runner.point(s, block.ptr)


def begin_updates(replay, specs):
    """Before the first update: blocks for the replaced values that have no donor this replay, and
    the donors' blocks where their new values' launches write and are read. `specs`: (slot, the
    result's allocation) of each replaced value."""
    donors, slots, runner = replay.donors, replay.slots, replay.runner
    for s, result in specs:
        buf = donors.get(s)
        if buf is None:
            allocate(replay, result)
            continue
        slots[s] = buf
        ptr = buf.device.ptr
        if runner.ptr_at.get(s) != ptr:
            runner.point(s, ptr)
    replay.updating = True


def host_copy(replay, pair):
    """A reshape of a value the host holds too keeps a host copy of its result, as in the eager run
    (placement.keeps_host_copy): free on the host, and index checks read it there. (A value made by
    prepared launches only, with no Buffer, is on the device only.)"""
    source, result = replay.slots[pair[0]], replay.slots[pair[1]]
    if source is not None and source.on_host:
        result.add_host_copy(source.host.reshape(result.shape))
        result.share_host()


def check(replay, index_check):
    """An index kernel's bounds, checked on the host's copy of its indices (IndexError if one is out
    of range); without a host copy the executors run the replay (they check on the device)."""
    slot, launches = index_check
    buf = replay.slots[slot]
    if buf is None or for_indices(launches, buf) is None:
        raise NoMemory()


def group_ready(replay, group):
    """A scatter's indices: on the host (else the executors run the replay), and resident on the
    device (pinned) as the eager run makes every operand, though its kernel reads only the grouping."""
    device = replay.device
    buf = replay.slots[group[1]]
    if buf is None or not buf.on_host:
        raise NoMemory()
    if buf.on_device and buf.backend is device:
        replay.hits += 1
    else:
        LOG.miss(device.name)
        if not copies.make_resident(buf, device):
            raise NoMemory()
    replay.pin(buf)


def group(replay, grouping):
    """A scatter's destinations grouped on the host's copy of its indices and uploaded where its
    launch reads them (as the eager launch does). `grouping`: (its node, the indices' slot, the
    destination count, the scratch keys of the order and the starts)."""
    node, slot, size, order_key, starts_key = grouping
    order, starts = group_by_destination(replay.slots[slot].host, size)
    ptr_at, device = replay.runner.ptr_at, replay.device
    device.upload_grouping(node, ptr_at[order_key], order)
    device.upload_grouping(node, ptr_at[starts_key], starts)


def tag(replay, checks):
    """The device index checks of the next launches, registered for the next status read (as the
    eager launches register them), their tags patched in."""
    for index_check, uses in checks:
        tag_value = replay.device.add_check(index_check)
        for p, j in uses:
            p.set_scalar(j, tag_value)


def generic(replay, step):
    """A step the runner does not launch itself, run by the executors."""
    slots = replay.slots
    buf = slots[step.out] = replay.execute(step, [slots[s] for s in step.ins])
    if step.out in replay.runner.resolved:
        replay.resolve(step.out, buf)
        replay.made.add(id(buf))  # a new value: unpinned after its last reader


def drop(replay, drops):
    # Only a result this replay made is unpinned at its last reader (and so freed): an input's
    # Buffer may also sit in another slot (two tensors holding one value), so inputs stay pinned.
    slots, pins, made = replay.slots, replay.pins, replay.made
    for s in drops:
        buf = slots[s]
        if buf is not None and id(buf) in made:
            made.discard(id(buf))
            pins.pop(id(buf), None)  # a value read only as a scalar was never pinned
        slots[s] = None
