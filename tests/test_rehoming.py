"""Re-homing (docs/RESIDENCY.md): values the evictor spilled from a device, and what the host computes from
them, return to that device once it has been quiet (no eviction for a while) and has room, so a step that
ran under memory pressure gets its state back on the device when the pressure is gone."""
import numpy as np

import lazytensor as lt
from lazytensor import nn

TIGHT = 400_000  # bytes: the MLP's parameters, moments and activations do not fit, so state is spilled


def _training(seed=0, activation=nn.GELU):
    lt.manual_seed(seed)
    model = nn.Sequential(nn.Linear(64, 256), activation(), nn.Linear(256, 256), activation(), nn.Linear(256, 10))
    opt = lt.optim.AdamW(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(seed)

    def step():
        """One step; returns (its loss, {(direction, reason): copies}, parameters left host-only)."""
        x = lt.tensor(rng.standard_normal((32, 64)).astype(np.float32)).to("virtual")
        y = lt.tensor(rng.integers(0, 10, 32)).to("virtual")
        lt.clear_transfer_log()
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        value = loss.item()
        copies = {}
        for r in lt.transfer_log():
            copies[r.direction, r.reason] = copies.get((r.direction, r.reason), 0) + 1
        host_only = sum(not p._node.buffer.on_device for p in model.parameters())
        return value, copies, host_only
    return step


def test_state_spilled_under_a_tight_budget_returns_to_the_device_once_the_budget_is_restored(virtual):
    virtual(memory="64MB", offload="policy")
    step = _training()
    for _ in range(2):
        step()
    lt.set_memory_budget(TIGHT)
    spilled = [step() for _ in range(2)]
    assert spilled[-1][2] > 0  # parameters left on the host: their updates ran there
    lt.set_memory_budget(None)
    restored = [step() for _ in range(2)]  # raising the budget needs no quiet spell: back within two steps
    assert restored[0][1].get(("h2d", "re-home"), 0) > 0
    _, copies, host_only = restored[-1]
    assert host_only == 0
    assert copies == {("d2h", "host-read:item"): 1}  # the loss; nothing else crosses once back home


def test_a_budget_that_stays_tight_moves_the_same_copies_every_step(virtual):
    virtual(memory="64MB", offload="policy")
    step = _training()
    step()
    lt.set_memory_budget(TIGHT)
    per_step = [step()[1] for _ in range(12)]
    assert all(copies == per_step[2] for copies in per_step[2:])  # no step brings state back to spill it again


def test_spilled_and_rehomed_steps_give_the_losses_of_a_run_without_a_budget(virtual):
    """With ops of the bit-identical class: a transcendental (GELU's erf) that pressure moves to the
    host's kernels may differ there in the last unit (docs/NUMERICS.md), and so the later losses."""
    virtual(memory="64MB", offload="policy")
    free = _training(activation=nn.ReLU)
    want = [free()[0] for _ in range(14)]
    virtual(memory="64MB", offload="policy")
    step = _training(activation=nn.ReLU)
    got = [step()[0] for _ in range(2)]
    lt.set_memory_budget(TIGHT)
    got += [step()[0] for _ in range(3)]
    lt.set_memory_budget(None)
    got += [step()[0] for _ in range(9)]
    assert got == want
