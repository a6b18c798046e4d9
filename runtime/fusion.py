"""Fusion planning: which pending elementwise nodes run inside one generated kernel.

A node is absorbed into its consumer when both are fusable elementwise ops of the same shape, the node
has no other consumer in this realization, and it is not one of the values asked for. A cheap node
(`+ - *` or negation) whose consumers are all such ops is absorbed into every one of them: recomputed
in each kernel instead of stored by a kernel of its own and loaded again (GELU's `0.5 x` and
`x / sqrt 2` are read by its forward and by its gradient, the linear's output plus bias by both of
them), as long as what it reads at full size is at most one array, so the kernels load no more than
before. 0-d constants with one consumer become kernel parameters. A group is a tree: its root is
materialized, its members stay pending (a member read later is recomputed from its inputs, which it keeps).

Where the fuser runs row groups (numba's `fuses_rows`), a group may also hold one softmax, layer norm
or gradient of either along the last axis (kernels/cpu/fused_rows.py): the row op absorbs the
elementwise trees it reads (attention's scale and mask, the product of a gradient with a layer norm's
weight), and an elementwise consumer absorbs the row op it reads as it would an elementwise node (the
gradient's mask and scale, a layer norm's weight and bias). A batched product such a group alone reads
(attention's q k^T before its softmax, the output's gradient times v^T before softmax's gradient) is
computed inside it one matrix at a time, so the T x T scores never reach memory; a bias add alone
takes its product (a linear layer's `x @ W.T + b`), the bias added to each block of rows in cache; and
a tree only a float sum over all but its last axis reads (a layer norm's weight gradient) becomes that
sum's group, its rows folded into the column sums as they are made (kernels/cpu/column_sums.py).
A row group holding such a product also takes the batched products that read its matrices or its
operands (attention's `P @ v`; `dS @ k`, `q^T @ dS` and `P^T @ dy` in the backward): computed after each
matrix's rows while they are in cache, they are the group's `extras`, values its one kernel makes
besides its root's (the executor binds each to its node; a capture gives each its own slot). A group
whose stored value others read and a float sum over its leading axes reads too (a bias's gradient) folds
that sum as it stores each block of rows: another extra.
"""
import numpy as np

from ..kernels.cpu.fused import OPS as FUSABLE_OPS
from ..kernels.cpu.fused_rows import OUT, ROW_OPS, row_at

MIN_ELEMENTS = 8192   # smaller outputs: NumPy's per-call cost is small and a compile would not pay back
MAX_INSTRUCTIONS = 48  # keeps one generated kernel (and its compile time) small
_TYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64", np.dtype(np.bool_): "bool"}


def _fusable(node):
    return (node.op in FUSABLE_OPS and node.dtype in _TYPES and node.size >= MIN_ELEMENTS
            and all(inp.dtype in _TYPES for inp in node.inputs))


_FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float64)})


def _row_fusable(node):
    """A row op a row group may hold: along the last axis of at least two, floats, its operands of its
    shape and dtype."""
    last = len(node.shape) - 1
    along = node.attrs["axis"] == last if "axis" in node.attrs else tuple(node.attrs["axes"]) == (last,)
    return (node.op in ROW_OPS and last >= 1 and along and node.dtype in _FLOATS and node.size >= MIN_ELEMENTS
            and all(inp.shape == node.shape and inp.dtype == node.dtype for inp in node.inputs))


def _scalar_const(node):
    return node.op == "full" and node.shape == () and node.buffer is None and node.dtype in _TYPES


class Group:
    """A fused tree: its root node, the recipe, its array operands (nodes), and its scalar parameters
    (constants, or 0-d nodes whose host value is read when the kernel runs); `extras`, the nodes its
    kernel also makes (a row group's trailing products, `recipe[2]`), each getting a value of its own."""

    __slots__ = ("root", "recipe", "inputs", "params", "label", "extras")

    def __init__(self, root, recipe, inputs, params, label, extras=()):
        self.root, self.recipe, self.inputs, self.params, self.label = root, recipe, inputs, params, label
        self.extras = extras

    @property
    def made(self):
        """The nodes the group's kernel gives values: its root, then its extras."""
        return (self.root,) + tuple(self.extras)


def groups(order, roots, lone_from=None, rows=False):
    """{root node: Group} and the ids of the nodes computed inside some group's kernel (ids, so the
    plan holds no member alive after the scheduler has passed it). With `lone_from`, a fusable node of
    at least that many elements with nothing to fuse is a group of its own: a generated kernel can be
    cut in pieces for several threads, NumPy's ufunc cannot. With `rows`, groups may hold a row op."""
    in_batch = set(order)
    consumers = {}  # a plain dict read with get: every realized input would call a Counter's __missing__
    fusing = {}     # of those, the consumers that are fusable and of the input's shape
    fusable = set()
    for node in order:
        joins = node.op in FUSABLE_OPS and _fusable(node)  # the op first: most nodes stop there, uncalled
        if joins:
            fusable.add(node)
        for inp in node.inputs:
            if inp in in_batch:
                consumers[inp] = consumers.get(inp, 0) + 1
                if joins and inp.shape == node.shape:
                    fusing[inp] = fusing.get(inp, 0) + 1
    wanted = set(roots)
    shared = _recomputed(order, consumers, fusing, fusable, wanted)
    absorbed, size, spilled = set(), {}, set()
    holds_row = set()  # the trees that hold a row op: one each at most
    absorber = {}      # a node absorbed -> the node that absorbed it (shared nodes: the last one)
    products = []      # batched products taken in (kept only where their tree ends in a row op)
    for node in order:
        if rows and node.op in ROW_OPS and _row_fusable(node):
            size[node] = 1
            holds_row.add(node)
            for x in node.inputs:  # the elementwise trees it reads, computed in its kernel's first loop
                if rows and _head_product(x, node, consumers, wanted) and x not in absorbed:
                    absorbed.add(x)
                    absorber[x] = node
                    products.append(x)
                    size[node] += 1
                elif (x in size and x not in absorbed and x not in holds_row and consumers.get(x) == 1
                        and x not in wanted and size[node] + size[x] <= MAX_INSTRUCTIONS):
                    absorbed.add(x)
                    absorber[x] = node
                    size[node] += size[x]
            continue
        if node not in fusable:
            continue
        size[node] = 1
        for k, inp in enumerate(node.inputs):
            if (rows and node not in shared and inp not in absorbed and inp not in node.inputs[:k]
                    and _head_product(inp, node, consumers, wanted)):
                absorbed.add(inp)
                absorber[inp] = node
                products.append(inp)
                size[node] += 1
                continue
            if inp in shared:
                if inp in node.inputs[:k]:
                    continue  # x * x: counted once
                if size[node] + size[inp] <= MAX_INSTRUCTIONS:
                    absorbed.add(inp)
                    size[node] += size[inp]
                else:
                    spilled.add(inp)
                continue
            if inp in absorbed or consumers.get(inp) != 1 or inp in wanted or _scalar_const(inp):
                continue
            # a shared node absorbs only shared ones: what each kernel recomputes stays cheap
            if (inp in size and inp.shape == node.shape and node not in shared
                    and size[node] + size[inp] <= MAX_INSTRUCTIONS
                    and not (inp in holds_row and node in holds_row)):
                absorbed.add(inp)
                absorber[inp] = node
                size[node] += size[inp]
                if inp in holds_row:
                    holds_row.add(node)
    absorbed -= spilled  # a consumer had no room for it: stored once, read by every consumer
    for product in products:  # a product is computed a head at a time only for a row op's rows
        chain = [absorber[product]]
        while chain[-1] in absorbed:
            chain.append(absorber[chain[-1]])
        if chain[-1] not in holds_row:
            absorbed.discard(product)
            for node in chain:  # stored by its own kernel: no longer counted in the tree
                size[node] -= 1
    groups = {}
    for node in size:
        lone = lone_from is not None and node.size >= lone_from and node in fusable
        if node not in absorbed and (size[node] > 1 or lone):
            groups[node] = _build(node, absorbed, consumers, wanted)
    if rows:  # a bias add alone (a group of its own at most) takes its product in
        for node in order:
            if node not in absorbed and size.get(node, 1) == 1:
                product = _biased_product(node, consumers, wanted)
                if product is not None:
                    groups[node] = _product_group(node, product)
                    absorbed.add(product)
        for node in order:  # a sum over the leading axes folds its tree's rows as the kernel makes them
            tree = _summed_tree(node, groups, fusable, absorbed, consumers, wanted)
            if tree is not None:
                group = groups.pop(tree, None) or _build(tree, absorbed, consumers, wanted)
                groups[node] = _column_sum_group(node, group)
                absorbed.add(tree)
        if TRAILING_PRODUCTS:
            _take_trailing_products(order, groups, absorbed)
        if KEPT_SUMS:
            _take_kept_sums(order, groups, absorbed)
    return groups, {id(n) for n in absorbed}


KEPT_SUMS = True  # a group folds the column sums of the value it stores while it makes it (tests turn it off)


def _take_kept_sums(order, groups, absorbed):
    """Give a group storing a value (elementwise or row, without products) the float sum over all but the
    last axis of that value that others read too (a bias's gradient: `sum(dy, (0, 1))` of a gradient the
    products also read), as an extra its kernel makes by folding each block of rows as it stores it
    (kernels/cpu/column_sums.py: the sum's own order, so the same bytes)."""
    for node in order:
        if node.op != "sum" or node.dtype not in _FLOATS or node in absorbed or node.buffer is not None:
            continue
        tree = node.inputs[0]
        group = groups.get(tree)
        if group is None or group.extras or len(group.recipe) > 2 or product_recipe(group.recipe):
            continue
        ndim, instrs = group.recipe
        if (ndim < 2 or tree.dtype != node.dtype or tuple(sorted(node.attrs["axes"])) != tuple(range(ndim - 1))
                or any(ins[0] in ("matmul", "colsum") for ins in instrs)):
            continue
        absorbed.add(node)
        instrs = instrs + (("colsum", _TYPES[node.dtype], len(instrs) - 1),)
        groups[tree] = Group(tree, (ndim, instrs, (("colsum", node.shape),)), group.inputs, group.params,
                             group.label[:-1] + "+sum)", (node,))


TRAILING_PRODUCTS = True  # row groups compute the batched products that read their matrices (tests turn it off)
MAX_TRAILING = 3


def _take_trailing_products(order, groups, absorbed):
    """Give each row group holding a head product the batched products that read its value or its inputs
    a matrix at a time (kernels/cpu/fused_rows.py's trailing products): attention's `P @ v` after its
    softmax, `dS @ k`, `q^T @ dS` and `P^T @ dy` after softmax's gradient, while each head's matrices
    are in cache. A product is taken when it comes after the group's root in `order` (so do its
    readers), its other operands have values by then (realized, or made by an earlier step), it is a
    float product of two stacks with the group's leading dims, and no other group computes it (a view
    it reads that the order makes later, the head split of v, the planner makes before the group)."""
    holders = [root for root, group in groups.items()
               if group.recipe[0] >= 3 and head_products(group.recipe) and row_at(group.recipe[1]) is not None]
    if not holders:  # most realizations (an eager step's forward, its optimizer) have no such group
        return
    position = {node: k for k, node in enumerate(order)}
    readers = {}  # operand (or the value a permuted operand views) -> batched products reading it
    for node in order:
        if node.op == "matmul" and node.buffer is None and len(node.shape) >= 3 and node not in absorbed:
            for x in node.inputs:
                readers.setdefault(x, []).append(node)
                if x.op == "permute" and x.inputs:  # pending (a realized node let go of its inputs)
                    readers.setdefault(x.inputs[0], []).append(node)
    for root in holders:
        group = groups[root]
        ndim, instrs = group.recipe[:2]
        taken, inputs = [], list(group.inputs)
        for source in (root,) + tuple(group.inputs):
            for x in readers.get(source, ()):
                if (len(taken) == MAX_TRAILING or x in absorbed or x in groups
                        or not _trails(x, root, position, absorbed)):
                    continue
                absorbed.add(x)
                spec = []
                for operand in x.inputs:
                    if operand is root:
                        spec.append(OUT)
                        continue
                    if operand not in inputs:
                        inputs.append(operand)
                    spec.append(inputs.index(operand))
                taken.append((x, tuple(spec) + (x.attrs.get("layout"),)))
        if taken:
            label = group.label[:-1] + "".join("+matmul" for _ in taken) + ")"
            groups[root] = Group(root, (ndim, instrs, tuple(spec for _, spec in taken)), inputs, group.params,
                                 label, tuple(x for x, _ in taken))


def _trails(x, root, position, absorbed):
    """Whether product `x` can be computed inside `root`'s row group after each matrix's rows."""
    at = position.get(root)
    if at is None or position.get(x, -1) <= at or x.dtype != root.dtype or x.dtype not in _FLOATS:
        return False
    batch = root.shape[:-2]
    if x.shape[:-2] != batch or any(len(a.shape) != len(x.shape) or a.shape[:-2] != batch or a.dtype != x.dtype
                                    for a in x.inputs):
        return False
    # each other operand has its value before the group's kernel runs
    return all(a is root or _before(a, at, position, absorbed) for a in x.inputs)


VIEWS = frozenset({"slice", "reshape", "permute", "expand"})  # what the planner may move before a group


def _before(node, at, position, absorbed):
    """Whether `node` has a value before step `at` runs: realized, made by an earlier step, or a pending
    view (head-split v, k and q) of such values, which the planner then makes just before the group
    (runtime/planner.py)."""
    if node.buffer is not None:
        return True
    if node in absorbed:
        return False
    if position.get(node, at) < at:
        return True
    return node.op in VIEWS and all(_before(x, at, position, absorbed) for x in node.inputs)


def _summed_tree(node, groups, fusable, absorbed, consumers, wanted):
    """The tree a float `sum` over all but the last axis reads alone (a group's root or a lone fusable
    node, elementwise or row, without products: a layer norm's weight gradient `sum(xhat * dy, (0, 1))`),
    whose kernel can fold its rows into the column sums instead of storing them; else None."""
    if node.op != "sum" or node.dtype not in _FLOATS:
        return None
    tree = node.inputs[0]
    ndim = len(tree.shape)
    if (ndim < 2 or tree.dtype != node.dtype or tuple(sorted(node.attrs["axes"])) != tuple(range(ndim - 1))
            or consumers.get(tree) != 1 or tree in wanted or tree in absorbed or tree.buffer is not None):
        return None
    group = groups.get(tree)
    if group is None:
        return tree if tree in fusable else None
    instrs = group.recipe[1]
    return None if any(ins[0] == "matmul" for ins in instrs) else tree


def _column_sum_group(node, group):
    """`group` with a last instruction folding its value's rows into `node`, the column sums:
    ("colsum", dtype, index of the tree's value)."""
    ndim, instrs = group.recipe[:2]
    instrs = instrs + (("colsum", _TYPES[node.dtype], len(instrs) - 1),)
    return Group(node, (ndim, instrs), group.inputs, group.params, group.label[:-1] + "+sum)")


def _head_product(x, consumer, consumers, wanted):
    """Whether `x` is a batched product a row group computes one matrix at a time into a scratch block
    (attention's q k^T, its output gradient times v^T), so the T x T matrices are never stored: a
    pending float product of two stacks of matrices with the same batch dims, of `consumer`'s shape and
    dtype, read only by `consumer`."""
    if x.op != "matmul" or x.buffer is not None or consumers.get(x) != 1 or x in wanted:
        return False
    a, b = x.inputs
    ndim = len(x.shape)
    return (ndim >= 3 and x.shape == consumer.shape and x.dtype == consumer.dtype and x.dtype in _FLOATS
            and len(a.shape) == len(b.shape) == ndim and a.shape[:-2] == b.shape[:-2] == x.shape[:-2]
            and a.dtype == b.dtype == x.dtype and a.shape[-1] >= 1 and x.size >= MIN_ELEMENTS)


def _biased_product(node, consumers, wanted):
    """The product of a bias add `node` computes inside no other group (a linear layer's `x @ W.T + b`
    whose sum is read by views: attention's q, k and v), when its kernel may compute it: a float product
    of a stack of rows by a matrix, pending, read only by `node`, and a bias along its last axis; else None."""
    if node.op != "add" or node.dtype not in _FLOATS or node.size < MIN_ELEMENTS:
        return None
    product, bias = node.inputs
    if product.op != "matmul":
        product, bias = bias, product
    if (product.op != "matmul" or product.buffer is not None or consumers.get(product) != 1 or product in wanted
            or product.shape != node.shape or product.dtype != node.dtype or bias.shape != node.shape[-1:]
            or bias.dtype != node.dtype or len(product.inputs[1].shape) != 2 or len(product.inputs[0].shape) < 2):
        return None
    return product


def _product_group(root, product):
    """The group computing bias add `root` with its `product` in one kernel: recipe (ndim, (x, w,
    ("matmul", x, w), bias, ("add", product, bias)))."""
    dtype = _TYPES[root.dtype]
    x, w = product.inputs
    bias = root.inputs[1] if root.inputs[0] is product else root.inputs[0]
    instrs = (("in", 0, dtype), ("in", 1, dtype), ("matmul", dtype, 0, 1), ("in", 2, dtype), ("add", dtype, 2, 3))
    return Group(root, (len(root.shape), instrs), [x, w, bias], [], "fused(matmul+add)")


def product_recipe(recipe):
    """Whether `recipe` is a bias add with its product (_product_group's form)."""
    instrs = recipe[1]
    return len(instrs) == 5 and instrs[2][0] == "matmul" and instrs[4][0] == "add"


def head_products(recipe):
    """The indices of the batched products a row group's recipe computes a matrix at a time."""
    return [n for n, ins in enumerate(recipe[1]) if ins[0] == "matmul"] if not product_recipe(recipe) else []


# No transcendental: recomputing one of these in a kernel costs less than storing it and loading it again.
_CHEAP = frozenset({"add", "sub", "mul", "neg"})


def _recomputed(order, consumers, fusing, fusable, wanted):
    """The cheap nodes that every one of their (several) consumers absorbs and recomputes: fusable, not
    asked for, all consumers fusable and of their shape, and reading at full size at most one array
    (through other such nodes included)."""
    shared, reads = set(), {}
    for node in order:
        n = consumers.get(node, 0)
        if n < 2 or fusing.get(node) != n or node.op not in _CHEAP or node not in fusable or node in wanted:
            continue
        count = 0
        for inp in node.inputs:
            if inp in shared:
                count += reads[inp]
            elif inp.shape == node.shape:
                count += 1
        if count <= 1:
            shared.add(node)
            reads[node] = count
    return shared


def _build(root, absorbed, consumers, wanted):
    """The recipe of the tree under `root` (post-order, iterative), with external inputs deduplicated.
    0-d constants used only here become literal parameters and join `absorbed`."""
    instrs, index, inputs, params, ops = [], {}, [], [], []
    stack = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in index:
            continue
        if not expanded and _scalar_const(node) and consumers.get(node) == 1 and node not in wanted:
            absorbed.add(node)
            index[node] = len(instrs)
            instrs.append(("param", len(params), _TYPES[node.dtype]))
            params.append(node.attrs["value"])
            continue
        if not expanded and node is not root and node not in absorbed and node.shape == ():
            index[node] = len(instrs)  # a 0-d operand computed elsewhere: read on the host, passed by value
            instrs.append(("param", len(params), _TYPES[node.dtype]))
            params.append(node)
            continue
        if not expanded and node is not root and node not in absorbed:
            index[node] = len(instrs)
            instrs.append(("in", len(inputs), _TYPES[node.dtype]))
            inputs.append(node)
            continue
        if not expanded:
            stack.append((node, True))
            stack.extend((inp, False) for inp in reversed(node.inputs) if inp not in index)
            continue
        operands = tuple(index[inp] for inp in node.inputs)
        if "eps" in node.attrs and node.op in ROW_OPS:  # a layer norm's eps: its row kernel's parameter
            operands += (len(instrs),)
            instrs.append(("param", len(params), _TYPES[node.dtype]))
            params.append(float(node.attrs["eps"]))
        index[node] = len(instrs)
        instrs.append((node.op, _TYPES[node.dtype]) + operands)
        ops.append(node.op)
    label = "fused(" + "+".join(ops) + ")"
    return Group(root, (len(root.shape), tuple(instrs)), inputs, params, label)
