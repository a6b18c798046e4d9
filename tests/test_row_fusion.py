"""Row groups: a softmax or layer norm (or a gradient of either) with the elementwise trees it reads and
the elementwise ops that read it, as one generated kernel on the CPU (runtime/fusion.py,
kernels/cpu/fused_rows.py). The kernel stores every value with its node's rounding, so its results are
the bytes the unfused kernels give; tested against row fusion turned off, and against the NumPy
backend in each op's class."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.kernels.cpu import fused
from lazytensor.runtime import devices, fusion
from lazytensor.runtime.backends.numba_backend import NumbaBackend
from lazytensor.runtime.backends.numpy_backend import NumpyBackend


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Row groups run on the host chain (numba first); these tests run there whatever LAZYTENSOR_DEVICE says."""
    lt.set_device("cpu")


def _attention(q, k, v, scale):
    """Causal attention as users write it: scores, scale, mask, softmax, weighted values."""
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * scale
    mask = lt.tril(lt.ones(t, t, dtype=lt.bool))
    att = att.masked_fill(~mask, float("-inf"))
    return F.softmax(att, dim=-1) @ v


def _attention_run(rows, monkeypatch, seed=0, shape=(2, 3, 48, 16)):
    """Forward and backward of hand-written attention; (output, gradients, kernel labels)."""
    monkeypatch.setattr(NumbaBackend, "fuses_rows", rows)
    rng = np.random.default_rng(seed)
    q, k, v = (lt.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True) for _ in range(3))
    with lt.profile() as p:
        y = _attention(q, k, v, 1.0 / math.sqrt(shape[-1]))
        out = y.numpy()
        (y * y).sum().backward()
        grads = [t.grad.numpy() for t in (q, k, v)]
    return out, grads, [kernel.op for kernel in p.kernels]


def test_attention_scores_product_scale_mask_and_softmax_are_one_kernel(monkeypatch):
    _, _, labels = _attention_run(True, monkeypatch)
    assert any(label.startswith("fused(matmul+mul+where+softmax") for label in labels)
    assert "softmax" not in labels


def test_softmax_gradient_with_its_product_mask_and_scale_is_one_kernel(monkeypatch):
    _, _, labels = _attention_run(True, monkeypatch)
    assert any(label.startswith("fused(matmul+softmax_grad+where+mul") for label in labels)
    assert "softmax_grad" not in labels


def test_attention_computes_its_two_t_by_t_products_inside_the_row_kernels(monkeypatch):
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", False)  # the products after the rows: test_trailing_products.py
    _, _, labels = _attention_run(True, monkeypatch)
    _, _, unfused = _attention_run(False, monkeypatch)
    assert unfused.count("matmul") - labels.count("matmul") == 2  # q k^T, and dy v^T


def test_scores_a_user_also_reads_are_stored_by_their_own_product(monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    rng = np.random.default_rng(1)
    q, k = (lt.tensor(rng.normal(size=(2, 3, 48, 16)).astype(np.float32)) for _ in range(2))
    scores = q @ k.transpose(-2, -1)
    with lt.profile() as p:
        att = F.softmax(scores * 0.25, dim=-1)
        lt.realize(att, scores)
    labels = [kernel.op for kernel in p.kernels]
    assert labels.count("matmul") == 1 and "fused(mul+softmax)" in labels
    np.testing.assert_allclose(att.numpy(), F.softmax(lt.tensor(scores.numpy()) * 0.25, dim=-1).numpy(), rtol=0, atol=0)


def test_a_product_read_by_an_elementwise_kernel_alone_is_stored_by_its_own_product(monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    rng = np.random.default_rng(2)
    q, k = (lt.tensor(rng.normal(size=(2, 3, 48, 16)).astype(np.float32)) for _ in range(2))
    with lt.profile() as p:
        (((q @ k.transpose(-2, -1)) * 0.25).exp() + 1.0).numpy()
    labels = [kernel.op for kernel in p.kernels]
    assert "matmul" in labels and not any("matmul" in label and label.startswith("fused(") for label in labels)
    assert "fused(mul+exp+add)" in labels


def test_fused_attention_gives_the_unfused_bytes_forward_and_backward(monkeypatch):
    out, grads, _ = _attention_run(True, monkeypatch)
    want_out, want_grads, labels = _attention_run(False, monkeypatch)
    assert not any("softmax" in label and label.startswith("fused(") for label in labels)
    assert out.tobytes() == want_out.tobytes()
    for got, want in zip(grads, want_grads):
        assert got.tobytes() == want.tobytes()


def test_fused_attention_matches_the_numpy_backend_within_the_softmax_class(monkeypatch):
    out, grads, _ = _attention_run(True, monkeypatch)
    monkeypatch.setattr(devices, "_HOST_CHAIN", (NumpyBackend(),))  # the reference alone
    want_out, want_grads, labels = _attention_run(True, monkeypatch)
    assert not any(label.startswith("fused(") for label in labels)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# Elementwise steps a prologue or an epilogue may be made of: (name, function of the value and an operand).
STEPS = {
    "scale": lambda t, b: t * 0.37,
    "shift": lambda t, b: t + b,
    "row_bias": lambda t, b: t - b[..., :1, :],          # broadcast along the rows
    "column_bias": lambda t, b: t * b[..., :1],          # broadcast along the columns
    "mask": lambda t, b: t.masked_fill(b > 0.8, float("-inf")),
    "select": lambda t, b: lt.where(t > 1.0, t * 0.5, t),
    "exp": lambda t, b: (t * 0.1).exp(),
}
SHAPES = [(8, 1024), (4, 33, 64), (2, 3, 40, 37), (2, 2, 2, 20, 105)]


def _chain(t, names, b):
    for name in names:
        t = STEPS[name](t, b)
    return t


ROW = {"softmax": lambda t, w: F.softmax(t, dim=-1),
       "layer_norm": lambda t, w: F.layer_norm(t, t.shape[-1:], w, w * 0.5 - 0.25)}


def _row_program(rows, row, shape, before, after, dtype, seed, grad, monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", rows)
    rng = np.random.default_rng(seed)
    x = lt.tensor(rng.normal(size=shape).astype(dtype), requires_grad=grad)
    b = lt.tensor(rng.uniform(size=shape).astype(dtype))
    w = lt.tensor(rng.uniform(0.5, 1.5, size=shape[-1:]).astype(dtype), requires_grad=grad)
    with lt.profile() as p:
        y = _chain(ROW[row](_chain(x, before, b), w), after, b)
        values = [y.numpy()]
        if grad:
            (y * b).sum().backward()
            values += [x.grad.numpy()] + ([w.grad.numpy()] if row == "layer_norm" else [])
    return values, [kernel.op for kernel in p.kernels]


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(sorted(ROW)), st.sampled_from(SHAPES), st.lists(st.sampled_from(sorted(STEPS)), max_size=3),
       st.lists(st.sampled_from(sorted(STEPS)), max_size=3), st.sampled_from([np.float32, np.float64]),
       st.integers(0, 10_000), st.booleans())
def test_random_row_groups_give_the_unfused_bytes(row, shape, before, after, dtype, seed, grad):
    with pytest.MonkeyPatch.context() as mp:
        got, labels = _row_program(True, row, shape, before, after, dtype, seed, grad, mp)
        want, _ = _row_program(False, row, shape, before, after, dtype, seed, grad, mp)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    if before:
        assert any(label.startswith("fused(") and f"+{row}" in label for label in labels)


def _layer_norm_run(monkeypatch, shape=(4, 64, 96)):
    """A LayerNorm module's forward and backward; (values: output and gradients, kernel labels)."""
    rng = np.random.default_rng(5)
    norm = lt.nn.LayerNorm(shape[-1])
    norm.load_state_dict({"weight": lt.tensor(rng.uniform(0.5, 1.5, shape[-1:]).astype(np.float32)),
                          "bias": lt.tensor(rng.normal(size=shape[-1:]).astype(np.float32))})
    x = lt.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)
    g = lt.tensor(rng.normal(size=shape).astype(np.float32))
    with lt.profile() as p:
        y = norm(x)
        values = [y.numpy()]
        (y * g).sum().backward()
        values += [x.grad.numpy(), norm.weight.grad.numpy(), norm.bias.grad.numpy()]
    return values, [kernel.op for kernel in p.kernels]


def test_layer_norm_with_its_weight_and_bias_is_one_kernel(monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    _, labels = _layer_norm_run(monkeypatch)
    assert "fused(layer_norm+mul+add)" in labels
    assert any(label.startswith("fused(") and "+layer_norm_grad" in label for label in labels)
    assert "layer_norm" not in labels and "layer_norm_grad" not in labels


def test_fused_layer_norm_gives_the_reference_bytes_forward_and_backward(monkeypatch):
    """layer norm and its gradient are in the bit-identical class: fused, they still are."""
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    got, _ = _layer_norm_run(monkeypatch)
    monkeypatch.setattr(devices, "_HOST_CHAIN", (NumpyBackend(),))
    want, _ = _layer_norm_run(monkeypatch)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_a_softmax_across_rows_is_not_fused(monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    x = lt.tensor(np.random.default_rng(0).normal(size=(64, 256)).astype(np.float32))
    with lt.profile() as p:
        F.softmax(x * 2.0, dim=0).numpy()
    assert [k.op for k in p.kernels] == ["mul", "softmax"]


def test_a_scaled_value_read_elsewhere_is_stored_not_fused(monkeypatch):
    monkeypatch.setattr(NumbaBackend, "fuses_rows", True)
    x = lt.tensor(np.random.default_rng(0).normal(size=(64, 256)).astype(np.float32))
    scaled = x * 2.0
    with lt.profile() as p:
        lt.realize(F.softmax(scaled, dim=-1), scaled)
    assert sorted(k.op for k in p.kernels) == ["mul", "softmax"]


def test_a_device_fuser_makes_no_row_groups(virtual):
    virtual(offload="always")
    x = lt.tensor(np.random.default_rng(0).normal(size=(64, 256)).astype(np.float32))
    with lt.profile() as p:
        F.softmax(x * 2.0, dim=-1).numpy()
    assert not any("softmax" in k.op and k.op.startswith("fused(") for k in p.kernels)


def test_a_layer_norm_kernel_reads_eps_from_its_parameter():
    recipe = (2, (("in", 0, "float32"), ("param", 0, "float32"), ("layer_norm", "float32", 0, 1),
                  ("in", 1, "float32"), ("mul", "float32", 2, 3)))
    source = fused.render(recipe, ((False, False), (True, False)))
    assert "eps = np.full(1, p0, out.dtype)" in source
    assert "layer_norm_rows(a0[lo:hi], out[lo:hi], eps)" in source
    assert "v2 = out[i0, i1]" in source  # the weight's product reads the row kernel's result


def test_a_row_kernel_reads_its_operand_from_a_block_in_cache():
    """The rendered kernel: the scale and mask into a scratch block of rows, softmax_rows from it."""
    recipe = (3, (("in", 0, "float32"), ("param", 0, "float32"), ("mul", "float32", 0, 1), ("in", 1, "bool"),
                  ("param", 1, "float32"), ("where", "float32", 3, 4, 2), ("softmax", "float32", 5)))
    source = fused.render(recipe, ((False,) * 3, (True, False, False)))
    assert "scratch5[i1 - lo, i2] = v5" in source
    assert "softmax_rows(scratch5[:hi - lo], out[i0, lo:hi], True)" in source
    assert "a1[0, i1, i2]" in source  # the mask, broadcast along the first dim
