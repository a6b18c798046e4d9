"""Learning-rate schedulers as PyTorch programs use them: every group's lr (and the momentum OneCycleLR
cycles) after each step against PyTorch's, the composite schedulers, ReduceLROnPlateau fed a loss, and
`step(epoch)` where programs pass one. PyTorch is the oracle (skipped without it)."""
import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")
S_LT, S_T = lt.optim.lr_scheduler, torch.optim.lr_scheduler


def _optimizers(kind="sgd"):
    def groups(lib):
        return [{"params": [lib.ones(2, requires_grad=True)]},
                {"params": [lib.ones(2, requires_grad=True)], "lr": 0.3}]
    if kind == "adam":
        return lt.optim.AdamW(groups(lt), lr=0.1), torch.optim.AdamW(groups(torch), lr=0.1)
    return (lt.optim.SGD(groups(lt), lr=0.1, momentum=0.9), torch.optim.SGD(groups(torch), lr=0.1, momentum=0.9))


def _group_values(opt):
    return [(g["lr"], g.get("momentum"), g.get("betas")) for g in opt.param_groups]


def _same_course(make, steps=14, kind="sgd", metrics=None):
    """The schedulers `make(S, opt)` builds for both libraries, stepped together; every group's lr and
    momentum after each step agree."""
    opt_lt, opt_t = _optimizers(kind)
    s_lt, s_t = make(S_LT, opt_lt), make(S_T, opt_t)
    for i in range(steps):
        assert np.allclose(s_lt.get_last_lr(), s_t.get_last_lr(), rtol=1e-12, atol=1e-15), i
        ours, theirs = _group_values(opt_lt), _group_values(opt_t)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a[0], b[0], rtol=1e-12, atol=1e-15, err_msg=f"lr at step {i}")
            assert (a[1] is None) == (b[1] is None) and (a[1] is None or abs(a[1] - b[1]) < 1e-12), i
            assert a[2] is None or np.allclose(a[2], b[2], rtol=1e-12), i
        opt_t.step()  # PyTorch warns if its scheduler steps before its optimizer
        if metrics is None:
            s_lt.step()
            s_t.step()
        else:
            s_lt.step(metrics[i])
            s_t.step(metrics[i])


SCHEDULERS = {
    "LinearLR": lambda S, o: S.LinearLR(o, start_factor=0.25, end_factor=0.9, total_iters=6),
    "ConstantLR": lambda S, o: S.ConstantLR(o, factor=0.5, total_iters=4),
    "MultiStepLR": lambda S, o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5),
    "ExponentialLR": lambda S, o: S.ExponentialLR(o, gamma=0.8),
    "PolynomialLR": lambda S, o: S.PolynomialLR(o, total_iters=8, power=2.0),
    "MultiplicativeLR": lambda S, o: S.MultiplicativeLR(o, lambda e: 0.95),
    "CosineAnnealingLR past T_max": lambda S, o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.01),
    "CosineAnnealingWarmRestarts": lambda S, o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2, eta_min=0.001),
    "OneCycleLR cos": lambda S, o: S.OneCycleLR(o, max_lr=[1.0, 2.0], total_steps=14),
    "OneCycleLR linear three-phase": lambda S, o: S.OneCycleLR(o, max_lr=1.0, epochs=2, steps_per_epoch=7,
                                                                anneal_strategy="linear", three_phase=True),
    "SequentialLR": lambda S, o: S.SequentialLR(o, [S.LinearLR(o, start_factor=0.1, total_iters=4),
                                                    S.ExponentialLR(o, gamma=0.9)], milestones=[4]),
    "ChainedScheduler": lambda S, o: S.ChainedScheduler([S.ConstantLR(o, factor=0.1, total_iters=3),
                                                         S.ExponentialLR(o, gamma=0.9)]),
    "StepLR": lambda S, o: S.StepLR(o, step_size=3, gamma=0.5),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_a_scheduler_gives_pytorchs_learning_rates_step_by_step(name):
    _same_course(SCHEDULERS[name])


def test_one_cycle_cycles_adams_beta1_as_pytorch():
    _same_course(lambda S, o: S.OneCycleLR(o, max_lr=0.5, total_steps=14, pct_start=0.25), kind="adam")


def test_reduce_on_plateau_follows_the_loss_as_pytorch():
    losses = [1.0, 0.9, 0.95, 0.96, 0.97, 0.85, 0.86, 0.86, 0.87, 0.9, 0.91, 0.92, 0.93, 0.94]
    _same_course(lambda S, o: S.ReduceLROnPlateau(o, factor=0.5, patience=1, cooldown=1, min_lr=[0.01, 0.05]),
                 metrics=losses)
    _same_course(lambda S, o: S.ReduceLROnPlateau(o, mode="max", threshold_mode="abs", threshold=0.05, patience=0),
                 metrics=[0.1 * (i % 4) for i in range(14)])


def test_reduce_on_plateau_takes_a_zero_dimensional_loss_tensor():
    opt = lt.optim.SGD([lt.ones(2, requires_grad=True)], lr=1.0)
    sched = lt.optim.lr_scheduler.ReduceLROnPlateau(opt, patience=0)
    for loss in (lt.tensor(1.0), lt.tensor(2.0)):
        sched.step(loss)
    assert sched.get_last_lr() == [0.1]


def test_warm_restarts_take_fractional_epochs_as_pytorch():
    opt_lt, opt_t = _optimizers()
    s_lt = S_LT.CosineAnnealingWarmRestarts(opt_lt, T_0=2, T_mult=2)
    s_t = S_T.CosineAnnealingWarmRestarts(opt_t, T_0=2, T_mult=2)
    for epoch in range(5):
        for i in range(4):
            s_lt.step(epoch + i / 4)
            s_t.step(epoch + i / 4)
            np.testing.assert_allclose(s_lt.get_last_lr(), s_t.get_last_lr(), rtol=1e-12)


def test_one_cycle_refuses_a_step_past_its_total_as_pytorch():
    opt, _ = _optimizers()
    sched = S_LT.OneCycleLR(opt, max_lr=1.0, total_steps=3)
    for _ in range(3):
        sched.step()
    with pytest.raises(ValueError, match="beyond total_steps=3"):
        sched.step()


def test_a_scheduler_state_dict_round_trips_without_the_optimizer():
    opt, _ = _optimizers()
    sched = S_LT.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
    for _ in range(3):
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3
    again = S_LT.MultiStepLR(_optimizers()[0], milestones=[2, 4], gamma=0.5)
    again.load_state_dict(state)
    assert again.state_dict() == state
