"""The backend contract (runtime/backends/base.py) is all a device needs: a toy device defined here, not in
the package, plugs in through lt.register_device and runs a training step end to end with residency,
the transfer log and eviction, with no edit to the runtime."""
import numpy as np
import pytest

import lazytensor as lt
from lazytensor.kernels.reference import KERNELS
from lazytensor.runtime import devices
from lazytensor.runtime.backends.base import DeviceBackend
from lazytensor.runtime.memory import DeviceMemory, PinnedPool


class ToyDevice(DeviceBackend):
    """Device memory is a dict of byte arrays keyed by block number; kernels are the NumPy reference run
    on views of them. It takes every op whose operands are all resident or that makes a new value."""

    def __init__(self, capacity=64 << 20):
        self.name = "toy"
        self.offload, self.thresholds = "always", {}
        self.capacity, self.blocks, self.next_id = capacity, {}, 0
        self.launched = []
        self.pinned_pool = PinnedPool(lambda n: np.empty(n, np.uint8))
        self.memory = DeviceMemory(self)

    def raw_alloc(self, size):
        if sum(b.size for b in self.blocks.values()) + size > self.capacity:
            raise MemoryError("toy device full")
        self.next_id += 1
        self.blocks[self.next_id] = np.empty(max(size, 1), np.uint8)
        return self.next_id

    def raw_free(self, block):
        del self.blocks[block]

    def view(self, block, shape, dtype):
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        return self.blocks[block][:count * dtype.itemsize].view(dtype).reshape(shape)

    def upload(self, block, host):
        np.copyto(self.view(block, host.shape, host.dtype), host)

    def download(self, block, out):
        np.copyto(out, self.view(block, out.shape, out.dtype))

    def mem_info(self):
        used = sum(b.size for b in self.blocks.values())
        return self.capacity - used, self.capacity

    def accepts(self, node, operands):
        return node.op in KERNELS and node.op not in ("uniform", "normal", "randint")

    def launch(self, node, args, out_block):
        self.launched.append(node.op)
        np.copyto(self.view(out_block, node.shape, node.dtype), KERNELS[node.op](node.attrs, *args))


@pytest.fixture
def toy():
    made = []

    def open_toy(**options):
        made.append(ToyDevice(**options))
        return made[-1], "a device defined in a test"

    lt.register_device("toy", open_toy)
    yield made
    devices.unregister("toy")
    lt.set_device("cpu")


def _step(device):
    lt.manual_seed(0)
    w1 = lt.randn(8, 16, requires_grad=True)
    w2 = lt.randn(16, 3, requires_grad=True)
    x = lt.tensor(np.linspace(-1, 1, 40, dtype=np.float32).reshape(5, 8))
    y = lt.tensor([0, 2, 1, 1, 0])
    if device is not None:
        for t in (w1, w2, x):
            t.to(device)
    loss = lt.nn.functional.cross_entropy((x @ w1).relu() @ w2, y)
    loss.backward()
    return loss, w1, w2


def test_a_registered_device_is_listed_and_selectable_by_name_and_environment(toy, monkeypatch):
    assert "toy" in [d["name"] for d in lt.devices()]
    assert lt.set_device("toy") == "toy"
    assert isinstance(toy[-1], ToyDevice)
    monkeypatch.setenv("LAZYTENSOR_DEVICE", "toy")
    lt.set_device("cpu")
    assert devices.select() == "toy"  # what the first kernel of a process does


def test_a_toy_device_runs_a_training_step_with_the_reference_results(toy):
    lt.set_device("cpu")
    want = [t.numpy() for t in (lambda r: (r[0], r[1].grad, r[2].grad))(_step(None))]
    lt.set_device("toy")
    lt.clear_transfer_log()
    loss, w1, w2 = _step("toy")
    assert loss.residency == lt.Residency.PENDING
    lt.realize(loss, w1.grad, w2.grad)
    assert w1.grad.device == "toy" and w1.grad.residency == lt.Residency.DEVICE
    got = [loss.numpy(), w1.grad.numpy(), w2.grad.numpy()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    log = lt.transfer_log()
    assert {r.device for r in log} == {"toy"}
    assert {r.direction for r in log} == {"h2d", "d2h"}
    assert "matmul" in toy[-1].launched


def test_a_toy_device_spills_to_the_host_under_a_tiny_budget_and_loses_nothing(toy):
    lt.set_device("toy")
    lt.set_memory_budget(4096)
    values = [lt.full((256,), float(i)) + 1.0 for i in range(8)]  # 1 KiB each: some must be evicted
    lt.realize(*values)
    assert lt.residency_stats()["evictions"] > 0
    assert [v.numpy()[0] for v in values] == [float(i) + 1.0 for i in range(8)]


def test_a_tensor_moves_to_a_registered_device_by_name(toy):
    lt.set_device("toy")
    t = lt.tensor([1.0, 2.0]).to("toy")
    assert t.device == "toy" and t.residency == lt.Residency.BOTH
