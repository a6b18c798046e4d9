"""When the steps being run read each value next: what the evictor spills first under a budget.

A device's LRU order knows the past only. A realization knows its future: the steps it is about to run
(runtime/executor.py) or replay (runtime/replay/capture.py, when the executors run a compiled step).
While one runs, its device memories hold a `NextReads`, and the evictor spills a value no remaining step
reads, else the value read furthest ahead (Belady's choice, the one that spills least when values are
of one size); runtime/memory.py has the rule. In a training step that is the optimizer's moments (read
last, by the update) and the first layers' saved activations (read last in backward), not the weights
the next layer reads. The table of reads is built at the first eviction only: a run that evicts
nothing pays nothing for it.
"""
import bisect
import contextlib

NEVER = float("inf")


class NextReads:
    """Positions of the steps reading each value, as `at` (the step about to run) moves on.

    `steps` are a schedule's pending steps (a node or a fused group; the executor sets each to None as
    it runs it), or, with `slots`, a capture's recorded steps reading slot numbers (`ins`) of the live
    list `slots`. Values are known by key while pending (node id, or slot) and by their Buffer once made
    (`made(key, buffer)`); `next_read(id(buffer))` is the first position at or after `at` that reads
    it, NEVER if none does."""

    __slots__ = ("at", "_steps", "_slots", "_pending", "_made")

    def __init__(self, steps, slots=None):
        self.at, self._steps, self._slots = 0, steps, slots
        self._pending = self._made = None

    def follow(self, steps):
        """Start over with a schedule's new steps (the executor planned again), from its first."""
        self.at, self._steps = 0, steps
        self._pending = self._made = None

    def _build(self):
        self._pending, self._made = {}, {}
        slots = self._slots
        for k in range(self.at, len(self._steps)):
            step = self._steps[k]
            if step is None:
                continue  # running now: its operands are pinned
            if slots is not None:
                for s in step.ins:
                    buf = slots[s]
                    if buf is not None:
                        self._add(self._made, id(buf), k)
                    else:
                        self._add(self._pending, s, k)
                continue
            for node in step.group.inputs if step.group is not None else step.node.inputs:
                if node.buffer is not None:
                    self._add(self._made, id(node.buffer), k)
                else:
                    self._add(self._pending, node.id, k)

    @staticmethod
    def _add(table, key, k):
        positions = table.get(key)
        if positions is None:
            table[key] = [k]
        elif positions[-1] != k:
            positions.append(k)

    def made(self, key, buffer):
        """Value `key` is `buffer` now (several keys may name one Buffer: a view's node and its source's)."""
        if self._pending is None:
            return  # not built yet: it will find the Buffer where it looks
        positions = self._pending.pop(key, None)
        if positions is None:
            return
        known = self._made.get(id(buffer))
        self._made[id(buffer)] = positions if known is None else sorted(set(known) | set(positions))

    def next_read(self, buffer_id):
        """The position of the first remaining step reading the Buffer with this id (NEVER if none)."""
        if self._made is None:
            self._build()
        positions = self._made.get(buffer_id)
        if not positions:
            return NEVER
        i = bisect.bisect_left(positions, self.at)
        return positions[i] if i < len(positions) else NEVER


@contextlib.contextmanager
def guiding(memories, reads):
    """Let `reads` choose what `memories` (DeviceMemory objects) evict inside the block."""
    saved = [m.next_reads for m in memories]
    for m in memories:
        m.next_reads = reads
    try:
        yield reads
    finally:
        for m, old in zip(memories, saved):
            m.next_reads = old
