"""In-place operations under autograd, as PyTorch programs write them: `masked_fill_` on attention
scores, `nn.ReLU(inplace=True)`, `x[mask] = 0`, `x.add_(y)` inside a forward; gradients against
PyTorch's, PyTorch's error where a value saved for the gradient was changed afterwards (and only there),
and random sequences of in-place and ordinary ops (Hypothesis) giving PyTorch's gradients or its error."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt

torch = pytest.importorskip("torch")
X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
W = np.random.default_rng(1).standard_normal((4, 4)).astype(np.float32)


def _run(lib, program):
    """program(lib, x, w) -> loss in `lib`; returns (the gradients of x and w, or the error's first words)."""
    x, w = lib.tensor(X, requires_grad=True), lib.tensor(W, requires_grad=True)
    try:
        program(lib, x, w).backward()
    except RuntimeError as exc:
        assert "modified by an inplace operation" in str(exc), exc
        return "inplace error"
    return [t.grad.numpy() if t.grad is not None else None for t in (x, w)]


def _same_as_pytorch(program):
    ours, theirs = _run(lt, program), _run(torch, program)
    if isinstance(theirs, str) or isinstance(ours, str):
        assert ours == theirs
        return
    for a, b in zip(ours, theirs):
        assert (a is None) == (b is None)
        if a is not None:
            # float32 gradients whose elements span many orders (exp of exp: 1e7 beside 7) differ by a few
            # units of the largest ones wherever the products round differently, so the absolute part of
            # the tolerance scales with the largest element
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-5 + 1e-6 * float(np.abs(b).max(initial=0.0)))


def test_masked_fill_in_place_on_attention_scores_matches_pytorch():
    def program(lib, x, w):
        scores = (x @ w) @ x.T * 0.5
        mask = lib.ones(3, 3).triu(1) > 0
        scores.masked_fill_(mask, -float("inf"))
        return (scores.softmax(dim=-1) @ x).pow(2).sum()
    _same_as_pytorch(program)


def test_relu_inplace_module_matches_pytorch():
    def program(lib, x, w):
        net = lib.nn.Sequential(lib.nn.ReLU(inplace=True))
        return (net(x @ w) * x.sum()).sum()
    _same_as_pytorch(program)


def test_setitem_with_a_mask_and_a_slice_on_a_computed_tensor_matches_pytorch():
    def program(lib, x, w):
        h = x @ w
        h[h < 0] = 0
        h[:, 1] = 2.5
        return (h * h).sum()
    _same_as_pytorch(program)


def test_add_in_place_inside_a_forward_matches_pytorch():
    def program(lib, x, w):
        h = x @ w
        h.add_(x)  # a residual written in place
        h.mul_(2).sub_(1)
        return h.tanh().sum()
    _same_as_pytorch(program)


def test_a_plain_tensor_changed_by_a_tensor_with_gradients_records_the_change():
    def program(lib, x, w):
        acc = lib.zeros(3, 4)
        acc.add_(x @ w)
        acc.addcmul_(x, x, value=0.5)
        return acc.sum()
    _same_as_pytorch(program)


def test_changing_a_saved_output_raises_pytorchs_error():
    def program(lib, x, w):
        y = (x @ w).sigmoid()
        y.mul_(2)
        return y.sum()
    assert _run(lt, program) == _run(torch, program) == "inplace error"


def test_changing_an_input_a_product_saved_raises_pytorchs_error_and_one_it_did_not_save_does_not():
    def saved(lib, x, w):
        h = x * 1
        out = (h * w[:3]).sum()
        h.add_(1)  # h was saved for w's gradient
        return out

    def not_saved(lib, x, w):
        h = x * 1
        out = (h * 3.0).sum()  # a number: nothing of h is saved
        h.add_(1)
        return out + h.sum()
    assert _run(lt, saved) == _run(torch, saved) == "inplace error"
    _same_as_pytorch(not_saved)


def test_in_place_on_a_leaf_that_requires_grad_is_still_refused():
    x = lt.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf that requires grad"):
        x.add_(1)
    with pytest.raises(RuntimeError, match="requires grad"):
        x[0] = 1.0


OPS = ["add_", "mul_", "sub_", "relu_", "exp_", "tanh_", "sigmoid_", "neg_", "clamp_", "masked_fill_", "setitem",
       "add", "mul", "tanh", "exp", "matmul"]


def _apply(lib, h, op, x):
    if op in ("add_", "mul_", "sub_"):
        return getattr(h, op)(x * 0.5)
    if op in ("relu_", "exp_", "tanh_", "sigmoid_", "neg_"):
        return getattr(h, op)()
    if op == "clamp_":
        return h.clamp_(-1.0, 1.0)
    if op == "masked_fill_":
        return h.masked_fill_(x > 0.5, 0.25)
    if op == "setitem":
        h[:, 0] = 0.5
        return h
    if op == "matmul":
        return h @ lib.tensor(W)
    return {"add": lambda: h + x, "mul": lambda: h * x, "tanh": h.tanh, "exp": lambda: (h * 0.1).exp()}[op]()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(OPS), min_size=1, max_size=6))
def test_random_sequences_of_in_place_and_plain_ops_give_pytorchs_gradients_or_its_error(ops):
    def program(lib, x, w):
        h = x @ w
        for op in ops:
            h = _apply(lib, h, op, x)
        return (h * h).sum()
    _same_as_pytorch(program)
