"""The Metal backend: unavailable off Apple silicon with a reason, and the same output as the CPU for
the ops it accepts. Here through a metalcompute stand-in that runs its kernels as single-precision C;
on a Mac, bench/device_check_metal.py runs these tests on the GPU (LAZYTENSOR_TEST_METAL=real)."""
import os
import subprocess
import sys

import numpy as np
import pytest

import fake_metalcompute
import lazytensor as lt
from lazytensor.kernels.gpu import c_emulation

REAL = os.environ.get("LAZYTENSOR_TEST_METAL") == "real"
pytestmark = pytest.mark.skipif(not REAL and c_emulation.compiler() is None,
                                reason="the Metal stand-in needs a C compiler")


def _module():
    if REAL:
        import metalcompute
        return metalcompute
    return fake_metalcompute
PROGRAM = ("import lazytensor as lt\nlt.manual_seed(1)\nx = lt.rand(300, 300)\n"
           "print((x.exp() - x.mean(0)).sum(1).numpy().tobytes().hex())\n")


def _metal(offload="always"):
    assert lt.set_device("metal", module=_module(), offload=offload) == "metal"
    fake_metalcompute.launches.clear()


@pytest.mark.skipif(sys.platform == "darwin", reason="on a Mac Metal may well be available")
def test_metal_reports_itself_unavailable_here_with_the_reason():
    entry = next(e for e in lt.devices() if e["name"] == "metal")
    assert entry["available"] is False and entry["reason"] == "Metal needs macOS on Apple silicon"


@pytest.mark.skipif(sys.platform == "darwin", reason="on a Mac Metal may well be available")
def test_forcing_metal_prints_one_notice_and_gives_the_cpu_output():
    def run(device):
        env = dict(os.environ, LAZYTENSOR_DEVICE=device)
        return subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env,
                              timeout=120)
    cpu, metal = run("cpu"), run("metal")
    assert metal.returncode == 0, metal.stderr
    assert metal.stdout == cpu.stdout
    assert metal.stderr.splitlines() == ["lazytensor: device 'metal' is not available (Metal needs macOS on Apple "
                                         "silicon); running on the CPU instead"]


def _both(program, *arrays):
    lt.set_device("cpu")
    cpu = [t.numpy().copy() for t in program(*[lt.tensor(a) for a in arrays])]
    _metal()
    dev = [t.numpy().copy() for t in program(*[lt.tensor(a) for a in arrays])]
    return cpu, dev


def test_float32_copies_arithmetic_and_comparisons_give_the_cpu_bytes(rng):
    a, b = rng.random((40, 30)).astype(np.float32), rng.random((40, 30)).astype(np.float32)
    program = lambda x, y: [x + y, x * 0.5 - y, x / (y + 1), x - y[:, :1], lt.maximum(x, y), x > y,
                            lt.where(x > y, x, -1.0), x.T.contiguous(), x[::-1, 2:9], lt.cat([x, y], 1),
                            x.amax(1), x.argmin(0), x.sqrt(), (x * 30).to(lt.int32)]
    cpu, dev = _both(program, a, b)
    for c, d in zip(cpu, dev):
        assert c.tobytes() == d.tobytes()
    assert REAL or len(fake_metalcompute.launches) >= len(cpu)


def test_float32_sums_are_compensated_to_kahans_bound(rng):
    a = rng.standard_normal((64, 5000)).astype(np.float32)
    cpu, dev = _both(lambda x: [x.sum(1), x.mean(1), x.var(1)], a)
    eps, magnitude = np.finfo(np.float32).eps, np.abs(a.astype(np.float64)).sum(1)
    # Kahan summation: |error| <= 2 eps sum|x| (plus the final rounding), against the float64 fold
    np.testing.assert_array_less(np.abs(dev[0] - cpu[0]), 2 * eps * magnitude + np.abs(cpu[0]) * eps)
    np.testing.assert_array_less(np.abs(dev[1] - cpu[1]), (2 * eps * magnitude + np.abs(cpu[0]) * eps) / 5000)
    np.testing.assert_allclose(dev[2], cpu[2], rtol=4 * eps)
    assert REAL or "reduce_sum" in fake_metalcompute.launches


def test_index_copies_and_seeded_uniform_and_integer_fills_give_the_cpu_bytes(rng):
    table = rng.random((50, 8)).astype(np.float32)
    idx = rng.integers(0, 50, 200)

    def program(t, i):
        lt.manual_seed(5)
        return [t.index_select(0, i), lt.rand(3000), lt.randint(0, 9, (700,)),
                t.gather(1, (i[:50] % 8).reshape(50, 1))]
    cpu, dev = _both(program, table, idx)
    for c, d in zip(cpu, dev):
        assert c.tobytes() == d.tobytes()


@pytest.mark.skipif(REAL, reason="counts launches through the stand-in")
def test_float64_and_ops_defined_in_float64_stay_on_the_cpu(rng):
    _metal()
    a64 = lt.tensor(rng.random(1000))
    (a64 + 1).numpy()
    a32 = lt.tensor(rng.random(1000).astype(np.float32))
    a32.exp().numpy()
    lt.randn(100).numpy()
    assert fake_metalcompute.launches == []


@pytest.mark.skipif(REAL, reason="counts launches through the stand-in")
def test_the_metal_policy_offers_no_reduction_at_any_size(rng):
    _metal(offload="policy")
    big = lt.tensor(rng.random((2048, 1024)).astype(np.float32))
    for t in (big.sum(1), big.mean(0), big.amax(1), big.var(1), big.argmax(1)):
        t.numpy()
    assert fake_metalcompute.launches == []


@pytest.mark.skipif(REAL, reason="counts launches through the stand-in")
def test_metal_takes_products_from_the_seed_threshold(rng):
    _metal(offload="policy")
    a = lt.tensor(rng.random((128, 128)).astype(np.float32))
    (a @ a).numpy()  # 128^3 = 2097152 multiply-adds: under 4194304
    assert fake_metalcompute.launches == []
    b = lt.tensor(rng.random((256, 256)).astype(np.float32))
    got = (b @ b).numpy()
    assert fake_metalcompute.launches == ["matmul"]
    want = b.numpy().astype(np.float64) @ b.numpy().astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.skipif(REAL, reason="counts launches through the stand-in")
def test_small_work_stays_on_the_cpu_under_the_metal_policy(rng):
    _metal(offload="policy")
    small = lt.tensor(rng.random((64, 64)).astype(np.float32))
    (small - small[:, :1]).numpy()
    assert fake_metalcompute.launches == []
    big = lt.tensor(rng.random((1024, 512)).astype(np.float32))
    (big - big[:, :1]).numpy()
    assert fake_metalcompute.launches == ["ew"]


def test_fused_elementwise_chains_run_as_one_metal_kernel_with_the_cpu_bytes(rng):
    a = rng.random((128, 128)).astype(np.float32)
    b = rng.random((128, 1)).astype(np.float32)
    program = lambda x, y: [lt.where(x > y, (x - y) * 0.5 + 2.0, -x / 3.0)]  # noqa: E731
    cpu, dev = _both(program, a, b)
    assert cpu[0].tobytes() == dev[0].tobytes()
    assert REAL or fake_metalcompute.launches == ["fused"]


@pytest.mark.skipif(REAL, reason="counts launches through the stand-in")
def test_a_fused_chain_metal_declines_runs_fused_on_the_cpu(rng):
    _metal(offload="policy")
    x = lt.tensor(rng.random((128, 128)).astype(np.float32))
    with lt.profile() as p:
        lt.realize(((x * 2.0 + 1.0).exp() - 3.0))
    assert fake_metalcompute.launches == []
    assert [k.op.split("(")[0] for k in p.kernels] == ["fused"]


def test_a_training_step_runs_with_metal_active_and_matches_the_cpu_loss():
    from lazytensor_train.data import CharDataset, default_corpus
    from lazytensor_train.train import TrainConfig, build, train_step
    data = CharDataset(default_corpus())
    losses = {}
    for where in ("cpu", "metal"):
        _metal() if where == "metal" else lt.set_device("cpu")
        lt.manual_seed(0)
        model, opt, _ = build(TrainConfig(steps=10), data)  # moves the model "to" the active device
        params = list(model.parameters())
        x, y = data.batch("train", 16, 64)
        losses[where] = [train_step(model, opt, params, x, y, 1.0).item() for _ in range(2)]
    assert lt.memory_budget() is None  # nothing stays resident on Metal
    np.testing.assert_allclose(losses["metal"], losses["cpu"], rtol=1e-4)
