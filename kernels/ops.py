"""The op registry: one record per op, the single place that says what an op is.

Kernels, the engine and the API derive their op sets from these records: the reference builds its
elementwise kernels from `numpy`, the numba fuser from `py`, the device kernels from `c`; the API makes
`lt.<name>` and `Tensor.<name>` for every elementwise record; the offload policy reads `policy`;
autograd refuses to record an op whose `grad` says "rule" without a rule. It sits at the bottom of the
import graph (it imports nothing of ours) so every layer can read it. docs/OPS.md is rendered from it.

Adding an elementwise op is one record here plus the functions its expressions name where a dialect
lacks them (`lt_<name>` in the device preludes), and its gradient rule in lazytensor/gradients.py.
"""
import dataclasses

# Result dtype rules (what the API gives the node).
DTYPE_RULES = {
    "float": "the input's float or complex dtype; integers give the default float",
    "real": "a complex input's real dtype (complex64 -> float32), else the input's",
    "same": "the input's dtype (bool refused)",
    "promote": "the operands' promoted dtype",
    "div": "the promoted dtype if it is a float or complex, else the default float",
    "bool": "bool (logical ops take bool operands)",
    "bool_of": "bool, from a real input",
    "attr": "given by the call (cast, creation, index results)",
    "index": "int64 positions",
}
# What "the same result on every backend" means for the op (docs/NUMERICS.md has the reasons).
NUMERICS = {
    "exact": "bit-identical",
    "unit": "may differ in the last unit (float64 libm vs device math)",
    "units": "within a few units",
    "tolerance": "documented tolerance (BLAS order)",
}
# Gradient marks: autograd has a rule / the result is a constant / only made by gradients and optimizers.
GRADS = {"rule": "yes", "none": "not differentiable (the result is a constant)",
         "internal": "made by backward or an optimizer; has no gradient of its own"}
# Which offload threshold (runtime/offload_tables.py, applied by runtime/placement.py) applies on a device.
POLICIES = ("transcendental", "reduce", "fill", "matmul", "broadcast", "shaped", "copy")
ELEMENTWISE = frozenset({"unary", "binary", "compare", "logical", "select", "cast"})


@dataclasses.dataclass(frozen=True)
class Op:
    """What the rest of lazytensor knows about one op.

    Elementwise records carry their expressions: `numpy` names the NumPy function of the reference
    (None: the reference defines it itself), `py` is the scalar Python expression of the numba fused
    kernel, `py_f32` a faster one where the result is rounded to float32, `py_lane32` one computed in
    float32 arithmetic on float32 operands (within one unit; a `native` op's `py` serves as its own),
    `c` the C expression of the device kernels on the wide type `{w}` (`c_int` where integers need
    another, e.g. wraparound).
    `native`: correctly rounded, so computing in the output dtype gives the widen-and-round bits.
    `wide`: the device needs float64 arithmetic to match the reference (float-only dialects decline).
    `kernels`: the backends beyond the NumPy reference that have a kernel ("numba": a numba kernel of
    its own, "fused": numba's generated elementwise kernels, "device": CUDA/Metal/C kernels).
    `replay_pass`: the rewrite a device replay may make of a captured program holding the op
    (runtime/replay/passes.py defines each name)."""

    name: str
    family: str
    dtype: str
    numerics: str
    grad: str
    doc: str
    policy: str = "copy"
    kernels: frozenset = frozenset()
    numpy: str = None
    py: str = None
    py_f32: str = None
    py_lane32: str = None
    c: str = None
    c_int: str = None
    native: bool = False
    wide: bool = False
    bool_inputs: bool = True
    aliases: tuple = ()
    replay_pass: str = None

    @property
    def elementwise(self):
        return self.family in ELEMENTWISE

    @property
    def arity(self):
        """The number of operands of an elementwise op."""
        return {"unary": 1, "cast": 1, "select": 3}.get(self.family, 2)


def _math(name, doc, numpy=True, py=None, py_f32=None, py_lane32=None, aliases=(), numba=False):
    """A float-valued transcendental: float64 libm or device math, rounded once. `numpy`: the NumPy
    function's name (True: the op's own; None: the reference defines it)."""
    kernels = {"fused", "device"} | ({"numba"} if numba else set())
    return Op(name, "unary", "float", "unit", "rule", doc, policy="transcendental", kernels=frozenset(kernels),
              numpy=name if numpy is True else numpy, py=py or f"math.{name}({{0}})", py_f32=py_f32,
              py_lane32=py_lane32, c=f"lt_{name}({{0}})", wide=True, aliases=aliases)


def _same(name, doc, numpy, py, c, c_int=None, aliases=()):
    """A dtype-preserving unary op computed exactly."""
    fused = {"fused"} if py else set()
    return Op(name, "unary", "same", "exact", "rule", doc, kernels=frozenset(fused | {"device"}), numpy=numpy,
              py=py, c=c, c_int=c_int, native=True, bool_inputs=False, aliases=aliases)


def _arith(name, doc, numpy, py=None, c=None, c_int=None, native=False, dtype="promote", bool_inputs=True,
           aliases=()):
    kernels = ({"fused"} if py else set()) | ({"device"} if c else set())
    return Op(name, "binary", dtype, "exact", "rule", doc, policy="shaped", kernels=frozenset(kernels),
              numpy=numpy, py=py, c=c, c_int=c_int, native=native, bool_inputs=bool_inputs, aliases=aliases)


def _compare(name, symbol, numpy):
    return Op(name, "compare", "bool", "exact", "none", f"x {symbol} y, elementwise", policy="shaped",
              kernels=frozenset({"fused", "device"}), numpy=numpy, py=f"({{0}} {symbol} {{1}})",
              c=f"{{0}} {symbol} {{1}}", aliases=(numpy,))


def _host_unary(name, doc, numpy, dtype="float", grad="rule", bool_inputs=True):
    """A unary op computed by the NumPy reference only (devices and numba decline it)."""
    return Op(name, "unary", dtype, "exact", grad, doc, policy="transcendental" if dtype == "float" else "copy",
              numpy=numpy, bool_inputs=bool_inputs)


def _host_binary(name, doc, numpy, dtype="promote", grad="rule", bool_inputs=True, native=False):
    """A binary op computed by the NumPy reference only (`native`: in the operands' dtype, not widened)."""
    return Op(name, "binary", dtype, "exact", grad, doc, policy="shaped", numpy=numpy, bool_inputs=bool_inputs,
              native=native)


def _logical(name, py, c):
    return Op(name, "logical", "bool", "exact", "none", f"{name.split('_')[1]} of two bool tensors",
              policy="shaped", kernels=frozenset({"fused", "device"}), numpy=name, py=py, c=c)


def _maxmin(cmp):
    # NumPy's maximum/minimum: a NaN in the first operand wins, else the comparison, else the second.
    return f"(({{0}}) != ({{0}}) ? ({{0}}) : (({{0}}) {cmp} ({{1}}) ? ({{0}}) : ({{1}})))"


def _wrap(op):
    # two's-complement wraparound as NumPy does (signed overflow is undefined in C)
    return f"(i64)((u64)({{0}}) {op} (u64)({{1}}))"


def _reduce(name, doc, grad="rule", dtype="attr", numba=True):
    kernels = {"device"} | ({"numba"} if numba else set())
    return Op(name, "reduce", dtype, "exact", grad, doc, policy="reduce", kernels=frozenset(kernels))


def _movement(name, doc, grad="rule", policy="copy", numba=False):
    kernels = {"device"} | ({"numba"} if numba else set())
    return Op(name, "movement", "attr", "exact", grad, doc, policy=policy, kernels=frozenset(kernels))


_RECORDS = (
    # ---- unary, float-valued ----------------------------------------------------------------------
    Op("sqrt", "unary", "float", "exact", "rule", "square root", kernels=frozenset({"fused", "device"}),
       numpy="sqrt", py="math.sqrt({0})", c="lt_sqrt({0})", native=True),
    Op("rsqrt", "unary", "float", "exact", "rule", "1 / sqrt(x), both in float64",
       kernels=frozenset({"fused", "device"}), py="(1.0 / math.sqrt({0}))", c="(({w})1 / lt_sqrt({0}))",
       wide=True),
    _math("exp", "e to the x", py_f32="exp_for_float32({0})", py_lane32="exp_in_float32({0})"),
    _math("expm1", "exp(x) - 1, accurate near 0 (complex too)", numpy=None),
    _math("log", "natural logarithm"),
    _math("log1p", "log(1 + x), accurate near 0"),
    _math("tanh", "hyperbolic tangent", py_f32="tanh_for_float32({0})"),
    _math("sin", "sine"), _math("cos", "cosine"), _math("tan", "tangent"),
    _math("asin", "inverse sine", numpy="arcsin", aliases=("arcsin",)),
    _math("acos", "inverse cosine", numpy="arccos", aliases=("arccos",)),
    _math("atan", "inverse tangent", numpy="arctan", aliases=("arctan",)),
    _math("sinh", "hyperbolic sine"), _math("cosh", "hyperbolic cosine"),
    _math("erf", "error function (Cephes' rational forms)", numpy=None, py="erf_scalar({0})",
          py_f32="erf_for_float32({0})", py_lane32="erf_in_float32({0})", numba=True),
    _math("sigmoid", "1 / (1 + exp(-x))", numpy=None, py="(1.0 / (1.0 + math.exp(-{0})))",
          py_f32="(1.0 / (1.0 + exp_for_float32(-{0})))"),
    # ---- unary, dtype-preserving ------------------------------------------------------------------
    _same("neg", "-x", "negative", "(-{0})", "(-{0})", "(i64)((u64)0 - (u64)({0}))", aliases=("negative",)),
    dataclasses.replace(_same("abs", "|x| (the modulus of a complex value)", "abs", "abs({0})", "lt_fabs({0})",
                              "({0} < 0 ? (i64)((u64)0 - (u64)({0})) : {0})"), dtype="real"),
    Op("real", "unary", "real", "exact", "none", "the real part (a real x itself)", numpy="real"),
    Op("imag", "unary", "real", "exact", "none", "the imaginary part (zeros for a real x)", numpy="imag"),
    Op("conj", "unary", "same", "exact", "none", "the complex conjugate (a real x itself)", numpy="conjugate",
       aliases=("conjugate",)),
    _same("sign", "-1, 0 or 1 (NaN stays NaN)", "sign", None,
          "({0} != {0} ? {0} : ({0} > 0 ? ({w})1 : ({0} < 0 ? ({w})-1 : ({w})0)))",
          "({0} > 0 ? (i64)1 : ({0} < 0 ? (i64)-1 : (i64)0))" ),
    _same("relu", "max(x, 0) (NaN stays NaN)", None, None,
          "(({0}) != ({0}) ? ({0}) : (({0}) > (({w})0) ? ({0}) : (({w})0)))"),
    _same("square", "x * x", "square", "({0} * {0})", "({0} * {0})", "(i64)((u64)({0}) * (u64)({0}))"),
    _same("floor", "largest integer <= x", "floor", None, "lt_floor({0})", "{0}"),
    _same("ceil", "smallest integer >= x", "ceil", None, "lt_ceil({0})", "{0}"),
    # ---- binary arithmetic ------------------------------------------------------------------------
    _arith("add", "x + y", "add", "({0} + {1})", "({0} + {1})", _wrap("+"), native=True),
    _arith("sub", "x - y", "subtract", "({0} - {1})", "({0} - {1})", _wrap("-"), native=True,
           bool_inputs=False, aliases=("subtract",)),
    _arith("mul", "x * y", "multiply", "({0} * {1})", "({0} * {1})", _wrap("*"), native=True,
           aliases=("multiply",)),
    _arith("div", "x / y (true division)", "true_divide", "({0} / {1})", "({0} / {1})", native=True,
           dtype="div", aliases=("divide",)),
    _arith("floordiv", "floor(x / y) as NumPy (integer division by 0 gives 0; infinities as IEEE)", None,
           bool_inputs=False, aliases=("floor_divide",)),
    _arith("mod", "x - floor(x / y) * y as NumPy (sign of y)", "mod", bool_inputs=False,
           aliases=("remainder",)),
    _arith("pow", "x ** y", "power", bool_inputs=False),
    _arith("maximum", "the larger of x and y (NaN wins)", "maximum", c=_maxmin(">"), native=True),
    _arith("minimum", "the smaller of x and y (NaN wins)", "minimum", c=_maxmin("<"), native=True),
    # ---- computed on the host only (the NumPy reference); the Array API standard's remaining functions
    _host_unary("log2", "base-2 logarithm", "log2"), _host_unary("log10", "base-10 logarithm", "log10"),
    _host_unary("asinh", "inverse hyperbolic sine", "arcsinh", ), _host_unary("acosh", "inverse hyperbolic cosine",
                                                                             "arccosh"),
    _host_unary("atanh", "inverse hyperbolic tangent", "arctanh"),
    _host_unary("reciprocal", "1 / x", "reciprocal"),
    _host_unary("trunc", "x rounded toward zero", "trunc", dtype="same", grad="none", bool_inputs=False),
    _host_unary("round", "x rounded to the nearest integer, ties to even", "round", dtype="same", grad="none",
                bool_inputs=False),
    _host_unary("signbit", "whether the sign bit is set (-0.0 included)", "signbit", dtype="bool_of", grad="none"),
    _host_unary("bitwise_invert", "~x, bit by bit (integers and bools)", "invert", dtype="same", grad="none"),
    _host_binary("atan2", "the angle of the point (y=x1, x=x2)", "arctan2", dtype="div"),
    _host_binary("hypot", "sqrt(x1^2 + x2^2) without overflow", "hypot", dtype="div"),
    _host_binary("logaddexp", "log(exp(x1) + exp(x2))", "logaddexp", dtype="div"),
    _host_binary("copysign", "|x1| with the sign of x2", "copysign", dtype="div", grad="none"),
    _host_binary("nextafter", "the next float after x1 toward x2 (in their dtype)", "nextafter", grad="none",
                 native=True),
    _host_binary("bitwise_and", "x1 & x2, bit by bit", "bitwise_and", grad="none"),
    _host_binary("bitwise_or", "x1 | x2, bit by bit", "bitwise_or", grad="none"),
    _host_binary("bitwise_xor", "x1 ^ x2, bit by bit", "bitwise_xor", grad="none"),
    _host_binary("bitwise_left_shift", "x1 << x2", "left_shift", grad="none", bool_inputs=False),
    _host_binary("bitwise_right_shift", "x1 >> x2", "right_shift", grad="none", bool_inputs=False),
    # ---- comparisons and logic --------------------------------------------------------------------
    _compare("eq", "==", "equal"), _compare("ne", "!=", "not_equal"), _compare("lt", "<", "less"),
    _compare("le", "<=", "less_equal"), _compare("gt", ">", "greater"), _compare("ge", ">=", "greater_equal"),
    _logical("logical_and", "({0} and {1})", "{0} && {1}"),
    _logical("logical_or", "({0} or {1})", "{0} || {1}"),
    _logical("logical_xor", "({0} != {1})", "{0} != {1}"),
    Op("logical_not", "unary", "bool", "exact", "none", "not x, of a bool tensor",
       kernels=frozenset({"fused", "device"}), py="(not {0})", c="(u8)(({0}) == 0)"),
    Op("where", "select", "promote", "exact", "rule", "x where the condition holds, else y",
       policy="shaped", kernels=frozenset({"fused", "device"}), py="({1} if {0} else {2})",
       c="(({0}) != 0 ? ({t})({1}) : ({t})({2}))"),
    Op("cast", "cast", "attr", "exact", "rule", "conversion to another dtype (floats to ints truncate)",
       kernels=frozenset({"fused", "device"})),
    # ---- reductions -------------------------------------------------------------------------------
    _reduce("sum", "sum over axes (float64 left fold)"),
    _reduce("prod", "product over axes (float64 left fold)", numba=False),
    _reduce("mean", "mean over axes"),
    _reduce("var", "variance over axes (two folds)"),
    _reduce("std", "standard deviation over axes"),
    _reduce("amax", "largest value over axes (NaN propagates)"),
    _reduce("amin", "smallest value over axes (NaN propagates)"),
    _reduce("argmax", "first position of the largest value", grad="none", dtype="index", numba=False),
    _reduce("argmin", "first position of the smallest value", grad="none", dtype="index", numba=False),
    # ---- scans and orderings along one axis ----------------------------------------------------------
    Op("cumsum", "scan", "attr", "exact", "rule", "running sum along an axis (float64 left fold)", policy="reduce"),
    Op("cumprod", "scan", "attr", "exact", "rule", "running product along an axis (float64 left fold)",
       policy="reduce"),
    Op("cumprod_grad", "scan", "attr", "exact", "internal", "cumprod's gradient (exact with zeros: no division)",
       policy="reduce"),
    Op("argsort", "scan", "index", "exact", "none", "positions that sort along an axis (stable; NaN largest)",
       policy="reduce"),
    # ---- softmax and layer norm: one row kernel each -------------------------------------------------------------
    Op("softmax", "softmax", "same", "units", "rule", "softmax along one axis", policy="transcendental",
       kernels=frozenset({"numba", "device"})),
    Op("log_softmax", "softmax", "same", "units", "rule", "log-softmax along one axis", policy="transcendental",
       kernels=frozenset({"numba", "device"})),
    Op("softmax_grad", "softmax", "same", "exact", "internal", "softmax's gradient y * (g - sum(g * y))",
       policy="transcendental", kernels=frozenset({"numba", "device"})),
    Op("log_softmax_grad", "softmax", "same", "units", "internal", "log-softmax's gradient g - exp(y) * sum(g)",
       policy="transcendental", kernels=frozenset({"numba", "device"})),
    Op("layer_norm", "layer_norm", "same", "exact", "rule", "normalization over trailing axes (no affine part)",
       policy="reduce", kernels=frozenset({"numba", "device"})),
    Op("layer_norm_grad", "layer_norm", "same", "exact", "internal", "layer_norm's gradient", policy="reduce",
       kernels=frozenset({"numba", "device"})),
    # ---- matrix products ----------------------------------------------------------------------------
    Op("matmul", "matmul", "promote", "tolerance", "rule", "matrix product (stacked, broadcast)",
       policy="matmul", kernels=frozenset({"numba", "device"})),
    # ---- movement ---------------------------------------------------------------------------------
    _movement("reshape", "the same elements in another shape"),
    _movement("contiguous", "a copy (clone)"),
    _movement("permute", "axes reordered", policy="broadcast"),
    _movement("expand", "size-1 axes broadcast", policy="broadcast"),
    _movement("slice", "basic slicing"),
    _movement("pad_slice", "a slice's gradient: zeros with the piece at its place", grad="internal"),
    _movement("place_slices", "disjoint slices' gradients placed in one zero tensor", grad="internal",
              numba=True),
    _movement("cat", "concatenation along an axis"),
    _movement("tril", "lower triangle (zeros above the k-th diagonal)"),
    _movement("triu", "upper triangle (zeros below the k-th diagonal)"),
    # ---- indexing ---------------------------------------------------------------------------------
    Op("take", "index", "attr", "exact", "rule", "index_select along an axis", kernels=frozenset({"device"})),
    Op("take_along", "index", "attr", "exact", "rule", "gather / take_along_axis",
       kernels=frozenset({"device"})),
    Op("index", "index", "attr", "exact", "rule", "advanced indexing with integer arrays"),
    Op("scatter_take", "index", "attr", "exact", "rule", "take's gradient, and index_add: rows added at their "
       "indices", kernels=frozenset({"numba", "device"})),
    Op("scatter_take_along", "index", "attr", "exact", "rule", "take_along's gradient, and scatter_add",
       kernels=frozenset({"numba", "device"})),
    Op("scatter_index", "index", "attr", "exact", "internal", "advanced indexing's gradient"),
    Op("scatter_along", "index", "attr", "exact", "rule", "scatter: src written at the indices along an axis "
       "(the last of repeated positions wins)"),
    # ---- sliding windows: convolution and pooling (im2col, then a product or a reduction) ----------------
    Op("im2col", "window", "attr", "exact", "rule", "every window of a (N, C, H, W) input, as "
       "(C, kh, kw, N, Ho, Wo)", policy="broadcast", kernels=frozenset({"numba"})),
    Op("col2im", "window", "attr", "exact", "rule", "windows added back into (N, C, H, W) (im2col's gradient)",
       policy="broadcast", kernels=frozenset({"numba"})),
    Op("conv_product", "window", "attr", "tolerance", "rule", "a convolution's output from its windows (a product "
       "per group over every image)", policy="broadcast", kernels=frozenset({"numba"})),
    Op("conv_input_grad", "window", "attr", "tolerance", "internal", "a convolution input's gradient: col2im of "
       "W^T @ g (image by image on the CPU)", policy="broadcast", kernels=frozenset({"numba"})),
    # ---- a NumPy function with no kernel of its own (linalg and fft of the Array API namespace) ---------
    Op("host_call", "host", "attr", "exact", "none", "a NumPy function called on the host (NumPy's result)"),
    # ---- creation and random fills ----------------------------------------------------------------
    Op("full", "fill", "attr", "exact", "none", "a constant", policy="fill", kernels=frozenset({"device"})),
    Op("arange", "fill", "attr", "exact", "none", "evenly spaced values by step", policy="fill"),
    Op("linspace", "fill", "attr", "exact", "none", "evenly spaced values by count", policy="fill"),
    Op("eye", "fill", "attr", "exact", "none", "the identity matrix", policy="fill"),
    Op("uniform", "random", "attr", "exact", "none", "uniform random numbers (counter-based, seeded)",
       policy="fill", kernels=frozenset({"numba", "device"})),
    Op("normal", "random", "attr", "exact", "none", "normal random numbers (counter-based, seeded)",
       policy="fill", kernels=frozenset({"numba", "device"})),
    Op("randint", "random", "attr", "exact", "none", "random integers (counter-based, seeded)",
       policy="fill", kernels=frozenset({"numba", "device"})),
    # ---- optimizer ----------------------------------------------------------------------------------
    Op("adamw", "optim", "same", "exact", "internal", "one AdamW step: new parameter and moments",
       kernels=frozenset({"numba", "device"}), replay_pass="unstacked_in_place"),
    Op("adamw_many", "optim", "same", "exact", "internal", "AdamW steps of several small parameters in "
       "one kernel (on the CPU)", kernels=frozenset({"numba"})),
    Op("sum_of_squares", "optim", "same", "exact", "internal", "sum of every element squared "
       "(clip_grad_norm_'s total)", kernels=frozenset({"numba", "device"})),
)

OPS = {op.name: op for op in _RECORDS}
assert len(OPS) == len(_RECORDS), "an op is registered twice"


def get(name):
    """The record of op `name` (KeyError for an op nobody registered)."""
    return OPS[name]


def names(**where):
    """The names of the ops whose fields equal the given values, e.g. names(family="reduce")."""
    return frozenset(op.name for op in _RECORDS if all(getattr(op, k) == v for k, v in where.items()))


def with_kernel(backend):
    """The names of the ops that `backend` ("numba", "fused", "device") has a kernel for."""
    return frozenset(op.name for op in _RECORDS if backend in op.kernels)


def markdown_table():
    """docs/OPS.md's table: one row per op."""
    rows = ["| op | family | result dtype | across backends | gradient | kernels besides NumPy | what it computes |",
            "|---|---|---|---|---|---|---|"]
    for op in _RECORDS:
        kernels = ", ".join(sorted(op.kernels)) or "-"
        name = f"`{op.name}`" + "".join(f" (`{a}`)" for a in op.aliases)
        rows.append(f"| {name} | {op.family} | {DTYPE_RULES[op.dtype]} | {NUMERICS[op.numerics]} | "
                    f"{GRADS[op.grad]} | {kernels} | {op.doc} |")
    return "\n".join(rows)
