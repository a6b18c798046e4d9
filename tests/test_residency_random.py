"""Hypothesis: random programs, random budgets and arena sizes, random host reads and writes.

On the virtual device (every kernel offloaded) the bytes read must equal the CPU run's, evictions must
happen, no value may be lost, and resident bytes must never exceed the budget.
"""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import lazytensor as lt

SHAPE = (16, 16)  # 1 KiB of float32: one 1024-byte bucket per value
OPS = {
    "tanh": lambda a, b: a.tanh(), "exp": lambda a, b: (a * 0.1).exp(), "sin": lambda a, b: a.sin(),
    "add": lambda a, b: a + b, "mul": lambda a, b: a * b, "sub": lambda a, b: a - b,
    "max": lambda a, b: lt.maximum(a, b), "where": lambda a, b: lt.where(a > b, a, b),
    "sum": lambda a, b: a.sum(0, keepdim=True) + b, "amax": lambda a, b: a.amax(1, keepdim=True) * b,
    "softmax": lambda a, b: a.softmax(-1), "matmul": lambda a, b: a @ b, "T": lambda a, b: a.T + 0.0,
    "slice": lambda a, b: lt.cat([a[8:], b[:8]]), "mean": lambda a, b: a - a.mean(),
}


@st.composite
def programs(draw):
    n_inputs = 5
    steps = [("op", draw(st.sampled_from(sorted(OPS))), i, (i + 1) % n_inputs) for i in range(n_inputs)]
    for _ in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["op", "op", "op", "read", "write", "drop", "realize"]))
        a, b = draw(st.integers(0, 10 ** 6)), draw(st.integers(0, 10 ** 6))
        if kind == "op":
            steps.append(("op", draw(st.sampled_from(sorted(OPS))), a, b))
        elif kind == "write":
            steps.append(("write", a, (b % 16, (b // 16) % 16), draw(st.floats(-4, 4, width=32))))
        else:
            steps.append((kind, a))
    budget = draw(st.integers(2, 4)) * 1024 + draw(st.integers(0, 1023))
    arena = draw(st.sampled_from([None, 3 * 1024, 6 * 1024]))
    return steps, budget, arena, draw(st.integers(0, 2 ** 32 - 1))


def _execute(steps, seed):
    """Run the program; returns every host read's bytes and the final values' bytes."""
    rng = np.random.default_rng(seed)
    pool = [lt.tensor(rng.uniform(-2, 2, SHAPE).astype(np.float32)) for _ in range(5)]
    reads = []
    for step in steps:
        if step[0] == "op":
            _, name, a, b = step
            pool.append(OPS[name](pool[a % len(pool)], pool[b % len(pool)]))
        elif step[0] == "read":
            reads.append(pool[step[1] % len(pool)].numpy().tobytes())
        elif step[0] == "write":
            _, a, idx, value = step
            pool[a % len(pool)][idx] = value
        elif step[0] == "drop" and len(pool) > 2:
            del pool[step[1] % len(pool)]  # freed by reference counting: finalizers return device blocks
        elif step[0] == "realize":
            pool[step[1] % len(pool)].realize()
    return reads, [t.numpy().tobytes() for t in pool]


@pytest.mark.filterwarnings("ignore:a memory budget of")  # budgets above small arenas, on purpose
@given(programs())
def test_random_programs_under_random_budgets_match_the_cpu_byte_for_byte(program):
    steps, budget, arena, seed = program
    lt.set_device("cpu")
    want = _execute(steps, seed)
    options = {"offload": "always"} if arena is None else {"offload": "always", "memory": arena}
    lt.set_device("virtual", **options)
    lt.set_memory_budget(budget)
    device = lt.runtime.devices.active_device()
    got = _execute(steps, seed)
    memory = device.memory
    assert got == want
    assert memory.peak_bytes <= memory.budget
    assert memory.resident_bytes + memory.cached_bytes <= memory.budget  # the block cache counts too
    if not any(step[0] == "drop" for step in steps):
        # Five 1 KiB results that all stay alive never fit in 4 KiB. (With drops they may: a program
        # that drops values before anything is computed can run within the budget, found by Hypothesis.)
        assert memory.evictions + memory.memory_fallbacks > 0
    lt.set_device("cpu")
