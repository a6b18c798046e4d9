"""PyTorch's functional activations and losses, RMSNorm and the loss modules, Adam and the learning-rate
schedulers, checked against PyTorch itself (values and gradients, float64)."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

R = np.random.default_rng(7)
X = R.uniform(-3, 3, size=(4, 5))
X[0, 0], X[1, 1] = 30.0, -30.0  # softplus's threshold and its far tail


def _both(fn_lt, fn_torch, *arrays):
    """Value and gradients of sum(fn * w) for each input, in lazytensor and PyTorch."""
    w = R.uniform(0.5, 1.5, size=np.shape(fn_torch(*(torch.from_numpy(a) for a in arrays))))
    ours = [lt.tensor(a, dtype=lt.float64, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out_lt, out_t = fn_lt(*ours), fn_torch(*theirs)
    (out_lt * lt.tensor(w)).sum().backward()
    (out_t * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(out_lt.numpy(), out_t.detach().numpy(), rtol=1e-12, atol=1e-12)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


ACTIVATIONS = {
    "relu": (F.relu, TF.relu), "sigmoid": (F.sigmoid, torch.sigmoid), "tanh": (F.tanh, torch.tanh),
    "silu": (F.silu, TF.silu), "softplus": (F.softplus, TF.softplus),
    "softplus beta=2 threshold=5": (lambda x: F.softplus(x, 2.0, 5.0), lambda x: TF.softplus(x, 2.0, 5.0)),
    "normalize": (F.normalize, TF.normalize),
    "normalize p=3 dim=0": (lambda x: F.normalize(x, 3.0, 0), lambda x: TF.normalize(x, 3.0, 0)),
    "rmsnorm": (lambda x: lt.nn.RMSNorm(5)(x), lambda x: torch.nn.RMSNorm(5, dtype=torch.float64)(x)),
    "rmsnorm eps": (lambda x: lt.nn.RMSNorm(5, eps=1e-3)(x),
                    lambda x: torch.nn.RMSNorm(5, eps=1e-3, dtype=torch.float64)(x)),
    "silu module": (lambda x: lt.nn.SiLU()(x), lambda x: torch.nn.SiLU()(x)),
    "identity": (lambda x: lt.nn.Identity(3, key=1)(x), lambda x: torch.nn.Identity(3, key=1)(x)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activations_match_pytorch_values_and_gradients(name):
    _both(*ACTIVATIONS[name], X)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_and_binary_losses_match_pytorch(reduction):
    t = R.uniform(0, 1, size=X.shape)
    p = R.uniform(0.01, 0.99, size=X.shape)
    _both(lambda a, b: F.mse_loss(a, b, reduction=reduction), lambda a, b: TF.mse_loss(a, b, reduction=reduction),
          X, t)
    _both(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
          lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction), X, t)
    _both(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
          lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction), p, t)
    _both(lambda a, b: lt.nn.MSELoss(reduction=reduction)(a, b),
          lambda a, b: torch.nn.MSELoss(reduction=reduction)(a, b), X, t)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss_and_cross_entropy_module_match_pytorch_with_an_ignored_row(reduction):
    target = np.array([1, -100, 4, 0])
    _both(lambda a: F.nll_loss(a.log_softmax(-1), lt.tensor(target), reduction=reduction),
          lambda a: TF.nll_loss(a.log_softmax(-1), torch.from_numpy(target), reduction=reduction), X)
    _both(lambda a: lt.nn.CrossEntropyLoss(reduction=reduction)(a, lt.tensor(target)),
          lambda a: torch.nn.CrossEntropyLoss(reduction=reduction)(a, torch.from_numpy(target)), X)


def test_a_loss_of_mismatched_shapes_is_refused_instead_of_broadcast():
    with pytest.raises(ValueError, match="same shape"):
        F.mse_loss(lt.zeros(4, 1), lt.zeros(4))


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_adam_matches_pytorch_over_twenty_steps(weight_decay):
    init = R.standard_normal((3, 4))
    ours = lt.tensor(init, dtype=lt.float64, requires_grad=True)
    theirs = torch.tensor(init, requires_grad=True)
    opt_lt = lt.optim.Adam([ours], lr=0.05, weight_decay=weight_decay)
    opt_t = torch.optim.Adam([theirs], lr=0.05, weight_decay=weight_decay)
    for _ in range(20):
        opt_lt.zero_grad()
        ((ours * ours).sum() + ours.sin().sum()).backward()
        opt_lt.step()
        opt_t.zero_grad()
        ((theirs * theirs).sum() + theirs.sin().sum()).backward()
        opt_t.step()
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-12, atol=1e-12)


SCHEDULERS = {
    "LambdaLR": (lambda o: lt.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e + 0.1 * e),
                 lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 0.9 ** e + 0.1 * e)),
    "StepLR": (lambda o: lt.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5),
               lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)),
    "CosineAnnealingLR": (lambda o: lt.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.01),
                          lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=7, eta_min=0.01)),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_schedulers_give_pytorchs_learning_rates(name):
    make_lt, make_t = SCHEDULERS[name]
    a = lt.ones(2, requires_grad=True)
    opt_lt = lt.optim.SGD([{"params": [a]}, {"params": [lt.ones(2, requires_grad=True)], "lr": 0.3}], lr=0.1)
    opt_t = torch.optim.SGD([{"params": [torch.ones(2, requires_grad=True)]},
                             {"params": [torch.ones(2, requires_grad=True)], "lr": 0.3}], lr=0.1)
    s_lt, s_t = make_lt(opt_lt), make_t(opt_t)
    ours, theirs = [s_lt.get_last_lr()], [s_t.get_last_lr()]
    for _ in range(12):
        opt_t.step()  # PyTorch warns if its scheduler steps before its optimizer
        s_lt.step()
        s_t.step()
        ours.append(s_lt.get_last_lr())
        theirs.append(s_t.get_last_lr())
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


TENSOR_FUNCTIONS = {
    "flip": (lambda x: x.flip((0, 2)), lambda x: x.flip((0, 2))),
    "roll": (lambda x: x.roll((1, -2), (1, 2)), lambda x: x.roll((1, -2), (1, 2))),
    "roll flat": (lambda x: x.roll(5), lambda x: x.roll(5)),
    "repeat": (lambda x: x.repeat(2, 1, 3, 1), lambda x: x.repeat(2, 1, 3, 1)),
    "tile": (lambda x: x.tile((2, 1)), lambda x: x.tile((2, 1))),
    "unbind": (lambda x: lt.stack([t * (i + 1) for i, t in enumerate(x.unbind(1))]),
               lambda x: torch.stack([t * (i + 1) for i, t in enumerate(x.unbind(1))])),
    "outer": (lambda x: lt.outer(x[0, 0], x[1, :, 1]), lambda x: torch.outer(x[0, 0], x[1, :, 1])),
    "bmm": (lambda x: lt.bmm(x, x.transpose(1, 2)), lambda x: torch.bmm(x, x.transpose(1, 2))),
    "lerp scalar": (lambda x: x[0].lerp(x[1], 0.3) + x[0].lerp(x[1], 0.8),
                    lambda x: x[0].lerp(x[1], 0.3) + x[0].lerp(x[1], 0.8)),
    "lerp tensor": (lambda x: x[0].lerp(x[1], x[0].sigmoid()), lambda x: x[0].lerp(x[1], x[0].sigmoid())),
    "logsumexp": (lambda x: x.logsumexp(1), lambda x: x.logsumexp(1)),
    "logsumexp dims": (lambda x: lt.logsumexp(x * 50, (0, 2), keepdim=True),
                       lambda x: torch.logsumexp(x * 50, (0, 2), keepdim=True)),
}


@pytest.mark.parametrize("name", sorted(TENSOR_FUNCTIONS))
def test_tensor_functions_match_pytorch_values_and_gradients(name):
    _both(*TENSOR_FUNCTIONS[name], R.uniform(-2, 2, size=(2, 3, 4)))


def test_nan_and_infinity_tests_and_nan_to_num_match_pytorch():
    v = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 3e38], np.float32)
    ours, theirs = lt.tensor(v), torch.from_numpy(v)
    for name in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(getattr(ours, name)().numpy(), getattr(theirs, name)().numpy())
    np.testing.assert_array_equal(ours.nan_to_num().numpy(), theirs.nan_to_num().numpy())
    np.testing.assert_array_equal(ours.nan_to_num(1.0, 2.0, -2.0).numpy(), theirs.nan_to_num(1.0, 2.0, -2.0).numpy())
    assert not lt.isnan(lt.tensor([1, 2])).any().item() and lt.isfinite(lt.tensor([1, 2])).all().item()


def test_logsumexp_of_an_all_minus_infinity_slice_is_minus_infinity():
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]])
    np.testing.assert_array_equal(lt.tensor(x).logsumexp(1).numpy(), torch.from_numpy(x).logsumexp(1).numpy())


def test_one_hot_matches_pytorch_and_refuses_classes_out_of_range():
    idx = np.array([[0, 3], [2, 1]])
    np.testing.assert_array_equal(F.one_hot(lt.tensor(idx)).numpy(), TF.one_hot(torch.from_numpy(idx)).numpy())
    np.testing.assert_array_equal(lt.one_hot(lt.tensor(idx), 6).numpy(), TF.one_hot(torch.from_numpy(idx), 6).numpy())
    with pytest.raises(IndexError, match="class values"):
        F.one_hot(lt.tensor([1, 4]), 3)
    with pytest.raises(IndexError, match="class values"):
        F.one_hot(lt.tensor([-1, 0]))
