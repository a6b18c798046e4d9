"""The training steps the compiled-step tests run eagerly and compiled (a tiny attention model, AdamW with a
schedule, dropout), the devices they run on, and how their results are compared."""

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor import nn
from test_random_graphs import BINARY, UNARY

V, T, B, C = 17, 8, 4, 16


class TinyAttention(nn.Module):
    """Attention written by hand, as PyTorch users write it: tril mask, masked_fill, softmax, dropout."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, C)
        self.qkv = nn.Linear(C, 3 * C)
        self.ln = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.drop = nn.Dropout(0.2)
        self.register_buffer("mask", lt.tril(lt.ones(T, T)).reshape(1, T, T))

    def forward(self, idx):
        x = self.emb(idx)
        q, k, v = self.qkv(self.ln(x)).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / C ** 0.5)
        att = att.masked_fill(self.mask[:, :idx.shape[1], :idx.shape[1]] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        return self.head(x + att @ v)


def _setup(seed=0):
    lt.manual_seed(seed)
    model = TinyAttention()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = lt.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                         lr=3e-3)
    sched = lt.optim.lr_scheduler.CosineAnnealingLR(opt, 20)

    def step(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, V), y.view(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        opt.step()
        return loss
    return model, opt, sched, step


def _batches(n, seed=1, batch=B, block=T):
    rs = np.random.default_rng(seed)
    return [(rs.integers(0, V, (batch, block)), rs.integers(0, V, (batch, block))) for _ in range(n)]


def _train(compiled, steps=8, batches=None, read_every=1):
    model, opt, sched, step = _setup()
    fn = lt.jit(step) if compiled else step
    losses = []
    for i, (x, y) in enumerate(batches or _batches(steps)):
        loss = fn(lt.tensor(x), lt.tensor(y))
        sched.step()
        if i % read_every == 0:
            losses.append(loss.item())
    state = opt.state_dict()["state"]
    return {"losses": losses, "params": [p.numpy().copy() for p in model.parameters()],
            "moments": [state[i][k].numpy().copy() for i in state for k in ("exp_avg", "exp_avg_sq")],
            "steps": [state[i]["step"] for i in state], "rng": lt.get_rng_state(),
            "grads": [p.grad.numpy().copy() for p in model.parameters()], "fn": fn}


@pytest.fixture(params=["suite device", "virtual device", "emulated CUDA"])
def where(request, virtual, cuda_device):
    if request.param == "virtual device":
        virtual()
    elif request.param == "emulated CUDA":
        cuda_device(offload="always")
    return request.param


def _same(eager, compiled):
    assert compiled["losses"] == eager["losses"]
    for key in ("params", "moments", "grads"):
        assert all(np.array_equal(a, b) for a, b in zip(eager[key], compiled[key])), key
    assert compiled["steps"] == eager["steps"] and compiled["rng"] == eager["rng"]


def _classification_step(model, opt):
    """One training step as users write it: zero the grads, the cross-entropy loss, backward, the
    optimizer's step; returns the loss."""
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return step


def _classifier_steps(compiled, make_opt, steps, make_sched=None):
    """`steps` steps of a small classifier (Linear, ReLU, Linear, cross entropy) trained by the optimizer
    `make_opt(parameters)` builds, eager or compiled: the losses, the final parameters, and the kernels
    of the last step."""
    lt.manual_seed(5)
    model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 3))
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched is not None else None
    step = _classification_step(model, opt)
    fn = lt.jit(step) if compiled else step
    rs = np.random.default_rng(0)
    out = []
    for _ in range(steps):
        lt.reset_counters()
        out.append(fn(lt.tensor(rs.standard_normal((16, 8)).astype(np.float32)),
                      lt.tensor(rs.integers(0, 3, 16))).item())
        if sched is not None:
            sched.step()
    return out, [p.numpy() for p in model.parameters()], lt.counters()["kernels"]


def _program_fn(steps):
    """test_random_graphs' program as a function of its input tensors, returning every value it made
    (views among them: `.mT` of a square operand)."""
    def fn(*inputs):
        pool = list(inputs)
        for step in steps:
            t = pool[-1]
            if step[0] == "unary":
                pool.append(UNARY[step[1]][0](t))
            elif step[0] == "binary":
                pool.append(BINARY[step[1]][0](t, pool[step[2] % len(pool)]))
            elif t.ndim and not (step[1] == "amax" and t.shape[step[2] % t.ndim] == 0):
                pool.append(getattr(lt, step[1])(t, dim=step[2] % t.ndim, keepdim=True))
        return tuple(pool[len(inputs):])
    return fn
