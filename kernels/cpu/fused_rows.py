"""The row form of a fused kernel: a recipe holding one row op (softmax, layer norm or their gradients
along the last axis) between elementwise instructions, computed a block of rows at a time so the block
stays in cache.

For each block of rows: the instructions the row op reads run first, their values stored into scratch
blocks of rows; the row op's kernel (kernels/cpu/softmax.py, kernels/cpu/layer_norm.py: the one the op
runs alone) then computes the block from them and from its input operands; the instructions that read
the row op's value run last, over `out` again. Each value is stored with its node's rounding before the
next stage reads it, so the result is the bytes the kernels would give one after another, without the
passes over memory between them (attention's scale and mask before its softmax and their gradients
after softmax's; a layer norm's weight and bias after it, the weight's product before its gradient).

A `("matmul", dtype, i, j)` instruction (i and j inputs: stacks of matrices with the output's leading
dims, read where they lie) is computed one matrix at a time, before that matrix's blocks of rows, into
a scratch matrix by the BLAS call a batched product makes for it (kernels/cpu/blas.py), and read from
there: attention's T x T scores and their gradient never reach memory.

A recipe may name trailing products (`recipe[2]`: each two operands, the row group's own value `OUT` or
an input's index, and the layout its result is stored in): batched products of the same leading dims
computed after each matrix's rows, while that matrix and its operands are in cache, into the kernel's
extra results `x0, x1, ...` (attention's `P @ v` after its softmax; `dS @ k`, `q^T @ dS`, `P^T @ dy`
after softmax's gradient), each by the call a batched product makes for that matrix
(kernels/cpu/blas.py's `matmul_batches`: a column-major result matrix as its transpose).
"""

BLOCK = 16  # rows per block: the row kernels fold sixteen rows side by side

# op -> (its row kernel, whether its last operand is eps: a parameter the kernel reads from a cell)
ROW_KERNELS = {"softmax": ("softmax_rows", False), "softmax_grad": ("softmax_grad_rows", False),
               "layer_norm": ("layer_norm_rows", True), "layer_norm_grad": ("layer_norm_grad_rows", True)}
ROW_OPS = frozenset(ROW_KERNELS)
IMPORTS = ["from lazytensor.kernels.cpu.softmax import softmax_grad_rows, softmax_rows",
           "from lazytensor.kernels.cpu.layer_norm import layer_norm_grad_rows, layer_norm_rows",
           "from lazytensor.kernels.cpu.blas import gemm_into"]
# A product's operands are read in place by BLAS, not elementwise; trailing arguments of a kernel with one.
PRODUCT_ARGS = ("gemm_at", "gemm_ints")
OUT = -1  # a trailing product's operand that is the group's own value


def trailing(recipe):
    """The recipe's trailing products: ((operand, operand, layout), ...), each operand `OUT` or an input's
    index, the layout the permutation its result is stored in for its consumer (or None)."""
    return tuple(spec for spec in recipe[2] if spec[0] != "colsum") if len(recipe) > 2 else ()


def kept_sums(recipe):
    """The shape of the column sums a recipe ending in them also stores its value beside (its extra
    ("colsum", shape): kernels/cpu/fused.py), or None."""
    for spec in recipe[2] if len(recipe) > 2 else ():
        if spec[0] == "colsum":
            return spec[1]
    return None


def inputs_read(recipe):
    """How many array inputs the kernel takes: its `in` instructions', then those only trailing
    products read."""
    count = sum(1 for ins in recipe[1] if ins[0] == "in")
    return max([count] + [k + 1 for spec in trailing(recipe) for k in spec[:2] if k != OUT])


def products(instrs):
    """The indices of the recipe's product instructions."""
    return [n for n, ins in enumerate(instrs) if ins[0] == "matmul"]


def row_at(instrs):
    """The index of the recipe's row op, or None for an elementwise recipe."""
    for n, ins in enumerate(instrs):
        if ins[0] in ROW_OPS:
            return n
    return None


def _closure(instrs, starts, stop_at=None):
    """Indices of the instructions `starts` depend on (themselves included), in order; `stop_at` is
    treated as given (its operands are not followed)."""
    needed, stack = set(), list(starts)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        if n != stop_at and instrs[n][0] not in ("in", "param", "matmul"):  # a product is computed before
            stack.extend(instrs[n][2:])
    return sorted(needed)


def row_kernel_lines(recipe, broadcast, body):
    """The body of `kernel(out, a0, ..., p0, ...)` for a recipe with one row op (ndim >= 2): the lines
    after the def line, indented. `body(instrs, which, broadcast)` renders elementwise instructions."""
    ndim, instrs = recipe[:2]
    r = row_at(instrs)
    op, dtype, operands = instrs[r][0], instrs[r][1], instrs[r][2:]
    kernel, takes_eps = ROW_KERNELS[op]
    assert ndim >= 2 and sum(ins[0] in ROW_OPS for ins in instrs) == 1
    if takes_eps:
        operands, eps = operands[:-1], instrs[operands[-1]]
        assert eps[0] == "param"
    lead = "".join(f"i{d}, " for d in range(ndim - 2))
    block, at = f"{lead}lo:hi", ", ".join(f"i{d}" for d in range(ndim))
    rows, cols = f"out.shape[{ndim - 2}]", f"out.shape[{ndim - 1}]"
    made = products(instrs)
    computed = [n for n in operands if instrs[n][0] not in ("in", "matmul")]
    lines, indent = [], "    "
    # Computed operands go to scratch blocks, not `out`: a row kernel reading and writing the same row
    # would not vectorize (LLVM's overlap check finds them the same).
    for n in computed:
        lines.append(f"{indent}scratch{n} = np.empty(({BLOCK}, {cols}), out.dtype)")
    for n in made:
        lines.append(f"{indent}prod{n} = np.empty(({rows}, {cols}), out.dtype)")
    if takes_eps:
        lines.append(f"{indent}eps = np.full(1, p{eps[1]}, out.dtype)")
    for d in range(ndim - 2):
        lines.append(f"{indent}for i{d} in range(out.shape[{d}]):")
        indent += "    "
    lead_at = ", ".join(f"i{d}" for d in range(ndim - 2))
    for n in made:
        a, b = (f"a{instrs[k][1]}[{lead_at}]" for k in instrs[n][2:])
        lines.append(f"{indent}gemm_into({', '.join(PRODUCT_ARGS)}, {a}, {b}, prod{n})")
    lines += [f"{indent}for lo in range(0, {rows}, {BLOCK}):", f"{indent}    hi = min(lo + {BLOCK}, {rows})"]
    per_matrix = indent
    indent += "    "

    def loop(which, stores, first=()):
        inner = indent + "        "
        return ([f"{indent}for i{ndim - 2} in range(lo, hi):", f"{indent}    for i{ndim - 1} in range({cols}):"]
                + [inner + line for line in list(first) + body(instrs, which, broadcast) + stores])

    if computed:
        lines += loop(_closure(instrs, computed),
                      [f"scratch{n}[i{ndim - 2} - lo, i{ndim - 1}] = v{n}" for n in computed])

    def row_operand(n):
        if n in computed:
            return f"scratch{n}[:hi - lo]"
        if n in made:
            return f"prod{n}[lo:hi]"
        ins = instrs[n]
        assert not any(broadcast[ins[1]]), "a row op reads whole inputs or its first loop's values"
        return f"a{ins[1]}[{block}]"

    extra = {"softmax": [str(dtype == "float32")], "layer_norm": ["eps"], "layer_norm_grad": ["eps"]}.get(op, [])
    args = [row_operand(n) for n in operands] + [f"out[{block}]"] + extra
    lines.append(f"{indent}{kernel}({', '.join(args)})")
    last = len(instrs) - 1
    if last != r:
        after = [n for n in _closure(instrs, [last], stop_at=r) if n != r]
        lines += loop(after, [f"out[{at}] = v{last}"], first=[f"v{r} = out[{at}]"])
    for e, spec in enumerate(trailing(recipe)):
        a, b = ("out" if k == OUT else f"a{k}" for k in spec[:2])
        lines += [f"{per_matrix}x = x{e}[{lead_at}]",
                  f"{per_matrix}if x.strides[1] == x.itemsize or x.shape[1] == 1:",
                  f"{per_matrix}    gemm_into({', '.join(PRODUCT_ARGS)}, {a}[{lead_at}], {b}[{lead_at}], x)",
                  f"{per_matrix}else:  # a column-major matrix: its transpose, row-major",
                  f"{per_matrix}    gemm_into({', '.join(PRODUCT_ARGS)}, {b}[{lead_at}].T, {a}[{lead_at}].T, x.T)"]
    return lines
