"""Op-specific rewrites of a captured program that a device replay may make, named in the op registry.

An op whose record (kernels/ops.py) names a `replay_pass` is looked at by that pass when a
`DeviceRunner` is built (runtime/replay/device_runner.py). A pass finds the places where the op's step
can run as another launch, and says which steps that launch makes unnecessary; the runner decides per
replay whether to use them (only when it writes the replaced state over its old blocks).

- "unstacked_in_place" (AdamW): an update whose stacked (p', m', v') result is read only by the three
  copies unstacking it, whose p', m', v' replace state and whose old p, m, v no later step reads, runs
  as one launch writing p', m', v' over the old p, m, v (each element read before it is written); the
  three copies do not run, and the stacked result is never made. The same bytes as the stacked update.
"""
from typing import Callable, NamedTuple

from ...kernels.ops import OPS
from .launch_calls import adamw_in_place_calls


class InPlaceUpdate(NamedTuple):
    """A step that may run as one launch over its old values: `step` (its index), `skipped` (the steps
    that launch makes unnecessary), `news` (the slots it writes: replaced state), `olds` (the slots it
    writes over, in the same order), `call(step, news, device)` (the launch's driver call)."""

    step: int
    skipped: tuple
    news: tuple
    olds: tuple
    call: Callable


def in_place_updates(program, steps, calls, internal, readers):
    """Every place a pass named in the op registry finds in `program` (`steps`; `calls`: the steps the
    runner launches itself; `internal`: the values no one outside those launches reads; `readers`: the
    steps reading each slot)."""
    found = []
    for k in calls:
        step = steps[k]
        op = OPS.get(step.what.op) if step.kind == "node" else None
        if op is not None and op.replay_pass is not None:
            update = PASSES[op.replay_pass](program, steps, k, calls, internal, readers)
            if update is not None:
                found.append(update)
    return found


def _unstacked_in_place(program, steps, k, calls, internal, readers):
    """Step `k` (an AdamW update) as one launch writing p', m', v' over the old p, m, v, where its
    stacked result is read by the copies of its three rows alone, those rows replace state, and the
    old values are bound values read last by this step."""
    step = steps[k]
    if step.out not in internal:
        return None
    replaced, bound = set(program.replaced_slots), {s for s, _ in program.bound}
    rows = {}
    for r in readers[step.out]:
        row = _row_taken(steps[r], step.out)
        if row is None or row in rows or r not in calls or steps[r].out not in replaced:
            return None
        rows[row] = r
    olds = (step.ins[0], step.ins[2], step.ins[3])
    if sorted(rows) != [0, 1, 2] or len(set(olds)) != 3 or not all(
            s in bound and max(readers[s]) == k for s in olds):
        return None
    unstack = tuple(rows[i] for i in range(3))
    return InPlaceUpdate(k, unstack, tuple(steps[r].out for r in unstack), olds, _first_call)


def _first_call(step, news, device):
    return adamw_in_place_calls(step, news, device)[0]


def _row_taken(step, source):
    """i if `step` copies row i of slot `source` (a slice that drops the first axis: x[i]), else None."""
    if step.kind != "node" or step.what.op != "slice" or tuple(step.ins) != (source,):
        return None
    attrs = step.what.attrs
    (lo, hi, stride), rest = attrs["slices"][0], attrs["slices"][1:]
    if attrs.get("squeeze") != (0,) or hi != lo + 1 or stride != 1:
        return None
    if any(s != (0, n, 1) for s, n in zip(rest, step.what.shape)) or len(rest) != len(step.what.shape):
        return None
    return lo


PASSES = {"unstacked_in_place": _unstacked_in_place}
