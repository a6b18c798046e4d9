"""Elementwise fusion: generated kernels give the reference's bits (transcendentals within an ulp),
kernel counts for known graphs, members read later, and the on-disk kernel cache."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.runtime import fusion

SHAPE = (8, 1024)  # 8192 elements: the smallest fused size


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Fusion runs on the host chain (numba first); these tests run there whatever LAZYTENSOR_DEVICE says."""
    lt.set_device("cpu")
ARITH = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "div": lambda a, b: a / b,
    "neg": lambda a, b: -a, "abs": lambda a, b: a.abs(), "square": lambda a, b: a.square(),
    "sqrt": lambda a, b: a.abs().sqrt(), "scalar": lambda a, b: a * 0.75 + 1.5,
    "where": lambda a, b: lt.where(a > b, a, b), "cast64": lambda a, b: a.double() * b,
    "bcast": lambda a, b: a * b[:1] if b.shape[0] > 1 else a * b,
}
TRANSCENDENTAL = {"exp": lambda a, b: (a * 0.1).exp(), "tanh": lambda a, b: a.tanh(),
                  "erf": lambda a, b: a.erf(), "sigmoid": lambda a, b: a.sigmoid(), "log": lambda a, b: (a.abs() + 1).log()}


def _evaluate(ops, seed, fuse, monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1" if fuse else "0")
    rng = np.random.default_rng(seed)
    a = lt.tensor(rng.normal(size=SHAPE).astype(np.float32))
    b = lt.tensor(rng.normal(size=SHAPE).astype(np.float32))
    t = a
    for name in ops:
        t = {**ARITH, **TRANSCENDENTAL}[name](t, b)
    with lt.profile() as p:
        out = t.numpy()
    return out, p


@settings(max_examples=12, deadline=None)
@given(st.lists(st.sampled_from(sorted(ARITH)), min_size=2, max_size=8), st.integers(0, 1000))
def test_fused_arithmetic_chains_give_the_reference_bits(ops, seed):
    with pytest.MonkeyPatch.context() as mp:
        want, _ = _evaluate(ops, seed, False, mp)
        got, prof = _evaluate(ops, seed, True, mp)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    assert any(k.op.startswith("fused(") for k in prof.kernels)


def _ulps(got, want):
    return np.abs(got.astype(np.float64) - want) / np.spacing(np.abs(want))


@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
def test_fused_transcendentals_stay_within_an_ulp_of_the_reference(name, monkeypatch):
    ops = ["scalar", name]   # fused with the multiply-add before it; its result is the kernel's
    want, _ = _evaluate(ops, 3, False, monkeypatch)
    got, prof = _evaluate(ops, 3, True, monkeypatch)
    assert [k.op for k in prof.kernels if k.op.startswith("fused(")]
    assert _ulps(got, want).max() <= 1.0


@pytest.mark.parametrize("name", sorted(TRANSCENDENTAL))
def test_an_op_after_a_fused_transcendental_adds_at_most_its_own_rounding(name, monkeypatch):
    ops = ["scalar", name, "mul"]   # the transcendental's unit, then the product's rounding
    want, _ = _evaluate(ops, 3, False, monkeypatch)
    got, _ = _evaluate(ops, 3, True, monkeypatch)
    assert _ulps(got, want).max() <= 2.0


def test_gelu_is_one_kernel(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x = lt.tensor(np.ones(SHAPE, np.float32)).realize()
    with lt.profile() as p:
        F.gelu(x).realize()
    assert [k.op for k in p.kernels] == ["fused(mul+mul+erf+add+mul)"]


def _loop_body(source):
    return source.split("def kernel(", 1)[1]


def test_a_float32_chain_of_exact_ops_exp_and_erf_computes_in_float32_only():
    from lazytensor.kernels.cpu.fused import render
    recipe = (1, (("in", 0, "float32"), ("param", 0, "float32"), ("mul", "float32", 0, 1), ("erf", "float32", 2),
                  ("add", "float32", 3, 0), ("exp", "float32", 4), ("lt", "bool", 5, 0),
                  ("where", "float32", 6, 5, 0), ("div", "float32", 7, 1)))
    body = _loop_body(render(recipe))
    assert "erf_in_float32(v2)" in body and "exp_in_float32(v4)" in body
    assert "float64" not in body   # one width throughout: the loop vectorizes eight lanes wide


def test_an_operand_of_another_dtype_keeps_that_op_in_float64():
    from lazytensor.kernels.cpu.fused import render
    recipe = (1, (("in", 0, "float32"), ("param", 0, "float64"), ("mul", "float32", 0, 1), ("erf", "float32", 2)))
    body = _loop_body(render(recipe))
    assert "np.float32((np.float64(v0) * v1))" in body   # widened, computed, rounded once: the reference
    assert "erf_in_float32(v2)" in body                  # its operand is a float32 again


def test_softmax_and_its_gradient_run_as_one_kernel_each():
    x = lt.tensor(np.ones(SHAPE, np.float32), requires_grad=True)
    y = x.softmax(-1)
    with lt.profile() as p:
        y.realize()
    assert [(k.op, k.backend) for k in p.kernels] == [("softmax", "numba")]
    y.backward(lt.tensor(np.ones(SHAPE, np.float32)))
    with lt.profile() as p:
        x.grad.realize()
    assert [(k.op, k.backend) for k in p.kernels] == [("softmax_grad", "numba")]


def test_layer_norm_with_weight_and_bias_is_one_kernel():
    x = lt.tensor(np.ones(SHAPE, np.float32))
    w, b = lt.tensor(np.ones(SHAPE[1], np.float32)), lt.tensor(np.zeros(SHAPE[1], np.float32))
    with lt.profile() as p:
        F.layer_norm(x, SHAPE[1], w, b).realize()
    assert [(k.op, k.backend) for k in p.kernels] == [("fused(layer_norm+mul+add)", "numba")]  # a row group


def test_cross_entropy_forward_is_one_log_softmax_kernel_and_small_ones():
    logits = lt.tensor(np.zeros((512, 96), np.float32))
    target = lt.tensor(np.arange(512) % 96)
    with lt.profile() as p:
        F.cross_entropy(logits, target).realize()
    big = [k.op for k in p.kernels if np.prod(k.shape) == 512 * 96]
    assert big == ["log_softmax"]


def test_without_fusion_every_op_is_a_kernel(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "0")
    x = lt.tensor(np.ones(SHAPE, np.float32)).realize()
    with lt.profile() as p:
        F.gelu(x).realize()
    assert len(p.kernels) == 5  # one per op (Python numbers are parameters, not kernels)


def test_a_member_read_later_is_recomputed_from_its_inputs(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x = lt.tensor(np.full(SHAPE, 2.0, np.float32))
    inner = x * 3.0
    outer = (inner + 1.0).realize()
    assert not inner.is_realized  # computed inside outer's kernel
    assert inner.numpy()[0, 0] == 6.0 and outer.numpy()[0, 0] == 7.0


def test_values_asked_for_are_materialized_not_fused_away(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x = lt.tensor(np.full(SHAPE, 2.0, np.float32))
    a = x * 3.0
    b = a + 1.0
    lt.realize(a, b)
    assert a.is_realized and b.is_realized


def test_long_chains_are_split_into_bounded_kernels(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    t = lt.tensor(np.zeros(SHAPE, np.float32))
    for _ in range(120):
        t = t + 1.0
    with lt.profile() as p:
        assert t.numpy()[0, 0] == 120.0
    fused = [k for k in p.kernels if k.op.startswith("fused(")]
    assert len(fused) >= 3 and all(k.op.count("+") < fusion.MAX_INSTRUCTIONS for k in fused)


def test_small_tensors_are_not_fused(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    with lt.profile() as p:
        ((lt.ones(100) * 2.0) + 1.0).realize()
    assert not any(k.op.startswith("fused(") for k in p.kernels)


def test_a_second_process_loads_fused_kernels_from_the_disk_cache(tmp_path):
    program = textwrap.dedent("""
        import numpy as np, lazytensor as lt
        from lazytensor.kernels.cpu import fused
        x = lt.tensor(np.ones((8, 1024), np.float32))
        ((x * 1.25 + 0.5).tanh() * x).realize()
        (module,) = fused._compiled.values()
        print(sum(module.kernel.stats.cache_hits.values()), sum(module.kernel.stats.cache_misses.values()))
    """)
    env = dict(os.environ, LAZYTENSOR_CACHE_DIR=str(tmp_path), LAZYTENSOR_FUSE="1", LAZYTENSOR_DEVICE="cpu")

    def run():
        out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True,
                             check=True, timeout=300).stdout.split()
        return int(out[0]), int(out[1])
    assert run() == (0, 1)  # compiled and written to the cache
    assert run() == (1, 0)  # loaded from the cache
    assert list((tmp_path / "fused").glob("k_*.py"))


def _fused_kernels(p):
    return [k.op for k in p.kernels if np.prod(k.shape) == np.prod(SHAPE)]


def test_a_cheap_value_read_by_several_fused_kernels_is_recomputed_in_each_not_stored(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x = lt.tensor(np.full(SHAPE, 2.0, np.float32))
    shared = x * 3.0
    a, b = shared + 1.0, shared * shared
    with lt.profile() as p:
        lt.realize(a, b)
    assert sorted(_fused_kernels(p)) == ["fused(mul+add)", "fused(mul+mul)"]
    assert not shared.is_realized
    assert a.numpy()[0, 0] == 7.0 and b.numpy()[0, 0] == 36.0 and shared.numpy()[0, 0] == 6.0


def test_gelu_and_its_gradient_in_one_realization_recompute_what_they_share_with_the_same_bytes(monkeypatch):
    """The training step's case: the linear's output plus bias is read by GELU's forward and by its
    gradient (one expression of x and the output's gradient); each kernel recomputes it instead of
    loading it, and computes the bytes that the kernel storing it computed."""
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    rng = np.random.default_rng(0)
    values, bias, seed = (rng.normal(size=SHAPE).astype(np.float32), rng.normal(size=SHAPE[1]).astype(np.float32),
                          rng.normal(size=SHAPE).astype(np.float32))

    def run():
        x = lt.tensor(values, requires_grad=True)
        y = F.gelu(x + lt.tensor(bias))
        (y * lt.tensor(seed)).sum().backward()
        with lt.profile() as p:
            lt.realize(y, x.grad)
        return y.numpy(), x.grad.numpy(), _fused_kernels(p)

    y, grad, kernels = run()
    monkeypatch.setattr(fusion, "_CHEAP", frozenset())   # nothing recomputed: every shared value stored
    y0, grad0, stored = run()
    assert y.tobytes() == y0.tobytes() and grad.tobytes() == grad0.tobytes()
    assert len(stored) - len(kernels) == 1, (stored, kernels)   # x + bias


def test_a_cheap_value_also_read_by_another_kind_of_kernel_is_stored_once(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x = lt.tensor(np.full(SHAPE, 2.0, np.float32))
    shared = x * 3.0
    a, total = shared + 1.0, shared.sum()
    lt.realize(a, total)
    assert shared.is_realized


def test_a_value_read_by_several_kernels_is_stored_when_recomputing_it_would_load_more(monkeypatch):
    """A sum of two full-size arrays (each consumer would load both), or a transcendental."""
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x, z = lt.tensor(np.ones(SHAPE, np.float32)), lt.tensor(np.ones(SHAPE, np.float32))
    two_arrays, costly = x + z, (x * 0.5).exp()
    outs = [two_arrays * 2.0, two_arrays + 1.0, costly * 2.0, costly + 1.0]
    lt.realize(*outs)
    assert two_arrays.is_realized and costly.is_realized


DAG_OPS = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
           "neg": lambda a, b: -a, "scale": lambda a, b: a * 0.5, "shift": lambda a, b: a + 1.5,
           "square": lambda a, b: a * a, "exp": lambda a, b: (a * 0.1).exp(), "erf": lambda a, b: a.erf(),
           "sum": lambda a, b: a + a.sum(1, keepdim=True)}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(DAG_OPS)), st.integers(0, 2), st.integers(0, 2)),
                min_size=2, max_size=14), st.integers(1, 3))
def test_recomputing_shared_values_keeps_the_bytes_of_storing_them_on_random_graphs(steps, n_roots):
    """Values read by several consumers (fused or not, cheap or not), some asked for: the same bytes with
    the cheap ones recomputed in each consumer as with every one of them stored, in no more kernels."""
    rng = np.random.default_rng(len(steps))
    inputs = [rng.normal(size=SHAPE).astype(np.float32) for _ in range(2)]

    def run():
        values = [lt.tensor(v) for v in inputs]
        for op, i, j in steps:
            recent = min(len(values), 3)   # operands among the last few values: most are read twice or more
            values.append(DAG_OPS[op](values[-1 - i % recent], values[-1 - j % recent]))
        roots = values[-n_roots:]
        with lt.profile() as p:
            lt.realize(*roots)
        return [r.numpy().tobytes() for r in roots], len(p.kernels)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LAZYTENSOR_FUSE", "1")
        got, kernels = run()
        mp.setattr(fusion, "_CHEAP", frozenset())
        want, stored = run()
    assert got == want
    assert kernels <= stored


def _q_k_v_projection(rng):
    """A linear layer's output (8, 128, 192): x, its weight, its bias, the output."""
    x = lt.tensor(rng.standard_normal((8, 128, 64)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((192, 64)).astype(np.float32))
    b = lt.tensor(rng.standard_normal(192).astype(np.float32))
    return x, w, b, F.linear(x, w, b)


def test_a_bias_add_a_consumer_fuses_keeps_its_product_apart(monkeypatch, rng):
    monkeypatch.setenv("LAZYTENSOR_FUSE", "1")
    x, w, b, y = _q_k_v_projection(rng)
    with lt.profile() as p:
        F.gelu(y).realize()
    assert [r.op for r in p.kernels if r.op != "permute"] == ["matmul", "fused(add+mul+mul+erf+add+mul)"]
