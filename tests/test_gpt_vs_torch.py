"""The tiny GPT against PyTorch with identical weights and batches (skipped where PyTorch is missing)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import lazytensor as lt  # noqa: E402
from lazytensor import nn, optim  # noqa: E402
from lazytensor_train.data import CharDataset, default_corpus  # noqa: E402
from lazytensor_train.models import CONFIGS, GPT, GPTConfig  # noqa: E402
from torch_gpt import twin_of  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return CharDataset(default_corpus())


def _tiny(data):
    sizes = {k: v for k, v in CONFIGS["tiny"].items() if k != "batch_size"}
    lt.manual_seed(3)
    return GPT(GPTConfig(vocab_size=data.vocab_size, dropout=0.0, **sizes))


def _batches(data, n):
    lt.manual_seed(11)
    return [tuple(t.numpy() for t in data.batch("train", 16, 64)) for _ in range(n)]


def test_first_loss_and_every_gradient_match_pytorch(data):
    torch.set_num_threads(2)
    model = _tiny(data)
    twin, pairs = twin_of(model)
    (x, y), = _batches(data, 1)
    _, loss = model(lt.tensor(x), lt.tensor(y))
    loss.backward()
    tloss = twin(torch.from_numpy(x), torch.from_numpy(y))
    tloss.backward()
    assert abs(loss.item() - tloss.item()) <= 1e-5 * abs(tloss.item())
    for name, p in model.named_parameters():
        ours, theirs = p.grad.numpy(), pairs[name].grad.numpy()
        scale = max(np.abs(theirs).max(), 1e-12)
        assert np.abs(ours - theirs).max() <= 1e-4 * scale, name


def test_loss_after_50_adamw_steps_with_clipping_matches_pytorch(data):
    torch.set_num_threads(2)
    model = _tiny(data)
    twin, pairs = twin_of(model)
    decay = [p for p in model.parameters() if p.ndim >= 2]
    rest = [p for p in model.parameters() if p.ndim < 2]
    opt = optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                      lr=3e-3, betas=(0.9, 0.99))
    tparams = dict(pairs)
    tdecay = [tparams[n] for n, p in model.named_parameters() if p.ndim >= 2]
    trest = [tparams[n] for n, p in model.named_parameters() if p.ndim < 2]
    topt = torch.optim.AdamW([{"params": tdecay, "weight_decay": 0.1}, {"params": trest, "weight_decay": 0.0}],
                             lr=3e-3, betas=(0.9, 0.99))
    for x, y in _batches(data, 50):
        _, loss = model(lt.tensor(x), lt.tensor(y))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # a generator, as PyTorch scripts pass it
        opt.step()
        tloss = twin(torch.from_numpy(x), torch.from_numpy(y))
        topt.zero_grad()
        tloss.backward()
        torch.nn.utils.clip_grad_norm_(twin.parameters(), 1.0)
        topt.step()
    x, y = _batches(data, 51)[-1]
    with lt.no_grad():
        final = model(lt.tensor(x), lt.tensor(y))[1].item()
    with torch.no_grad():
        tfinal = twin(torch.from_numpy(x), torch.from_numpy(y)).item()
    assert abs(final - tfinal) <= 1e-3 * abs(tfinal), (final, tfinal)
