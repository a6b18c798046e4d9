"""Differential fuzzing: random tensor programs (tests/differential.py) on every device configuration,
against NumPy and against each other, devices under a random memory budget; and a seed corpus of the
cases such fuzzing found, each run the way a user meets it on every configuration.

Configurations: the NumPy backend alone (the definition), the CPU (numba, then NumPy; a program run
three times, so that its realizations replay), the virtual device and the emulated CUDA driver (every
kernel they can run offloaded, a budget small enough to evict).
"""
import contextlib

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import lazytensor as lt
from lazytensor.kernels.gpu import c_emulation
from lazytensor.runtime import devices

import differential

HAS_CC = c_emulation.compiler() is not None


@contextlib.contextmanager
def configuration(name, budget=None):
    """Run the block on one configuration (see the module docstring); the device is restored after."""
    previous = devices._HOST_CHAIN
    try:
        if name == "numpy":
            devices._HOST_CHAIN = devices.host_chain()[-1:]
            lt.set_device("cpu")
        elif name == "cpu":
            lt.set_device("cpu")
        elif name == "virtual":
            lt.set_device("virtual", memory="16MB", offload="always")
        elif name == "cuda":
            if lt.set_device("cuda", driver="emulated", offload="always", memory="16MB") != "cuda":
                pytest.skip("the emulated CUDA driver did not start")
        if budget is not None and name in ("virtual", "cuda"):
            lt.set_memory_budget(budget)
        yield
    finally:
        devices._HOST_CHAIN = previous
        lt.set_device("cpu")


DEVICES = ["cpu", "virtual"] + (["cuda"] if HAS_CC else [])


def _check_program(kind, inputs, steps, values, budget, configs):
    with configuration("numpy"):
        ref, ref_reads = differential.run(inputs, steps)
    for k, (got, v) in enumerate(zip(ref, values)):
        if v.check == "none":
            continue
        check = "exact" if v.oracle else v.check
        assert differential.agree(got, v.array, check, v.bound), (
            f"value {k} ({kind}) differs from NumPy ({check}):\n{got!r}\nwant\n{v.array!r}\nprogram {steps}")
    for name in configs:
        runs = 3 if name == "cpu" else 1  # the third run of a structure replays its recorded plan
        for _ in range(runs):
            with configuration(name, budget):
                got_values, got_reads = differential.run(inputs, steps)
            for k, (got, want, v) in enumerate(zip(got_values, ref, values)):
                if v.check == "none":
                    continue
                check = "exact" if v.cross else v.check
                assert differential.agree(got, want, check, v.bound), (
                    f"value {k} ({kind}) on {name} differs from the NumPy backend ({check}):\n{got!r}\n"
                    f"want\n{want!r}\nprogram {steps}")
            assert len(got_reads) == len(ref_reads)
            for got, want, step in zip(got_reads, ref_reads, [s for s in steps if s[0] in ("read", "item")]):
                v = values[step[1]] if step[1] < len(values) else None
                if v is not None and v.cross and v.check != "none":
                    assert differential.agree(got, want, "exact"), f"a host read on {name} differs: {step}"


@st.composite
def programs(draw, kind):
    inputs, steps, values = differential.draw_program(draw, st, kind, draw(st.integers(1, 10)))
    budget = draw(st.integers(512, 1 << 20))
    return inputs, steps, values, budget


@pytest.mark.filterwarnings("error")  # NumPy's warnings must not reach the user
@pytest.mark.parametrize("kind", ["float32", "float64", "int64"])
@settings(max_examples=300)
@given(data=st.data())
def test_random_programs_agree_with_numpy_and_across_the_cpu_and_virtual_device(kind, data):
    inputs, steps, values, budget = data.draw(programs(kind))
    _check_program(kind, inputs, steps, values, budget, ["cpu", "virtual"])


@pytest.mark.skipif(not HAS_CC, reason="the emulated CUDA driver needs a C compiler (cc)")
@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("kind", ["float32", "float64", "int64"])
@settings(max_examples=60)
@given(data=st.data())
def test_random_programs_agree_on_the_emulated_cuda_driver(kind, data):
    inputs, steps, values, budget = data.draw(programs(kind))
    _check_program(kind, inputs, steps, values, budget, ["cuda"])


# ---- the seed corpus: what fuzzing found, each as a user meets it, on every configuration ----------

def _bits(t):
    a = t.numpy()
    return a.tolist(), np.signbit(a).tolist() if a.dtype.kind == "f" else None


SEEDS = {
    # a float sum is never -0.0 (NumPy's and PyTorch's sums start from +0.0)
    "axis_sum_of_negative_zeros": (lambda: lt.tensor(np.full((3, 4), -0.0)).sum(1),
                                   np.zeros(3)),
    "full_sum_of_negative_zeros": (lambda: lt.tensor(np.full((3, 4), -0.0, np.float32)).sum(),
                                   np.float32(0.0)),
    "mean_of_negative_zeros": (lambda: lt.tensor(np.full((2, 5), -0.0)).mean(0), np.zeros(5)),
    # amax/amin: the first extreme element by position, as argmax points at it (PyTorch's values too)
    "amax_on_a_signed_zero_tie": (lambda: lt.tensor(np.array([[0.0, -0.0], [-0.0, 0.0]])).amax(1),
                                  np.array([0.0, -0.0])),
    "amin_on_a_signed_zero_tie": (lambda: lt.tensor(np.array([[0.0, -0.0], [-0.0, 0.0]])).amin(1),
                                  np.array([0.0, -0.0])),
    "amax_over_every_axis": (lambda: lt.tensor(np.array([[-0.0, 0.0], [0.0, -1.0]], np.float32)).amax(),
                             np.float32(-0.0)),
    # an integer mean folds in float64: no int64 overflow
    "int64_mean_whose_sum_overflows": (lambda: lt.tensor(np.array([2 ** 62] * 3, np.int64)).mean(),
                                       np.float32(2.0 ** 62)),
    # slices that select nothing with a negative step
    "negative_step_starting_before_the_front": (lambda: lt.tensor([1.0, 2.0])[-3::-1], np.zeros(0, np.float32)),
    "negative_step_on_a_matrix": (lambda: lt.tensor(np.arange(6.0).reshape(2, 3))[:, -5::-2],
                                  np.zeros((2, 0))),
    # products with empty batch and inner dimensions
    "empty_batch_and_inner_dimension": (lambda: lt.zeros(5, 0, 0) @ lt.zeros(0, 3), np.zeros((5, 0, 3), np.float32)),
    "empty_inner_dimension": (lambda: lt.ones(2, 0, dtype=lt.float64) @ lt.ones(0, 3, dtype=lt.float64),
                              np.zeros((2, 3))),
}


@pytest.mark.parametrize("config", ["numpy"] + DEVICES)
@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_seed_program_gives_the_defined_bytes(seed, config):
    build, want = SEEDS[seed]
    want = np.asarray(want)
    with configuration(config, budget=4096):
        got = build().numpy()
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.tolist() == want.tolist()
    if want.dtype.kind == "f":
        assert np.signbit(got).tolist() == np.signbit(want).tolist()


ALIASING = {  # name: (the input, the op)
    "flip_over_size_one_axes": (lambda: lt.tensor([[1.0, 2.0, 3.0]]), lambda x: x.flip(0)),
    "flip_of_no_axes": (lambda: lt.tensor([[1.0, 2.0, 3.0]]), lambda x: x.flip(())),
    "roll_by_zero": (lambda: lt.tensor([1.0, 2.0, 3.0]), lambda x: x.roll(0)),
    "roll_by_the_length": (lambda: lt.tensor([[1.0, 2.0, 3.0]]), lambda x: x.roll(3, 1)),
    "nan_to_num_of_an_integer_tensor": (lambda: lt.tensor([1, 2, 3]), lambda x: lt.nan_to_num(x)),
}


@pytest.mark.parametrize("config", ["numpy"] + DEVICES)
@pytest.mark.parametrize("op", sorted(ALIASING))
def test_an_op_that_moves_nothing_still_returns_a_new_tensor(op, config):
    make, apply = ALIASING[op]
    with configuration(config, budget=4096):
        x = make()
        before = x.numpy().copy()
        y = apply(x)
        assert y is not x
        y += 1
        assert np.array_equal(x.numpy(), before)  # y's write did not reach x, as in PyTorch
