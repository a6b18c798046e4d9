"""Graph nodes and iterative traversals (no recursion, so 100,000-op chains are fine)."""
import contextlib
import itertools
import math

from ..kernels.ops import OPS

_ids = itertools.count()

_made = None  # inside `collecting_made()`: the list every new node is appended to


@contextlib.contextmanager
def collecting_made():
    """Yields a list that gets every node made inside the block, in order (a backward pass being
    recorded: lazytensor/backward_replay.py)."""
    global _made
    outer, _made = _made, []
    try:
        yield _made
    finally:
        _made = outer


class Node:
    """One op in the lazy DAG: op name, inputs, static attrs, output shape/dtype, and a Buffer once realized.

    Realizing a node drops its inputs (the graph is cut) so long loops do not keep history alive.
    """

    __slots__ = ("id", "op", "inputs", "attrs", "shape", "dtype", "buffer", "used", "__weakref__")

    def __init__(self, op, inputs, attrs, shape, dtype, buffer=None):
        self.id = next(_ids)
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = attrs
        self.shape = tuple(shape)
        self.dtype = dtype
        self.buffer = None
        if buffer is not None:
            self.bind(buffer)
        # True once another node (or a second tensor handle) reads this node's value: a host write
        # must then copy instead of writing in place, so earlier derived values stay as they were.
        self.used = False
        for inp in self.inputs:
            inp.used = True
        if _made is not None:
            _made.append(self)

    def bind(self, buffer):
        """Give this node its value, `buffer` (which counts the nodes bound to it)."""
        self.buffer = buffer
        buffer.nodes += 1

    @classmethod
    def leaf(cls, op, buffer):
        """A realized node with no inputs holding `buffer` (what `Node(op, (), {}, ...)` then `bind`
        make, built directly: compiled replays make one per value they hand back)."""
        node = cls.__new__(cls)
        node.id, node.op, node.inputs, node.attrs = next(_ids), op, (), {}
        node.shape, node.dtype, node.buffer, node.used = buffer.shape, buffer.dtype, buffer, False
        buffer.nodes += 1
        if _made is not None:
            _made.append(node)
        return node

    @property
    def realized(self):
        return self.buffer is not None

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    def __repr__(self):
        state = self.buffer.state.name if self.buffer is not None else "PENDING"
        return f"<Node {self.id} {self.op} {self.shape} {self.dtype} {state}>"


def walk(roots):
    """Every node reachable from `roots` through inputs, each once, inputs before their consumers."""
    return postorder(roots, lambda node: True)


def pending_order(roots, early=False, worth=None):
    """The unrealized nodes needed for `roots`, in an order where inputs come first: depth first from
    the roots; with `early`, the last consumers of a value of at least `worth` bytes (default
    `_WORTH_BYTES`) moved up (`consumers_early`)."""
    order = _pending_postorder(roots)
    return consumers_early(order, worth or _WORTH_BYTES) if early else order


def pending_in_order(roots, rank):
    """The unrealized nodes needed for `roots` in the order `rank` (node -> position) gives them: a
    node it does not rank (one computed inside a fused group's kernel) takes the rank of its earliest
    ranked consumer, and ties keep depth-first order. None when that order would run a node before one
    of its inputs. What a run planned again mid-way keeps: the order it was running, not a new one."""
    order = _pending_postorder(roots)
    consumers = {}
    for node in order:
        for inp in node.inputs:
            consumers.setdefault(inp, []).append(node)
    key = {}
    for node in reversed(order):  # consumers before their inputs: each unranked node's consumers are keyed
        k = rank.get(node)
        if k is None:
            k = min((key[c] for c in consumers.get(node, ())), default=math.inf)
        key[node] = k
    index = {node: i for i, node in enumerate(order)}
    kept = sorted(order, key=lambda node: (key[node], index[node]))
    seen = set()
    for node in kept:
        if any(inp in index and inp not in seen for inp in node.inputs):
            return None
        seen.add(node)
    return kept


# Values smaller than this are not worth reordering for (a device's size classes start at 512 B).
_WORTH_BYTES = 64 * 1024


def consumers_early(order, worth=_WORTH_BYTES):
    """`order` (inputs first) with the remaining consumers of a value run as soon as all of them can run,
    when together they make fewer bytes than the value holds: they let it go. Depth first from an
    optimizer's roots, a layer's output gradient waited for its weight's gradient and its bias's sum
    until that parameter's turn, after the rest of the backward pass: one such value per layer was held
    through it (with the q/k/v gradients and the layer norms' inputs, 62 MB of a 518 MB training step at
    the seed's size). Values under `worth` bytes are left where depth first puts their consumers."""
    for node in order:  # the reordering costs Python time per node: not spent where no value is worth it
        n = node.dtype.itemsize
        for d in node.shape:
            n *= d
        if n >= worth:
            break
    else:
        return order
    index = {node: k for k, node in enumerate(order)}
    consumers = {}
    for node in order:
        for inp in node.inputs:
            if inp in index:
                users = consumers.setdefault(inp, [])
                if not users or users[-1] is not node:
                    users.append(node)
    shared = {v: nbytes for v, users in consumers.items() if len(users) > 1 and (nbytes := v.nbytes) >= worth}
    if not shared:
        return order
    done, out = set(), []
    ends = {}  # consumer -> (the node its chain leads to, that node's bytes): asked again at each visit

    for first in order:
        if first in done:
            continue
        work = [first]
        while work:
            node = work.pop()
            if node in done:
                continue
            done.add(node)
            out.append(node)
            moved = None
            for value in (node, *node.inputs):
                if value not in shared:
                    continue
                rest = [c for c in consumers[value] if c not in done]
                if len(rest) < 2:
                    continue
                rest = [ends.get(c) or ends.setdefault(c, _end(c, consumers)) for c in rest]
                if sum(nbytes for _, nbytes in rest) >= shared[value]:
                    continue
                rest = [c for c, _ in rest]
                need = [_needs(c, index, done) for c in rest]
                if all(n is not None for n in need):
                    moved = (moved or set()).union(m for n in need for m in n)
            if moved:
                work.extend(sorted(moved, key=index.__getitem__, reverse=True))
    return out


_SHAPE_OPS = frozenset({"reshape", "permute", "contiguous"})


def _through_shape_ops(node, consumers):
    """The node a chain of reshapes, transposes and elementwise ops (none smaller than its consumer)
    from `node` leads to (each link its input's only consumer): a weight gradient's product, where a
    layer's output gradient is reshaped and transposed for it; a layer norm's weight gradient, the sum of
    that gradient times the normalized input. Its bytes, not the chain's, are what running the chain
    keeps (a fusing backend never stores the links; another frees each after its one reader)."""
    while len(consumers.get(node, ())) == 1 and (node.op in _SHAPE_OPS or _elementwise(node, consumers[node][0])):
        node = consumers[node][0]
    return node


def _end(node, consumers):
    end = _through_shape_ops(node, consumers)
    return end, end.nbytes


def _elementwise(node, consumer):
    record = OPS.get(node.op)
    return record is not None and record.elementwise and consumer.size <= node.size


def _needs(node, index, done, depth=8):
    """The pending nodes (of `index`, not `done`) that `node` needs before it can run, itself included,
    if its missing inputs are at most `depth` steps from values already made (a weight gradient's
    transposed activation); else None. (A function of its own, not a closure: a recursive closure is a
    reference cycle, and it held every node of the realization, and their values, until the collector ran.)"""
    need = [node]
    for inp in node.inputs:
        if inp in index and inp not in done:
            more = _needs(inp, index, done, depth - 1) if depth > 1 else None
            if more is None:
                return None
            need += more
    return need


def _pending_postorder(roots):
    """postorder(the unrealized `roots`, unrealized nodes): the same order, without a call per input (every
    realization walks its pending graph once)."""
    order, seen = [], set()
    stack = [(root, False) for root in reversed(list(roots)) if root.buffer is None]
    pop, push, append, add = stack.pop, stack.append, order.append, seen.add
    while stack:
        node, expanded = pop()
        if expanded:
            append(node)
            continue
        if node in seen:
            continue
        add(node)
        push((node, True))
        for inp in reversed(node.inputs):
            if inp.buffer is None and inp not in seen:
                push((inp, False))
    return order


def postorder(roots, include):
    """The nodes reachable from `roots` (each included) through inputs for which `include(node)` holds,
    each once, inputs before their consumers."""
    order, seen = [], set()
    stack = [(root, False) for root in reversed(list(roots))]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        for inp in reversed(node.inputs):
            if inp not in seen and include(inp):
                stack.append((inp, False))
    return order
