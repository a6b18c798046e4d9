"""A fused elementwise group (a recipe of runtime/fusion.py; format in kernels/cpu/fused.py) evaluated
one instruction at a time by the reference kernels: the bits of the unfused nodes, with the members'
values as host temporaries that live only during the call. What the virtual device runs for a group, so
that it holds in its memory only what a fusing GPU would (the group's result), not every member."""
import numpy as np

from .elementwise import ELEMENTWISE_KERNELS


def run(recipe, out_shape, out_dtype, arrays, params):
    """The value of `recipe` over `arrays` (broadcastable to `out_shape`) and scalar `params`, as the
    reference computes the nodes it was made of."""
    instructions = recipe[1]
    last_read = {}
    for k, ins in enumerate(instructions):
        if ins[0] not in ("in", "param"):
            for j in ins[2:]:
                last_read[j] = k
    values = []
    for k, ins in enumerate(instructions):
        kind = ins[0]
        if kind == "in":
            values.append(arrays[ins[1]])
        elif kind == "param":
            values.append(np.asarray(params[ins[1]], dtype=ins[2]))
        else:
            values.append(ELEMENTWISE_KERNELS[kind]({"dtype": ins[1]}, *(values[j] for j in ins[2:])))
            for j in ins[2:]:
                if last_read[j] == k:
                    values[j] = None  # a long chain holds two members at a time, as the nodes would
    return values[-1]
