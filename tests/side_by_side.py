"""Training a program with lazytensor and with PyTorch from the same weights and batches, and checking
what a warm step moves on the virtual device: shared by the tests of the programs written the way
PyTorch users write them (tests/user_gpt.py, lazytensor/models/llama.py, tests/mlp_programs.py)."""
import numpy as np

import lazytensor as lt


def twin_from(model, twin, torch):
    """`twin` (a PyTorch module) loaded with `model`'s state dict; the names must match."""
    twin.load_state_dict({k: torch.from_numpy(np.array(v.numpy())) for k, v in model.state_dict().items()})
    return twin


def train_side_by_side(model, twin, step, twin_step, batches, torch, after_step=None):
    """Run `step(x, y)` (lazytensor tensors) and `twin_step(x, y)` (PyTorch's) on every batch; each
    returns the loss tensor. Checks step 0's gradients within 1e-4 of the largest; returns the
    per-step relative loss differences and both loss lists."""
    ours, theirs = [], []
    for i, (x, y) in enumerate(batches):
        ours.append(step(lt.tensor(x), lt.tensor(y)).item())
        theirs.append(twin_step(torch.from_numpy(x), torch.from_numpy(y)).item())
        if i == 0:
            check_gradients(model, twin)
        if after_step is not None:
            after_step()
    ours, theirs = np.array(ours), np.array(theirs)
    return np.abs(ours - theirs) / np.abs(theirs), ours, theirs


def check_gradients(model, twin):
    """Every parameter's gradient within 1e-4 of the largest gradient element, PyTorch's as reference."""
    mine = dict(model.named_parameters())
    scale = max(float(np.abs(q.grad.numpy()).max()) for q in twin.parameters())
    for name, q in twin.named_parameters():
        diff = np.abs(mine[name].grad.numpy() - q.grad.numpy()).max()
        assert diff <= 1e-4 * scale, (name, diff, scale)


def only_the_batch_and_the_loss_move(step, batches, device="virtual", warmup=2, after_step=None):
    """Run `step(x, y)` with each batch put on `device` first; after `warmup` steps the transfer log of a
    step must be the two batch uploads and the loss read (4 bytes)."""
    for i, (x, y) in enumerate(batches):
        x, y = lt.tensor(x), lt.tensor(y)
        lt.clear_transfer_log()
        x.to(device), y.to(device)
        step(x, y).item()
        if after_step is not None:
            after_step()
        if i >= warmup:
            log = [(r.direction, r.reason, r.nbytes) for r in lt.transfer_log()]
            assert log == [("h2d", "to-device", x.nbytes), ("h2d", "to-device", y.nbytes),
                           ("d2h", "host-read:item", 4)], log
