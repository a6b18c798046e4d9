"""The modeled device timeline (runtime/device_model.py): each profiled kernel's work, its modeled time
on a named device profile (launch latency plus the longer of bytes over bandwidth and flops over rate),
copies at the host link's rate, host kernels as measured, and the errors a user can act on."""
import dataclasses

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.runtime import device_model

H200 = device_model.PROFILES["h200"]


def _f32(rng, *shape):
    return lt.tensor(rng.standard_normal(shape).astype(np.float32))


def test_a_product_record_carries_its_operands_bytes_its_result_bytes_and_2mnk_flops(virtual, rng):
    virtual(offload="always")
    a, b = _f32(rng, 64, 96), _f32(rng, 96, 32)
    with lt.profile() as p:
        (a @ b).realize()
    (k,) = [k for k in p.kernels if k.op == "matmul"]
    assert (k.read_bytes, k.written_bytes, k.flops) == ((64 * 96 + 96 * 32) * 4, 64 * 32 * 4, 2 * 64 * 32 * 96)


def test_a_fused_group_reads_each_external_operand_once_and_counts_an_op_per_member(rng):
    lt.set_device("cpu")
    x = _f32(rng, 100_000)  # large enough for the CPU to fuse it
    with lt.profile() as p:
        ((x * x + x) * 3.0).realize()
    (k,) = p.kernels
    assert k.op == "fused(mul+add+mul)" and k.backend == "numba"
    assert 400_000 <= k.read_bytes <= 400_004 and k.written_bytes == 400_000  # x once (and the 3.0)
    assert k.flops == 300_000


def test_a_kernels_modeled_time_is_its_launch_plus_the_longer_of_memory_and_compute():
    big_copy = 64 * 2**20
    seconds, bound = device_model.kernel_seconds(H200, "add", big_copy, big_copy, 2**24)
    assert bound == "memory" and seconds == pytest.approx(H200.launch_s + 2 * big_copy / H200.memory_bytes_per_s)
    flops = 2 * 4096**3
    seconds, bound = device_model.kernel_seconds(H200, "matmul", 3 * 4096**2 * 4, 4096**2 * 4, flops)
    assert bound == "compute" and seconds == pytest.approx(H200.launch_s + flops / H200.product_flops_per_s)
    seconds, bound = device_model.kernel_seconds(H200, "relu", 16, 16, 4)
    assert bound == "launch" and seconds == pytest.approx(H200.launch_s + 32 / H200.memory_bytes_per_s)


def test_a_profiles_modeled_timeline_adds_its_device_kernels_and_copies_at_the_links_rate(virtual, rng):
    virtual(offload="always")
    a, b = rng.standard_normal((128, 256)).astype(np.float32), rng.standard_normal((256, 64)).astype(np.float32)
    with lt.profile(model="h200") as p:
        (lt.tensor(a) @ lt.tensor(b)).relu().sum().item()
    t = p.modeled("h200")
    kernels = sum(device_model.kernel_seconds(H200, k.op, k.read_bytes, k.written_bytes, k.flops)[0]
                  for k in p.kernels)
    copies = sum(device_model.copy_seconds(H200, r.nbytes) for r in p.transfers)
    assert t.device_kernels == len(p.kernels) == 3 and t.copies == 3  # two uploads, the sum read back
    assert t.copy_bytes == a.nbytes + b.nbytes + 4
    assert t.total_s == pytest.approx(kernels + copies) and t.host_kernel_s == 0
    assert p.stats["modeled"]["total_s"] == pytest.approx(t.total_s)


def test_a_slower_device_profile_models_the_same_block_as_slower(virtual, rng):
    virtual(offload="always")
    with lt.profile() as p:
        (_f32(rng, 512, 512) @ _f32(rng, 512, 512)).exp().realize()
    assert p.modeled("rtx4060").total_s > 2 * p.modeled("h200").total_s


def test_kernels_that_ran_on_the_host_are_counted_as_measured_not_modeled(rng):
    lt.set_device("cpu")
    with lt.profile(model="h200") as p:
        (_f32(rng, 64, 64) @ _f32(rng, 64, 64)).realize()
    t = p.modeled("h200")
    assert t.device_kernels == 0 and t.host_kernels == len(p.kernels) >= 1
    assert t.host_kernel_s == pytest.approx(sum(k.duration_s for k in p.kernels))


def test_a_compiled_steps_replayed_kernels_carry_their_work(virtual, rng):
    virtual(offload="always")
    w = lt.tensor(rng.standard_normal((32, 32)).astype(np.float32), requires_grad=True)

    @lt.jit
    def step(x):
        loss = ((x @ w).tanh() ** 2).mean()
        loss.backward()
        with lt.no_grad():
            w.sub_(0.1 * w.grad)
        w.grad = None
        return loss

    for _ in range(3):
        step(_f32(rng, 16, 32)).item()
    with lt.profile() as p:
        step(_f32(rng, 16, 32)).item()
    assert p.kernels and all(k.read_bytes > 0 and k.written_bytes > 0 for k in p.kernels if k.op != "full")


def test_the_summary_shows_the_modeled_timeline_and_says_it_is_a_model(virtual, rng, capsys):
    virtual(offload="always")
    with lt.profile(model="rtx4060") as p:
        (_f32(rng, 8, 8) + 1).realize()
    text = p.summary()
    assert "modeled on rtx4060" in text and "a model, not a measurement" in text


def test_an_unknown_device_profile_is_refused_at_the_profile_call_with_the_known_names():
    with pytest.raises(ValueError, match="no device profile named 'a100'; known: h200, rtx4060"):
        lt.profile(model="a100")
    assert set(lt.device_profiles()) == {"h200", "rtx4060"}


def test_a_model_needs_kernel_records():
    with pytest.raises(ValueError, match="kernel records"):
        lt.profile(kernels=False, model="h200")
    with lt.profile(kernels=False) as p:
        pass
    with pytest.raises(ValueError, match="kernels=True"):
        p.modeled("h200")


def test_a_cuda_kernel_timed_by_device_events_keeps_its_work_in_the_record(cuda_device, rng):
    cuda_device(offload="always")
    a, b = _f32(rng, 16, 24), _f32(rng, 24, 8)
    with lt.profile() as p:
        (a @ b).realize()
    (k,) = [k for k in p.kernels if k.op == "matmul"]
    assert k.backend == "cuda" and k.flops == 2 * 16 * 8 * 24 and k.written_bytes == 16 * 8 * 4


def test_a_block_whose_device_peak_exceeds_the_profiles_memory_says_so(virtual, rng):
    virtual(memory="64MB", offload="always")
    with lt.profile() as p:
        (_f32(rng, 1024, 1024) + 1).realize()  # 8 MB at its peak
    small = dataclasses.replace(H200, name="tiny-card", memory_bytes=2**20)
    assert any("more than tiny-card's 1,048,576 B" in line for line in p.modeled(small).lines())
    assert not any("more than" in line for line in p.modeled("h200").lines())
