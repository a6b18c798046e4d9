"""Autograd: finite-difference checks (float64) for every differentiable op, and the autograd contract."""
import weakref

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F


def gradcheck(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0):
    """Compare backward() with central differences of sum(fn(*inputs) * w) for a fixed random w."""
    inputs = [lt.tensor(a, dtype=lt.float64, requires_grad=True) for a in arrays]
    out = fn(*inputs)
    w = np.random.default_rng(seed).normal(size=out.shape)
    (out * lt.tensor(w)).sum().backward()
    for i, a in enumerate(arrays):
        analytic = inputs[i].grad.numpy()
        numeric = np.zeros_like(a, dtype=np.float64)
        flat = numeric.reshape(-1)
        for j in range(a.size):
            vals = []
            for sign in (1, -1):
                shifted = [np.array(x, dtype=np.float64, copy=True) for x in arrays]
                shifted[i].reshape(-1)[j] += sign * eps
                with lt.no_grad():
                    vals.append(float((fn(*[lt.tensor(s) for s in shifted]) * lt.tensor(w)).sum()))
            flat[j] = (vals[0] - vals[1]) / (2 * eps)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=f"input {i}")


R = np.random.default_rng(42)


def pos(*shape):
    return R.uniform(0.5, 2.0, size=shape)


def anyv(*shape):
    return R.uniform(-2.0, 2.0, size=shape)


def unit(*shape):
    return R.uniform(-0.8, 0.8, size=shape)


UNARY = {
    "neg": (lambda x: -x, anyv), "abs": (lambda x: x.abs(), anyv), "sqrt": (lambda x: x.sqrt(), pos),
    "rsqrt": (lambda x: x.rsqrt(), pos), "exp": (lambda x: x.exp(), anyv), "log": (lambda x: x.log(), pos),
    "expm1": (lambda x: x.expm1(), anyv), "log1p": (lambda x: x.log1p(), pos),
    "tanh": (lambda x: x.tanh(), anyv), "sin": (lambda x: x.sin(), anyv), "cos": (lambda x: x.cos(), anyv),
    "tan": (lambda x: x.tan(), unit), "asin": (lambda x: x.asin(), unit), "acos": (lambda x: x.acos(), unit),
    "atan": (lambda x: x.atan(), anyv), "sinh": (lambda x: x.sinh(), anyv), "cosh": (lambda x: x.cosh(), anyv),
    "erf": (lambda x: x.erf(), anyv), "sigmoid": (lambda x: x.sigmoid(), anyv),
    "relu": (lambda x: x.relu(), anyv), "square": (lambda x: x.square(), anyv),
    "gelu": (F.gelu, anyv), "gelu_tanh": (lambda x: F.gelu(x, "tanh"), anyv),
    "softmax": (lambda x: x.softmax(-1), anyv), "log_softmax": (lambda x: x.log_softmax(0), anyv),
    "clip": (lambda x: x.clip(-1, 1), anyv), "cast": (lambda x: x.float().double() * 1.0, anyv),
    "log2": (lambda x: x.log2(), pos), "log10": (lambda x: x.log10(), pos), "asinh": (lambda x: x.asinh(), anyv),
    "acosh": (lambda x: (x + 1.0).acosh(), pos), "atanh": (lambda x: x.atanh(), unit),
    "reciprocal": (lambda x: x.reciprocal(), pos),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradients_match_finite_differences(name):
    fn, make = UNARY[name]
    # Through a float32 cast, differences need a larger step (the function is linear there).
    tol = dict(eps=1e-2, rtol=1e-5, atol=1e-5) if name == "cast" else {}
    gradcheck(fn, make(3, 4), **tol)


BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "pow": lambda a, b: a ** b, "maximum": lambda a, b: lt.maximum(a, b),
    "minimum": lambda a, b: lt.minimum(a, b), "mod": lambda a, b: a % b,
    "where": lambda a, b: lt.where(a > b, a, b * 2.0),
    "atan2": lambda a, b: lt.atan2(a, b), "hypot": lambda a, b: lt.hypot(a, b),
    "logaddexp": lambda a, b: lt.logaddexp(a, b),
}
BROADCASTS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
def test_binary_gradients_with_broadcasting(name, shapes):
    gradcheck(BINARY[name], pos(*shapes[0]), pos(*shapes[1]) + 0.1)


def test_a_bias_gradient_is_one_sum_over_the_broadcast_leading_axes():
    x, b = lt.ones(2, 3, 4, requires_grad=True), lt.ones(4, requires_grad=True)
    (x * 2.0 + b).sum().backward()
    assert b.grad._node.op == "sum" and b.grad.shape == (4,)  # no reshape node after the sum
    np.testing.assert_array_equal(b.grad.numpy(), np.full(4, 6.0, np.float32))


REDUCTIONS = {
    "sum": lambda x: x.sum(dim=1), "sum_all": lambda x: x.sum(), "sum_keep": lambda x: x.sum((0, 2), keepdim=True),
    "mean": lambda x: x.mean(dim=-1), "prod": lambda x: x.prod(dim=0), "var": lambda x: x.var(dim=1),
    "var_biased": lambda x: x.var(dim=(0, 1), correction=0), "std": lambda x: x.std(dim=2, keepdim=True),
    "amax": lambda x: x.amax(dim=1), "amin": lambda x: x.amin(), "max_dim": lambda x: x.max(dim=2).values,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_gradients(name):
    gradcheck(REDUCTIONS[name], pos(2, 3, 4))


MATMULS = [((3, 4), (4, 5)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
           ((2, 1, 3, 4), (3, 4, 2))]


@pytest.mark.parametrize("sa,sb", MATMULS, ids=str)
def test_matmul_gradients(sa, sb):
    gradcheck(lambda a, b: a @ b, anyv(*sa), anyv(*sb))


SHAPES = {
    "reshape": lambda x: x.reshape(4, 6), "permute": lambda x: x.permute(2, 0, 1), "T": lambda x: x.mT,
    "expand": lambda x: x[:, :1].expand(2, 5, 4), "slice": lambda x: x[:, 1::2, ::-1],
    "index_int": lambda x: x[1, :, 2], "none": lambda x: x[None, ..., 0],
    "cat": lambda x: lt.cat([x, x * 2.0], dim=1), "stack": lambda x: lt.stack([x, x.exp()], dim=0),
    "split": lambda x: x.split([1, 2], dim=1)[1], "squeeze": lambda x: x[:, :1].squeeze(1),
    "tril": lambda x: x.tril(), "triu": lambda x: x.triu(1), "contiguous": lambda x: x.mT.contiguous(),
    "flatten": lambda x: x.flatten(1),
}


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_shape_op_gradients(name):
    gradcheck(SHAPES[name], anyv(2, 3, 4))


def test_index_select_gradient_accumulates_repeated_rows():
    idx = lt.tensor([2, 0, 2, 2])
    gradcheck(lambda w: w.index_select(0, idx) * 3.0, anyv(3, 4))


def test_embedding_with_a_2d_index():
    idx = lt.tensor([[1, 1], [0, 2]])
    gradcheck(lambda w: F.embedding(idx, w), anyv(3, 2))


def test_gather_and_take_along_axis_gradients():
    idx = lt.tensor([[0, 0], [2, 1], [1, 1]])
    gradcheck(lambda x: x.gather(1, idx), anyv(3, 4))
    gradcheck(lambda x: lt.take_along_axis(x, idx, 1), anyv(3, 4))


def test_advanced_index_gradient():
    rows, cols = lt.tensor([0, 2, 2]), lt.tensor([1, 3, 3])
    gradcheck(lambda x: x[rows, cols], anyv(3, 4))


def test_masked_fill_gradient_is_zero_where_filled():
    mask = lt.tensor([[True, False, False, True]])
    gradcheck(lambda x: x.masked_fill(mask, 0.5), anyv(3, 4))


def test_layer_norm_and_cross_entropy_gradients():
    gradcheck(lambda x, w, b: F.layer_norm(x, (4,), w, b), anyv(3, 4), pos(4), anyv(4))
    target = lt.tensor([1, 0, 3])
    gradcheck(lambda x: F.cross_entropy(x, target), anyv(3, 4))
    gradcheck(lambda x: F.cross_entropy(x, lt.tensor([1, -100, 3])), anyv(3, 4))


def test_attention_gradients():
    gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
              anyv(2, 3, 4), anyv(2, 3, 4), anyv(2, 3, 4))


# ---- the contract -----------------------------------------------------------------------------------

def test_backward_builds_lazy_gradients_and_computes_nothing():
    x = lt.randn(4, 3, requires_grad=True)
    loss = (x.tanh() @ lt.ones(3, 2)).sum()
    lt.reset_counters()
    loss.backward()
    assert lt.counters()["kernels"] == 0 and not x.grad.is_realized


def test_gradients_accumulate_across_backward_calls():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    (x * 3).sum().backward()
    (x * x).sum().backward()
    assert x.grad.tolist() == [5.0, 7.0]


def test_leaves_given_the_same_gradient_get_grads_an_in_place_write_to_one_leaves_the_other():
    """add's rule hands both operands one gradient tensor; as in PyTorch each leaf's .grad is its own."""
    a, b = lt.ones(3, requires_grad=True), lt.ones(3, requires_grad=True)
    (a + b).sum().backward()
    assert a.grad is not b.grad
    a.grad *= 3.0
    assert a.grad.tolist() == [3.0, 3.0, 3.0] and b.grad.tolist() == [1.0, 1.0, 1.0]


def test_a_leaf_backward_from_is_given_a_grad_the_gradient_passed_does_not_see_written():
    x = lt.ones(2, requires_grad=True)
    g = lt.tensor([1.0, 2.0])
    x.backward(g)
    x.grad *= 2.0
    assert x.grad.tolist() == [2.0, 4.0] and g.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("retain", [False, True])
def test_after_backward_a_forward_intermediate_is_freed_once_its_gradients_are_computed(retain):
    """The records let go of their inputs (PyTorch frees its saved tensors); with retain_graph they
    keep them for another backward."""
    x = lt.tensor(np.linspace(-1.0, 1.0, 6), requires_grad=True)
    h = (x * 2.0).exp()
    kept = weakref.ref(h._node)
    loss = (h * h).sum()
    del h
    loss.backward(retain_graph=retain)
    lt.realize(loss, x.grad)
    assert (kept() is not None) == retain
    np.testing.assert_allclose(x.grad.numpy(), 4.0 * np.exp(4.0 * np.linspace(-1.0, 1.0, 6)))


def test_no_grad_and_detach_stop_recording():
    x = lt.tensor([1.0], requires_grad=True)
    with lt.no_grad():
        y = x * 2
    assert not y.requires_grad and y.grad_fn is None
    z = x.detach() * 2
    assert not z.requires_grad
    assert (x * 2).requires_grad and (x * 2).grad_fn is not None


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="floating-point"):
        lt.tensor([1, 2], requires_grad=True)


def test_backward_of_a_non_scalar_needs_a_gradient():
    x = lt.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="single-element"):
        (x * 2).backward()
    (x * 2).backward(lt.tensor([1.0, 2.0, 3.0]))
    assert x.grad.tolist() == [2, 4, 6]


def test_backward_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        lt.ones(2).sum().backward()


def test_writing_into_a_leaf_that_requires_grad_needs_no_grad():
    w = lt.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="no_grad"):
        w[0] = 1.0
    with lt.no_grad():
        w[0] = 1.0
    assert w.tolist() == [1, 0, 0] and w.requires_grad


def test_saved_values_survive_a_later_host_write():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    with lt.no_grad():
        x[0] = 10.0
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]  # d(x*x)/dx at the values used, not the new ones


def test_comparisons_and_argmax_are_not_differentiable():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    assert not (x > 1).requires_grad and not x.argmax().requires_grad


def test_create_graph_gives_second_derivatives():
    x = lt.tensor([3.0], requires_grad=True)
    y = (x * x * x).sum()
    y.backward(create_graph=True)
    g = x.grad
    x.grad = None
    g.sum().backward()
    assert x.grad.item() == pytest.approx(18.0)


def test_repr_shows_gradient_tracking_like_pytorch():
    x = lt.tensor([1.0], requires_grad=True)
    assert repr(x) == "tensor([1.], requires_grad=True)"
    assert repr(x * 2) == "tensor([2.], grad_fn=<mul>)"


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_second_derivatives_through_softmax_match_pytorch(op):
    torch = pytest.importorskip("torch")
    x0 = np.random.default_rng(3).standard_normal((3, 5))
    w = np.arange(5.0)
    x = lt.tensor(x0, requires_grad=True)
    (getattr(x, op)(-1) * lt.tensor(w)).sum().backward(create_graph=True)
    gx = x.grad
    x.grad = None
    (gx * gx).sum().backward()
    tx = torch.tensor(x0, requires_grad=True)
    (tg,) = torch.autograd.grad((getattr(tx, op)(-1) * torch.tensor(w)).sum(), tx, create_graph=True)
    (tg * tg).sum().backward()
    np.testing.assert_allclose(gx.numpy(), tg.detach().numpy(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_gradient_of_a_split_is_placed_by_one_node_not_padded_and_added():
    x0 = np.random.default_rng(5).standard_normal((4, 3, 12)).astype(np.float32)
    x = lt.tensor(x0, requires_grad=True)
    q, k, v = x.split(4, dim=2)
    (q * 2.0 + k * v).sum().backward()
    assert x.grad._node.op == "place_slices"
    with lt.profile() as p:
        got = x.grad.numpy()
    assert [k.op for k in p.kernels if k.shape == x0.shape] == ["place_slices"]
    want = np.concatenate([np.full((4, 3, 4), 2.0, np.float32), x0[..., 8:], x0[..., 4:8]], axis=2)
    assert got.tobytes() == want.tobytes()


def test_gradient_of_overlapping_or_strided_slices_is_still_summed():
    x = lt.tensor(np.zeros(10), requires_grad=True)
    (x[2:6].sum() + x[4:8].sum() * 2 + x[::3].sum() * 10).backward()
    np.testing.assert_array_equal(x.grad.numpy(), [10, 0, 1, 11, 3, 3, 12, 2, 0, 10])


def test_layer_norm_gradients_and_second_derivatives_match_pytorch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    x0, w0, b0 = rng.standard_normal((3, 4, 6)), rng.standard_normal(6), rng.standard_normal(6)
    mix = np.arange(6.0)
    x, w, b = (lt.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    (lt.nn.functional.layer_norm(x, 6, w, b) * lt.tensor(mix)).sum().backward(create_graph=True)
    gx = x.grad
    x.grad = None
    (gx * gx).sum().backward()
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    tgx, tgw, tgb = torch.autograd.grad((torch.nn.functional.layer_norm(tx, (6,), tw, tb) * torch.tensor(mix)).sum(),
                                        (tx, tw, tb), create_graph=True)
    (tgx * tgx).sum().backward()
    np.testing.assert_allclose(gx.numpy(), tgx.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-9, atol=1e-11)
    x2, w2, b2 = (lt.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    (lt.nn.functional.layer_norm(x2, 6, w2, b2) * lt.tensor(mix)).sum().backward()
    for ours, theirs in ((x2, tgx), (w2, tgw), (b2, tgb)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_an_element_read_keeps_its_gradient_edge_to_the_source():
    x = lt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    ((x * x).sum() + 10 * x[0]).backward()
    assert x.grad.numpy().tolist() == [12.0, 4.0, 6.0]  # PyTorch's: the read x[0] is x's first entry


def test_an_element_of_a_computed_tensor_backpropagates_to_its_leaf():
    x = lt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x.exp()[1, 0].backward()
    want = np.zeros((2, 2), np.float32)
    want[1, 0] = np.exp(np.float32(3.0))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_a_sum_of_element_reads_has_the_gradient_of_the_sum():
    x = lt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    total = x[0] * x[0] + x[-1] * 2.0 + x[1]
    total.backward()
    assert x.grad.numpy().tolist() == [2.0, 1.0, 2.0]


def test_an_element_read_is_still_a_host_value_and_records_nothing_without_grad():
    x = lt.tensor([1.0, 2.0], requires_grad=True)
    with lt.no_grad():
        assert not x[1].requires_grad
    assert not x.detach()[1].requires_grad
    y = x[1]
    assert y.requires_grad and y.shape == () and float(y) == 2.0
