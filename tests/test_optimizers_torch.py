"""Adagrad, RMSprop, Adadelta, LBFGS (with its closure), SGD's dampening and Nesterov momentum, step(closure)
and `from lt.optim.lr_scheduler import ...`: parameters after each step against PyTorch's."""
import numpy as np
import pytest

import lazytensor as lt

R = np.random.default_rng(0)
W0, X, Y = R.standard_normal((4, 3)), R.standard_normal((16, 4)), R.standard_normal((16, 3))


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _train(fw, make, steps=6, closure=False, groups=False):
    w = fw.tensor(W0.copy(), requires_grad=True)
    b = fw.tensor(np.zeros(3), requires_grad=True)
    params = [{"params": [w]}, {"params": [b], "lr": 0.05}] if groups else [w, b]
    opt = make(fw.optim, params)
    x, y = fw.tensor(X), fw.tensor(Y)
    losses = []

    def loss_and_grads():
        opt.zero_grad()
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        return loss
    for _ in range(steps):
        if closure:
            losses.append(float(opt.step(loss_and_grads)))
        else:
            losses.append(float(loss_and_grads()))
            opt.step()
    return np.array(losses), np.concatenate([w.detach().numpy().ravel(), b.detach().numpy().ravel()])


OPTIMIZERS = {
    "Adagrad": lambda o, p: o.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1),
    "RMSprop": lambda o, p: o.RMSprop(p, lr=0.01),
    "RMSprop centered momentum": lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.01),
    "Adadelta": lambda o, p: o.Adadelta(p, lr=1.0, rho=0.8, weight_decay=0.01),
    "SGD nesterov": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "SGD dampening": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01),
    "SGD maximize": lambda o, p: o.SGD(p, lr=0.01, maximize=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("groups", [False, True])
def test_optimizers_match_pytorch_step_by_step(torch, name, groups):
    ours, theirs = _train(lt, OPTIMIZERS[name], groups=groups), _train(torch, OPTIMIZERS[name], groups=groups)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kwargs", [dict(lr=0.8), dict(lr=1, max_iter=5, history_size=3)], ids=str)
def test_lbfgs_with_a_closure_matches_pytorch(torch, kwargs):
    def make(o, p):
        return o.LBFGS(p, **kwargs)
    ours, theirs = _train(lt, make, steps=3, closure=True), _train(torch, make, steps=3, closure=True)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-10)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-8, atol=1e-12)


def test_step_with_a_closure_returns_its_loss_for_every_optimizer():
    for make in (lambda o, p: o.Adam(p), lambda o, p: o.AdamW(p), lambda o, p: o.RMSprop(p)):
        losses, _ = _train(lt, make, steps=2, closure=True)
        assert np.all(np.isfinite(losses))


def test_lbfgs_refuses_strong_wolfe_and_a_missing_closure():
    w = lt.ones(2, requires_grad=True)
    with pytest.raises(NotImplementedError, match="strong_wolfe"):
        lt.optim.LBFGS([w], line_search_fn="strong_wolfe")
    with pytest.raises(ValueError, match="needs a closure"):
        lt.optim.LBFGS([w]).step(None)


def test_optimizer_state_round_trips_through_state_dict():
    w = lt.tensor(W0.copy(), requires_grad=True)
    opt = lt.optim.RMSprop([w], lr=0.01, momentum=0.9, centered=True)
    (w * w).sum().backward()
    opt.step()
    twin = lt.optim.RMSprop([lt.tensor(W0.copy(), requires_grad=True)], lr=0.01, momentum=0.9, centered=True)
    twin.load_state_dict(opt.state_dict())
    assert set(twin.state_dict()["state"][0]) == {"step", "square_avg", "momentum_buffer", "grad_avg"}


def test_lr_scheduler_imports_from_the_optim_package():
    from lazytensor.optim.lr_scheduler import StepLR
    w = lt.ones(2, requires_grad=True)
    opt = lt.optim.Adadelta([w], lr=1.0)
    sched = StepLR(opt, step_size=1, gamma=0.7)
    sched.step()
    assert opt.param_groups[0]["lr"] == pytest.approx(0.7)


def test_add_param_group_takes_the_defaults():
    a, b = lt.ones(2, requires_grad=True), lt.ones(3, requires_grad=True)
    opt = lt.optim.SGD([a], lr=0.1, momentum=0.5)
    opt.add_param_group({"params": b, "lr": 0.01})
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["lr"] == 0.01
    with pytest.raises(ValueError, match="more than one group"):
        opt.add_param_group({"params": [a]})


@pytest.mark.parametrize("name", ["AdamW", "Adam", "SGD momentum", "RMSprop"])
def test_a_pytorch_optimizers_saved_state_resumes_training_as_pytorch(torch, tmp_path, name):
    """A checkpoint written by PyTorch (its groups carry foreach/fused/capturable/differentiable and Adam's
    amsgrad/maximize/decoupled_weight_decay; its step is a float tensor) loads into lazytensor's optimizer
    through lt.load, and the steps after it are PyTorch's."""
    make = {"AdamW": lambda o, p: o.AdamW(p, lr=0.01, weight_decay=0.1),
            "Adam": lambda o, p: o.Adam(p, lr=0.01, weight_decay=0.1),
            "SGD momentum": lambda o, p: o.SGD(p, lr=0.1, momentum=0.9),
            "RMSprop": lambda o, p: o.RMSprop(p, lr=0.01, momentum=0.5)}[name]
    results = {}
    for fw in (torch, lt):
        w = fw.tensor(W0.copy(), requires_grad=True)
        opt = make(fw.optim, [w])
        if fw is torch:  # two steps, then the checkpoint
            for _ in range(2):
                opt.zero_grad()
                (fw.tensor(X) @ w).pow(2).mean().backward()
                opt.step()
            torch.save({"w": w.detach(), "optimizer": opt.state_dict()}, tmp_path / "ckpt.pt")
        else:
            checkpoint = lt.load(tmp_path / "ckpt.pt")
            with lt.no_grad():
                w.copy_(checkpoint["w"])
            opt.load_state_dict(checkpoint["optimizer"])
        for _ in range(3):
            opt.zero_grad()
            (fw.tensor(X) @ w).pow(2).mean().backward()
            opt.step()
        results[fw] = w.detach().numpy()
    np.testing.assert_allclose(results[lt], results[torch], rtol=1e-5, atol=1e-7)


def test_a_saved_group_asking_for_what_the_optimizer_does_not_compute_is_refused(torch):
    w = torch.ones(2, requires_grad=True)
    saved = torch.optim.Adam([w], amsgrad=True).state_dict()
    opt = lt.optim.Adam([lt.ones(2, requires_grad=True)])
    with pytest.raises(ValueError, match="amsgrad=True; lazytensor's Adam computes amsgrad=False"):
        opt.load_state_dict(saved)
