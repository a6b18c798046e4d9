"""Convolution and pooling (`im2col` + a product or a reduction, `col2im` for the gradient): values and
gradients against PyTorch where it is installed, against a direct NumPy loop for random shapes
(Hypothesis), the modules, and errors that name the problem."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.kernels.cpu import window as compiled
from lazytensor.kernels.reference import window as reference


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _check(torch, fn_lt, fn_torch, *arrays, rtol=1e-9):
    ours = [lt.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = fn_lt(*ours), fn_torch(*theirs)
    w = np.random.default_rng(1).uniform(0.5, 1.5, tuple(ref.shape))
    (out * lt.tensor(w)).sum().backward()
    (ref * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=1e-12)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=1e-12)


R = np.random.default_rng(0)
CONV2D = [  # (input shape, weight shape, kwargs)
    ((2, 3, 9, 8), (4, 3, 3, 3), {}),
    ((2, 3, 9, 8), (4, 3, 3, 2), dict(stride=2, padding=1)),
    ((1, 4, 10, 10), (6, 2, 3, 3), dict(groups=2, dilation=2, padding=(2, 1))),
    ((2, 2, 7, 7), (3, 2, 5, 5), dict(padding="same")),
    ((3, 6, 6), (2, 3, 1, 1), dict(stride=(1, 2))),  # unbatched input
]


@pytest.mark.parametrize("shapes", CONV2D, ids=range(len(CONV2D)))
def test_conv2d_matches_pytorch_in_value_and_gradient(torch, shapes):
    xs, ws, kw = shapes
    if len(xs) == 3:
        kw = dict(kw)
        ws = (ws[0], xs[0], *ws[2:])
    x, w, b = R.standard_normal(xs), R.standard_normal(ws), R.standard_normal(ws[0])
    _check(torch, lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: torch.nn.functional.conv2d(x, w, b, **kw),
           x, w, b)


@pytest.mark.parametrize("kw", [{}, dict(stride=2, padding=2, dilation=2), dict(groups=3, padding="same")])
def test_conv1d_matches_pytorch_in_value_and_gradient(torch, kw):
    x, w = R.standard_normal((2, 3, 11)), R.standard_normal((6, 3 // kw.get("groups", 1), 3))
    _check(torch, lambda x, w: F.conv1d(x, w, **kw), lambda x, w: torch.nn.functional.conv1d(x, w, **kw), x, w)


POOLS = {
    "max_pool2d 2": (lambda F, x: F.max_pool2d(x, 2)),
    "max_pool2d 3 s2 p1": (lambda F, x: F.max_pool2d(x, 3, stride=2, padding=1)),
    "max_pool2d dilation": (lambda F, x: F.max_pool2d(x, 2, stride=1, dilation=2)),
    "avg_pool2d 2": (lambda F, x: F.avg_pool2d(x, 2)),
    "avg_pool2d 3 s1 p1": (lambda F, x: F.avg_pool2d(x, 3, stride=1, padding=1)),
    "adaptive_avg_pool2d 1": (lambda F, x: F.adaptive_avg_pool2d(x, 1)),
    "adaptive_avg_pool2d uneven": (lambda F, x: F.adaptive_avg_pool2d(x, (3, 4))),
    "adaptive_max_pool2d uneven": (lambda F, x: F.adaptive_max_pool2d(x, (4, 3))),
    "max_pool1d": (lambda F, x: F.max_pool1d(x.flatten(2), 3, stride=2)),
    "avg_pool1d": (lambda F, x: F.avg_pool1d(x.flatten(2), 4)),
    "adaptive_avg_pool1d": (lambda F, x: F.adaptive_avg_pool1d(x.flatten(2), 5)),
}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_pooling_matches_pytorch_in_value_and_gradient(torch, name):
    x = R.standard_normal((2, 3, 7, 9))
    _check(torch, lambda x: POOLS[name](F, x), lambda x: POOLS[name](torch.nn.functional, x), x)


def test_max_pool_gives_a_tied_window_gradient_to_its_first_maximum_as_pytorch(torch):
    x = np.zeros((1, 1, 4, 4))
    _check(torch, lambda x: F.max_pool2d(x, 2), lambda x: torch.nn.functional.max_pool2d(x, 2), x)


def _direct_conv2d(x, w, stride, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    N, C, H, W = xp.shape
    O, _, kh, kw = w.shape
    Ho, Wo = (H - kh) // stride + 1, (W - kw) // stride + 1
    out = np.zeros((N, O, Ho, Wo))
    for i in range(Ho):
        for j in range(Wo):
            patch = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
    return out


@given(n=st.integers(1, 2), c=st.integers(1, 3), o=st.integers(1, 3), h=st.integers(3, 8), w=st.integers(3, 8),
       k=st.integers(1, 3), stride=st.integers(1, 3), pad=st.integers(0, 2))
def test_conv2d_of_random_shapes_is_the_direct_sum(n, c, o, h, w, k, stride, pad):
    rs = np.random.default_rng(n * 1000 + h * 10 + w)
    x, wt = rs.standard_normal((n, c, h, w)), rs.standard_normal((o, c, k, k))
    got = F.conv2d(lt.tensor(x), lt.tensor(wt), stride=stride, padding=pad).numpy()
    np.testing.assert_allclose(got, _direct_conv2d(x, wt, stride, pad), rtol=1e-10, atol=1e-12)


def test_conv_modules_have_pytorchs_parameters_and_init_bounds(torch):
    lt.manual_seed(0)
    ours, theirs = lt.nn.Conv2d(3, 8, 5, padding=2, bias=True), torch.nn.Conv2d(3, 8, 5, padding=2)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    bound = 1 / np.sqrt(3 * 25)
    assert float(ours.weight.abs().max()) <= bound and float(ours.bias.abs().max()) <= bound
    ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
    x = R.standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(ours(lt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)
    c1 = lt.nn.Conv1d(4, 2, 3, stride=2)
    assert c1(lt.ones(1, 4, 9)).shape == (1, 2, 4)


def test_pooling_modules_run_as_layers():
    x = lt.ones(2, 3, 8, 8)
    net = lt.nn.Sequential(lt.nn.MaxPool2d(2), lt.nn.AvgPool2d(2, stride=1), lt.nn.AdaptiveAvgPool2d((1, 1)),
                           lt.nn.Flatten())
    assert net(x).shape == (2, 3)
    assert lt.nn.MaxPool1d(2)(lt.ones(1, 2, 6)).shape == (1, 2, 3)


def test_conv_errors_name_the_problem():
    with pytest.raises(ValueError, match="3 channels.*groups=1 expects 4"):
        F.conv2d(lt.ones(1, 3, 5, 5), lt.ones(2, 4, 3, 3))
    with pytest.raises(ValueError, match="smaller than the kernel"):
        F.conv2d(lt.ones(1, 1, 2, 2), lt.ones(1, 1, 3, 3))
    with pytest.raises(ValueError, match=r"expected input \(N, C, H, W\)"):
        F.conv2d(lt.ones(5, 5), lt.ones(1, 1, 3, 3))
    with pytest.raises(NotImplementedError, match="ceil_mode"):
        F.max_pool2d(lt.ones(1, 1, 4, 4), 2, ceil_mode=True)
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(lt.ones(1, 1, 4, 4), 2, padding=2)
    with pytest.raises(NotImplementedError, match="padding_mode"):
        lt.nn.Conv2d(1, 1, 3, padding_mode="reflect")


def test_a_cnn_step_replays_under_jit():
    lt.manual_seed(0)
    net = lt.nn.Sequential(lt.nn.Conv2d(1, 4, 3), lt.nn.ReLU(), lt.nn.MaxPool2d(2), lt.nn.Flatten(),
                           lt.nn.Linear(4 * 3 * 3, 2))
    opt = lt.optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    compiled = lt.jit(step)
    x, y = lt.tensor(R.standard_normal((4, 1, 8, 8)).astype(np.float32)), lt.tensor([0, 1, 1, 0])
    losses = [compiled(x, y).item() for _ in range(4)]
    assert losses[-1] < losses[0] and compiled.stats()["replayed"] >= 1


@given(kh=st.integers(1, 3), kw=st.integers(1, 3), sh=st.integers(1, 3), sw=st.integers(1, 3),
       ph=st.integers(0, 2), pw=st.integers(0, 2), dh=st.integers(1, 2), dw=st.integers(1, 2),
       pad_value=st.sampled_from([0.0, -np.inf]), threads=st.sampled_from([None, 2]))
def test_the_compiled_window_kernels_give_the_references_bytes(kh, kw, sh, sw, ph, pw, dh, dw, pad_value, threads):
    attrs = dict(kernel=(kh, kw), stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), pad_value=pad_value)
    x = np.random.default_rng(kh * 100 + sw).standard_normal((2, 3, 9, 8)).astype(np.float32)
    pieces = (lambda n, work=1: np.array([0, n // 2, n], dtype=np.int64) if n > 1 else None) if threads else \
        (lambda n, work=1: None)
    ref = reference.im2col(attrs, x)
    assert compiled.im2col(attrs, x, ref.shape, pieces).tobytes() == ref.tobytes()
    g = np.random.default_rng(1).standard_normal(ref.shape).astype(np.float32)
    back = {**attrs, "shape": x.shape}
    assert compiled.col2im(back, g, pieces).tobytes() == reference.col2im(back, g).tobytes()


def test_conv2d_gradient_of_a_gradient_matches_pytorch(torch):
    x, w = R.standard_normal((2, 2, 6, 6)), R.standard_normal((3, 2, 3, 3))
    a, b = lt.tensor(x, requires_grad=True), lt.tensor(w, requires_grad=True)
    F.conv2d(a, b, padding=1).square().sum().backward(create_graph=True)
    penalty = (a.grad * a.grad).sum()
    a.grad = b.grad = None
    penalty.backward()
    ta, tb = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    gx, = torch.autograd.grad(torch.nn.functional.conv2d(ta, tb, padding=1).square().sum(), ta, create_graph=True)
    (gx * gx).sum().backward()
    np.testing.assert_allclose(b.grad.numpy(), tb.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-9, atol=1e-12)


@given(h=st.integers(1, 9), w=st.integers(1, 9), oh=st.integers(1, 12), ow=st.integers(1, 12),
       kind=st.sampled_from(["avg", "max"]))
def test_adaptive_pooling_to_any_size_matches_pytorch_in_value_and_gradient(h, w, oh, ow, kind):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(h * 100 + w).standard_normal((2, 3, h, w))
    name = f"adaptive_{kind}_pool2d"
    _check(torch, lambda x: getattr(F, name)(x, (oh, ow)), lambda x: getattr(torch.nn.functional, name)(x, (oh, ow)),
           x)


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_adaptive_pooling_to_a_size_that_does_not_divide_builds_a_few_nodes_not_one_per_cell(kind):
    out = getattr(F, f"adaptive_{kind}_pool2d")(lt.ones(1, 1, 4, 4), (1000, 1000))
    assert out.shape == (1, 1, 1000, 1000) and lt.graph(out).number_of_nodes() < 20
    assert float(out.sum()) == 1e6
    huge = getattr(F, f"adaptive_{kind}_pool2d")(lt.ones(1, 1, 4, 4), (10 ** 6, 10 ** 6))  # built, not run
    assert huge.shape == (1, 1, 10 ** 6, 10 ** 6) and lt.graph(huge).number_of_nodes() < 20


def test_adaptive_pooling_refuses_a_zero_output_size_naming_the_function():
    with pytest.raises(ValueError, match="adaptive_avg_pool2d: output_size must be a positive int"):
        F.adaptive_avg_pool2d(lt.ones(1, 1, 4, 4), (0, 3))


CONV_T = [  # (input shape, weight shape, kwargs)
    ((2, 4, 5, 6), (4, 3, 3, 3), {}),
    ((2, 4, 5, 6), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
    ((1, 4, 4, 4), (4, 2, 3, 3), dict(groups=2, dilation=2, stride=3, output_padding=2)),
    ((3, 5, 5), (3, 2, 2, 2), dict(stride=2)),  # unbatched
]


@pytest.mark.parametrize("shapes", CONV_T, ids=range(len(CONV_T)))
def test_conv_transpose2d_matches_pytorch_in_value_and_gradient(torch, shapes):
    xs, ws, kw = shapes
    x, w = R.standard_normal(xs), R.standard_normal(ws)
    b = R.standard_normal(ws[1] * kw.get("groups", 1))
    _check(torch, lambda x, w, b: F.conv_transpose2d(x, w, b, **kw),
           lambda x, w, b: torch.nn.functional.conv_transpose2d(x, w, b, **kw), x, w, b)


def test_conv_transpose1d_matches_pytorch_in_value_and_gradient(torch):
    x, w = R.standard_normal((2, 4, 7)), R.standard_normal((4, 3, 3))
    _check(torch, lambda x, w: F.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1),
           lambda x, w: torch.nn.functional.conv_transpose1d(x, w, stride=2, padding=1, output_padding=1), x, w)


def test_conv_transpose_modules_have_pytorchs_parameters_and_outputs(torch):
    for name, shape in (("ConvTranspose2d", (2, 4, 5, 5)), ("ConvTranspose1d", (2, 4, 9))):
        ours, theirs = getattr(lt.nn, name)(4, 6, 3, stride=2, padding=1), getattr(torch.nn, name)(4, 6, 3, stride=2,
                                                                                                      padding=1)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        bound = 1 / np.sqrt(6 * 9 if name.endswith("2d") else 6 * 3)
        assert float(ours.weight.abs().max()) <= bound
        ours.load_state_dict({k: v.detach().numpy() for k, v in theirs.state_dict().items()})
        x = R.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(ours(lt.tensor(x)).numpy(), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                                   atol=1e-5)


def test_conv_transpose_refuses_an_output_padding_as_large_as_the_stride():
    with pytest.raises(ValueError, match=r"output_padding \(2, 2\) must be smaller than the stride \(2, 2\)"):
        F.conv_transpose2d(lt.ones(1, 1, 3, 3), lt.ones(1, 1, 3, 3), stride=2, output_padding=2)


CONV3D = [  # (input shape, weight shape, bias, kwargs)
    ((2, 3, 5, 6, 7), (4, 3, 3, 3, 2), True, {}),
    ((1, 4, 6, 7, 7), (6, 2, 2, 3, 3), False, dict(groups=2, stride=(2, 1, 2), padding=(1, 1, 0), dilation=(2, 1, 1))),
    ((2, 2, 5, 5, 5), (3, 2, 3, 3, 3), True, dict(padding="same")),
    ((3, 4, 5, 6), (2, 3, 1, 2, 2), True, dict(stride=2)),  # unbatched input
]


@pytest.mark.parametrize("shapes", CONV3D, ids=range(len(CONV3D)))
def test_conv3d_matches_pytorch_in_value_and_gradient(torch, shapes):
    xs, ws, bias, kw = shapes
    arrays = [R.standard_normal(xs), R.standard_normal(ws)] + ([R.standard_normal(ws[0])] if bias else [])
    _check(torch, lambda *a: F.conv3d(*a, **kw), lambda *a: torch.nn.functional.conv3d(*a, **kw), *arrays,
           rtol=1e-7)


def test_conv3d_module_has_pytorchs_parameters_and_repr(torch):
    ours, theirs = lt.nn.Conv3d(2, 4, 3, padding=1, bias=False), torch.nn.Conv3d(2, 4, 3, padding=1, bias=False)
    assert repr(ours) == repr(theirs) and ours.weight.shape == tuple(theirs.weight.shape) and ours.bias is None
    with pytest.raises(ValueError, match="conv3d: the input's depth 2"):
        lt.nn.Conv3d(2, 4, (3, 1, 1))(lt.ones(1, 2, 2, 4, 4))


POOL3D = [  # (input shape, kwargs)
    ((2, 3, 5, 6, 7), dict(kernel_size=2)),
    ((1, 2, 7, 6, 6), dict(kernel_size=(3, 2, 3), stride=(2, 1, 2), padding=(1, 1, 0))),
    ((2, 6, 5, 5), dict(kernel_size=3, stride=1, padding=1)),  # unbatched input
]


@pytest.mark.parametrize("shapes", POOL3D, ids=range(len(POOL3D)))
def test_max_pool3d_matches_pytorch_in_value_and_gradient(torch, shapes):
    xs, kw = shapes
    _check(torch, lambda x: F.max_pool3d(x, **kw), lambda x: torch.nn.functional.max_pool3d(x, **kw),
           R.standard_normal(xs))


def test_max_pool3d_with_dilation_matches_pytorch(torch):
    kw = dict(kernel_size=2, stride=1, dilation=(2, 1, 2))
    _check(torch, lambda x: F.max_pool3d(x, **kw), lambda x: torch.nn.functional.max_pool3d(x, **kw),
           R.standard_normal((1, 2, 6, 5, 6)))


@pytest.mark.parametrize("shapes", POOL3D, ids=range(len(POOL3D)))
def test_avg_pool3d_matches_pytorch_in_value_and_gradient(torch, shapes):
    xs, kw = shapes
    _check(torch, lambda x: F.avg_pool3d(x, **kw), lambda x: torch.nn.functional.avg_pool3d(x, **kw),
           R.standard_normal(xs), rtol=1e-12)


def test_3d_pooling_modules_print_and_pool_as_pytorch(torch):
    x = R.standard_normal((1, 2, 4, 4, 4))
    for name, kw in (("MaxPool3d", dict(kernel_size=2)), ("AvgPool3d", dict(kernel_size=2, stride=1))):
        ours, theirs = getattr(lt.nn, name)(**kw), getattr(torch.nn, name)(**kw)
        np.testing.assert_allclose(ours(lt.tensor(x)).numpy(), theirs(torch.tensor(x)).numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="max_pool3d: the input's depth 1"):
        F.max_pool3d(lt.ones(1, 1, 1, 4, 4), 2)
