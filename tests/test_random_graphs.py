"""Hypothesis builds random expression graphs (depth up to 20) and compares them with NumPy."""
import numpy as np
from hypothesis import given, strategies as st

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
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2, 2, size=s) for s in shapes]
    pool = [(lt.tensor(a), a) for a in arrays]
    for step in steps:
        t, a = pool[-1]
        if step[0] == "unary":
            f, g = UNARY[step[1]]
            pool.append((f(t), g(a)))
        elif step[0] == "binary":
            ot, oa = pool[step[2] % len(pool)]
            f, g = BINARY[step[1]]
            pool.append((f(t, ot), g(a, oa)))
        elif a.ndim:
            axis = step[2] % a.ndim
            if step[1] == "amax" and a.shape[axis] == 0:
                continue
            t = getattr(lt, step[1])(t, dim=axis, keepdim=True)
            with np.errstate(all="ignore"):
                pool.append((t, REDUCE[step[1]](a, axis=axis, keepdims=True)))
    return pool


@given(programs())
def test_random_graphs_match_numpy(program):
    pool = _run(*program)
    lt.reset_counters()
    results = [t for t, _ in pool]
    got = [np.asarray(t) for t in results]
    for g, (_, want) in zip(got, pool):
        assert g.shape == want.shape
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
