"""Hypothesis builds random expression graphs (depth up to 20) and compares them with NumPy."""
import numpy as np
from hypothesis import example, given, strategies as st

import lazytensor as lt

UNARY = {
    "tanh": (lt.tanh, np.tanh), "sin": (lt.sin, np.sin), "cos": (lt.cos, np.cos),
    "abs": (lt.abs, np.abs), "neg": (lt.neg, np.negative), "relu": (lt.relu, lambda x: np.maximum(x, 0)),
    "sigmoid": (lt.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    "sqrt1": (lambda t: (t.abs() + 1).sqrt(), lambda x: np.sqrt(np.abs(x) + 1)),
    "T": (lambda t: t.mT if t.ndim >= 2 and t.shape[-1] == t.shape[-2] else t,
          lambda x: np.swapaxes(x, -1, -2) if x.ndim >= 2 and x.shape[-1] == x.shape[-2] else x),
}
BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "max": (lt.maximum, np.maximum), "min": (lt.minimum, np.minimum),
    "where": (lambda a, b: lt.where(a > b, a, b * 0.5), lambda a, b: np.where(a > b, a, b * 0.5)),
    "scalar": (lambda a, b: 0.75 * a - 2.0, lambda a, b: 0.75 * a - 2.0),
}
REDUCE = {"sum": np.sum, "mean": np.mean, "amax": np.max}


@st.composite
def programs(draw):
    ndim = draw(st.integers(0, 3))
    base = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=ndim, max_size=ndim)))
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        keep = draw(st.integers(0, ndim))
        shapes.append(tuple(n if draw(st.booleans()) else 1 for n in base[ndim - keep:]))
    steps = []
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce"]))
        if kind == "unary":
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY)))))
        elif kind == "binary":
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, 1000))))
        else:
            steps.append(("reduce", draw(st.sampled_from(sorted(REDUCE))), draw(st.integers(0, 1000))))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    return shapes, steps, seed


def _run(shapes, steps, seed):
    """[(tensor, NumPy's value along the same chain, NumPy's value of the step from given values of its
    inputs: a function of the list of every entry's value, None for an input)]."""
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, size=s) for s in shapes]
    pool = [(lt.tensor(a), a, None) for a in arrays]
    for step in steps:
        k = len(pool) - 1
        t, a, _ = pool[k]
        if step[0] == "unary":
            f, g = UNARY[step[1]]
            pool.append((f(t), g(a), lambda values, g=g, k=k: g(values[k])))
        elif step[0] == "binary":
            j = step[2] % len(pool)
            ot, oa, _ = pool[j]
            f, g = BINARY[step[1]]
            pool.append((f(t, ot), g(a, oa), lambda values, g=g, k=k, j=j: g(values[k], values[j])))
        elif a.ndim:
            axis = step[2] % a.ndim
            if step[1] == "amax" and a.shape[axis] == 0:
                continue
            t = getattr(lt, step[1])(t, dim=axis, keepdim=True)
            reduce = REDUCE[step[1]]
            with np.errstate(all="ignore"):
                pool.append((t, reduce(a, axis=axis, keepdims=True),
                             lambda values, r=reduce, k=k, axis=axis: r(values[k], axis=axis, keepdims=True)))
    return pool


@given(programs())
# (libm's tanh is one unit below NumPy's here: on the emulated CUDA driver (tanh(|x|) - x) + x then exceeds
# tanh(|x|) and the `where` picks the other side, which NumPy's own chain would not)
@example(([()], [("unary", "abs"), ("unary", "tanh"), ("binary", "sub", 0), ("binary", "add", 0),
              ("binary", "where", 2)], 569108))
def test_random_graphs_match_numpy(program):
    """Every node of the realized graph against NumPy's op applied to the values lazytensor computed for
    its inputs: a transcendental may differ in the last unit between backends (docs/NUMERICS.md), and a
    comparison downstream of one (a `where` of two nearly equal values) may then decide the other way, so
    the check is per node, not along NumPy's own chain."""
    pool = _run(*program)
    lt.reset_counters()
    got = [np.asarray(t) for t, _, _ in pool]  # read together: the whole graph realized at once
    for g, (_, chained, local) in zip(got, pool):
        assert g.shape == chained.shape
        with np.errstate(all="ignore"):
            want = chained if local is None else np.asarray(local(got))
        scale = max(1.0, float(np.nanmax(np.abs(want)))) if want.size and np.isfinite(want).any() else 1.0
        np.testing.assert_allclose(g, want, rtol=1e-9, atol=1e-9 * scale)


@given(programs())
def test_building_random_graphs_computes_nothing(program):
    lt.reset_counters()
    pool = _run(*program)
    assert lt.counters()["kernels"] == 0
    final = pool[-1][0]
    pending = not final.is_realized  # a program of only no-op steps ends on an input tensor
    final.numpy()
    assert lt.counters()["realizations"] == int(pending)
