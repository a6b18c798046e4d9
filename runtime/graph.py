"""Graph nodes and iterative traversals (no recursion, so 100,000-op chains are fine)."""
import contextlib
import itertools

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


def pending_order(roots):
    """The unrealized nodes needed for `roots`, in an order where inputs come first."""
    return postorder([r for r in roots if r.buffer is None], lambda node: node.buffer is None)


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
