"""Mixed precision as PyTorch programs write it: which ops autocast runs in bfloat16 on the CPU and which
it keeps in float32 (dtypes against PyTorch's, values within bfloat16's rounding), a training loop with
autocast and a GradScaler against PyTorch's losses, the scaler's skipped steps and scale changes, and
the forms programs use (decorator, torch.cuda.amp names, a region for a device not in use)."""
import warnings

import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")
R = np.random.default_rng(0)
X = R.standard_normal((4, 8)).astype(np.float32)
IMG = R.standard_normal((2, 3, 6, 6)).astype(np.float32)


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """CPU autocast is about tensors on the CPU: these tests run there whatever device the suite uses."""
    lt.set_device("cpu")


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


OPS = {
    "linear": lambda lib, x, img: lib.nn.functional.linear(x, x[:3]),
    "matmul": lambda lib, x, img: x @ x.T,
    "conv2d": lambda lib, x, img: lib.nn.functional.conv2d(img, img[:2, :, :3, :3]),
    "softmax of a product": lambda lib, x, img: (x @ x.T).softmax(-1),
    "layer_norm of a product": lambda lib, x, img: lib.nn.functional.layer_norm(x @ x.T, (4,)),
    "mse_loss": lambda lib, x, img: lib.nn.functional.mse_loss(x @ x.T, lib.zeros(4, 4)),
    "cross_entropy": lambda lib, x, img: lib.nn.functional.cross_entropy(x @ x.T, lib.tensor([0, 1, 2, 3])),
    "elementwise": lambda lib, x, img: (x * 2).exp(),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_cpu_autocast_gives_pytorchs_dtypes_and_values_within_bfloat16(name):
    results = []
    for lib in (lt, torch):
        with lib.autocast("cpu", dtype=lib.bfloat16):
            results.append(OPS[name](lib, lib.tensor(X), lib.tensor(IMG)))
    ours, theirs = results
    assert _dtype_name(ours) == _dtype_name(theirs)
    np.testing.assert_allclose(ours.float().numpy(), theirs.float().detach().numpy(), rtol=3e-2, atol=3e-2)


def test_outside_a_region_nothing_is_cast():
    with lt.autocast("cpu"):
        pass
    assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.float32


def test_a_training_loop_with_autocast_and_a_grad_scaler_follows_pytorchs_losses():
    losses = {}
    y = R.standard_normal((4, 2)).astype(np.float32)
    theirs_model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    state = {k: v.detach().numpy() for k, v in theirs_model.state_dict().items()}
    for lib in (lt, torch):
        model = lib.nn.Sequential(lib.nn.Linear(8, 16), lib.nn.ReLU(), lib.nn.Linear(16, 2))
        model.load_state_dict(state if lib is lt else theirs_model.state_dict())
        opt = lib.optim.SGD(model.parameters(), lr=0.05)
        scaler = lib.amp.GradScaler("cpu", init_scale=1024.0)
        losses[lib.__name__] = []
        for _ in range(5):
            opt.zero_grad()
            with lib.autocast("cpu", dtype=lib.bfloat16):
                loss = lib.nn.functional.mse_loss(model(lib.tensor(X)), lib.tensor(y))
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(opt)
            scaler.update()
            losses[lib.__name__].append(loss.item())
        assert scaler.get_scale() == 1024.0
    np.testing.assert_allclose(losses["lazytensor"], losses["torch"], rtol=3e-2)


def test_the_scaler_skips_a_step_with_an_infinite_gradient_and_backs_off_as_pytorchs():
    scales, weights = [], []
    for lib in (lt, torch):
        w = lib.tensor([1.0, 2.0], requires_grad=True)
        opt = lib.optim.SGD([w], lr=0.1)
        scaler = lib.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
        seen = []
        for factor in (1.0, float("inf"), 1.0, 1.0, 1.0):
            opt.zero_grad()
            scaler.scale((w * factor).sum()).backward()
            scaler.step(opt)
            scaler.update()
            seen.append(scaler.get_scale())
        scales.append(seen)
        weights.append(w.detach().numpy().tolist())
    assert scales[0] == scales[1] == [8.0, 4.0, 4.0, 8.0, 8.0]
    assert weights[0] == weights[1]


def test_a_scaler_state_dict_round_trips():
    scaler = lt.amp.GradScaler("cpu", init_scale=64.0, growth_interval=3)
    scaler.update()
    again = lt.amp.GradScaler("cpu")
    again.load_state_dict(scaler.state_dict())
    assert again.get_scale() == 64.0 and again.state_dict() == scaler.state_dict()


def test_cuda_names_on_a_machine_without_cuda_warn_and_change_nothing():
    with pytest.warns(UserWarning, match="CUDA is not the device in use"):
        scaler = lt.cuda.amp.GradScaler()
    assert not scaler.is_enabled() and scaler.scale(lt.tensor(2.0)).item() == 2.0
    with pytest.warns(UserWarning, match="changes nothing"):
        with lt.autocast(device_type="cuda", dtype=lt.float16):
            assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.float32


def test_autocast_as_a_decorator_and_the_cpu_amp_name():
    @lt.autocast("cpu")
    def product(x):
        return x @ x.T
    assert product(lt.tensor(X)).dtype == lt.bfloat16
    with lt.cpu.amp.autocast():
        assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.bfloat16
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with lt.autocast("cpu", enabled=False):
            assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.float32


def test_cuda_autocast_runs_products_in_float16_and_keeps_softmax_norms_and_losses_in_float32(cuda_device):
    cuda_device()
    x = lt.tensor(X)
    with lt.autocast("cuda"):
        product = x @ x.T
        assert product.dtype == lt.float16 and lt.nn.functional.linear(x, x[:3]).dtype == lt.float16
        assert product.softmax(-1).dtype == lt.float32
        assert lt.nn.functional.layer_norm(product, (4,)).dtype == lt.float32
        assert lt.nn.functional.mse_loss(product, lt.zeros(4, 4)).dtype == lt.float32
    np.testing.assert_allclose(product.float().numpy(), X @ X.T, rtol=1e-2, atol=1e-2)


def test_autocast_to_float32_changes_nothing_and_on_the_cpu_warns_as_pytorch():
    """nanoGPT's `--dtype=float32` builds `autocast(device_type="cuda", dtype=float32)`: PyTorch accepts it
    (nothing is lowered); on the CPU it warns and disables the region."""
    with lt.amp.autocast(device_type="cuda", dtype=lt.float32):
        assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.float32
    with pytest.warns(UserWarning, match="In CPU autocast, but the target dtype is not supported"):
        region = lt.autocast("cpu", dtype=lt.float32)
    with region:
        assert (lt.tensor(X) @ lt.tensor(X).T).dtype == lt.float32 and not lt.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="dtype must be float16 or bfloat16"):
        lt.autocast("cpu", dtype=lt.int32)
