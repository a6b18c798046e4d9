"""The CUDA backend against the CPU: bit-identity for the contract's op classes, documented tolerances
for matmul and transcendentals, byte-identical fills, deterministic scatter-adds, and what a training
step moves. By default on the emulated driver (the kernels of kernels/gpu/ compiled as C and run on
the CPU, so lowering, residency and numerics are checked without a GPU); bench/device_check.py runs
the same tests on a GPU with LAZYTENSOR_TEST_CUDA_DRIVER=cuda-bindings."""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor import nn
from lazytensor_train.data import CharDataset, default_corpus
from lazytensor_train.train import TrainConfig, build, train_step


def _on(device_start, program, *arrays):
    """Run `program` on the CPU and on the device; returns both results as NumPy arrays."""
    lt.set_device("cpu")
    cpu = [r.numpy().copy() for r in program(*[lt.tensor(a) for a in arrays])]
    device_start()
    dev = [r.numpy().copy() for r in program(*[lt.tensor(a) for a in arrays])]
    return cpu, dev


def _same_bytes(cpu, dev):
    for c, d in zip(cpu, dev):
        assert c.dtype == d.dtype and c.shape == d.shape
        assert c.tobytes() == d.tobytes(), np.argwhere(c.view(np.uint8) != d.view(np.uint8))[:5]


BIT_IDENTICAL_PROGRAMS = {
    "arithmetic": lambda a, b: [a + b, a - b, a * b, a / (b + 3), -a, abs(a), a.square(), a.sqrt()],
    "broadcast": lambda a, b: [a - b[:, :1], a * b[0], lt.maximum(a, b[:, :1]), lt.minimum(a, 0.25)],
    "python scalars": lambda a, b: [a * 0.5 + 1.25, 3.0 - a, a / 7],
    "comparisons and where": lambda a, b: [a > b, a <= 0.5, lt.where(a > b, a, b), a.masked_fill(a > 0.9, -1.0)],
    "casts": lambda a, b: [(a * 100).to(lt.int32), (a > 0.5).to(lt.float32), (a * 10).to(lt.int64) + 3],
    "reductions": lambda a, b: [a.sum(0), a.sum(1), a.mean(), a.var(1), a.std(0), a.amax(1), a.amin(0),
                                a.argmax(1), a.argmin(0), a.sum((0, 1), keepdim=True)],
    "movement": lambda a, b: [a.T.contiguous(), a[::-2, 1:5], a.reshape(-1), lt.cat([a, b], 0),
                              a.unsqueeze(0).expand(3, *a.shape), a.tril(), a.triu(1)],
    "relu and sign": lambda a, b: [(a - 0.5).relu(), (a - 0.5).sign(), (a * 4).floor(), (a * 4).ceil()],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(BIT_IDENTICAL_PROGRAMS))
def test_bit_identical_ops_give_the_cpu_bytes(cuda_device, rng, name, dtype):
    a = rng.random((7, 9)).astype(dtype)
    b = rng.random((7, 9)).astype(dtype)
    cpu, dev = _on(cuda_device, BIT_IDENTICAL_PROGRAMS[name], a, b)
    _same_bytes(cpu, dev)


def test_kernels_ran_on_the_device_not_the_cpu(cuda_device, rng):
    device = cuda_device()
    a = lt.tensor(rng.random((64, 64)).astype(np.float32))
    y = ((a * 2 + 1).sum(0) - a.mean()).exp()
    lt.realize(y)
    assert y.residency is lt.Residency.DEVICE and y.device == "cuda"
    assert device.driver.kind == os.environ.get("LAZYTENSOR_TEST_CUDA_DRIVER", "emulated")


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=25)
@given(rows=st.integers(1, 4500), cols=st.integers(1, 40), axis=st.sampled_from([0, 1, None]),
       dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 2 ** 16))
def test_long_float_sums_means_and_variances_give_the_cpu_bytes(cuda_device, rows, cols, axis, dtype, seed):
    """Folds over many elements load them in chunks (kernels/gpu/reduce.py): the same order, the same bits
    (float64 values of many magnitudes, so that another order would round otherwise)."""
    r = np.random.default_rng(seed)
    a = (r.standard_normal((rows, cols)) * 10.0 ** r.uniform(-8, 8, (rows, cols))).astype(dtype)
    a[:, 0] = -0.0  # a column of negative zeros sums to +0.0

    def program(x):
        return [x.sum(axis), x.mean(axis), x.var(axis) if a.size > 1 else x + 0, (x * x).sum(axis)]
    _same_bytes(*_on(cuda_device, program, a))


def test_a_bias_gradient_sum_over_batch_and_time_gives_the_cpu_bytes(cuda_device, rng):
    a = rng.standard_normal((32, 128, 96)).astype(np.float32)
    _same_bytes(*_on(cuda_device, lambda x: [x.sum((0, 1)), x.mean((0, 1)), x.sum((0, 1), keepdim=True)], a))


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the fixture only starts a device
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       axes=st.sets(st.integers(0, 3), max_size=3), seed=st.integers(0, 2 ** 16))
def test_random_shapes_reduce_and_broadcast_bit_identically(cuda_device, shape, axes, seed):
    axes = tuple(sorted(a for a in axes if a < len(shape))) or None
    r = np.random.default_rng(seed)
    a = r.standard_normal(shape).astype(np.float32)
    b = r.standard_normal(shape[-1:]).astype(np.float32)

    def program(x, y):
        return [(x * y - 0.5).sum(axes), x.var(axes) if a.size > 1 else x + 0, (x - y).amax(axes),
                x.permute(*reversed(range(len(shape)))).contiguous()]
    cpu, dev = _on(cuda_device, program, a, b)
    _same_bytes(cpu, dev)
    lt.set_device("cpu")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transcendentals_differ_by_at_most_one_float32_unit(cuda_device, rng, dtype):
    a = (rng.standard_normal(20000) * 3).astype(dtype)
    program = lambda x: [x.exp(), (x.abs() + 0.1).log(), x.tanh(), x.sin(), x.cos(), x.erf(), x.sigmoid(),
                         (x / 4).tanh().atan()]
    cpu, dev = _on(cuda_device, program, a)
    for c, d in zip(cpu, dev):
        if dtype == np.float32:
            ulps = np.abs(c.view(np.int32).astype(np.int64) - d.view(np.int32).astype(np.int64))
            assert ulps.max() <= 1
        else:
            np.testing.assert_allclose(d, c, rtol=1e-15, atol=1e-300)  # the seed measured 2e-16..1e-15


def test_gelu_differs_by_erfs_one_unit_carried_through_one_plus_erf(cuda_device, rng):
    """GELU is 0.5 x (1 + erf(x / sqrt 2)): erf may differ by one unit (<= 2^-24 absolute), which 1 + erf
    keeps as an absolute difference, so outputs differ by at most |x| 2^-24 beyond two units of their own
    rounding (many relative units for x below about -2, where the output is small)."""
    a = (rng.standard_normal(20000) * 3).astype(np.float32)
    (cpu,), (dev,) = _on(cuda_device, lambda x: [lt.nn.functional.gelu(x)], a)
    bound = np.abs(a.astype(np.float64)) * 2.0 ** -24 + 2 * np.spacing(np.abs(dev))
    assert np.all(np.abs(cpu.astype(np.float64) - dev) <= bound)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_family_runs_as_one_kernel_each_within_units_of_the_reference(cuda_device, rng, dtype):
    from lazytensor.kernels.reference import KERNELS
    device = cuda_device()
    x = (rng.standard_normal((6, 300, 40)) * 4).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    eps = np.finfo(dtype).eps
    for op, axis in (("softmax", 2), ("log_softmax", 1)):
        attrs = {"axis": axis, "dtype": np.dtype(dtype)}
        t = lt.tensor(x, requires_grad=True)
        y = getattr(t, op)(axis)
        y.backward(lt.tensor(g))
        with lt.profile() as p:
            lt.realize(y, t.grad)
        assert sorted(k.op for k in p.kernels) == sorted([op, op + "_grad"])
        assert {k.backend for k in p.kernels} == {device.name}
        want = KERNELS[op](attrs, x)
        np.testing.assert_allclose(y.numpy(), want, rtol=4 * eps, atol=4 * eps)
        want_g = KERNELS[op + "_grad"](attrs, y.numpy(), g)
        scale = np.abs(g).sum(axis=axis, keepdims=True) + np.abs(g)
        assert np.all(np.abs(t.grad.numpy() - want_g) <= 4 * eps * scale)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layer_norm_and_its_gradient_run_as_one_kernel_each_with_the_reference_bytes(cuda_device, rng, dtype):
    from lazytensor.kernels.reference import KERNELS
    device = cuda_device()
    x0 = (rng.standard_normal((6, 50, 40)) * 3 + 2).astype(dtype)
    g0 = rng.standard_normal(x0.shape).astype(dtype)
    x = lt.tensor(x0, requires_grad=True)
    y = nn.functional.layer_norm(x, (50, 40))
    y.backward(lt.tensor(g0))
    with lt.profile() as p:
        lt.realize(y, x.grad)
    assert [(k.op, k.backend) for k in p.kernels] == [("layer_norm", device.name), ("layer_norm_grad", device.name)]
    attrs = {"axes": (1, 2), "eps": 1e-5, "dtype": np.dtype(dtype)}
    assert y.numpy().tobytes() == KERNELS["layer_norm"](attrs, x0).tobytes()
    assert x.grad.numpy().tobytes() == KERNELS["layer_norm_grad"](attrs, x0, g0).tobytes()


def test_clip_grad_norm_total_is_one_device_kernel_with_the_cpu_bytes(cuda_device, rng):
    grads = [rng.standard_normal(s).astype(np.float32) for s in ((300, 40), (40,), (9, 9))]
    program = lambda *gs: [lt.nn.utils.clip_grad_norm_([_with_grad(g) for g in gs], 0.5)]
    cpu, dev = _on(cuda_device, program, *grads)
    _same_bytes(cpu, dev)


def _with_grad(g):
    p = lt.nn.Parameter(lt.zeros(g.shape))
    p.grad = g
    return p


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-5), (np.float64, 1e-13)])
def test_matmul_is_within_the_documented_tolerance(cuda_device, rng, dtype, rtol):
    cuda_device()
    a = rng.standard_normal((3, 40, 30)).astype(dtype)
    w = rng.standard_normal((30, 20)).astype(dtype)
    v = rng.standard_normal(30).astype(dtype)
    got = [(lt.tensor(a) @ lt.tensor(w)).numpy(), (lt.tensor(a[0]) @ lt.tensor(v)).numpy(),
           (lt.tensor(v) @ lt.tensor(w)).numpy()]
    exact = [a.astype(np.float64) @ w, a[0].astype(np.float64) @ v, v.astype(np.float64) @ w]
    for g, e in zip(got, exact):
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol * np.abs(e).max())


def test_seeded_fills_are_byte_identical(cuda_device):
    def program():
        lt.manual_seed(7)
        return [lt.rand(1000), lt.rand(333, dtype=lt.float64), lt.randn(257), lt.randn(64, dtype=lt.float64),
                lt.randint(-3, 11, (500,)), lt.uniform(100, low=-2.0, high=5.0)]
    lt.set_device("cpu")
    cpu = [t.numpy().copy() for t in program()]
    cuda_device()
    _same_bytes(cpu, [t.numpy().copy() for t in program()])


def test_scatter_add_of_repeated_indices_is_deterministic_and_matches_the_cpu(cuda_device, rng):
    idx = rng.integers(0, 10, 400)
    g = rng.standard_normal((400, 6)).astype(np.float32)

    def program():
        emb = lt.tensor(rng_table, requires_grad=True)
        out = emb.index_select(0, lt.tensor(idx))
        (out * lt.tensor(g)).sum().backward()
        logits = lt.tensor(g, requires_grad=True)
        logits.log_softmax(-1).gather(1, lt.tensor(idx[:, None] % 6)).sum().backward()
        return [emb.grad, logits.grad]
    rng_table = rng.standard_normal((10, 6)).astype(np.float32)
    lt.set_device("cpu")
    cpu = [t.numpy().copy() for t in program()]
    cuda_device()
    first = [t.numpy().copy() for t in program()]
    second = [t.numpy().copy() for t in program()]
    _same_bytes(cpu, first)
    _same_bytes(first, second)


def test_adamw_step_matches_the_cpu_bytes(cuda_device, rng):
    def program():
        lt.manual_seed(3)
        model = nn.Linear(16, 8)
        opt = lt.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        x = lt.tensor(rng_x)
        for _ in range(3):
            opt.zero_grad()
            ((model(x) - 0.5) ** 2).mean().backward()
            opt.step()
        return [model.weight, model.bias]
    rng_x = rng.standard_normal((32, 16)).astype(np.float32)
    lt.set_device("cpu")
    cpu = [t.numpy().copy() for t in program()]
    cuda_device()
    dev = [t.numpy().copy() for t in program()]
    # the forward matmul is inside the tolerance class, so compare to its bound, not bytes
    for c, d in zip(cpu, dev):
        np.testing.assert_allclose(d, c, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("factor_on", ["host", "device"])
def test_adamw_scaling_its_gradient_by_a_host_or_device_factor_gives_the_cpu_bytes(cuda_device, rng, factor_on):
    """The update kernel multiplies the gradient by its 0-d factor (clip_grad_norm_'s) itself: read as a
    kernel parameter when the factor is a host value, from its device block otherwise."""
    p0, g = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))

    def program():
        p = nn.Parameter(lt.tensor(p0))
        opt = lt.optim.AdamW([p], lr=1e-2, weight_decay=0.1)
        for _ in range(3):
            factor = lt.tensor(np.float32(0.37))
            if factor_on == "device":
                factor = lt.tensor(np.float32(1.0)).to(lt.get_device()) * factor  # computed there
            p.grad = lt.tensor(g) * factor
            opt.step()
        return p.numpy().copy(), opt.state[id(p)]["exp_avg_sq"].numpy().copy()
    lt.set_device("cpu")
    cpu = program()
    cuda_device()
    dev = program()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(cpu, dev))


def test_an_out_of_range_index_raises_index_error_naming_it(cuda_device):
    cuda_device()
    x = lt.zeros(5, 3)
    with pytest.raises(IndexError, match="index 7 is out of range"):
        x.index_select(0, lt.tensor([1, 7])).numpy()


def test_an_index_computed_on_the_device_is_checked_there_and_raises_at_the_read(cuda_device):
    device = cuda_device()
    x = lt.zeros(5, 3)
    index = lt.tensor([1, 2]) * lt.tensor([1, 4])  # computed on the device: no host copy to check
    picked = x.index_select(0, index)
    lt.realize(picked)
    with pytest.raises(IndexError, match="index 8 is out of range for dimension 0 with size 5"):
        picked.numpy()
    ok = x.index_select(0, lt.tensor([1, 2]) * lt.tensor([1, 2]))
    assert ok.numpy().shape == (2, 3)  # the status was cleared after reporting
    assert device.status_reads >= 2 and device.memory.stats()["status_reads"] == device.status_reads


def test_a_training_step_moves_the_batch_and_the_losses_read_and_logs_every_other_copy(cuda_device):
    data = CharDataset(default_corpus())
    cuda_device(offload="policy", memory="1GiB")
    lt.manual_seed(0)
    model, opt, _ = build(TrainConfig(steps=10), data)
    params = list(model.parameters())
    for _ in range(2):
        x, y = data.batch("train", 16, 64)
        train_step(model, opt, params, x.to("cuda"), y.to("cuda"), 1.0)
    for _ in range(2):
        lt.clear_transfer_log()
        x, y = data.batch("train", 16, 64)
        loss = train_step(model, opt, params, x.to("cuda"), y.to("cuda"), 1.0)
        loss.item()
        log = lt.transfer_log()
        values = [(r.direction, r.reason, r.nbytes) for r in log if r.op not in ("scatter_take", "status")]
        assert values == [("h2d", "to-device", 16 * 64 * 8), ("h2d", "to-device", 16 * 64 * 8),
                          ("d2h", "host-read:item", 4)]
        # Every other byte the driver moved is logged too: the groupings the embedding gradient's
        # scatters read (made on the host from the batch's indices), and one read of the status word
        # the index kernels report bad indices in.
        rest = [(r.direction, r.reason) for r in log if r.op in ("scatter_take", "status")]
        assert set(rest) == {("h2d", "index-grouping"), ("d2h", "status-read")}
        assert rest.count(("d2h", "status-read")) == 1
    assert all(p.residency in (lt.Residency.DEVICE, lt.Residency.BOTH) for p in params)


def test_eviction_under_a_small_budget_keeps_every_value(cuda_device, rng):
    cuda_device(budget="64KiB")
    arrays = [rng.random((64, 64)).astype(np.float32) for _ in range(8)]
    outs = [(lt.tensor(a) * 2).exp() for a in arrays]
    lt.realize(*outs)
    assert lt.residency_stats()["evictions"] > 0
    for a, o in zip(arrays, outs):
        lt.set_device("cpu")
        ref = (lt.tensor(a) * 2).exp().numpy()
        np.testing.assert_array_equal(o.numpy(), ref)


def test_fused_elementwise_chains_run_as_one_kernel_with_the_cpu_bytes(cuda_device, rng):
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 1)).astype(np.float32)

    def program(x, y):
        scale = x.mean()  # a 0-d value computed on the device: read by the fused kernel from device memory
        chain = lt.where(x > y, (x - y) * 0.5 + scale, -x / 3.0)
        return [chain, (chain * chain + 1.0).sqrt()]
    cpu, dev = _on(cuda_device, program, a, b)
    _same_bytes(cpu, dev)
    x, y = lt.tensor(a), lt.tensor(b)
    lt.realize(x, y)
    with lt.profile() as p:
        lt.realize(*program(x, y))
    # mean, then the two fused chains: where(...) and sqrt(chain*chain+1)
    assert p.stats["kernels_by_backend"] == {"cuda": 3}
    assert sorted(k.op.split("(")[0] for k in p.kernels) == ["fused", "fused", "mean"]


def _fake_binding(monkeypatch, binding):
    """Install the stand-in for `binding` (see below); returns the fake module."""
    import sys
    import types
    from lazytensor.kernels.cuda import nvrtc
    from lazytensor.runtime import devices
    import fake_cuda_driver
    import fake_pycuda
    if not nvrtc.available():
        pytest.skip("NVRTC is not installed here")
    if binding == "cuda-bindings":
        fake = fake_cuda_driver
        package = types.ModuleType("cuda.bindings")
        package.driver = fake
        modules = {"cuda": types.ModuleType("cuda"), "cuda.bindings": package, "cuda.bindings.driver": fake}
    else:
        fake = fake_pycuda
        package = types.ModuleType("pycuda")
        package.driver = fake
        modules = {"pycuda": package, "pycuda.driver": fake}
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(devices, "ctypes", types.SimpleNamespace(CDLL=lambda name: None))  # "libcuda loads"
    return fake


@pytest.mark.parametrize("binding", ["cuda-bindings", "pycuda"])
def test_the_driver_bindings_marshal_calls_and_arguments_correctly(monkeypatch, rng, binding):
    """Through stand-ins for cuda.bindings.driver and pycuda.driver (tests/fake_cuda_driver.py,
    tests/fake_pycuda.py): real NVRTC cubins, arguments decoded as each binding passes them, the
    kernels run as C."""
    from lazytensor.runtime import devices
    fake = _fake_binding(monkeypatch, binding)
    a = rng.standard_normal((40, 30)).astype(np.float32)
    b = rng.standard_normal((40, 30)).astype(np.float32)
    program = BIT_IDENTICAL_PROGRAMS["broadcast"]
    lt.set_device("cpu")
    cpu = [t.numpy().copy() for t in program(lt.tensor(a), lt.tensor(b))]
    assert lt.set_device("cuda", driver=binding, offload="always") == "cuda"
    device = devices.active_device()
    assert device.driver.kind == binding and device.driver.arch == "sm_90"
    assert "Fake GPU" in device.driver.description
    fake.calls.clear()
    with lt.profile():  # events around launches and copies
        dev = [t.numpy().copy() for t in program(lt.tensor(a), lt.tensor(b))]
    _same_bytes(cpu, dev)
    assert len(fake.calls) >= len(cpu)
    lt.manual_seed(1)
    fills = lt.rand(1000).numpy().copy()  # scalars: the Philox key words, low and high
    lt.set_device("cpu")
    lt.manual_seed(1)
    assert fills.tobytes() == lt.rand(1000).numpy().tobytes()


@pytest.mark.parametrize("binding", ["cuda-bindings", "pycuda"])
def test_prepared_launches_of_a_compiled_step_pass_each_binding_its_patched_arguments(monkeypatch, rng, binding):
    """A replay's launches are built once and patched (new inputs, new outputs, a scalar that changes):
    through each binding's stand-in, replays compute what the CPU computes."""
    _fake_binding(monkeypatch, binding)
    w0 = rng.standard_normal((8, 8)).astype(np.float32)
    data = [(rng.standard_normal((5, 8)).astype(np.float32), 0.1 * (i + 1)) for i in range(5)]

    def step(x, w, lr):
        h = (x @ w).tanh() * 2.0 + 1.0
        return (h * h).sum(), w - lr * (x.T @ h)

    def run():
        f, w, out = lt.jit(step), lt.tensor(w0), []
        for x, lr in data:
            loss, w = f(lt.tensor(x), w, lt.tensor(np.float32(lr)))
            out.append(loss.item())
        return out + [w.numpy().copy()], f
    lt.set_device("cpu")
    cpu, _ = run()
    assert lt.set_device("cuda", driver=binding, offload="always") == "cuda"
    lt.reset_counters()
    dev, f = run()
    assert f.stats()["replayed"] == 3 and lt.counters()["prepared_kernels"] > 0
    for a, b in zip(cpu, dev):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_profiling_times_kernels_with_events_and_waits_once_not_after_every_kernel(monkeypatch, rng):
    """The profile's kernel records carry CUDA-event times, written after the next wait (here: the end of
    the profile), so profiling does not serialize the device."""
    from lazytensor.runtime import devices
    _fake_binding(monkeypatch, "cuda-bindings")
    assert lt.set_device("cuda", driver="cuda-bindings", offload="always") == "cuda"
    driver = devices.active_device().driver
    waits = []
    wait = driver.synchronize
    monkeypatch.setattr(driver, "synchronize", lambda: (waits.append(1), wait())[1])
    a = lt.tensor(rng.standard_normal((64, 64)).astype(np.float32)).to("cuda")
    lt.realize(a)
    lt.reset_counters()
    with lt.profile() as p:
        lt.realize((a * 2).exp().sum(1), (a + 1).sum(0), (a - 1).mean())
    n = lt.counters()["kernels"]
    assert n >= 3 and len(p.kernels) == n and len(waits) == 1
    assert all(k.duration_s == 0.001 / 1e3 for k in p.kernels)  # the fake's event time, 0.001 ms


def _tiny_training(device_name):
    """A small GPT's model, optimizer, parameters and a step function on the active device."""
    from lazytensor_train.models.gpt import GPT, GPTConfig
    data = CharDataset(default_corpus())
    lt.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=data.vocab_size, block_size=16, n_layer=1, n_head=2, n_embd=16))
    model.to(device_name)
    params = list(model.parameters())
    opt = lt.optim.AdamW(params, lr=1e-3)

    def step():
        x, y = data.batch("train", 4, 16)
        return train_step(model, opt, params, x.to(device_name), y.to(device_name), 1.0).item()
    return step


@pytest.mark.parametrize("binding", ["emulated", "cuda-bindings", "pycuda"])
def test_every_copy_the_driver_makes_in_a_training_step_is_in_the_log_with_its_bytes(monkeypatch, cuda_device,
                                                                                   binding):
    from lazytensor.runtime import devices
    if binding == "emulated":
        cuda_device(offload="policy")
    else:
        _fake_binding(monkeypatch, binding)
        assert lt.set_device("cuda", driver=binding, offload="policy") == "cuda"
    driver = devices.active_device().driver
    copies = []
    upload, download = driver.upload, driver.download
    monkeypatch.setattr(driver, "upload", lambda ptr, host: (copies.append(("h2d", host.nbytes)),
                                                             upload(ptr, host))[1])
    monkeypatch.setattr(driver, "download", lambda out, ptr: (copies.append(("d2h", out.nbytes)),
                                                              download(out, ptr))[1])
    step = _tiny_training("cuda")
    step()
    step()
    copies.clear()
    lt.clear_transfer_log()
    step()
    logged = [(r.direction, r.nbytes) for r in lt.transfer_log()]
    assert len(logged) >= 3  # the batch up (twice), the loss down, and the bookkeeping copies
    assert sorted(logged) == sorted(copies)


def test_a_profiled_training_step_on_the_emulated_driver_waits_only_at_its_host_read(monkeypatch, cuda_device):
    from lazytensor.runtime import devices
    cuda_device(offload="policy")
    driver = devices.active_device().driver
    waits = []
    wait = driver.synchronize
    monkeypatch.setattr(driver, "synchronize", lambda: (waits.append(1), wait())[1])
    step = _tiny_training("cuda")
    step()
    waits.clear()
    lt.reset_counters()
    with lt.profile() as p:
        step()
    reads = lt.counters()["host_reads_by_trigger"]
    assert reads.get("item") == 1 and len(waits) <= sum(reads.values())  # the batch's data read and the loss
    assert len(p.kernels) == lt.counters()["kernels"] > 50
    assert all(k.duration_s >= 0 for k in p.kernels)


def test_the_emulated_driver_leaves_no_temporary_folder_behind(tmp_path):
    import subprocess
    import sys
    from lazytensor.kernels.gpu import c_emulation
    if c_emulation.compiler() is None:
        pytest.skip("the emulated CUDA driver needs a C compiler (cc)")
    code = ("import lazytensor as lt\n"
            "from lazytensor.kernels.gpu import c_emulation\n"
            "lt.set_device('cuda', driver='emulated', offload='always')\n"
            "print(float((lt.ones(64) * 3).sum()), c_emulation._dir)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    value, folder = done.stdout.split()
    assert float(value) == 192.0 and folder.startswith("/") and not os.path.exists(folder), done.stderr
