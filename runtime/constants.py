"""Constant subgraphs follow their consumers: a value computed from fills alone (ones, arange, eye, and
what is derived from them, such as a causal mask's `tril`) is computed where its first consumer runs,
on the device holding that consumer's other operands, rather than on the host and then uploaded.

A model that builds its mask or positions in every forward (the PyTorch habit) would otherwise upload
them once per layer per step. Only when the consumer's turn comes is it known where the consumer's
operands live, so such nodes are skipped in the realization order and computed just before it.
"""
from .graph import pending_order
from .policy import placement

FILLS = frozenset({"full", "arange", "linspace", "eye"})


def deferrable(order, roots, groups, absorbed):
    """The nodes of `order` computed only when a consumer needs them: fills with no placement of their
    own and pure functions of such fills, neither asked for (`roots`) nor part of a fused group. 0-d
    values are left alone: read on the host, they travel as kernel parameters."""
    root_ids = {id(r) for r in roots}
    found = set()
    for node in order:
        if id(node) in root_ids or id(node) in absorbed or node in groups or not node.shape:
            continue
        if node.inputs:
            if all(inp in found for inp in node.inputs):
                found.add(node)
        elif node.op in FILLS and placement(node) is None:
            found.add(node)
    return found


def due(inputs, deferred):
    """The deferred constants among a consumer's `inputs` and everything pending they are computed
    from, inputs first (removed from `deferred`: they are computed now)."""
    wanted = [inp for inp in inputs if inp in deferred]
    if not wanted:
        return []
    order = pending_order(wanted)
    deferred.difference_update(order)
    return order


def consumer_device(operands):
    """The device holding one of the consumer's other operands with no host copy (values or planned
    stand-ins), or None: a consumer whose operands are all on the host too is left to the policy."""
    for value in operands:
        if value is not None and value.on_device and not value.on_host and value.backend is not None:
            return value.backend
    return None
