"""nn.Module plumbing, layers, and the optimizers against their formulas."""
import math

import numpy as np
import pytest

import lazytensor as lt
from lazytensor import nn, optim
import lazytensor.nn.functional as F


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 4)
        self.b = nn.Linear(4, 3, bias=False)
        self.b.weight = nn.Parameter(self.a.weight.mT.contiguous().detach())
        self.register_buffer("scale", lt.tensor([2.0]))

    def forward(self, x):
        return self.b(self.a(x).relu()) * self.scale


def test_parameters_buffers_and_state_dict_names():
    m = Tiny()
    assert [n for n, _ in m.named_parameters()] == ["a.weight", "a.bias", "b.weight"]
    assert list(m.state_dict()) == ["scale", "a.weight", "a.bias", "b.weight"]
    assert m.num_parameters() == 12 + 4 + 12


def test_tied_parameters_are_listed_once():
    emb = nn.Embedding(5, 3)
    head = nn.Linear(3, 5, bias=False)
    head.weight = emb.weight
    seq = nn.Sequential(emb, head)
    assert len(list(seq.parameters())) == 1


def test_load_state_dict_copies_values_and_names_mismatches():
    m, other = Tiny(), Tiny()
    other.load_state_dict(m.state_dict())
    for (_, a), (_, b) in zip(m.named_parameters(), other.named_parameters()):
        assert a.numpy().tobytes() == b.numpy().tobytes()
    with pytest.raises(KeyError, match="missing keys \\['scale'\\]"):
        other.load_state_dict({k: v for k, v in m.state_dict().items() if k != "scale"})
    bad = dict(m.state_dict())
    bad["a.bias"] = lt.zeros(7)
    with pytest.raises(ValueError, match="a.bias has shape \\(7,\\)"):
        other.load_state_dict(bad)


def test_train_and_eval_switch_dropout():
    m = nn.Sequential(nn.Dropout(0.5))
    x = lt.ones(1000)
    assert (m(x).numpy() == 0).any()
    m.eval()
    assert not m.training and m(x) is x


def test_linear_matches_numpy_and_pytorch_init_bound():
    lt.manual_seed(0)
    layer = nn.Linear(100, 7)
    w = layer.weight.numpy()
    assert w.shape == (7, 100) and np.abs(w).max() <= 0.1
    x = np.random.default_rng(0).normal(size=(5, 100)).astype(np.float32)
    np.testing.assert_allclose(layer(lt.tensor(x)).numpy(), x @ w.T + layer.bias.numpy(), rtol=1e-5, atol=1e-6)


def test_layer_norm_matches_the_formula():
    x = np.random.default_rng(1).normal(size=(4, 6))
    got = nn.LayerNorm(6)(lt.tensor(x)).numpy()
    want = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_gelu_is_the_exact_erf_form():
    x = np.linspace(-4, 4, 81)
    want = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    np.testing.assert_allclose(F.gelu(lt.tensor(x)).numpy(), want, rtol=1e-14, atol=1e-15)


def test_cross_entropy_matches_the_formula_and_ignores_rows():
    logits = np.random.default_rng(2).normal(size=(5, 4))
    target = np.array([0, 3, -1, 2, 1])
    got = F.cross_entropy(lt.tensor(logits), lt.tensor(target), ignore_index=-1).item()
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    rows = [i for i in range(5) if target[i] != -1]
    assert got == pytest.approx(-np.mean([logp[i, target[i]] for i in rows]), rel=1e-12)
    assert F.cross_entropy(lt.tensor(logits), lt.tensor(target), ignore_index=-1, reduction="none").shape == (5,)


def test_attention_is_causal():
    q = lt.randn(1, 4, 8)
    v = lt.randn(1, 4, 8)
    out = F.scaled_dot_product_attention(q, q, v, is_causal=True).numpy()
    assert np.allclose(out[0, 0], v.numpy()[0, 0], atol=1e-6)  # the first position sees only itself


def test_sgd_with_momentum_and_weight_decay_follows_pytorchs_formula():
    p = lt.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    w, buf = np.array([1.0, -2.0]), None
    for _ in range(3):
        (p * p).sum().backward()
        opt.step()
        opt.zero_grad()
        g = 2 * w + 0.01 * w
        buf = g if buf is None else 0.9 * buf + g
        w = w - 0.1 * buf
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-6)


def test_adamw_follows_pytorchs_formula():
    p = lt.tensor([0.5, -1.5, 2.0], dtype=lt.float64, requires_grad=True)
    opt = optim.AdamW([p], lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.1)
    w, m, v = np.array([0.5, -1.5, 2.0]), np.zeros(3), np.zeros(3)
    for t in range(1, 6):
        (p * p * p).sum().backward()
        opt.step()
        opt.zero_grad()
        g = 3 * w * w
        w = w * (1 - 0.01 * 0.1)
        m = 0.9 * m + 0.1 * g
        v = 0.99 * v + 0.01 * g * g
        w = w - (0.01 / (1 - 0.9 ** t)) * m / (np.sqrt(v) / math.sqrt(1 - 0.99 ** t) + 1e-8)
    np.testing.assert_allclose(p.numpy(), w, rtol=1e-14)


def test_adamw_update_is_one_fused_node_per_parameter():
    p = lt.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.AdamW([p])
    (p * 2).sum().backward()
    with lt.profile() as prof:
        opt.step()
    assert sum(k.op == "adamw" for k in prof.kernels) == 1


def test_parameter_groups_take_their_own_options():
    a, b = lt.ones(2, requires_grad=True), lt.ones(2, requires_grad=True)
    opt = optim.AdamW([{"params": [a], "weight_decay": 0.5}, {"params": [b], "lr": 0.1}], lr=0.01)
    assert [g["weight_decay"] for g in opt.param_groups] == [0.5, 0.01]
    assert [g["lr"] for g in opt.param_groups] == [0.01, 0.1]
    with pytest.raises(ValueError, match="unknown options"):
        optim.AdamW([{"params": [a], "momentum": 0.9}])
    with pytest.raises(ValueError, match="more than one group"):
        optim.SGD([{"params": [a]}, {"params": [a]}])


@pytest.mark.parametrize("make", [lambda m: optim.AdamW(m.parameters(), lr=0.1),
                                  lambda m: optim.SGD((p for p in m.parameters()), lr=0.1),
                                  lambda m: optim.AdamW([{"params": (p for p in m.parameters() if p.ndim >= 2)},
                                                         {"params": (p for p in m.parameters() if p.ndim < 2),
                                                          "weight_decay": 0.0}], lr=0.1)],
                         ids=["parameters()", "generator", "groups of generators"])
def test_optimizers_given_generators_update_every_parameter(make):
    lt.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))  # no ReLU: every gradient is nonzero
    before = {n: p.numpy().copy() for n, p in model.named_parameters()}
    opt = make(model)
    (model(lt.tensor([[1.0, -2.0, 0.5], [0.3, 0.7, -1.1]])) ** 2).sum().backward()
    opt.step()
    assert sum(len(g["params"]) for g in opt.param_groups) == len(before)
    assert all(not np.array_equal(p.numpy(), before[n]) for n, p in model.named_parameters())


def test_optimizer_state_dict_round_trip():
    p = lt.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.AdamW([p], lr=0.05)
    (p * p).sum().backward()
    opt.step()
    q = lt.tensor(p.numpy(), requires_grad=True)
    opt2 = optim.AdamW([q], lr=0.05)
    opt2.load_state_dict(opt.state_dict())
    for o, t in ((opt, p), (opt2, q)):
        o.zero_grad()
        (t * t).sum().backward()
        o.step()
    assert p.numpy().tobytes() == q.numpy().tobytes()


def test_cosine_schedule_with_warmup():
    p = lt.ones(1, requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = optim.CosineWarmupLR(opt, warmup_steps=4, total_steps=14, min_lr=0.1)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(14):
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    assert lrs[:4] == [0.25, 0.5, 0.75, 1.0]
    assert lrs[9] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 0.5)))
    assert lrs[14] == pytest.approx(0.1)


def test_clip_grad_norm_scales_to_max_norm_and_returns_the_norm():
    a, b = lt.ones(3, requires_grad=True), lt.ones(4, requires_grad=True)
    ((a * 3).sum() + (b * 4).sum()).backward()
    norm = nn.utils.clip_grad_norm_([a, b], 1.0)
    assert not norm.is_realized
    assert norm.item() == pytest.approx(math.sqrt(3 * 9 + 4 * 16))
    total = math.sqrt((a.grad * a.grad).sum().item() + (b.grad * b.grad).sum().item())
    assert total == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_clips_every_gradient_when_given_a_generator():
    a, b = lt.ones(3, requires_grad=True), lt.ones(4, requires_grad=True)
    ((a * 3).sum() + (b * 4).sum()).backward()
    norm = nn.utils.clip_grad_norm_((p for p in (a, b)), 1.0)
    assert norm.item() == pytest.approx(math.sqrt(3 * 9 + 4 * 16))
    total = math.sqrt((a.grad * a.grad).sum().item() + (b.grad * b.grad).sum().item())
    assert total == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_of_model_parameters_scales_every_parameter_gradient():
    m = Tiny()
    (m(lt.ones(2, 3)) * 100).sum().backward()
    before = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    norm = nn.utils.clip_grad_norm_(m.parameters(), 0.5).item()
    for n, p in m.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), before[n] * (0.5 / (norm + 1e-6)), rtol=1e-6)


def test_module_to_device_moves_parameters_and_buffers(virtual):
    virtual()
    m = Tiny()
    m.to("virtual")
    assert all(p.device == "virtual" for p in m.parameters()) and m.scale.device == "virtual"
    m.to("cpu")
    assert all(p.residency is lt.Residency.HOST for p in m.parameters())


def test_gpt_with_an_untied_head_has_its_own_output_matrix():
    from lazytensor_train.models import GPT, GPTConfig
    lt.manual_seed(0)
    tied = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8))
    untied = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, n_embd=8, tie_weights=False))
    assert untied.num_parameters() == tied.num_parameters() + 11 * 8
    idx = lt.tensor([[1, 2, 3], [4, 5, 6]])
    logits, loss = untied(idx, idx)
    assert logits.shape == (2, 3, 11) and loss.shape == ()
    loss.backward()
    assert untied.lm_head.weight.grad is not None and untied.wte.weight.grad is not None
    with pytest.raises(ValueError, match="exceeds block_size 8"):
        untied(lt.zeros(1, 9, dtype=lt.int64))


def test_adamw_step_on_the_cpu_updates_small_parameters_in_one_kernel_and_big_ones_in_their_own():
    lt.set_device("cpu")
    shapes = [(64, 32), (32,), (300, 256)]  # the last is over TOGETHER_MAX_ELEMENTS
    params = [lt.nn.Parameter(lt.tensor(np.ones(s, np.float32))) for s in shapes]
    opt = lt.optim.AdamW(params, lr=0.1)
    for p in params:
        p.grad = lt.tensor(np.full(p.shape, 0.5, np.float32))
    opt.step()  # the first step also creates the zero moments
    first = [p.numpy().copy() for p in params]
    with lt.profile() as prof:
        opt.step()
    assert sorted(k.op for k in prof.kernels) == ["adamw", "adamw_many"]  # and no slices
    for p, before in zip(params, first):
        np.testing.assert_allclose(before, 1 - 0.1 - 0.1 * 0.01, rtol=1e-6)  # a first step moves by lr
        assert p.is_realized and (p.numpy() < before).all() and p.shape == before.shape


def _adamw_run(monkeypatch, together, write_between=False, steps=4):
    """Parameters and moments after `steps` clipped AdamW steps (decay and no-decay groups) of a small
    MLP, with small parameters updated together (`together`) or each by a kernel of its own."""
    monkeypatch.setattr(optim.optimizer, "TOGETHER_MAX_ELEMENTS", optim.TOGETHER_MAX_ELEMENTS if together else 0)
    lt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}], lr=1e-2)
    x = lt.tensor(np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32))
    ops = []
    for step in range(steps):
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.01)
        with lt.profile() as prof:
            opt.step()
        ops.append(sorted(k.op for k in prof.kernels if k.op.startswith("adamw")))
        if write_between and step == 1:
            with lt.no_grad():
                next(model.parameters())[0] = 0.5  # a host write into a parameter the update left as a view
    values = [t.numpy().copy() for p in model.parameters()
              for t in (p, opt.state[id(p)]["exp_avg"], opt.state[id(p)]["exp_avg_sq"])]
    return values, ops


@pytest.mark.parametrize("write_between", [False, True])
def test_adamw_updating_small_parameters_together_gives_the_bytes_of_one_kernel_each(monkeypatch, write_between):
    lt.set_device("cpu")
    together, ops = _adamw_run(monkeypatch, True, write_between)
    alone, ops_alone = _adamw_run(monkeypatch, False, write_between)
    assert ops[-1] == ["adamw_many", "adamw_many"] and ops_alone[-1] == ["adamw"] * 4  # one per group
    assert all(a.tobytes() == b.tobytes() for a, b in zip(together, alone))


def test_adamw_on_a_device_keeps_one_kernel_per_parameter(monkeypatch):
    lt.set_device("virtual", offload="always")
    try:
        _, ops = _adamw_run(monkeypatch, True)
    finally:
        lt.set_device("cpu")
    assert ops[-1] == ["adamw"] * 4


def _clipped_adamw_steps(read_grads_before_step, steps=3):
    lt.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    opt = optim.AdamW(model.parameters(), lr=1e-2)
    x = lt.tensor(np.random.default_rng(0).standard_normal((32, 8)).astype(np.float32))
    kernels = []
    for _ in range(steps):
        lt.reset_counters()
        opt.zero_grad()
        (model(x) ** 2).mean().backward()
        nn.utils.clip_grad_norm_(model.parameters(), 0.01)  # small: every step scales
        if read_grads_before_step:
            for p in model.parameters():
                p.grad.numpy()
        opt.step()
        kernels.append(lt.counters()["kernels"])
    return model, [p.numpy().copy() for p in model.parameters()], kernels


def test_adamw_after_clipping_scales_the_gradients_itself_with_the_bytes_of_the_clipped_gradients():
    """clip_grad_norm_ leaves each .grad a pending product with its factor; AdamW's kernel multiplies
    them itself (rounded as the product is), so the clipped gradients are computed only when read."""
    _, read_first, kernels_read_first = _clipped_adamw_steps(True)
    model, folded, kernels = _clipped_adamw_steps(False)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(read_first, folded))
    assert kernels[-1] == kernels_read_first[-1] - len(folded)  # one multiply per parameter less
    assert all(p.grad._node.op == "mul" and not p.grad.is_realized for p in model.parameters())


def test_a_clipped_gradient_read_after_the_step_is_its_clipped_value():
    model, _, _ = _clipped_adamw_steps(False, steps=1)
    for p in model.parameters():
        raw, factor = (lt.Tensor(node).numpy() for node in p.grad._node.inputs)
        assert p.grad.numpy().tobytes() == (raw * factor).tobytes()
        assert np.abs(p.grad.numpy()).max() < np.abs(raw).max()  # scaled down: the norm was above 0.01


def test_clip_grad_norm_totals_the_squares_in_one_kernel_with_the_composites_value():
    rng = np.random.default_rng(2)
    params = [lt.nn.Parameter(lt.tensor(rng.standard_normal(s).astype(np.float32))) for s in ((40, 30), (30,), (7, 3))]
    grads = [rng.standard_normal(p.shape).astype(np.float32) for p in params]
    for p, g in zip(params, grads):
        p.grad = lt.tensor(g)
    with lt.profile() as prof:
        norm = lt.nn.utils.clip_grad_norm_(params, 0.5).numpy()
    assert [k.op for k in prof.kernels].count("sum_of_squares") == 1
    composite = lt.tensor(grads[0] * grads[0]).sum()
    for g in grads[1:]:
        composite = composite + lt.tensor(g * g).sum()
    assert norm.tobytes() == composite.sqrt().numpy().tobytes()
    scale = min(1.0, 0.5 / (float(norm) + 1e-6))
    for p, g in zip(params, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * np.float32(scale), rtol=1e-6)


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "lt.jit"])
def test_an_adamw_step_on_a_device_holds_the_optimizer_state_once_not_twice(virtual, compiled):
    """Each parameter and its moments point at their new values' slices before the step's one
    realization, so the old values go as their update runs, and an update's result once its three
    slices are made: the step peaks at the state and the gradients plus one parameter's update, where
    it held the old and the new state side by side. A compiled step's replay makes each slice right
    after its update, for the same effect (it held both states until the last update had run)."""
    n, width = 16, 512
    device = virtual(memory="1GB", offload="always")
    model = lt.nn.Sequential(*[lt.nn.Linear(width, width, bias=False) for _ in range(n)])
    opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
    x = lt.tensor(np.random.default_rng(0).normal(size=(1, width)).astype(np.float32)).to("virtual")
    one = width * width * 4

    def step():
        opt.zero_grad()
        model(x).square().sum().backward()
        opt.step()
    run = lt.jit(step) if compiled else step
    for _ in range(4):  # a compiled step: warm-up, capture, then replays
        with device.memory.watch_peak() as peak:
            run()
    # parameters and moments (3n), gradients (n), the products' transposed weights (n: copies on a device
    # today), one update's old and new values beside them (6); holding the state twice peaked at 7n
    assert peak[0] <= (5 * n + 6) * one + 64 * 1024, peak[0] / one
