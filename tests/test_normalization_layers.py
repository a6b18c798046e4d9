"""BatchNorm, InstanceNorm and GroupNorm as PyTorch programs use them: outputs, input and parameter
gradients and running statistics against PyTorch over training steps, then evaluation; momentum=None;
without affine or running statistics; state dicts both ways; a jit-compiled training step updates the
running statistics as the eager one does."""
import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")
RTOL, ATOL = 2e-5, 2e-6  # float32, and a mean and variance summed in another order than PyTorch's


def _close(ours, theirs, what):
    np.testing.assert_allclose(ours.numpy() if isinstance(ours, lt.Tensor) else ours,
                               theirs.detach().numpy(), rtol=RTOL, atol=ATOL, err_msg=what)


def _twins(name, *args, **kwargs):
    ours, theirs = getattr(lt.nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    return ours, theirs


def _train_then_eval(name, shape, steps=3, **kwargs):
    ours, theirs = _twins(name, shape[1] if name != "GroupNorm" else 2, *(() if name != "GroupNorm" else (shape[1],)),
                          **kwargs)
    rng = np.random.default_rng(sum(shape))
    for step in range(steps):
        x = (rng.standard_normal(shape) * (step + 1) + step).astype(np.float32)
        w = rng.standard_normal(shape).astype(np.float32)
        xo, xt = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        yo, yt = ours(xo), theirs(xt)
        _close(yo, yt, f"output at step {step}")
        (yo * lt.tensor(w)).sum().backward()
        (yt * torch.tensor(w)).sum().backward()
        _close(xo.grad, xt.grad, f"input gradient at step {step}")
        for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
            _close(p.grad, q.grad, f"{n}'s gradient at step {step}")
            p.grad, q.grad = None, None
    for (n, b), c in zip(ours.named_buffers(), theirs.buffers()):
        _close(b.to(lt.float64) if b.dtype == lt.int64 else b, c.double() if c.dtype == torch.int64 else c, n)
    ours.eval()
    theirs.eval()
    x = rng.standard_normal(shape).astype(np.float32)
    _close(ours(lt.tensor(x)), theirs(torch.tensor(x)), "output in evaluation")


@pytest.mark.parametrize("name,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)),
                                        ("BatchNorm2d", (4, 3, 5, 6)), ("BatchNorm3d", (2, 3, 2, 3, 4))])
@pytest.mark.parametrize("kwargs", [{}, {"momentum": None}, {"affine": False}, {"track_running_stats": False},
                                    {"momentum": 0.3, "eps": 1e-3}])
def test_batch_norm_trains_and_evaluates_like_pytorch(name, shape, kwargs):
    _train_then_eval(name, shape, **kwargs)


@pytest.mark.parametrize("name,shape", [("InstanceNorm1d", (4, 3, 7)), ("InstanceNorm2d", (2, 3, 4, 5)),
                                        ("InstanceNorm3d", (2, 3, 2, 3, 4))])
@pytest.mark.parametrize("kwargs", [{}, {"affine": True}, {"affine": True, "track_running_stats": True}])
def test_instance_norm_trains_and_evaluates_like_pytorch(name, shape, kwargs):
    _train_then_eval(name, shape, **kwargs)


@pytest.mark.parametrize("shape", [(4, 12), (2, 12, 5), (2, 12, 3, 4)])  # (groups of 2 values have a ~0 gradient)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_pytorch(shape, affine):
    ours, theirs = lt.nn.GroupNorm(3, 12, affine=affine), torch.nn.GroupNorm(3, 12, affine=affine)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32) * 3 + 1
    xo, xt = lt.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    w = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    yo, yt = ours(xo), theirs(xt)
    _close(yo, yt, "output")
    (yo * lt.tensor(w)).sum().backward()  # (a sum of squares of normalized values has a gradient of ~0)
    (yt * torch.tensor(w)).sum().backward()
    _close(xo.grad, xt.grad, "input gradient")


def test_the_functional_forms_match_pytorch():
    x = np.random.default_rng(3).standard_normal((4, 3, 5)).astype(np.float32)
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    ours_m, ours_v = lt.tensor(rm), lt.tensor(rv)
    theirs_m, theirs_v = torch.tensor(rm), torch.tensor(rv)
    F, G = lt.nn.functional, torch.nn.functional
    _close(F.batch_norm(lt.tensor(x), ours_m, ours_v, training=True, momentum=0.2),
           G.batch_norm(torch.tensor(x), theirs_m, theirs_v, training=True, momentum=0.2), "batch_norm")
    _close(ours_m, theirs_m, "running mean updated in place")
    _close(F.group_norm(lt.tensor(x), 3), G.group_norm(torch.tensor(x), 3), "group_norm")
    _close(F.instance_norm(lt.tensor(x)), G.instance_norm(torch.tensor(x)), "instance_norm")


def test_a_compiled_training_step_updates_running_statistics_as_the_eager_one():
    def make():
        lt.manual_seed(0)
        model = lt.nn.Sequential(lt.nn.Linear(4, 6), lt.nn.BatchNorm1d(6), lt.nn.ReLU(), lt.nn.Linear(6, 1))
        return model, lt.optim.SGD(model.parameters(), lr=0.1)

    def step(model, opt, x):
        opt.zero_grad()
        loss = (model(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    xs = [lt.tensor(np.random.default_rng(i).standard_normal((8, 4)).astype(np.float32)) for i in range(5)]
    eager, opt_e = make()
    compiled, opt_c = make()
    jitted = lt.jit(lambda x: step(compiled, opt_c, x))
    for x in xs:
        assert step(eager, opt_e, x).item() == jitted(x).item()
    assert jitted.stats()["replayed"] >= 2
    for (n, a), b in zip(eager.state_dict().items(), compiled.state_dict().values()):
        assert a.numpy().tobytes() == b.numpy().tobytes(), n


def test_a_batch_of_one_sample_per_channel_is_refused_when_training():
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        lt.nn.BatchNorm1d(3)(lt.ones(1, 3))


def test_a_wrong_channel_count_names_the_layer():
    with pytest.raises(ValueError, match="BatchNorm2d: input has 4 channels, the layer expects 3"):
        lt.nn.BatchNorm2d(3)(lt.ones(2, 4, 3, 3))
    with pytest.raises(ValueError, match="GroupNorm: num_channels 5 must be divisible by num_groups 2"):
        lt.nn.GroupNorm(2, 5)


@pytest.mark.parametrize("layer, args", [("BatchNorm2d", (4,)), ("InstanceNorm2d", (4,)), ("GroupNorm", (2, 4))])
@pytest.mark.parametrize("kwargs", [{}, {"bias": False}, {"affine": False}])
def test_norm_layers_take_bias_false_and_print_as_pytorch(layer, args, kwargs):
    if layer == "InstanceNorm2d" and not kwargs:
        kwargs = {"affine": True}
    ours, theirs = getattr(lt.nn, layer)(*args, **kwargs), getattr(torch.nn, layer)(*args, **kwargs)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    x = np.random.default_rng(1).standard_normal((2, 4, 3, 3)).astype(np.float32)
    np.testing.assert_allclose(ours(lt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), atol=1e-5)
