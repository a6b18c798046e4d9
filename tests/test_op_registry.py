"""The op registry (kernels/ops.py) is the one place that says what an op is: every op it lists has a
reference kernel, a gradient rule or an explicit mark, a docs entry, and the expressions its kernels claim."""
import pathlib

import numpy as np
import pytest

import lazytensor as lt
from lazytensor import autograd
from lazytensor.kernels import ops
from lazytensor.kernels.cpu import fused
from lazytensor.kernels.gpu import elementwise as gew
from lazytensor.kernels.reference import KERNELS

from test_autograd import UNARY as GRADIENT_CHECKED
from test_elementwise import UNARY as VALUE_CHECKED

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_registered_op_has_a_reference_kernel_and_every_kernel_is_registered():
    assert set(ops.OPS) == set(KERNELS)


def test_every_op_has_a_gradient_rule_or_an_explicit_mark():
    assert all(op.grad in ops.GRADS for op in ops.OPS.values())
    assert ops.names(grad="rule") == set(autograd.VJP)


def test_an_op_marked_not_differentiable_gives_a_constant():
    x = lt.tensor([1.0, -2.0], requires_grad=True)
    assert ops.get("gt").grad == "none"
    assert not (x > 0).requires_grad
    assert x.exp().requires_grad


def test_docs_list_every_op_from_the_registry():
    assert ops.markdown_table() in (ROOT / "docs" / "OPS.md").read_text()


def test_every_unary_op_is_checked_against_numpy_and_by_finite_differences():
    assert ops.names(family="unary") - {"logical_not"} <= set(VALUE_CHECKED)
    assert ops.names(family="unary", dtype="float") <= set(GRADIENT_CHECKED)


@pytest.mark.parametrize("name", sorted(fused.OPS - {"cast"}))
def test_every_fusable_op_renders_as_python(name):
    record = ops.get(name)
    instrs = [("in", k, "bool" if record.family == "logical" or (record.family == "select" and k == 0)
               else "float64") for k in range(record.arity)]
    out = "bool" if record.dtype == "bool" else "float64"
    source = fused.render((1, tuple(instrs) + ((name, out) + tuple(range(record.arity)),)))
    compile(source, f"<fused {name}>", "exec")


@pytest.mark.parametrize("name", sorted(gew.OPS - {"cast"}))
def test_every_device_op_has_a_float64_expression(name):
    record = ops.get(name)
    if record.family == "select":
        dtypes = ["bool", "float64", "float64"]
    elif record.family == "logical" or record.dtype == "bool":
        dtypes = ["bool"] * record.arity
    else:
        dtypes = ["float64"] * record.arity
    out = "bool" if record.dtype == "bool" else "float64"
    assert gew.supported(name, dtypes, out, has_double=True)
    expr = gew.expression(name, dtypes, out, [f"v{k}" for k in range(record.arity)])
    assert "{" not in expr and "v0" in expr


ATTRIBUTES = {"real", "imag"}  # PyTorch has them as attributes: x.real, x.imag


def test_every_elementwise_record_is_a_function_and_a_method_under_each_of_its_names():
    for record in ops.OPS.values():
        if record.family in ("unary", "binary", "compare", "logical"):
            for name in (record.name,) + record.aliases:
                assert callable(getattr(lt, name)), name
                assert callable(getattr(lt.Tensor, name)) or name in ATTRIBUTES, name
    z = lt.tensor([1 + 2j])
    assert z.real.tolist() == [1.0] and z.imag.tolist() == [2.0]


def test_log1p_and_expm1_came_from_their_records_alone():
    x = np.array([-0.5, 1e-10, 3.0], np.float64)
    np.testing.assert_allclose(lt.log1p(lt.tensor(x)).numpy(), np.log1p(x), rtol=4e-16)
    np.testing.assert_allclose(lt.tensor(x).expm1().numpy(), np.expm1(x), rtol=4e-16)
    assert lt.log1p(lt.tensor([1e-10])).item() != 0.0  # log(1 + x) would round to 0


def test_a_fused_chain_with_log1p_matches_the_reference_within_one_unit(rng):
    x = rng.uniform(0, 3, size=(128, 128)).astype(np.float32)
    got = ((lt.tensor(x) * 0.5).log1p() + 1.0).expm1().numpy()
    x64 = x.astype(np.float64)
    half = (x64 * 0.5).astype(np.float32).astype(np.float64)
    step = np.log1p(half).astype(np.float32).astype(np.float64)
    want = np.expm1((step + 1.0).astype(np.float32).astype(np.float64)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=2.5e-7, atol=0)


def test_an_elementwise_record_claims_exactly_the_kernels_its_expressions_give():
    for op in ops.OPS.values():
        if op.elementwise and op.name != "cast":  # cast is rendered by each kernel module itself
            assert ("fused" in op.kernels) == (op.py is not None), op.name
            assert ("device" in op.kernels) == (op.c is not None), op.name
            assert op.numpy is None or hasattr(np, op.numpy), op.name


def test_every_replay_pass_an_op_names_exists_and_every_pass_is_named_by_an_op():
    from lazytensor.runtime.replay import passes
    named = {op.replay_pass for op in ops.OPS.values() if op.replay_pass is not None}
    assert named == set(passes.PASSES)
    assert ops.OPS["adamw"].replay_pass == "unstacked_in_place"
