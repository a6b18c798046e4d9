"""Random tensor programs for differential tests (tests/test_differential.py): a generator that draws
a program together with its NumPy oracle, and an interpreter that runs the program with lazytensor.

A program is a list of steps over a growing list of values: ops (elementwise with broadcasting,
reductions over random axes, movement with negative steps, matmul with empty dimensions, cumsum,
softmax), host reads of values or elements, and host writes. Inputs mix NaN, infinities, signed zeros,
subnormals and extreme values with ordinary ones. The oracle computes each op as docs/NUMERICS.md
defines it, from NumPy: elementwise in float64 rounded once, sums in float64 (any order: compared
within a bound), amax/amin the first extreme element, argmax/argmin its position.

Each value carries two marks: `cross`, whether every backend must give its bytes exactly (false below
a transcendental or a matrix product, whose last unit may differ between backends), and `oracle`,
whether the NumPy oracle's bytes are exactly right (false below a sum's order or a transcendental).
A value is checked against the oracle or across devices only where that mark holds for its whole
ancestry, or where it is one tolerant op over such values (then within that op's documented bound).
"""
import dataclasses

import numpy as np

import lazytensor as lt

FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, np.nan, np.inf, -np.inf, 1e-40, -1e-310, 1e30, -1e30]
INT_SPECIALS = [0, 1, -1, 7, -3, 2 ** 62, -2 ** 62, 2 ** 63 - 1, -2 ** 63, 2 ** 31]

EXACT_UNARY = {"neg": np.negative, "abs": np.abs, "square": np.square, "sign": np.sign, "floor": np.floor,
               "ceil": np.ceil, "sqrt": np.sqrt, "relu": lambda x: np.maximum(x, np.zeros((), x.dtype))}
UNIT_UNARY = {"exp": np.exp, "tanh": np.tanh, "sin": np.sin, "log1p": np.log1p}
def _floor_divide(a, b):
    """NumPy's floor_divide, but IEEE's floor(a / b) (the Array API's special cases) for an infinite a over
    a finite nonzero b and a finite a over an infinite b (docs/NUMERICS.md)."""
    out = np.floor_divide(a, b)
    if out.dtype.kind != "f":
        return out
    ieee = (np.isinf(a) & np.isfinite(b) & (b != 0)) | (np.isfinite(a) & np.isinf(b))
    return np.where(ieee, np.floor(a / b), out)


def _power(a, b):
    """C99's pow (the Array API's special cases, docs/NUMERICS.md): (-inf) ** y is +inf and (-0.0) ** y is
    +0.0 for y > 0 not an odd integer, where NumPy's loops give NaN and -0.0 on some CPUs and shapes."""
    out = np.power(a, b)
    if out.dtype.kind != "f":
        return out
    c99 = (b > 0) & (np.fmod(b, 2) != 1) & np.signbit(a) & ((a == 0) | np.isinf(a))
    return np.where(c99, np.where(a == 0, 0.0, np.inf).astype(out.dtype), out)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "maximum": np.maximum, "minimum": np.minimum, "floordiv": _floor_divide, "mod": np.mod,
          "pow": _power}
INT_BINARY = ("add", "sub", "mul", "maximum", "minimum", "floordiv", "mod")
CASTS = ("float32", "float64", "int64", "int32", "bool")
INT_UNARY = ("neg", "abs")


@dataclasses.dataclass
class Value:
    array: np.ndarray     # the oracle's value
    cross: bool           # every backend gives these bytes exactly
    oracle: bool          # the oracle's bytes are exactly the definition's
    check: str = "exact"  # how this value is compared: exact, unit (a few units), sum (a bound), none
    bound: np.ndarray = None  # check "sum": how far a float64 fold in another order may land
    alias: object = None  # values that are one tensor object (an op that moves nothing returns its input)


def _inputs(rng, kind, shape):
    n = int(np.prod(shape))
    if kind == "int64":
        pool = np.array(INT_SPECIALS, np.int64)
        ordinary = rng.integers(-20, 20, n)
    else:
        pool = np.array(FLOAT_SPECIALS, np.float64)
        ordinary = rng.standard_normal(n) * 3
    special = rng.random(n) < 0.3
    values = np.where(special, pool[rng.integers(0, len(pool), n)], ordinary)
    return values.astype(kind).reshape(shape)


BIG_SHAPES = [(9000,), (96, 100), (3, 50, 64), (4100, 3)]  # past the numba backend's 8192 elements, or
# past a blocked sum's 4096 per output


def _shape(draw, st, max_dims=3):
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(BIG_SHAPES))
    dims = draw(st.integers(0, max_dims))
    return tuple(draw(st.sampled_from([0, 1, 1, 2, 3, 4, 5])) for _ in range(dims))


def _axes(draw, st, ndim):
    if ndim == 0 or draw(st.booleans()):
        return None
    picked = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(sorted(picked))


def _slices(draw, st, shape):
    key = []
    for n in shape:
        start = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        stop = draw(st.one_of(st.none(), st.integers(-n - 2, n + 2)))
        step = draw(st.sampled_from([None, 1, 2, -1, -2, 3]))
        key.append(slice(start, stop, step))
    return tuple(key)


def _broadcast_partner(draw, st, shape):
    """A shape that broadcasts against `shape`: some leading dims dropped, some dims made 1."""
    drop = draw(st.integers(0, len(shape)))
    return tuple(1 if draw(st.booleans()) else n for n in shape[drop:])


def _first_extreme(x, axes, pick):
    """amax/amin as defined: the element argmax/argmin choose, in row-major order of reduced positions."""
    axes = tuple(range(x.ndim)) if axes is None else axes
    kept = [d for d in range(x.ndim) if d not in axes]
    count = int(np.prod([x.shape[d] for d in axes]))
    rows = np.transpose(x, kept + list(axes)).reshape(tuple(x.shape[d] for d in kept) + (count,))
    return np.take_along_axis(rows, pick(rows, axis=-1)[..., None], axis=-1)[..., 0]


def _restore(result, shape, axes, keepdims):
    if not keepdims:
        return result
    axes = tuple(range(len(shape))) if axes is None else axes
    return result.reshape(tuple(1 if d in axes else n for d, n in enumerate(shape)))


def draw_program(draw, st, kind, n_steps):
    """(inputs, steps, values): a program over `kind` ("float32", "float64" or "int64") values, with the
    oracle's Value for every value it makes (inputs first)."""
    seed = draw(st.integers(0, 2 ** 32 - 1))
    rng = np.random.default_rng(seed)
    inputs = [_inputs(rng, kind, _shape(draw, st)) for _ in range(draw(st.integers(1, 3)))]
    values = [Value(a, True, True) for a in inputs]
    steps = []
    floating = kind != "int64"
    with np.errstate(all="ignore"):
        for _ in range(n_steps):
            ops = ["unary", "binary", "binary", "reduce", "arg", "move", "move", "cumsum", "read", "write",
                   "item", "iadd", "cast"] + (["unit", "softmax", "matmul", "where"] if floating else [])
            op = draw(st.sampled_from(ops))
            # arithmetic on the program's dtype; indices (argmax's) are only moved, read and written
            eligible = [k for k, u in enumerate(values)
                        if op in ("move", "read", "item", "write") or u.array.dtype == np.dtype(kind)]
            i = eligible[draw(st.integers(0, len(eligible) - 1))]
            v = values[i]
            step, out = _draw_step(draw, st, rng, op, i, v, values, kind)
            steps.append(step)
            if out is not None:
                if isinstance(out, tuple):  # a write: value i changes, and every value that is its tensor
                    for k, u in enumerate(values):
                        if k == i or (u.alias is not None and u.alias is v.alias):
                            values[k] = dataclasses.replace(out[0], alias=u.alias)
                else:
                    values.append(out)
    return inputs, steps, values


def _derived(v, array, cross=True, oracle=True, check="exact"):
    """The Value of an op's result from operand Value(s) `v`."""
    vs = v if isinstance(v, list) else [v]
    exact_in = all(u.check == "exact" for u in vs)
    if not exact_in:  # below a tolerant result: neither its bytes nor its closeness are defined
        return Value(array, False, False, "none")
    return Value(array, cross and all(u.cross for u in vs), oracle and all(u.oracle for u in vs), check)


def _draw_step(draw, st, rng, op, i, v, values, kind):
    x = v.array
    floating = kind != "int64"
    if op == "unary":
        name = draw(st.sampled_from(sorted(EXACT_UNARY) if floating else INT_UNARY))
        return ("unary", name, i), _derived(v, EXACT_UNARY[name](x).astype(x.dtype))
    if op == "unit":
        name = draw(st.sampled_from(sorted(UNIT_UNARY)))
        want = UNIT_UNARY[name](x.astype(np.float64)).astype(x.dtype)
        return ("unary", name, i), _derived(v, want, cross=False, oracle=False, check="unit")
    if op == "binary":
        name = draw(st.sampled_from(sorted(BINARY) if floating else INT_BINARY))
        other = _inputs(rng, kind, _broadcast_partner(draw, st, x.shape))
        swap = draw(st.booleans())
        a, b = (other, x) if swap else (x, other)
        want = BINARY[name](a.astype(np.float64), b.astype(np.float64)) if floating else BINARY[name](a, b)
        return ("binary", name, i, other, swap), _derived(v, np.asarray(want).astype(x.dtype))
    if op == "cast":
        to = draw(st.sampled_from([c for c in CASTS if c != x.dtype.name]))
        return ("cast", i, to), _derived(v, x.astype(to))
    if op == "where":
        other = _inputs(rng, kind, x.shape)
        return ("where", i, other), _derived(v, np.where(x > other, x, other))
    if op == "iadd":
        c = draw(st.sampled_from([1, -2, 0]))
        return ("iadd", i, c), (_derived(v, (x + np.asarray(c, x.dtype)).astype(x.dtype)),)
    if op == "reduce":
        names = ["sum", "mean", "amax", "amin", "var"] if floating else ["sum", "mean", "amax", "amin"]
        name = draw(st.sampled_from(names))
        axes, keep = _axes(draw, st, x.ndim), draw(st.booleans())
        count = int(np.prod([x.shape[d] for d in (axes if axes is not None else range(x.ndim))]))
        if name in ("amax", "amin") and count == 0:
            name = "sum"
        return ("reduce", name, i, axes, keep), _reduced(v, name, axes, keep, kind)
    if op == "arg":
        name = draw(st.sampled_from(["argmax", "argmin"]))
        dim = None if x.ndim == 0 or draw(st.booleans()) else draw(st.integers(0, x.ndim - 1))
        if x.size == 0 or (dim is not None and x.shape[dim] == 0):
            return ("read", i), None
        pick = np.argmax if name == "argmax" else np.argmin
        want = pick(x.reshape(-1)) if dim is None else pick(x, axis=dim)
        return ("arg", name, i, dim), _derived(v, np.asarray(want, np.int64))
    if op == "cumsum":
        if x.ndim == 0:
            return ("read", i), None
        dim = draw(st.integers(0, x.ndim - 1))
        want = np.cumsum(x.astype(np.float64 if floating else np.int64), axis=dim).astype(x.dtype)
        return ("cumsum", i, dim), _derived(v, want)
    if op == "softmax":
        if x.ndim == 0:
            return ("read", i), None
        dim = draw(st.integers(0, x.ndim - 1))
        out = _derived(v, _softmax(x, dim), cross=False, oracle=False, check="softmax")
        if out.check == "softmax":
            # The Σ's order (the reference's left fold, NumPy's pairwise sum here) moves a whole row by up to
            # ~K units of the float64 sum: in float64 results more than the 8 units `agree` allows alone
            # (a row of 64 moved 9).
            out.bound = 2 * max(x.shape[dim], 1) * np.finfo(np.float64).eps * np.abs(out.array.astype(np.float64))
        return ("softmax", i, dim), out
    if op == "matmul":  # of x's values brought into [-4, 4] (a product's rounding has no exact bound)
        if x.ndim == 0:
            return ("read", i), None
        w = _inputs(np.random.default_rng(rng.integers(2 ** 32)), "float64", (x.shape[-1], draw(st.integers(0, 4))))
        w = np.nan_to_num(w, nan=1.0, posinf=2.0, neginf=-2.0).clip(-4, 4).astype(x.dtype)
        tame = np.nan_to_num(x).clip(-4, 4).astype(np.float64)
        want = (tame @ w.astype(np.float64)).astype(x.dtype)
        out = _derived(v, want, cross=False, oracle=False, check="sum")
        # BLAS accumulates in the dtype, in its own order: within k·u·Σ|x·w| of the exact product
        out.bound = 2 * x.shape[-1] * np.finfo(x.dtype).eps * (np.abs(tame) @ np.abs(w.astype(np.float64)))
        return ("matmul", i, w), out
    if op == "move":
        return _movement(draw, st, rng, i, v, values)
    if op == "read":
        return ("read", i), None
    if op == "item":
        if x.size == 0:
            return ("read", i), None
        index = tuple(draw(st.integers(-n, n - 1)) for n in x.shape)
        return ("item", i, index), None
    # a host write of one element (value semantics: only this value changes)
    if x.size == 0 or x.ndim == 0:
        return ("read", i), None
    index = tuple(draw(st.integers(0, n - 1)) for n in x.shape)
    new = x.copy()
    new[index] = _inputs(rng, x.dtype.name, ())
    bound = v.bound
    if bound is not None:  # the written element is exact
        bound = np.broadcast_to(bound, x.shape).copy()
        bound[index] = 0.0
    return ("write", i, index, new[index].item()), (dataclasses.replace(v, array=new, bound=bound),)


def _softmax(x, dim):
    """softmax as its reference composite: each step rounded as its op is, the sum in float64."""
    m = np.max(x, axis=dim, keepdims=True) if x.shape[dim] else np.zeros_like(x)
    e = np.exp((x - m).astype(np.float64)).astype(x.dtype)
    s = np.sum(e.astype(np.float64), axis=dim, keepdims=True).astype(x.dtype)
    return (e.astype(np.float64) / s.astype(np.float64)).astype(x.dtype)


def _reduced(v, name, axes, keep, kind):
    x = v.array
    wide = x.astype(np.float64) if kind != "int64" or name == "mean" else x
    out_dtype = np.float32 if (kind == "int64" and name == "mean") else x.dtype
    count = int(np.prod([x.shape[d] for d in (axes if axes is not None else range(x.ndim))]))
    magnitude = np.sum(np.abs(wide.astype(np.float64)), axis=axes)  # any order's error is below n·u·Σ|x|
    bound = 2 * count * np.finfo(np.float64).eps * magnitude
    if name == "sum":
        want = np.sum(wide, axis=axes) + (0.0 if kind != "int64" else 0)
        check = "sum" if kind != "int64" else "exact"
    elif name == "mean":
        want = np.mean(wide, axis=axes) if wide.size else np.full(np.sum(wide, axis=axes).shape, np.nan)
        bound = bound / max(count, 1)
        check = "sum"
    elif name == "var":
        want = np.var(wide, axis=axes) if wide.size else np.full(np.sum(wide, axis=axes).shape, np.nan)
        bound = 8 * count * np.finfo(np.float64).eps * np.sum(np.square(wide.astype(np.float64)), axis=axes) \
            / max(count, 1)
        check = "sum"
    else:
        want = _first_extreme(x, axes, np.argmax if name == "amax" else np.argmin)
        check = "exact"
    want = _restore(np.asarray(want).astype(out_dtype), x.shape, axes, keep)
    out = _derived(v, want, oracle=check == "exact", check=check)
    out.bound = _restore(np.asarray(bound, np.float64), x.shape, axes, keep)
    return out


def _same_tensor(v):
    """The result of an op that returns its input itself (PyTorch returns a view there): one object."""
    if v.alias is None:
        v.alias = object()
    return dataclasses.replace(v)


def _movement(draw, st, rng, i, v, values):
    x = v.array
    name = draw(st.sampled_from(["permute", "reshape", "flip", "roll", "slice", "expand", "cat", "index_select",
                                 "unsqueeze", "nan_to_num"]))
    if name == "permute":
        perm = tuple(draw(st.permutations(range(x.ndim))))
        if perm == tuple(range(x.ndim)):
            return ("permute", i, perm), _same_tensor(v)
        return ("permute", i, perm), _derived(v, np.transpose(x, perm))
    if name == "reshape":
        shape = (-1,) if draw(st.booleans()) else tuple(reversed(x.shape))
        new = x.reshape(shape if shape != (-1,) else (x.size,))
        if new.shape == x.shape:
            return ("reshape", i, shape), _same_tensor(v)
        return ("reshape", i, shape), _derived(v, new)
    if name == "flip":
        dims = tuple(sorted(set(draw(st.lists(st.integers(0, max(x.ndim - 1, 0)), max_size=2))))) if x.ndim else ()
        return ("flip", i, dims), _derived(v, np.flip(x, dims).copy() if dims else x.copy())
    if name == "roll":
        shift = draw(st.integers(-3, 3))
        dim = None if x.ndim == 0 or draw(st.booleans()) else draw(st.integers(0, x.ndim - 1))
        want = np.roll(x, shift) if dim is None else np.roll(x, shift, dim)
        return ("roll", i, shift, dim), _derived(v, want)
    if name == "slice":
        key = _slices(draw, st, x.shape)
        # lazytensor's getitem returns x itself when every axis keeps all of itself in order (an empty
        # axis read backwards included)
        if x.ndim and all(k.indices(n) == (0, n, 1) or (n == 0 and k.indices(n)[2] < 0)
                          for k, n in zip(key, x.shape)):
            return ("slice", i, key), _same_tensor(v)
        return ("slice", i, key), _derived(v, x[key].copy())
    if name == "expand":
        k = draw(st.integers(0, 3))
        return ("expand", i, k), _derived(v, np.broadcast_to(x, (k,) + x.shape).copy())
    if name == "cat":
        if x.ndim == 0:
            return ("read", i), None
        dim = draw(st.integers(0, x.ndim - 1))
        j = draw(st.integers(0, len(values) - 1))
        y = values[j].array
        if y.dtype != x.dtype or y.ndim != x.ndim or y.shape[:dim] + y.shape[dim + 1:] != x.shape[:dim] + x.shape[dim + 1:]:
            j = i
            y = x
        return ("cat", i, j, dim), _derived([v, values[j]], np.concatenate([x, y], dim))
    if name == "index_select":
        if x.ndim == 0 or x.shape[0] == 0:
            return ("read", i), None
        index = rng.integers(0, x.shape[0], draw(st.integers(0, 4)))
        return ("index_select", i, index), _derived(v, x[index])
    if name == "unsqueeze":
        dim = draw(st.integers(0, x.ndim))
        return ("unsqueeze", i, dim), _derived(v, np.expand_dims(x, dim))
    return ("nan_to_num", i), _derived(v, np.nan_to_num(x) if x.dtype.kind == "f" else x.copy())


def run(inputs, steps):
    """Run the program with lazytensor on the active device; returns (every value at the end, every host
    read's value in order). The values are read after all steps, so the engine plans
    them as one program (host reads midway realize parts of it first)."""
    vals = [lt.tensor(a) for a in inputs]
    reads = []
    for step in steps:
        op, i = step[0], step[1] if len(step) > 1 else None
        if op == "unary":
            _, name, i = step
            vals.append(getattr(vals[i], name)() if name != "relu" else lt.relu(vals[i]))
        elif op == "binary":
            _, name, i, other, swap = step
            a, b = (lt.tensor(other), vals[i]) if swap else (vals[i], lt.tensor(other))
            vals.append(getattr(lt, name)(a, b))
        elif op == "cast":
            _, i, to = step
            vals.append(vals[i].to(getattr(lt, to)))
        elif op == "where":
            _, i, other = step
            o = lt.tensor(other)
            vals.append(lt.where(vals[i] > o, vals[i], o))
        elif op == "iadd":
            _, i, c = step
            vals[i] += c
        elif op == "reduce":
            _, name, i, axes, keep = step
            vals.append(getattr(vals[i], name)(dim=axes, keepdim=keep, **({"correction": 0} if name == "var" else {})))
        elif op == "arg":
            _, name, i, dim = step
            vals.append(getattr(vals[i], name)(dim=dim))
        elif op == "cumsum":
            _, i, dim = step
            vals.append(lt.cumsum(vals[i], dim))
        elif op == "softmax":
            _, i, dim = step
            vals.append(lt.softmax(vals[i], dim))
        elif op == "matmul":
            _, i, w = step
            vals.append(lt.nan_to_num(vals[i]).clip(-4, 4) @ lt.tensor(w))
        elif op == "read":
            reads.append(vals[step[1]].numpy().copy())
        elif op == "item":
            _, i, index = step
            reads.append(np.asarray(vals[i][index].item(), vals[i].dtype.np))
        elif op == "write":
            _, i, index, value = step
            vals[i][index] = value
        elif op == "permute":
            vals.append(vals[i].permute(*step[2]))
        elif op == "reshape":
            vals.append(vals[i].reshape(*step[2]))
        elif op == "flip":
            vals.append(vals[i].flip(step[2]))
        elif op == "roll":
            _, i, shift, dim = step
            vals.append(vals[i].roll(shift, dim))
        elif op == "slice":
            vals.append(vals[i][step[2]])
        elif op == "expand":
            _, i, k = step
            vals.append(vals[i][None].expand(k, *vals[i].shape))
        elif op == "cat":
            _, i, j, dim = step
            vals.append(lt.cat([vals[i], vals[j]], dim))
        elif op == "index_select":
            _, i, index = step
            vals.append(vals[i].index_select(0, lt.tensor(index)))
        elif op == "unsqueeze":
            vals.append(vals[i].unsqueeze(step[2]))
        elif op == "nan_to_num":
            vals.append(lt.nan_to_num(vals[i]))
        else:
            raise AssertionError(op)
    return [t.numpy() for t in vals], reads


def _ulps(got, want):
    """Distance in units of the last place of `want` (elementwise; equal specials count as 0)."""
    got, want = got.astype(np.float64), want.astype(want.dtype)
    spacing = np.spacing(np.abs(want).astype(want.dtype)).astype(np.float64)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    with np.errstate(all="ignore"):
        return np.where(same, 0.0, np.abs(got - want.astype(np.float64)) / spacing)


def agree(got, want, check, bound=None):
    """Whether `got` is `want` under `check` (exact: the same bytes but any NaN; unit: within 4 units;
    softmax: within 8; sum: within `bound` (a reordered fold's error) and the rounding)."""
    with np.errstate(all="ignore"):  # the spacing of the largest float overflows: an infinite margin
        return _agree(got, want, check, bound)


def _agree(got, want, check, bound):
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if check == "sum" and bound is not None and want.dtype.kind in "fc":
        # where Σ|x| overflows, a fold in another order may overflow differently (inf, or inf - inf = NaN,
        # or a finite value): nothing to compare there
        bounded = np.isfinite(np.broadcast_to(bound, want.shape))
        if not bounded.all():
            return _agree(got[bounded], want[bounded], check, np.broadcast_to(bound, want.shape)[bounded])
    if check == "exact" or want.dtype.kind not in "fc":
        nan = np.isnan(got) & np.isnan(want) if want.dtype.kind == "f" else np.zeros(got.shape, bool)
        return bool(np.all(nan | ((got == want) & (np.signbit(got) == np.signbit(want)))))
    finite = np.isfinite(want)
    if not np.array_equal(np.isnan(got), np.isnan(want)) or not np.array_equal(got[~finite & ~np.isnan(want)],
                                                                             want[~finite & ~np.isnan(want)]):
        return False
    if check == "unit":
        return bool(np.all(_ulps(got[finite], want[finite]) <= 4))
    if check == "softmax":  # exp (libm's or ours, against NumPy's own), then the Σ and the division: each
        close = _ulps(got[finite], want[finite]) <= 8  # adds its unit (5 seen in float64)
        if bound is not None:  # and the Σ's order
            close |= np.abs(got[finite].astype(np.float64) - want[finite]) <= np.broadcast_to(bound, want.shape)[finite]
        return bool(np.all(close))
    # sums, means, variances (float64 folds in another order than NumPy's, then both round once) and
    # products (BLAS's order and width): within `bound` of the oracle, and the rounding
    rounding = np.spacing(np.abs(want[finite])).astype(np.float64)
    bound = np.broadcast_to(bound, want.shape)[finite]
    return bool(np.all(np.abs(got[finite].astype(np.float64) - want[finite]) <= bound + 2 * rounding))
