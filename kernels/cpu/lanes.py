"""Reductions of one contiguous float row in a fixed number of lanes, written as vector LLVM IR.

LLVM vectorizes no float reduction without fast-math (that would let it pick the order per CPU), and
numba gives SLP nothing to start from in eight scalar accumulators, so a row's sum or maximum ran one
element per step. Here lane j (of `LANES`) takes elements j, j + LANES, ...; the lanes then combine in a
fixed tree and the tail is added last, so the order, and the result, is the same on every CPU (LLVM
splits the 16-lane vector into what the CPU has: two AVX-512 or four AVX2 registers).

`lane_sum` is not the left fold: it serves kernels of the tolerance class only (softmax's Σ, where the
float64 sum of float32 values is exact but for terms 2^29 times below the largest). `lane_max` is the
largest value by `>`; a NaN in the row may or may not come out (callers whose result turns NaN anyway,
like softmax's shift, use it).
"""
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

LANES = 16


def _row(context, builder, aryty, value):
    """(data pointer, length) of a 1-D contiguous array value."""
    array = context.make_array(aryty)(context, builder, value)
    return array.data, builder.extract_value(array.shape, 0)


def _loop(builder, name, start_i, stop, step, starts, body):
    """Emit a loop over i = start_i, start_i + step, ... while i + step <= stop, carrying the values
    `starts` (one phi each): `body(i, values)` emits one iteration and returns the next values.
    Returns (i, values) after the loop."""
    i64 = ir.IntType(64)
    pre = builder.block
    head, loop_body, done = (builder.append_basic_block(f"{name}.{part}") for part in ("head", "body", "done"))
    builder.branch(head)
    builder.position_at_end(head)
    i = builder.phi(i64)
    values = [builder.phi(v.type) for v in starts]
    i.add_incoming(start_i, pre)
    for phi, value in zip(values, starts):
        phi.add_incoming(value, pre)
    last = builder.add(i, ir.Constant(i64, step - 1)) if step > 1 else i
    builder.cbranch(builder.icmp_signed("<", last, stop), loop_body, done)
    builder.position_at_end(loop_body)
    following = body(i, values)
    i.add_incoming(builder.add(i, ir.Constant(i64, step)), builder.block)
    for phi, value in zip(values, following):
        phi.add_incoming(value, builder.block)
    builder.branch(head)
    builder.position_at_end(done)
    return i, values


def _vector_at(builder, data, i, width):
    """The `width` elements at data[i], as one vector (aligned as one element, not as the vector: a row
    starts wherever its array puts it)."""
    elt = data.type.pointee
    pointer = builder.bitcast(builder.gep(data, [i]), ir.VectorType(elt, width).as_pointer())
    return builder.load(pointer, align=4 if elt == ir.FloatType() else 8)


def _reduce_row(builder, data, n, start, vector_step, tree, scalar_step):
    """`start` (a LANES vector) folded with every whole LANES-chunk of the row by `vector_step`, its lanes
    combined by `tree`, then the tail's elements folded in by `scalar_step`."""
    zero = ir.Constant(ir.IntType(64), 0)
    i, (acc,) = _loop(builder, "lanes", zero, n, LANES, [start],
                      lambda i, values: [vector_step(values[0], _vector_at(builder, data, i, LANES))])
    _, (value,) = _loop(builder, "tail", i, n, 1, [tree(acc)],
                        lambda i, values: [scalar_step(values[0], builder.load(builder.gep(data, [i])))])
    return value


def _tree(builder, vector, combine):
    """The vector's lanes combined pairwise in a fixed tree: (((l0 . l1) . (l2 . l3)) . ...)."""
    values = [builder.extract_element(vector, ir.Constant(ir.IntType(32), j)) for j in range(LANES)]
    while len(values) > 1:
        values = [combine(values[j], values[j + 1]) for j in range(0, len(values), 2)]
    return values[0]


def _is_float_row(row):
    return isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C" and \
        row.dtype in (types.float32, types.float64)


@intrinsic
def lane_sum(typingctx, row):
    """The float64 sum of a contiguous float32 or float64 row in LANES lanes (0.0 for an empty row)."""
    if not _is_float_row(row):
        return None

    def codegen(context, builder, signature, args):
        data, n = _row(context, builder, row, args[0])
        f64 = ir.DoubleType()
        vec64 = ir.VectorType(f64, LANES)
        wide = row.dtype == types.float64
        return _reduce_row(builder, data, n, ir.Constant(vec64, [0.0] * LANES),
                           lambda a, chunk: builder.fadd(a, chunk if wide else builder.fpext(chunk, vec64)),
                           lambda acc: _tree(builder, acc, builder.fadd),
                           lambda t, v: builder.fadd(t, v if wide else builder.fpext(v, f64)))
    return types.float64(row), codegen


@intrinsic
def lane_max(typingctx, row):
    """The largest value of a contiguous float row of at least one element, by `>` in LANES lanes."""
    if not _is_float_row(row):
        return None

    def codegen(context, builder, signature, args):
        data, n = _row(context, builder, row, args[0])

        def larger(a, b):
            return builder.select(builder.fcmp_ordered(">", b, a), b, a)
        first = builder.load(data)
        vec = ir.VectorType(first.type, LANES)
        splat = builder.insert_element(ir.Constant(vec, ir.Undefined), first, ir.Constant(ir.IntType(32), 0))
        splat = builder.shuffle_vector(splat, ir.Constant(vec, ir.Undefined),
                                       ir.Constant(ir.VectorType(ir.IntType(32), LANES), [0] * LANES))
        return _reduce_row(builder, data, n, splat, larger, lambda acc: _tree(builder, acc, larger), larger)
    return row.dtype(row), codegen


_ROWS = 8  # rows folded side by side by fold_8_rows: one vector of running sums, lane j for row j

# An 8 x 8 transpose in three rounds of two-vector shuffles (unpack pairs, then pairs of pairs, then
# halves): each round is (left, right, lane indices) over the previous round's vectors.
_ROUND_1 = [(0, 1, (0, 8, 1, 9, 4, 12, 5, 13)), (0, 1, (2, 10, 3, 11, 6, 14, 7, 15)),
            (2, 3, (0, 8, 1, 9, 4, 12, 5, 13)), (2, 3, (2, 10, 3, 11, 6, 14, 7, 15)),
            (4, 5, (0, 8, 1, 9, 4, 12, 5, 13)), (4, 5, (2, 10, 3, 11, 6, 14, 7, 15)),
            (6, 7, (0, 8, 1, 9, 4, 12, 5, 13)), (6, 7, (2, 10, 3, 11, 6, 14, 7, 15))]
_LO2, _HI2 = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
_ROUND_2 = [(0, 2, _LO2), (0, 2, _HI2), (1, 3, _LO2), (1, 3, _HI2),
            (4, 6, _LO2), (4, 6, _HI2), (5, 7, _LO2), (5, 7, _HI2)]
_LO4, _HI4 = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)
_ROUND_3 = [(0, 4, _LO4), (1, 5, _LO4), (2, 6, _LO4), (3, 7, _LO4),
            (0, 4, _HI4), (1, 5, _HI4), (2, 6, _HI4), (3, 7, _HI4)]


def _transposed(builder, rows):
    """The 8 columns of the 8 x 8 block whose rows are the vectors `rows`."""
    i32 = ir.IntType(32)
    for spec in (_ROUND_1, _ROUND_2, _ROUND_3):
        rows = [builder.shuffle_vector(rows[a], rows[b], ir.Constant(ir.VectorType(i32, 8), list(lanes)))
                for a, b, lanes in spec]
    return rows


def _fold_rows_codegen(groups):
    """The codegen of fold_8_rows (groups=1) and fold_16_rows (groups=2: two vectors of running sums,
    independent chains of additions in flight side by side)."""
    def codegen(context, builder, signature, args):
        x, m, out = signature.args
        i64, i32, f64 = ir.IntType(64), ir.IntType(32), ir.DoubleType()
        array = context.make_array(x)(context, builder, args[0])
        result = context.make_array(out)(context, builder, args[2])
        first = context.cast(builder, args[1], m, types.int64)
        row_bytes = builder.extract_value(array.strides, 0)
        k_total = builder.extract_value(array.shape, 1)
        elt = array.data.type.pointee
        vec8 = ir.VectorType(elt, 8)
        vec64 = ir.VectorType(f64, 8)
        base = builder.ptrtoint(array.data, i64)
        rows = [[builder.inttoptr(builder.add(base, builder.mul(builder.add(first, ir.Constant(i64, 8 * g + j)),
                                                                 row_bytes)), elt.as_pointer()) for j in range(_ROWS)]
                for g in range(groups)]

        def widen(v):
            return v if elt == f64 else builder.fpext(v, vec64)

        def column(group, k):
            v = ir.Constant(vec8, ir.Undefined)
            for j, row in enumerate(group):
                v = builder.insert_element(v, builder.load(builder.gep(row, [k])), ir.Constant(i32, j))
            return widen(v)

        def eight_columns(k, accs):  # columns k..k+7 of every group, transposed in registers
            out_accs = []
            for group, acc in zip(rows, accs):
                loaded = [_vector_at(builder, row, k, 8) for row in group]
                for col in _transposed(builder, loaded):
                    acc = builder.fadd(acc, widen(col))
                out_accs.append(acc)
            return out_accs

        def one_column(k, accs):
            return [builder.fadd(acc, column(group, k)) for group, acc in zip(rows, accs)]

        starts = [column(group, ir.Constant(i64, 0)) for group in rows]
        k, accs = _loop(builder, "fold.wide", ir.Constant(i64, 1), k_total, 8, starts, eight_columns)
        _, accs = _loop(builder, "fold.tail", k, k_total, 1, accs, one_column)
        for g, acc in enumerate(accs):
            for j in range(_ROWS):
                target = builder.gep(result.data, [builder.add(first, ir.Constant(i64, 8 * g + j))])
                builder.store(builder.extract_element(acc, ir.Constant(i32, j)), target)
        return context.get_dummy_value()
    return codegen


def _fold_arguments(x, m, out):
    return (isinstance(x, types.Array) and x.ndim == 2 and x.dtype in (types.float32, types.float64)
            and isinstance(m, types.Integer) and isinstance(out, types.Array) and out.ndim == 1
            and out.dtype == types.float64)


@intrinsic
def fold_8_rows(typingctx, x, m, out):
    """out[m + j] = the float64 left fold of row m + j of `x` (2-D float32 or float64, each row
    contiguous, at least one column), for j < 8: the reference's order in every row, eight rows in
    one vector (columns taken eight at a time through an in-register transpose)."""
    if not _fold_arguments(x, m, out):
        return None
    return types.void(x, m, out), _fold_rows_codegen(1)


@intrinsic
def fold_16_rows(typingctx, x, m, out):
    """fold_8_rows of rows m..m+7 and m+8..m+15 in one loop: two chains of additions side by side."""
    if not _fold_arguments(x, m, out):
        return None
    return types.void(x, m, out), _fold_rows_codegen(2)
