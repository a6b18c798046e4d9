"""Where a device runner's internal values live: fixed offsets in a few blocks of scratch device memory.

Values that only prepared launches make and read get an offset in a chunk of scratch (greedy by size
over their lifetimes, as TFLite's arena planner does); one chunk if the step's memory allows, else the
chunk held at the peak is cut where the fewest bytes live across, until a replay adds no more device
memory at its peak than the captured eager call did; then the chunks the cuts left are merged back
wherever that keeps the peak (each chunk is an allocation per replay).
"""

import numpy as np

from ..memory import bucket

ALIGN = 256


def place(intervals):
    """Offsets for (size, first, last) intervals in one block: largest first, each at the lowest gap
    between the placed intervals whose lifetimes overlap its own. Returns (offsets, block size)."""
    order = sorted(range(len(intervals)), key=lambda i: (-intervals[i][0], intervals[i][1]))
    placed, offsets, total = [], [0] * len(intervals), 0
    for i in order:
        size, first, last = intervals[i]
        at = _lowest_gap([(offsets[j], offsets[j] + intervals[j][0]) for j in placed
                          if intervals[j][1] <= last and first <= intervals[j][2]], size)
        offsets[i] = at
        total = max(total, at + size)
        placed.append(i)
    return offsets, total


def aligned(nbytes):
    return -(-max(nbytes, 1) // ALIGN) * ALIGN


class Chunk:
    """A block of scratch holding internal values at fixed offsets, allocated from the step that
    makes the first of them to the step that reads the last."""

    __slots__ = ("offsets", "size", "first", "last", "block", "base", "last_block")

    def __init__(self, members, internal):
        offsets, self.size = place([internal[s] for s in members])
        self.offsets = dict(zip(members, offsets))
        self.first = min(internal[s][1] for s in members)
        self.last = max(internal[s][2] for s in members)
        self.block = self.base = self.last_block = None

    @classmethod
    def joined(cls, chunk, other, at, size, last):
        """`chunk` with `other`'s values added at offset `at` (their lifetimes do not overlap where
        their bytes do): `size` bytes, held to step `last`."""
        new = cls.__new__(cls)
        new.offsets = {**chunk.offsets, **{s: at + o for s, o in other.offsets.items()}}
        new.size, new.first, new.last = size, chunk.first, last
        new.block = new.base = new.last_block = None
        return new


def layout(internal, externals, n_steps, eager_peak=None, replay_peak=None):
    """Scratch chunks for the internal values {slot: (size, first, last)}, so that a planned replay
    adds no more device memory at its peak than the captured eager call did (`eager_peak` bytes), nor
    than a replay by the executors (one block per value; it added `replay_peak`) where that is more.
    `externals` are the other results as (bytes, made, freed) steps; what the model leaves out (inputs
    held to the end, index temporaries) is the measured replay's excess over its model. One chunk if
    it fits; else the chunk held at the peak is cut where the fewest bytes live across (the values
    living across becoming blocks of their own) until it fits, or every value has its own block."""
    if not internal:
        return []
    one_each, _ = peak_of([(bucket(size), first, last) for size, first, last in internal.values()] + externals,
                           n_steps)
    budget = one_each
    if eager_peak is not None and replay_peak is not None:
        budget = max(one_each, eager_peak - (replay_peak - one_each))
    groups = [sorted(internal, key=lambda s: internal[s][1])]
    while True:
        chunks = [Chunk(g, internal) for g in groups]
        peak, at = peak_of([(bucket(c.size), c.first, c.last) for c in chunks] + externals, n_steps)
        if peak <= budget:
            break
        held = [i for i, c in enumerate(chunks) if c.first <= at <= c.last and len(groups[i]) > 1]
        if not held:
            break
        i = max(held, key=lambda i: chunks[i].size)
        groups[i:i + 1] = _cut(groups[i], internal)
    return chunks if len(chunks) == 1 else _merged(chunks, externals, n_steps, max(peak, budget))


def _merged(chunks, externals, n_steps, budget):
    """Fewer chunks within the same budget: in order of their first step, each chunk joins the first
    of the chunks made so far (the latest first) that it can join with the layout's peak staying within
    `budget`, placed whole at the lowest offset free over its lifetime there. Cutting at the peak leaves
    each value living across a cut in a block of its own, most of them far from the peak; each chunk
    costs a replay an allocation and, where its block moved, a pointer patch in every launch that reads
    its values."""
    chunks = sorted(chunks, key=lambda c: c.first)
    held = np.zeros(n_steps + 1, np.int64)  # bytes held before each step, by the layout as it stands
    for size, first, last in [(bucket(c.size), c.first, c.last) for c in chunks] + externals:
        held[first:last + 1] += size
    out, parts = [], []  # the chunks made so far; for each, its parts at their offsets
    for chunk in chunks:
        for k in range(len(out) - 1, -1, -1):
            acc = out[k]
            at = _free_offset(parts[k], chunk)
            size, first, last = max(acc.size, at + chunk.size), acc.first, max(acc.last, chunk.last)
            trial = held[first:last + 1] + bucket(size)
            trial[acc.first - first:acc.last - first + 1] -= bucket(acc.size)
            trial[chunk.first - first:chunk.last - first + 1] -= bucket(chunk.size)
            if trial.max() <= budget:
                held[first:last + 1] = trial
                out[k] = Chunk.joined(acc, chunk, at, size, last)
                parts[k].append((at, chunk))
                break
        else:
            out.append(chunk)
            parts.append([(0, chunk)])
    return out


def _free_offset(parts, chunk):
    """The lowest offset where `chunk` overlaps no part (at its offset) whose lifetime overlaps its own."""
    return _lowest_gap([(at, at + c.size) for at, c in parts if c.first <= chunk.last and chunk.first <= c.last],
                       chunk.size)


def _lowest_gap(busy, size):
    """The lowest offset where `size` bytes fit between the (start, end) byte ranges `busy`."""
    at = 0
    for lo, hi in sorted(busy):
        if at + size <= lo:
            break
        at = max(at, hi)
    return at


def _cut(group, internal):
    """`group` split at the step where the fewest bytes live across: the values before, those after,
    and each value living across on its own."""
    first, last = min(internal[s][1] for s in group), max(internal[s][2] for s in group)
    across = [0] * (last - first + 2)
    for s in group:
        size, a, b = internal[s]
        across[a - first + 1] += size  # lives across every cut c with a < c <= b
        across[b - first + 1] -= size
    best, best_bytes, running = None, None, 0
    for c in range(first + 1, last + 1):
        running += across[c - first]
        if best_bytes is None or running < best_bytes:
            best, best_bytes = c, running
    if best is None:
        return [[s] for s in group]
    before = [s for s in group if internal[s][2] < best]
    after = [s for s in group if internal[s][1] >= best]
    parts = [part for part in (before, after) if part]
    parts += [[s] for s in group if internal[s][1] < best <= internal[s][2]]
    return parts if len(parts) > 1 else [[s] for s in group]


def peak_of(blocks, n_steps):
    """The most bytes held at once by (size, allocated before step, freed after step) blocks, and
    the first step where it is held."""
    delta = [0] * (n_steps + 1)
    for size, first, last in blocks:
        delta[first] += size
        delta[last + 1] -= size
    held = peak = at = 0
    for k, d in enumerate(delta):
        held += d
        if held > peak:
            peak, at = held, k
    return peak, at
