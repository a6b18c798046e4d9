"""The tensor methods PyTorch programs call: in-place arithmetic (`add_` and its family), `.data` that
writes through, `.cpu()`, `to(...)` in every form, `new_*`, `type_as`, `view_as`, `t`, `mm`, `equal`,
`allclose`, NumPy's reductions on tensors, device objects, `randint(high, size)`, `randperm`,
`inference_mode` (values against PyTorch where it is installed)."""
import numpy as np
import pytest

import lazytensor as lt

X = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
Y = np.random.default_rng(4).standard_normal((3, 4)).astype(np.float32)


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


INPLACE = {
    "add_ alpha": lambda x, y: x.add_(y, alpha=-0.5),
    "sub_ alpha": lambda x, y: x.sub_(y, alpha=2),
    "mul_": lambda x, y: x.mul_(y),
    "div_": lambda x, y: x.div_(y),
    "div_ floor": lambda x, y: x.div_(y, rounding_mode="floor"),
    "div_ trunc": lambda x, y: x.div_(y, rounding_mode="trunc"),
    "add_ scalar": lambda x, y: x.add_(3),
    "clamp_": lambda x, y: x.clamp_(-0.5, 0.5),
    "clamp_ min": lambda x, y: x.clamp_(min=0.1),
    "addcmul_": lambda x, y: x.addcmul_(y, y, value=0.3),
    "addcdiv_": lambda x, y: x.addcdiv_(y, y.abs() + 1, value=-2),
    "zero_": lambda x, y: x.zero_(),
    "copy_": lambda x, y: x.copy_(y),
    "neg_ then exp_": lambda x, y: x.neg_().exp_(),
    "lerp_": lambda x, y: x.lerp_(y, 0.25),
    "pow_": lambda x, y: x.abs().pow_(1.5),
}


@pytest.mark.parametrize("name", sorted(INPLACE))
def test_in_place_methods_match_pytorch_and_return_the_same_object(torch, name):
    ours, theirs = lt.tensor(X), torch.tensor(X)
    got, ref = INPLACE[name](ours, lt.tensor(Y)), INPLACE[name](theirs, torch.tensor(Y))
    np.testing.assert_allclose(got.numpy(), ref.numpy(), rtol=1e-6, atol=1e-7)
    if name not in ("pow_",):
        assert got is ours


def test_in_place_on_a_leaf_that_requires_grad_is_refused_outside_no_grad():
    p = lt.tensor(X, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf that requires grad.*no_grad"):
        p.add_(1.0)
    with lt.no_grad():
        p.add_(1.0)
    np.testing.assert_array_equal(p.numpy(), X + 1)


def test_in_place_on_a_computed_tensor_with_gradients_is_recorded_as_pytorch_records_it(torch):
    grads = []
    for lib in (lt, torch):
        p = lib.tensor(X, requires_grad=True)
        y = p * 2
        y.mul_(3)
        y.add_(p)
        (y * y).sum().backward()
        grads.append(p.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_in_place_result_that_would_broadcast_the_tensor_is_refused():
    with pytest.raises(ValueError, match="cannot broadcast the tensor itself"):
        lt.ones(3).add_(lt.ones(2, 3))


def test_data_add_updates_the_parameter_as_a_training_loop_writes_it(torch):
    """regression/main.py's update: `param.data.add_(-0.1 * param.grad)`."""
    ours, theirs = lt.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    for p, fw in ((ours, lt), (theirs, torch)):
        (p * p).sum().backward()
        p.data.add_(-0.1 * p.grad)
        p.data.add_(p.grad, alpha=-0.1)
    np.testing.assert_allclose(ours.numpy(), theirs.detach().numpy(), rtol=1e-6)
    assert ours.requires_grad and ours.is_leaf


def test_data_assignment_replaces_the_value_and_data_reads_are_not_tracked():
    p = lt.tensor(X, requires_grad=True)
    assert not p.data.requires_grad
    p.data = lt.zeros(3, 4)
    np.testing.assert_array_equal(p.numpy(), np.zeros((3, 4)))
    assert p.requires_grad


def test_cpu_downloads_a_device_value_and_the_transfer_log_shows_it(virtual):
    virtual(offload="always")
    x = (lt.tensor(X) * 2).realize()
    assert x.residency == lt.Residency.DEVICE
    lt.clear_transfer_log()
    y = x.cpu()
    assert y is x and x.residency == lt.Residency.HOST
    assert [(r.direction, r.nbytes) for r in lt.transfer_log()] == [("d2h", X.nbytes)]
    np.testing.assert_array_equal(y.numpy(), X * 2)


def test_to_accepts_pytorchs_forms():
    x = lt.tensor(X)
    assert x.to(lt.float64).dtype == lt.float64
    assert x.to("cpu", lt.float64).dtype == lt.float64
    assert x.to(device="cpu", dtype=lt.int32, non_blocking=True).dtype == lt.int32
    assert x.to(lt.tensor([1], dtype=lt.int64)).dtype == lt.int64
    assert x.to(lt.device("cpu")) is x
    assert x.to("cpu", copy=True) is not x


def test_to_an_unknown_name_says_it_is_neither_a_device_nor_a_dtype():
    with pytest.raises(ValueError, match="'tpu'.*not a dtype.*nor a device"):
        lt.ones(2).to("tpu")


def test_to_a_registered_device_that_is_not_active_says_how_to_select_it(capfd, monkeypatch):
    lt.set_device("cpu")
    monkeypatch.setitem(lt.runtime.devices._state, "noticed", set())  # each notice is printed once a process
    lt.ones(2).to("virtual")
    err = capfd.readouterr().err
    assert "available but not the active device" in err and "set_device('virtual')" in err


def test_device_objects_have_type_and_index_and_compare_with_names():
    d = lt.device("cuda" if lt.cuda.is_available() else "cpu")
    assert d.type == lt.get_device() if lt.get_device() in ("cuda", "cpu") else d.type == "cpu"
    assert d.index is None and d == d.type
    assert lt.device("cuda:1").index == 1 and lt.device("cuda", 0) == "cuda:0"
    assert repr(lt.device("cuda", 2)) == "device(type='cuda', index=2)"
    with pytest.raises(ValueError, match="unknown device"):
        lt.device("tpu")
    assert lt.ones(2).to(lt.device("cpu")).device == "cpu"


@pytest.mark.parametrize("method,args", [("new_zeros", ((2, 3),)), ("new_ones", (2, 3)),
                                         ("new_full", ((2,), 7.5)), ("new_empty", ((4,),))])
def test_new_creation_methods_keep_the_dtype_and_match_pytorch(torch, method, args):
    ours = getattr(lt.tensor(X, dtype=lt.float64), method)(*args)
    theirs = getattr(torch.tensor(X, dtype=torch.float64), method)(*args)
    assert ours.dtype == lt.float64 and ours.shape == tuple(theirs.shape)
    if method != "new_empty":
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


def test_new_tensor_copies_data_in_this_dtype():
    t = lt.tensor([1.0], dtype=lt.float64).new_tensor([[1, 2]])
    assert t.dtype == lt.float64 and t.shape == (1, 2)


def test_type_as_view_as_t_mm_match_pytorch(torch):
    a, b = lt.tensor(X, requires_grad=True), torch.tensor(X, requires_grad=True)
    got = a.t().mm(a.view_as(lt.ones(12)).view_as(lt.ones(3, 4))).type_as(lt.ones(1, dtype=lt.float64))
    ref = b.t().mm(b.view_as(torch.ones(12)).view_as(torch.ones(3, 4))).type_as(torch.ones(1, dtype=torch.float64))
    np.testing.assert_allclose(got.numpy(), ref.detach().numpy(), rtol=1e-6)
    got.sum().backward(), ref.sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5)


def test_t_of_three_dims_and_mm_of_a_vector_are_refused():
    with pytest.raises(ValueError, match="at most 2 dimensions"):
        lt.ones(2, 2, 2).t()
    with pytest.raises(ValueError, match="both operands must be matrices"):
        lt.ones(2, 2).mm(lt.ones(2))


def test_equal_is_one_bool_and_allclose_follows_pytorch(torch):
    a = lt.tensor(X)
    assert lt.equal(a, lt.tensor(X)) is True and a.equal(a + 1) is False
    assert lt.equal(a, a[:2]) is False
    for rtol, atol in ((1e-5, 1e-8), (0, 1e-3)):
        b = X + 1e-4
        assert lt.allclose(a, lt.tensor(b), rtol=rtol, atol=atol) == torch.allclose(
            torch.tensor(X), torch.tensor(b), rtol=rtol, atol=atol)
    nan = np.array([1.0, np.nan])
    assert lt.allclose(lt.tensor(nan), lt.tensor(nan), equal_nan=True)
    assert not lt.allclose(lt.tensor(nan), lt.tensor(nan))


def test_numpy_reductions_take_tensors():
    a = lt.tensor(X)
    assert np.mean(a) == pytest.approx(X.mean(), rel=1e-6)
    np.testing.assert_allclose(np.sum(a, axis=0), X.sum(axis=0), rtol=1e-6)
    np.testing.assert_allclose(np.max(a, axis=1, keepdims=True), X.max(axis=1, keepdims=True))
    assert np.argmax(a) == X.argmax()
    np.testing.assert_allclose(np.std(a, ddof=1), X.std(ddof=1), rtol=1e-5)
    np.testing.assert_allclose(np.concatenate([a, a]), np.concatenate([X, X]))


def test_randint_takes_a_positional_size_as_pytorch_does():
    lt.manual_seed(0)
    a = lt.randint(10, (3, 4))
    b = lt.randint(5, 8, (6,))
    assert a.shape == (3, 4) and a.dtype == lt.int64 and 0 <= int(a.min()) and int(a.max()) < 10
    assert b.shape == (6,) and 5 <= int(b.min()) and int(b.max()) < 8
    with pytest.raises(TypeError, match="missing the size"):
        lt.randint(10)


def test_randperm_is_a_seeded_permutation():
    lt.manual_seed(1)
    p = lt.randperm(50).numpy()
    assert sorted(p.tolist()) == list(range(50)) and p.dtype == np.int64
    lt.manual_seed(1)
    assert lt.randperm(50).numpy().tolist() == p.tolist()
    g = lt.Generator().manual_seed(1)
    assert lt.randperm(50, generator=g).numpy().tolist() == p.tolist()


def test_inference_mode_works_as_block_decorator_and_bare_decorator():
    x = lt.ones(2, requires_grad=True)
    with lt.inference_mode():
        assert not (x * 2).requires_grad

    @lt.inference_mode()
    def called():
        return x * 2

    @lt.inference_mode
    def bare():
        return x * 2
    assert not called().requires_grad and not bare().requires_grad
    with lt.inference_mode(False):
        assert (x * 2).requires_grad


def test_add_with_alpha_matches_pytorch(torch):
    got = lt.tensor(X).add(lt.tensor(Y), alpha=2.5)
    np.testing.assert_allclose(got.numpy(), torch.tensor(X).add(torch.tensor(Y), alpha=2.5).numpy(), rtol=1e-6)
    np.testing.assert_allclose(lt.sub(lt.tensor(X), 1, alpha=3).numpy(), X - 3, rtol=1e-6)


def test_deepcopy_keeps_the_value_class_and_requires_grad():
    import copy
    p = lt.nn.Parameter(lt.tensor(X))
    q = copy.deepcopy(p)
    assert type(q) is lt.nn.Parameter and q.requires_grad and q is not p
    with lt.no_grad():
        q.add_(1)
    np.testing.assert_array_equal(p.numpy(), X)


def test_in_place_on_a_computed_tensor_under_no_grad_changes_its_value_and_keeps_its_record(torch):
    grads = []
    for lib in (lt, torch):
        p = lib.tensor(X, requires_grad=True)
        y = p * 2
        with lib.no_grad():
            y.add_(1)
        (y * y).sum().backward()
        grads.append(p.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)


def test_a_tensors_device_has_a_type_as_pytorchs_does():
    x = lt.ones(2)
    assert x.device.type == lt.get_device() and x.device == lt.get_device()
    assert lt.ones(2, device=x.device).device == x.device
