"""The driver calls a recorded step becomes in a device runner (runtime/replay/device_runner.py), built once with
stand-ins for what changes from replay to replay: each value's pointer or 0-d value (`Stand(slot)`), a
Scratch block's or an uploaded index grouping's place in scratch, a device index check's status tag.
"""
from ..backends.lowering import adamw_in_place


class Stand:
    """Stands for slot `slot`'s value while launches are built: a device pointer, or a 0-d value."""

    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    def item(self):
        return self


class _StandArray:
    """A device operand while launches are built: its shape and dtype, and a stand-in pointer."""

    __slots__ = ("ptr", "shape", "dtype")

    def __init__(self, slot, shape, dtype):
        self.ptr, self.shape, self.dtype = Stand(slot), shape, dtype


def step_calls(k, step, device, scratch, groups, tags):
    """The driver calls of step `k` if the plan launches it itself, or None (the executors run it).
    A Scratch block its launches share, or a host array uploaded for them, becomes an internal value of
    its own, living for that step: scratch[("scratch", k, n)] = its bytes; for a scatter's grouping,
    groups[k] = (the indices' slot, destinations, the keys of `order` and `starts`); for a launch that
    checks indices on the device, tags[("tag", k, n)] = its check (a tag registered at each replay)."""
    if step.runs_on is not device or step.kind not in ("node", "device_group"):
        return None
    if step.kind == "node" and step.launches is None:
        return None
    args = [Stand(s) if param else _StandArray(s, shape, dtype)
            for s, param, shape, dtype in zip(step.ins, step.params, step.shapes, step.dtypes)]
    if step.kind == "node":
        mine, keys = {}, {}

        def stand(operand):
            key = keys[id(operand)] = ("scratch", k, len(mine))
            mine[key] = operand.nbytes
            return Stand(key)
        mine_tags = {}

        def tag(launch):
            key = ("tag", k, len(mine_tags))
            mine_tags[key] = launch.check
            return Stand(key)
        calls = device.launch_calls(step.what, step.launches, args, Stand(step.out), stand, tag)
        if calls is not None:
            scratch.update(mine)
            tags.update(mine_tags)
            for launch in step.launches:
                if launch.host_group is not None:
                    groups[k] = (step.ins[1], launch.host_group, keys[id(launch.operands[2])],
                                 keys[id(launch.operands[3])])
        return calls
    return [device.group_call(step.what, args, Stand(step.out))]


def adamw_in_place_calls(step, outs, device):
    """The driver call of AdamW step `step` (a node whose result stacks p', m', v') writing p', m', v' to
    slots `outs` instead, over the old values' blocks where those slots hold them (runtime/replay/device_runner.py)."""
    shape, dtype = step.shapes[0], step.dtypes[0]
    args = [_StandArray(s, shape, dtype) for s in outs]
    args += [Stand(s) if param else _StandArray(s, sh, dt)
             for s, param, sh, dt in zip(step.ins, step.params, step.shapes, step.dtypes)]
    return device.launch_calls(step.what, [adamw_in_place(step.what, step.params)], args, None)
