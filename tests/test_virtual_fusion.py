"""The virtual device runs fused elementwise groups as a CUDA device does: one kernel, only the group's
result in its memory, with the bits of the reference's kernels one node at a time; a group its budget
cannot hold at once runs member by member on the device, not on the host."""
import numpy as np

import lazytensor as lt
import lazytensor.nn.functional as F

SHAPE = (64, 1024)   # 256 KiB of float32
MIB = (512, 512)     # 1 MiB of float32


def _data(shape, seed):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _gelu_on_the_device():
    """GELU of a device-resident value: (its bytes, the kernels that ran, the device's peak while it ran)."""
    memory = lt.runtime.devices.active_device().memory
    x = lt.tensor(_data(SHAPE, 0)).to("virtual")
    x.realize()
    with lt.profile() as p, memory.watch_peak() as peak:
        y = F.gelu(x).realize()
    return y.numpy().tobytes(), [(k.op, k.backend) for k in p.kernels], peak[0]


def _fused_then_unfused(virtual, monkeypatch):
    virtual(offload="always")
    fused = _gelu_on_the_device()
    monkeypatch.setenv("LAZYTENSOR_FUSE", "0")
    virtual(offload="always")
    return fused, _gelu_on_the_device()


def test_a_fused_group_on_the_virtual_device_is_one_kernel_with_the_unfused_bytes(virtual, monkeypatch):
    (fused, kernels, _), (unfused, one_by_one, _) = _fused_then_unfused(virtual, monkeypatch)
    assert kernels == [("fused(mul+mul+erf+add+mul)", "virtual")]
    assert len(one_by_one) == 5
    assert fused == unfused


def test_a_fused_groups_members_take_no_device_memory(virtual, monkeypatch):
    (_, _, fused_peak), (_, _, unfused_peak) = _fused_then_unfused(virtual, monkeypatch)
    one = np.zeros(SHAPE, np.float32).nbytes
    assert fused_peak == 2 * one  # its input and its result
    assert unfused_peak > 2 * one


def test_a_group_its_budget_cannot_hold_at_once_runs_member_by_member_on_the_device(virtual):
    device = virtual(offload="always", budget="3.5MiB")  # a*b+c reads three MiB and makes one; a*b reads two
    a, b, c = (lt.tensor(_data(MIB, seed)) for seed in (1, 2, 3))
    with lt.profile() as p:
        y = (a * b + c).realize()
    assert [(k.op, k.backend) for k in p.kernels] == [("mul", "virtual"), ("add", "virtual")]
    assert device.memory.stats()["memory_fallbacks"] == 0
    want = _data(MIB, 1) * _data(MIB, 2) + _data(MIB, 3)
    assert y.numpy().tobytes() == want.tobytes()
