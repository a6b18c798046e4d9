"""Constant subgraphs follow their consumers: a value computed from fills alone (ones, arange, eye, and
what is derived from them, such as a causal mask's `tril`) is computed where its first consumer runs,
on the device holding that consumer's other operands, rather than on the host and then uploaded.

A model that builds its mask or positions in every forward (the PyTorch habit) would otherwise upload
them once per layer per step. Only when the consumer's turn comes is it known where the consumer's
operands live, so such nodes are skipped in the realization order and computed just before it.
"""
from .graph import Node, postorder
from .placement import explicit

FILLS = frozenset({"full", "arange", "linspace", "eye"})


def deferrable(order, roots, groups, absorbed):
    """The nodes of `order` computed only when a consumer needs them: fills with no placement of their
    own and pure functions of such fills, neither asked for (`roots`) nor part of a fused group. A 0-d
    one is deferred only when every consumer is itself deferred: read on the host, a 0-d value travels
    as a kernel parameter."""
    root_ids = {id(r) for r in roots}
    found, escaping = set(), set()
    for node in order:
        free = id(node) not in root_ids and id(node) not in absorbed and node not in groups
        if node.inputs:
            if free and all(inp in found or _host_scalar(inp) for inp in node.inputs):
                found.add(node)
            else:
                escaping.update(inp for inp in node.inputs if not inp.shape and inp in found)
        elif free and node.op in FILLS and explicit(node) is None:
            found.add(node)
    return found - escaping


def _host_scalar(node):
    """A realized 0-d value on the host (a Python number's tensor): a kernel parameter, so a constant."""
    buf = node.buffer
    return buf is not None and not node.shape and buf.on_host


def consumed(node, group):
    """What a kernel reads: the node's inputs, or its fused group's inputs and 0-d operand nodes."""
    if group is None:
        return node.inputs
    return group.inputs + [p for p in group.params if isinstance(p, Node)]


def due(inputs, deferred):
    """The deferred constants among a consumer's `inputs` and everything pending they are computed
    from, inputs first (removed from `deferred`: they are computed now)."""
    wanted = [inp for inp in inputs if inp in deferred]
    if not wanted:
        return []
    order = postorder(wanted, deferred.__contains__)  # what an earlier consumer took is computed by then
    deferred.difference_update(order)
    return order


def consumer_device(operands):
    """The device holding one of the consumer's other operands with no host copy (values or planned
    stand-ins), or None: a consumer whose operands are all on the host too is left to the policy."""
    for value in operands:
        if value is not None and value.on_device and not value.on_host and value.backend is not None:
            return value.backend
    return None
