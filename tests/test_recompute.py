"""Values recomputed for backward instead of kept (lazytensor/recompute.py): GELU keeps its input alone,
layer norm with a weight keeps its input and parameters, and on a device a GELU output that a weight
gradient reads is made again from GELU's input instead of being held through the forward pass."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.tensor import Tensor

SHAPE = (64, 96)


def _values(seed, shape=SHAPE):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _layer_norm_op_by_op(x, w, b, eps=1e-5):
    """What F.layer_norm recorded before: the normalization node, then `* w + b` recorded op by op."""
    n = Tensor._from_op("layer_norm", (x,), {"axes": (x.ndim - 1,), "eps": eps, "dtype": x.dtype.np},
                        x.shape, x.dtype)
    return n * w + b


def test_gelu_records_one_record_that_keeps_only_its_input():
    x = lt.tensor(_values(0), requires_grad=True) * 2.0
    y = F.gelu(x)
    assert y._grad_fn.name == "gelu" and y._grad_fn.saved == (x._node,)
    assert "grad_fn=<gelu>" in repr(y)


def test_layer_norm_with_weight_and_bias_keeps_its_input_and_parameters_not_the_normalized_value():
    x = lt.tensor(_values(0), requires_grad=True) * 2.0
    w, b = lt.ones(SHAPE[1], requires_grad=True), lt.zeros(SHAPE[1], requires_grad=True)
    y = F.layer_norm(x, SHAPE[1:], w, b)
    assert y._grad_fn.name == "layer_norm" and y._grad_fn.saved == (x._node, w._node, b._node)


def test_layer_norm_values_and_gradients_are_the_bytes_of_the_op_by_op_recording():
    grads = []
    for layer_norm in (lambda x, w, b: F.layer_norm(x, SHAPE[1:], w, b), _layer_norm_op_by_op):
        x = lt.tensor(_values(0), requires_grad=True)
        w = lt.tensor(_values(1, SHAPE[1:]), requires_grad=True)
        b = lt.tensor(_values(2, SHAPE[1:]), requires_grad=True)
        y = layer_norm(x, w, b)
        (y * lt.tensor(_values(3))).sum().backward()
        grads.append([t.numpy().tobytes() for t in (y, x.grad, w.grad, b.grad)])
    assert grads[0] == grads[1]


def test_gelu_gradient_is_pytorchs_formula_to_float32_rounding():
    torch = pytest.importorskip("torch")
    v, g = _values(0) * 3.0, _values(1)
    x = lt.tensor(v, requires_grad=True)
    (F.gelu(x) * lt.tensor(g)).sum().backward()
    t = torch.tensor(v, requires_grad=True)
    (torch.nn.functional.gelu(t) * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_second_derivatives_through_gelu_match_pytorch(approximate):
    torch = pytest.importorskip("torch")
    v = _values(0, (8, 16)).astype(np.float64)
    x = lt.tensor(v, requires_grad=True)
    F.gelu(x, approximate=approximate).sum().backward(create_graph=True)
    gx, x.grad = x.grad, None
    (gx * gx).sum().backward()
    t = torch.tensor(v, requires_grad=True)
    torch.nn.functional.gelu(t, approximate=approximate).sum().backward(create_graph=True)
    tg, t.grad = t.grad, None
    (tg * tg).sum().backward()
    np.testing.assert_allclose(gx.numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_second_derivatives_through_layer_norm_are_those_of_the_op_by_op_recording_to_rounding():
    """The first gradients are the same bytes; the second ones add the same terms in another order."""
    results = []
    for layer_norm in (lambda x, w, b: F.layer_norm(x, (16,), w, b), _layer_norm_op_by_op):
        x = lt.tensor(_values(0, (8, 16)).astype(np.float64), requires_grad=True)
        w = lt.tensor(_values(1, (16,)).astype(np.float64), requires_grad=True)
        b = lt.tensor(_values(2, (16,)).astype(np.float64), requires_grad=True)
        y = layer_norm(x, w, b)
        (y * y).sum().backward(create_graph=True)
        (gx, x.grad), (gw, w.grad), b.grad = (x.grad, None), (w.grad, None), None
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        results.append([t.numpy() for t in (gx, gw, x.grad, w.grad, b.grad)])
    assert [r.tobytes() for r in results[0][:2]] == [r.tobytes() for r in results[1][:2]]
    for ours, op_by_op in zip(results[0][2:], results[1][2:]):
        np.testing.assert_allclose(ours, op_by_op, rtol=1e-12, atol=1e-12)


def _mlp_grads(held_output=False):
    """A two-product GELU MLP's backward: (the realization's kernels, w1's gradient bytes)."""
    x = lt.tensor(_values(0, (256, 64)))
    w1 = lt.tensor(_values(1, (64, 128)) * 0.1, requires_grad=True)
    w2 = lt.tensor(_values(2, (128, 32)) * 0.1, requires_grad=True)
    h = F.gelu(x @ w1)
    if held_output:
        h.realize()
    (h @ w2).square().sum().backward()
    with lt.profile() as p:
        lt.realize(w1.grad, w2.grad)
    return [k.op for k in p.kernels], w1.grad.numpy().tobytes() + w2.grad.numpy().tobytes()


def _erf_kernels(kernels):
    return sum(k.count("erf") for k in kernels)


def test_on_a_device_gelus_output_is_made_again_for_the_weight_gradient_with_the_same_bytes(virtual):
    lt.set_device("cpu")
    on_host, _ = _mlp_grads()
    assert _erf_kernels(on_host) == 2     # forward, gradient: the output is kept for w2's gradient
    virtual(offload="always")
    remade, remade_grads = _mlp_grads()
    assert _erf_kernels(remade) == 3      # and the output made again where w2's gradient reads it
    _, kept_grads = _mlp_grads(held_output=True)
    assert remade_grads == kept_grads


def test_a_gelu_output_that_still_exists_is_read_and_not_made_again(virtual):
    virtual(offload="always")
    kernels, _ = _mlp_grads(held_output=True)
    assert _erf_kernels(kernels) == 1     # only the gradient's: the output was computed before


def test_a_second_backward_through_released_gelu_records_raises():
    x = lt.tensor(_values(0), requires_grad=True)
    loss = (F.gelu(x * 2.0) @ lt.tensor(_values(1, (96, 4)))).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_retain_graph_lets_a_second_backward_through_gelu_and_layer_norm_add_the_same_gradient():
    x = lt.tensor(_values(0), requires_grad=True)
    w = lt.ones(SHAPE[1], requires_grad=True)
    loss = (F.gelu(F.layer_norm(x, SHAPE[1:], w, None)) * lt.tensor(_values(1))).sum()
    loss.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    loss.backward()
    np.testing.assert_array_equal(x.grad.numpy(), first * 2)


def test_a_repeated_backward_through_gelu_and_layer_norm_is_replayed_with_the_same_bytes():
    def step():
        x = lt.tensor(_values(0), requires_grad=True)
        w = lt.tensor(_values(1, SHAPE[1:]), requires_grad=True)
        h = x
        for _ in range(6):
            h = F.gelu(F.layer_norm(h, SHAPE[1:], w, w * 0.5)) + h
        h.sum().backward()
        return x.grad.numpy().tobytes() + w.grad.numpy().tobytes()

    first = step()
    before = lt.counters()["replayed_backwards"]
    assert step() == first
    assert lt.counters()["replayed_backwards"] == before + 1

