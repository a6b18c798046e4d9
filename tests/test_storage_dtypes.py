"""float16 and bfloat16: storage dtypes (2 bytes per element). Casts round as NumPy and ml_dtypes do;
every op that computes on them widens to float32 and rounds its result back once, which is what
PyTorch's CPU kernels do, so the correctly rounded ops match PyTorch bit for bit."""
import ml_dtypes
import numpy as np
import pytest

import lazytensor as lt

DTYPES = {"float16": (lt.float16, np.float16), "bfloat16": (lt.bfloat16, ml_dtypes.bfloat16)}


def _values(n=257, seed=0):
    rs = np.random.default_rng(seed)
    x = rs.standard_normal(n) * np.exp(rs.uniform(-30, 30, n))  # subnormals, overflow, everything between
    return np.concatenate([x, [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 6e-8]])


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_a_storage_dtype_keeps_two_bytes_per_element_and_reads_back_as_its_numpy_dtype(name):
    dt, np_dt = DTYPES[name]
    x = lt.zeros(3, 5, dtype=dt)
    assert x.dtype == dt and x.element_size() == 2 and x.nbytes == 30
    assert x.numpy().dtype == np.dtype(np_dt)
    assert lt.tensor(np.ones(4, np_dt)).dtype == dt
    assert lt.tensor([1.5], dtype=name).dtype == dt


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("source", [np.float32, np.float64])
def test_casts_to_a_storage_dtype_round_as_numpy_and_ml_dtypes_do(name, source):
    dt, np_dt = DTYPES[name]
    values = _values().astype(source)
    with np.errstate(over="ignore"):
        expected = values.astype(np_dt)
    assert lt.tensor(values).to(dt).numpy().tobytes() == expected.tobytes()


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_casts_from_a_storage_dtype_are_exact(name):
    dt, np_dt = DTYPES[name]
    with np.errstate(over="ignore"):
        stored = _values().astype(np_dt)
    back = lt.tensor(stored).to(lt.float64).numpy()
    np.testing.assert_array_equal(back, stored.astype(np.float64))


@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "sqrt"])
def test_correctly_rounded_ops_match_pytorch_bit_for_bit(torch, name, op):
    dt, np_dt = DTYPES[name]
    rs = np.random.default_rng(1)
    a = rs.uniform(0.01, 100, 999).astype(np.float32)
    b = rs.uniform(0.01, 100, 999).astype(np.float32)
    tdt = getattr(torch, name)
    ta, tb = torch.from_numpy(a).to(tdt), torch.from_numpy(b).to(tdt)
    la, lb = lt.tensor(a).to(dt), lt.tensor(b).to(dt)
    fn = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
          "div": lambda x, y: x / y, "sqrt": lambda x, y: x.sqrt()}[op]
    ours = fn(la, lb)
    assert ours.dtype == dt
    theirs = fn(ta, tb).float().numpy()
    assert ours.to(lt.float32).numpy().tobytes() == theirs.tobytes()


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_every_other_op_computes_in_float32_and_rounds_once(name):
    dt, np_dt = DTYPES[name]
    x = np.random.default_rng(2).uniform(-3, 3, (4, 6)).astype(np_dt)
    wide = x.astype(np.float32)
    t = lt.tensor(x)
    for ours, reference in [(t.exp(), lt.tensor(wide).exp()), (t.sum(dim=1), lt.tensor(wide).sum(dim=1)),
                            (t.softmax(-1), lt.tensor(wide).softmax(-1)),
                            (t @ t.T, lt.tensor(wide) @ lt.tensor(wide).T)]:
        assert ours.dtype == dt
        assert ours.numpy().tobytes() == reference.numpy().astype(np_dt).tobytes()


def test_promotion_follows_numpy_with_float16_and_bfloat16_meeting_at_float32():
    h, b = lt.ones(2, dtype=lt.float16), lt.ones(2, dtype=lt.bfloat16)
    assert (h + h).dtype == lt.float16 and (b * b).dtype == lt.bfloat16
    assert (h + b).dtype == lt.float32
    assert (h + lt.ones(2)).dtype == lt.float32 and (b + lt.ones(2, dtype=lt.float64)).dtype == lt.float64
    assert (h + 2.5).dtype == lt.float16 and (b * 3).dtype == lt.bfloat16  # Python numbers are weak
    assert (h + lt.tensor([True, False])).dtype == lt.float16
    assert (b + lt.tensor([1, 2], dtype=lt.int64)).dtype == lt.float64  # NumPy's table (PyTorch: bfloat16)
    assert (h > 0.5).dtype == lt.bool


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_gradients_of_a_storage_dtype_parameter_have_its_dtype(torch, name):
    dt, np_dt = DTYPES[name]
    w0 = np.random.default_rng(3).uniform(-1, 1, (3, 4)).astype(np.float32)
    w = lt.tensor(w0).to(dt).requires_grad_()
    (w * w).sum().backward()
    tw = torch.from_numpy(w0).to(getattr(torch, name)).requires_grad_()
    (tw * tw).sum().backward()
    assert w.grad.dtype == dt
    assert w.grad.to(lt.float32).numpy().tobytes() == tw.grad.float().numpy().tobytes()


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_a_module_converted_with_to_trains_in_that_dtype_with_the_optimizer_made_before(name):
    dt, _ = DTYPES[name]
    lt.manual_seed(0)
    model = lt.nn.Sequential(lt.nn.Linear(4, 16), lt.nn.GELU(), lt.nn.Linear(16, 3))
    opt = lt.optim.AdamW(model.parameters(), lr=0.05)
    model.to(dt)
    assert all(p.dtype == dt for p in model.parameters())
    x, y = lt.randn(32, 4).to(dt), lt.tensor(np.arange(32) % 3)
    losses = []
    for _ in range(15):
        loss = lt.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert loss.dtype == dt and all(p.dtype == dt for p in model.parameters())
    assert losses[-1] < 0.8 * losses[0]
    model.float()
    assert all(p.dtype == lt.float32 for p in model.parameters())


def test_module_to_refuses_an_integer_dtype():
    with pytest.raises(TypeError, match="floating-point dtype"):
        lt.nn.Linear(2, 2).to(lt.int32)


def test_uploads_of_a_storage_dtype_carry_two_bytes_per_element(virtual):
    virtual(offload="always")
    h = lt.ones(256, dtype=lt.float16)
    h.realize()
    assert [r.nbytes for r in lt.transfer_log() if r.direction == "h2d"] in ([], [512])
    lt.clear_transfer_log()
    out = (h * 3).to(lt.bfloat16)
    assert out.sum().item() == 768.0
    assert [r.nbytes for r in lt.transfer_log()] == [2]  # the sum read back: one bfloat16


def test_printing_shows_values_and_the_dtype():
    assert repr(lt.tensor([1.5, -2.0], dtype=lt.bfloat16)) == "tensor([ 1.5, -2. ], dtype=lt.bfloat16)"
    assert repr(lt.tensor([1.5, -2.0]).half()) == "tensor([ 1.5, -2. ], dtype=lt.float16)"
