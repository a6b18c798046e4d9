"""Issue 15's first and third programs, one source each for both frameworks, trained side by side with
PyTorch from the same weights and batches (skipped where PyTorch is missing), and on the virtual device,
where a warm step moves only the batch up and the loss read down. The second program (a Llama-style
decoder) is tests/test_llama_vs_torch.py."""
import numpy as np
import pytest

import lazytensor as lt
import mlp_programs
import user_gpt
from side_by_side import only_the_batch_and_the_loss_move, train_side_by_side, twin_from

STEPS = 30
GPT_SIZES = dict(vocab_size=29, n_layer=2, n_head=4, n_embd=32, block_size=16)
GPT_BATCH = 8


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _token_batches(n):
    rs = np.random.default_rng(7)
    V, T = GPT_SIZES["vocab_size"], GPT_SIZES["block_size"]
    return [(rs.integers(0, V, (GPT_BATCH, T)), rs.integers(0, V, (GPT_BATCH, T))) for _ in range(n)]


def _nanogpt(framework):
    GPT, optimizer, step = user_gpt.make(framework)
    return GPT(**GPT_SIZES), optimizer, step


def test_nanogpt_as_users_write_it_trains_like_pytorch(torch):
    lt.manual_seed(1)
    model, optimizer, step = _nanogpt(lt)
    twin = twin_from(model, _nanogpt(torch)[0], torch)
    opt, topt = optimizer(model), user_gpt.make(torch)[1](twin)
    tstep = user_gpt.make(torch)[2]
    rel, ours, _ = train_side_by_side(model, twin, lambda x, y: step(model, opt, x, y),
                                      lambda x, y: tstep(twin, topt, x, y), _token_batches(STEPS), torch)
    assert rel.max() <= 1e-5, rel.max()  # measured: 7.1e-8
    assert ours[-1] < ours[0]


def test_nanogpt_on_the_virtual_device_moves_only_the_batch_and_the_loss(virtual):
    virtual()
    lt.manual_seed(1)
    model, optimizer, step = _nanogpt(lt)
    model.to("virtual")
    opt = optimizer(model)
    only_the_batch_and_the_loss_move(lambda x, y: step(model, opt, x, y), _token_batches(5))


N_IN, HIDDEN, CLASSES, BATCH = 8, 32, 4, 64


def _classification_batches(n):
    rs = np.random.default_rng(8)
    centers = rs.standard_normal((CLASSES, N_IN))  # overlapping classes: the loss stays well above 0
    out = []
    for _ in range(n):
        y = rs.integers(0, CLASSES, BATCH)
        out.append(((centers[y] + rs.standard_normal((BATCH, N_IN))).astype(np.float32), y))
    return out


def _regression_batches(n):
    rs = np.random.default_rng(9)
    w = rs.standard_normal(N_IN) * 0.3
    out = []
    for _ in range(n):
        x = rs.standard_normal((BATCH, N_IN))
        out.append((x.astype(np.float32), (np.sin(x @ w) + 0.1 * rs.standard_normal(BATCH)).astype(np.float32)))
    return out


def _mlp(framework, kind):
    Classifier, Regressor, copt, ropt, step = mlp_programs.make(framework)
    if kind == "classifier":
        return Classifier(N_IN, HIDDEN, CLASSES), copt, framework.nn.CrossEntropyLoss(), step
    return Regressor(N_IN, HIDDEN), ropt, framework.nn.MSELoss(), step


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_mlp_programs_train_like_pytorch(torch, kind):
    lt.manual_seed(2)
    model, optimizer, loss_fn, step = _mlp(lt, kind)
    twin, toptimizer, tloss_fn, tstep = _mlp(torch, kind)
    twin_from(model, twin, torch)
    opt, topt = optimizer(model), toptimizer(twin)
    batches = (_classification_batches if kind == "classifier" else _regression_batches)(STEPS)
    rel, ours, _ = train_side_by_side(model, twin, lambda x, y: step(model, opt, loss_fn, x, y),
                                      lambda x, y: tstep(twin, topt, tloss_fn, x, y), batches, torch)
    assert rel.max() <= 1e-5, rel.max()  # measured: 2.8e-7 (classifier), 2.4e-7 (regressor)
    assert ours[-5:].mean() < 0.7 * ours[:5].mean()


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
def test_mlp_programs_on_the_virtual_device_move_only_the_batch_and_the_loss(virtual, kind):
    virtual()
    lt.manual_seed(2)
    model, optimizer, loss_fn, step = _mlp(lt, kind)
    model.to("virtual")
    opt = optimizer(model)
    batches = (_classification_batches if kind == "classifier" else _regression_batches)(5)
    only_the_batch_and_the_loss_move(lambda x, y: step(model, opt, loss_fn, x, y), batches)
