"""nn layers PyTorch programs use beyond Linear/Embedding/LayerNorm: activation modules, Flatten/Unflatten,
the losses, init functions, and Module's apply/buffers/state-dict behaviour (values and gradients
against PyTorch where it is installed)."""
import collections

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

X = np.random.default_rng(0).standard_normal((4, 6)) * 3


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _module_matches(torch, make, x=X, rtol=1e-10):
    ours, theirs = make(lt.nn), make(torch.nn)
    a, b = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out, ref = ours(a * 1.0), theirs(b * 1.0)  # not leaves: PyTorch refuses in-place ops on those
    w = np.random.default_rng(1).uniform(0.5, 1.5, tuple(ref.shape))
    (out * lt.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=1e-12)


ACTIVATIONS = {
    "Tanh": lambda nn: nn.Tanh(), "Sigmoid": lambda nn: nn.Sigmoid(), "ReLU inplace": lambda nn: nn.ReLU(inplace=True),
    "ReLU6": lambda nn: nn.ReLU6(), "LeakyReLU": lambda nn: nn.LeakyReLU(0.2), "ELU": lambda nn: nn.ELU(alpha=0.7),
    "CELU": lambda nn: nn.CELU(1.5), "SELU": lambda nn: nn.SELU(), "GELU": lambda nn: nn.GELU(),
    "GELU tanh": lambda nn: nn.GELU(approximate="tanh"), "SiLU": lambda nn: nn.SiLU(), "Mish": lambda nn: nn.Mish(),
    "Softplus": lambda nn: nn.Softplus(beta=2.0, threshold=5.0), "Softsign": lambda nn: nn.Softsign(),
    "Tanhshrink": lambda nn: nn.Tanhshrink(), "LogSigmoid": lambda nn: nn.LogSigmoid(),
    "Hardtanh": lambda nn: nn.Hardtanh(-2.0, 2.5), "Hardsigmoid": lambda nn: nn.Hardsigmoid(),
    "Hardswish": lambda nn: nn.Hardswish(), "Threshold": lambda nn: nn.Threshold(0.5, -1.0),
    "GLU": lambda nn: nn.GLU(), "Softmax": lambda nn: nn.Softmax(dim=1), "LogSoftmax": lambda nn: nn.LogSoftmax(dim=-1),
    "Softmin": lambda nn: nn.Softmin(dim=1), "Identity": lambda nn: nn.Identity(54, unused=1),
    "Flatten": lambda nn: nn.Sequential(nn.Unflatten(1, (2, 3)), nn.Flatten(0)),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_modules_match_pytorch_in_value_and_gradient(torch, name):
    # PyTorch's float64 hardsigmoid/hardswish multiply by a float32 1/6; its GELU, Mish, SELU, CELU use
    # other formulas or libm calls than ours: within 1e-6 there
    loose = ("Mish", "GELU", "SELU", "CELU", "Hardsigmoid", "Hardswish")
    _module_matches(torch, ACTIVATIONS[name], rtol=1e-6 if name in loose else 1e-10)


def test_prelu_learns_its_slope_like_pytorch(torch):
    ours, theirs = lt.nn.PReLU(6, init=0.1), torch.nn.PReLU(6, init=0.1)
    a, b = lt.tensor(X, dtype=lt.float32), torch.tensor(X, dtype=torch.float32)
    ours(a).sum().backward(), theirs(b).sum().backward()
    np.testing.assert_allclose(ours.weight.grad.numpy(), theirs.weight.grad.numpy(), rtol=1e-5)


LOSSES = {
    "nll_loss": lambda F, x, t, y: F.nll_loss(F.log_softmax(x, 1), t),
    "nll_loss weight ignore": lambda F, x, t, y: F.nll_loss(F.log_softmax(x, 1), t, weight=x.new_tensor(
        [1.0, 2.0, 0.5, 1.0, 3.0, 1.0]), ignore_index=2),
    "nll_loss sum": lambda F, x, t, y: F.nll_loss(F.log_softmax(x, 1), t, reduction="sum"),
    "cross_entropy label_smoothing": lambda F, x, t, y: F.cross_entropy(x, t, label_smoothing=0.2),
    "cross_entropy probabilities": lambda F, x, t, y: F.cross_entropy(x, F.softmax(y, 1)),
    "cross_entropy (N, C, d)": lambda F, x, t, y: F.cross_entropy(x.reshape(2, 6, 2), t.reshape(2, 2) % 6),
    "smooth_l1_loss": lambda F, x, t, y: F.smooth_l1_loss(x, y),
    "smooth_l1_loss beta": lambda F, x, t, y: F.smooth_l1_loss(x, y, beta=0.5, reduction="sum"),
    "huber_loss": lambda F, x, t, y: F.huber_loss(x, y, delta=2.0),
    "l1_loss": lambda F, x, t, y: F.l1_loss(x, y),
    "kl_div batchmean": lambda F, x, t, y: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction="batchmean"),
    "bce_with_logits pos_weight": lambda F, x, t, y: F.binary_cross_entropy_with_logits(
        x, y.sigmoid(), pos_weight=x.new_tensor([2.0] * 6)),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_match_pytorch_in_value_and_gradient(torch, name):
    y = np.random.default_rng(2).standard_normal((4, 6))
    t = np.array([0, 2, 5, 1])
    a, b = lt.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    out = LOSSES[name](F, a, lt.tensor(t), lt.tensor(y))
    ref = LOSSES[name](torch.nn.functional, b, torch.tensor(t), torch.tensor(y))
    out.backward(), ref.backward()
    np.testing.assert_allclose(out.item(), ref.item(), rtol=1e-10)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("make", ["NLLLoss", "CrossEntropyLoss", "SmoothL1Loss", "HuberLoss", "L1Loss", "MSELoss"])
def test_loss_modules_take_pytorchs_arguments(torch, make):
    kwargs = {"NLLLoss": dict(ignore_index=1), "CrossEntropyLoss": dict(label_smoothing=0.1),
              "SmoothL1Loss": dict(beta=0.3), "HuberLoss": dict(delta=0.3)}.get(make, {})
    ours, theirs = getattr(lt.nn, make)(reduction="sum", **kwargs), getattr(torch.nn, make)(reduction="sum", **kwargs)
    if make in ("NLLLoss", "CrossEntropyLoss"):
        args = (X, np.array([0, 1, 5, 3]))
    else:
        args = (X, X[::-1].copy())
    got = ours(*(lt.tensor(v) for v in args)).item()
    assert got == pytest.approx(theirs(*(torch.tensor(v) for v in args)).item(), rel=1e-10)


def test_nll_loss_refuses_float_targets_and_mismatched_shapes():
    with pytest.raises(TypeError, match="integer class indices"):
        F.nll_loss(lt.ones(2, 3), lt.ones(2))
    with pytest.raises(ValueError, match=r"expected input \(N, C\)"):
        F.nll_loss(lt.ones(2, 3), lt.tensor([0, 1, 2]))


def test_init_functions_follow_pytorchs_laws():
    lt.manual_seed(0)
    w = lt.empty(400, 300)
    lt.nn.init.xavier_uniform_(w, gain=2.0)
    bound = 2.0 * np.sqrt(6 / 700)
    assert float(w.abs().max()) <= bound and float(w.abs().max()) > 0.99 * bound
    lt.nn.init.kaiming_uniform_(w, a=np.sqrt(5))
    assert float(w.abs().max()) <= 1 / np.sqrt(300) * 1.0001
    lt.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert float(w.std()) == pytest.approx(np.sqrt(2 / 400), rel=0.02)
    lt.nn.init.trunc_normal_(w, std=1.0, a=-0.5, b=0.5)
    assert float(w.min()) >= -0.5 and float(w.max()) <= 0.5 and float(w.std()) == pytest.approx(0.28, rel=0.05)
    lt.nn.init.xavier_normal_(w)
    assert float(w.std()) == pytest.approx(np.sqrt(2 / 700), rel=0.02)
    lt.nn.init.zeros_(w), lt.nn.init.constant_(w[0:0], 1.0)
    assert float(w.abs().sum()) == 0
    lt.nn.init.ones_(w)
    assert float(w.mean()) == 1.0
    q = lt.nn.init.orthogonal_(lt.empty(5, 3))
    np.testing.assert_allclose(q.numpy().T @ q.numpy(), np.eye(3), atol=1e-6)


def test_calculate_gain_matches_pytorch(torch):
    for name, param in (("relu", None), ("tanh", None), ("leaky_relu", 0.2), ("selu", None), ("conv2d", None)):
        assert lt.nn.init.calculate_gain(name, param) == pytest.approx(torch.nn.init.calculate_gain(name, param))


def test_apply_visits_every_submodule_children_first():
    seen = []
    net = lt.nn.Sequential(lt.nn.Linear(2, 2), lt.nn.Sequential(lt.nn.Tanh()))
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Linear", "Tanh", "Sequential", "Sequential"]


def test_apply_initializes_weights_as_programs_do():
    def init(m):
        if isinstance(m, lt.nn.Linear):
            lt.nn.init.normal_(m.weight, mean=0.0, std=0.02)
            lt.nn.init.zeros_(m.bias)
    net = lt.nn.Sequential(lt.nn.Linear(30, 40), lt.nn.ReLU(), lt.nn.Linear(40, 2)).apply(init)
    assert float(net[0].bias.abs().sum()) == 0 and float(net[0].weight.std()) == pytest.approx(0.02, rel=0.1)


def test_non_persistent_buffers_are_kept_out_of_the_state_dict():
    class M(lt.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("mask", lt.ones(3), persistent=False)
            self.register_buffer("count", lt.zeros(1))
            self.lin = lt.nn.Linear(3, 1)
    m = M()
    assert list(m.state_dict()) == ["count", "lin.weight", "lin.bias"]
    assert [n for n, _ in m.named_buffers()] == ["mask", "count"]
    m.mask = lt.zeros(3)  # a new value for a buffer keeps it a buffer
    assert float(dict(m.named_buffers())["mask"].sum()) == 0
    result = m.load_state_dict({"count": np.ones(1), "lin.weight": np.ones((1, 3)), "lin.bias": np.zeros(1)})
    assert result.missing_keys == [] and result.unexpected_keys == []


def test_load_state_dict_reports_missing_and_unexpected_keys_when_not_strict():
    m = lt.nn.Linear(2, 2)
    result = m.load_state_dict(collections.OrderedDict(weight=np.zeros((2, 2)), extra=np.zeros(1)), strict=False)
    assert result.missing_keys == ["bias"] and result.unexpected_keys == ["extra"]


def test_module_to_takes_device_and_dtype_forms():
    m = lt.nn.Linear(2, 2)
    assert m.to("cpu", lt.float64) is m and m.weight.dtype == lt.float64
    assert m.to(dtype=lt.float32, non_blocking=True).weight.dtype == lt.float32
    assert m.cpu() is m


def test_init_functions_draw_from_a_given_generator():
    draws = [lt.nn.init.kaiming_uniform_(lt.empty(4, 3), generator=lt.Generator().manual_seed(5)) for _ in range(2)]
    assert lt.equal(*draws)
    fills = [lt.empty(6).normal_(generator=lt.Generator().manual_seed(2)) for _ in range(2)]
    assert lt.equal(*fills)
