"""Column sums kept beside their value: a fused group storing a value others read also folds the float sum
over all its axes but the last (a bias's gradient, `sum(dy, (0, 1))`) as it stores each block of rows,
while the block is in cache (runtime/fusion.py `_take_kept_sums`, kernels/cpu/fused.py). The folds are
the sum's own (kernels/cpu/column_sums.py), so the bytes are those of the sum run as its own kernel
(tested against kept sums turned off)."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.runtime import fusion


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Fusion runs on the host chain (numba first); these tests run there whatever LAZYTENSOR_DEVICE says."""
    lt.set_device("cpu")


class _Mlp(lt.nn.Module):
    """A transformer's MLP with its residual and layer norm: GELU's gradient feeds fc1's bias sum, the
    layer norm's gradient the residual's, and products read both."""

    def __init__(self, c, rng):
        super().__init__()
        self.ln, self.fc, self.proj = lt.nn.LayerNorm(c), lt.nn.Linear(c, 4 * c), lt.nn.Linear(4 * c, c)
        for layer in (self.fc, self.proj):
            layer.load_state_dict({"weight": lt.tensor(rng.normal(size=layer.weight.shape).astype(np.float32) * 0.1),
                                   "bias": lt.tensor(rng.normal(size=layer.bias.shape).astype(np.float32))})

    def forward(self, x):
        return x + self.proj(F.gelu(self.fc(self.ln(x))))


def _run(kept, monkeypatch, threads=1, shape=(8, 48, 64)):
    """Forward and backward of two MLP blocks; (values and every gradient, kernel labels)."""
    monkeypatch.setattr(fusion, "KEPT_SUMS", kept)
    before = lt.get_num_threads()
    lt.set_num_threads(threads)
    try:
        rng = np.random.default_rng(0)
        blocks = [_Mlp(shape[-1], rng) for _ in range(2)]
        x = lt.tensor(rng.normal(size=shape).astype(np.float32), requires_grad=True)
        g = lt.tensor(rng.normal(size=shape).astype(np.float32))
        with lt.profile() as p:
            y = blocks[1](blocks[0](x))
            (y * g).sum().backward()
            grads = [x.grad] + [w.grad for b in blocks for w in b.parameters()]
            values = [t.numpy() for t in lt.realize(y, *grads)]
    finally:
        lt.set_num_threads(before)
    return values, [kernel.op for kernel in p.kernels]


def test_a_bias_gradient_is_folded_by_the_kernel_that_stores_its_operand(monkeypatch):
    _, labels = _run(True, monkeypatch)
    _, unfused = _run(False, monkeypatch)
    gelu_grad = [label for label in labels if "erf" in label and "exp" in label]
    assert gelu_grad and all(label.endswith("+sum)") for label in gelu_grad)
    assert labels.count("sum") < unfused.count("sum")


def test_kept_sums_give_the_bytes_of_the_sums_run_apart(monkeypatch):
    got, _ = _run(True, monkeypatch)
    want, _ = _run(False, monkeypatch)
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_kept_sums_in_pieces_on_two_threads_give_the_bytes_of_the_sums_run_apart(monkeypatch):
    got, _ = _run(True, monkeypatch, threads=2, shape=(16, 64, 64))
    want, _ = _run(False, monkeypatch, threads=2, shape=(16, 64, 64))
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_sums_over_more_rows_than_one_partial_take_the_reference_s_blocked_order(monkeypatch):
    """8192 rows: the reference folds strided partials there; the kept folds follow them."""
    got, _ = _run(True, monkeypatch, shape=(4, 2048, 32))
    want, _ = _run(False, monkeypatch, shape=(4, 2048, 32))
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_a_compiled_step_replays_its_kept_sums_with_the_eager_bytes(monkeypatch):
    monkeypatch.setattr(fusion, "KEPT_SUMS", True)

    def train(step_fn, steps=5):
        lt.manual_seed(0)
        rng = np.random.default_rng(1)
        block = _Mlp(64, rng)
        opt = lt.optim.AdamW(block.parameters(), lr=1e-3)
        losses = []
        for _ in range(steps):
            x = lt.tensor(rng.normal(size=(8, 48, 64)).astype(np.float32))
            losses.append(step_fn(block, opt, x).item())
        return losses, [w.numpy().tobytes() for w in block.parameters()]

    def step(block, opt, x):
        opt.zero_grad()
        loss = (block(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    assert train(lt.jit(step)) == train(step)
