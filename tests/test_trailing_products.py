"""Trailing products: the batched products that read a row group's matrices (attention's `P @ v`;
`dS @ k`, `q^T @ dS` and `P^T @ dy` in its backward) computed inside that group's kernel after each
matrix's rows, while the matrix is in cache (runtime/fusion.py, kernels/cpu/fused_rows.py). One kernel
makes several values: each is bound to its node, recorded in its own slot by a capture, and handed out
by replays. Each product is the call the batched product makes for that matrix, so the bytes are those
of the products run apart (tested against trailing products turned off)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor.runtime import fusion
from lazytensor.runtime.replay import repeats

SHAPE = (2, 3, 48, 16)


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """Row groups run on the host chain (numba first); these tests run there whatever LAZYTENSOR_DEVICE says."""
    lt.set_device("cpu")


def _heads(qkv, n_head):
    """q, k, v split from one (B, T, 3C) projection into heads, as nanoGPT writes it."""
    b, t, c3 = qkv.shape
    c = c3 // 3
    return [x.view(b, t, n_head, c // n_head).transpose(1, 2) for x in qkv.split(c, dim=2)]


def _causal_attention(q, k, v):
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.shape[-1]))
    att = att.masked_fill(lt.tril(lt.ones(t, t)).view(1, 1, t, t) == 0, float("-inf"))
    return F.softmax(att, dim=-1) @ v


def _block(qkv, n_head=3):
    """Hand-written attention on a q/k/v projection, heads merged back: nanoGPT's forward."""
    b, t, c3 = qkv.shape
    return _causal_attention(*_heads(qkv, n_head)).transpose(1, 2).contiguous().view(b, t, c3 // 3)


def _run(trailing, monkeypatch, threads=1, seed=0):
    """Forward and backward of `_block` in one host realization each; (values, kernel labels)."""
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", trailing)
    before = lt.get_num_threads()
    lt.set_num_threads(threads)
    try:
        rng = np.random.default_rng(seed)
        qkv = lt.tensor(rng.normal(size=(4, 48, 3 * 48)).astype(np.float32), requires_grad=True)
        g = lt.tensor(rng.normal(size=(4, 48, 48)).astype(np.float32))
        with lt.profile() as p:
            y = _block(qkv)
            (y * g).sum().backward()
            values = [t.numpy() for t in lt.realize(y, qkv.grad)]
    finally:
        lt.set_num_threads(before)
    return values, [kernel.op for kernel in p.kernels]


def test_attention_products_run_inside_the_row_kernels_that_make_their_operands(monkeypatch):
    _, labels = _run(True, monkeypatch)
    assert "fused(matmul+mul+where+softmax+matmul)" in labels                    # P @ v
    assert "fused(matmul+softmax_grad+where+mul+matmul+matmul+matmul)" in labels  # dS @ k, q^T @ dS, P^T @ dy
    assert "matmul" not in labels


def test_trailing_products_give_the_bytes_of_the_products_run_apart(monkeypatch):
    got, _ = _run(True, monkeypatch)
    want, labels = _run(False, monkeypatch)
    assert labels.count("matmul") == 4
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_trailing_products_in_pieces_on_two_threads_give_the_bytes_of_the_products_run_apart(monkeypatch):
    got, labels = _run(True, monkeypatch, threads=2)
    want, _ = _run(False, monkeypatch, threads=2)
    assert "matmul" not in labels
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_a_product_also_read_by_the_user_is_handed_out_with_its_value(monkeypatch):
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", True)
    rng = np.random.default_rng(3)
    q, k, v = (lt.tensor(rng.normal(size=SHAPE).astype(np.float32)) for _ in range(3))
    y = _causal_attention(q, k, v)
    twice = y * 2
    with lt.profile() as p:
        got_y, got_twice = (t.numpy() for t in lt.realize(y, twice))
    assert "matmul" not in [kernel.op for kernel in p.kernels]
    assert got_twice.tobytes() == (got_y * np.float32(2)).tobytes()


def test_a_product_of_an_operand_made_after_the_softmax_keeps_its_own_kernel(monkeypatch):
    """`P @ (v * 2)`: the order makes v * 2 after P's kernel and it is not a view to make earlier."""
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", True)
    rng = np.random.default_rng(4)
    q, k, v = (lt.tensor(rng.normal(size=SHAPE).astype(np.float32)) for _ in range(3))
    with lt.profile() as p:
        got = _causal_attention(q, k, v * 2).numpy()
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", False)
    want = _causal_attention(q, k, v * 2).numpy()
    assert "matmul" in [kernel.op for kernel in p.kernels]
    assert got.tobytes() == want.tobytes()


def _training_step(block, opt, x, g):
    opt.zero_grad()
    loss = (block(x) * g).sum()
    loss.backward()
    opt.step()
    return loss


class _Attention(lt.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.qkv = lt.nn.Linear(c, 3 * c)

    def forward(self, x):
        return _block(self.qkv(x))


def _train(compiled, monkeypatch, steps=5, profile_last=False):
    """A compiled (or eager) training step of an attention layer, `steps` times; the losses and the
    weights after, and whether a trailing-product kernel ran."""
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", True)
    lt.manual_seed(0)
    model = _Attention(48)
    opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
    step = lt.jit(_training_step) if compiled else _training_step
    rng = np.random.default_rng(6)
    losses, labels = [], []
    for n in range(steps):
        x = lt.tensor(rng.normal(size=(4, 48, 48)).astype(np.float32))
        g = lt.tensor(rng.normal(size=(4, 48, 48)).astype(np.float32))
        if profile_last and n == steps - 1:
            with lt.profile() as p:
                losses.append(step(model, opt, x, g).item())
            labels = [kernel.op for kernel in p.kernels]
        else:
            losses.append(step(model, opt, x, g).item())
    return losses, [w.numpy().copy() for w in model.parameters()], labels


def test_a_compiled_step_replays_its_trailing_products_with_the_eager_bytes(monkeypatch):
    """Five steps: captured, then replayed by the host runner, as a loop and as one generated function."""
    want_losses, want_weights, _ = _train(False, monkeypatch)
    got_losses, got_weights, _ = _train(True, monkeypatch)
    assert got_losses == want_losses
    for g, w in zip(got_weights, want_weights):
        assert g.tobytes() == w.tobytes()


def test_a_profiled_replay_runs_trailing_products_through_the_executors_with_the_eager_bytes(monkeypatch):
    want_losses, want_weights, _ = _train(False, monkeypatch, steps=4)
    got_losses, got_weights, labels = _train(True, monkeypatch, steps=4, profile_last=True)
    assert any(label.endswith("+matmul)") for label in labels)
    assert got_losses == want_losses
    for g, w in zip(got_weights, want_weights):
        assert g.tobytes() == w.tobytes()


def test_a_repeated_eager_step_replays_its_trailing_products_with_the_bytes_of_one_that_never_replays(monkeypatch):
    monkeypatch.setenv("LAZYTENSOR_REPLAY", "0")
    want_losses, want_weights, _ = _train(False, monkeypatch, steps=6)
    monkeypatch.setenv("LAZYTENSOR_REPLAY", "1")
    lt.reset_counters()
    got_losses, got_weights, _ = _train(False, monkeypatch, steps=6)
    assert lt.counters()["replayed_realizations"] >= 2
    assert got_losses == want_losses
    for g, w in zip(got_weights, want_weights):
        assert g.tobytes() == w.tobytes()


def test_a_replayed_realization_hands_out_a_trailing_product_the_user_holds(monkeypatch):
    """`y = P @ v` asked for with a value read from it: from the third sighting the realization is replayed,
    and y comes back with its value (reading it runs no kernel)."""
    monkeypatch.setattr(fusion, "TRAILING_PRODUCTS", True)
    monkeypatch.setenv("LAZYTENSOR_REPLAY", "1")
    monkeypatch.setattr(repeats, "MIN_NODES", 1)
    repeats.clear()
    rng = np.random.default_rng(7)
    lt.reset_counters()
    for _ in range(4):
        q, k, v = (lt.tensor(rng.normal(size=SHAPE).astype(np.float32)) for _ in range(3))
        y = _causal_attention(q, k, v)
        total = (y * 2).sum()
        total.item()
        with lt.profile() as p:
            got = y.numpy()
        assert p.kernels == []
        assert got.tobytes() == _causal_attention(q, k, v).numpy().tobytes()
    assert lt.counters()["replayed_realizations"] >= 1


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([(2, 3, 48, 16), (1, 2, 64, 32), (3, 1, 40, 8), (2, 2, 33, 24)]),
       st.lists(st.sampled_from(["P @ v", "P^T @ g", "P @ w", "(P @ v) * 2"]), min_size=1, max_size=3, unique=True),
       st.booleans(), st.sampled_from([1, 2]), st.integers(0, 10_000))
def test_random_products_after_an_attention_softmax_give_the_bytes_of_the_products_run_apart(
        shape, readers, backward, threads, seed):
    """Products reading P (or its transpose) in several combinations, forward or with the backward pass
    (which makes dS and its products), on one or two threads: the values and gradients are the bytes of
    the products run as their own kernels."""
    def run(trailing):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(fusion, "TRAILING_PRODUCTS", trailing)
            before = lt.get_num_threads()
            lt.set_num_threads(threads)
            try:
                rng = np.random.default_rng(seed)
                b, h, t, d = shape
                q, k, v, w = (lt.tensor(rng.normal(size=(b, h, t, d)).astype(np.float32), requires_grad=backward)
                              for _ in range(4))
                g = lt.tensor(rng.normal(size=(b, h, t, t)).astype(np.float32))
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
                att = att.masked_fill(lt.tril(lt.ones(t, t)).view(1, 1, t, t) == 0, float("-inf"))
                p = F.softmax(att, dim=-1)
                made = {"P @ v": lambda: p @ v, "P^T @ g": lambda: p.transpose(-2, -1) @ g,
                        "P @ w": lambda: p @ w, "(P @ v) * 2": lambda: (p @ v) * 2}
                outs = [made[name]() for name in readers]
                if backward:
                    sum((o * o).sum() for o in outs).backward()
                    outs += [x.grad for x in (q, k, v, w) if x.grad is not None]
                return [o.numpy() for o in lt.realize(*outs)]
            finally:
                lt.set_num_threads(before)
    got, want = run(True), run(False)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
