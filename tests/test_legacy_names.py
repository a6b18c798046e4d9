"""The older PyTorch spellings programs still use, written as those programs write them: typed tensor
classes as constructors, isinstance checks and `.type()` arguments, the legacy `Tensor(2, 3)`,
`view(dtype)`, `autograd.Variable`, the constants, `version`, `backends` flags, `onnx`, optimizers'
implementation flags and `cuda`'s memory counters; values against PyTorch where it is installed."""
import math

import numpy as np
import pytest

import lazytensor as lt


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


TYPED = ["FloatTensor", "DoubleTensor", "HalfTensor", "LongTensor", "IntTensor", "ShortTensor", "CharTensor",
         "ByteTensor", "BoolTensor"]


@pytest.mark.parametrize("name", TYPED)
def test_a_typed_tensor_class_makes_pytorchs_dtype_from_data_and_from_sizes(torch, name):
    ours, theirs = getattr(lt, name)([1, 0, 3]), getattr(torch, name)([1, 0, 3])
    assert str(ours.dtype).split(".")[1] == str(theirs.dtype).split(".")[1]
    assert ours.tolist() == theirs.tolist()
    sized = getattr(lt, name)(2, 3)
    assert sized.shape == (2, 3) and sized.dtype == ours.dtype


@pytest.mark.parametrize("name", TYPED)
def test_type_names_a_tensors_class_as_pytorch_does(torch, name):
    assert getattr(lt, name)([1]).type() == getattr(torch, name)([1]).type() == f"torch.{name}"


def test_type_converts_to_a_class_its_name_or_a_dtype(torch):
    x, t = lt.tensor([1.7, -2.2, 3.0]), torch.tensor([1.7, -2.2, 3.0])
    assert x.type(lt.LongTensor).tolist() == t.type(torch.LongTensor).tolist()
    assert x.type("torch.DoubleTensor").dtype == lt.float64 and x.type(lt.int32).dtype == lt.int32


def test_isinstance_checks_a_typed_class_by_dtype():
    x = lt.ones(2)
    assert isinstance(x, lt.FloatTensor) and not isinstance(x, lt.LongTensor)
    assert isinstance(lt.arange(3), lt.LongTensor) and not isinstance(3, lt.LongTensor)


def test_the_legacy_tensor_constructor_takes_sizes_a_shape_or_data():
    assert lt.Tensor(2, 3).shape == (2, 3) and lt.Tensor(2, 3).dtype == lt.float32
    assert lt.Tensor([1, 2]).tolist() == [1.0, 2.0] and lt.Tensor([1, 2]).dtype == lt.float32
    assert lt.Tensor(lt.ones(4, 5).size()).shape == (4, 5)
    assert lt.Tensor().shape == (0,)
    with pytest.raises(TypeError, match="takes sizes"):
        lt.Tensor(2, "a")


@pytest.mark.parametrize("src,dst,shape", [("float32", "int32", (2, 3)), ("float32", "uint8", (2, 12)),
                                           ("float32", "float16", (2, 6)), ("int64", "float64", (2, 3)),
                                           ("int16", "uint8", (2, 6)), ("uint8", "bool", (2, 3))])
def test_view_as_another_dtype_reads_the_same_bytes_as_pytorch(torch, src, dst, shape):
    data = np.arange(1, 7).reshape(2, 3) * (7 if src != "uint8" else 0) % (2 if dst == "bool" else 1000)
    ours = lt.tensor(data.astype(src)).view(getattr(lt, dst))
    theirs = torch.tensor(data.astype(src)).view(getattr(torch, dst))
    assert ours.shape == tuple(theirs.shape) == shape
    assert ours.numpy().tobytes() == theirs.numpy().tobytes()


def test_view_as_a_wider_dtype_needs_a_last_dimension_it_divides():
    with pytest.raises(ValueError, match="does not hold a whole number of float32 elements"):
        lt.zeros(3, dtype=lt.uint8).view(lt.float32)
    assert lt.ones(2, 3).view(6).shape == (6,) and lt.ones(2, 3).view(-1, 2).shape == (3, 2)


def test_variable_is_a_tensor_that_records_gradients_when_asked():
    v = lt.autograd.Variable(lt.tensor([1.0, 2.0]), requires_grad=True)
    (v * v).sum().backward()
    assert isinstance(v, lt.Tensor) and v.grad.tolist() == [2.0, 4.0]
    assert lt.autograd.Variable(lt.ones(2)).requires_grad is False


def test_the_constants_version_and_dtype_names_are_pytorchs(torch):
    assert (lt.inf, lt.pi, lt.e) == (torch.inf, torch.pi, torch.e) == (math.inf, math.pi, math.e)
    assert math.isnan(lt.nan)
    assert lt.version.__version__ == lt.__version__ and lt.version.cuda is None
    for name in ("int8", "int16", "uint8", "short", "complex64", "cfloat"):
        assert str(getattr(lt, name)).split(".")[1] == str(getattr(torch, name)).split(".")[1]


def test_backends_flags_are_settable_and_a_misspelt_one_is_refused():
    lt.backends.cuda.matmul.allow_tf32 = True
    lt.backends.cudnn.benchmark = True
    lt.backends.cudnn.deterministic = True
    assert lt.backends.cuda.matmul.allow_tf32 and lt.backends.cudnn.benchmark
    assert lt.backends.mps.is_available() is False
    with pytest.raises(AttributeError, match="has no flag 'benchmrk'"):
        lt.backends.cudnn.benchmrk = True


def test_import_onnx_works_and_export_says_it_is_not_supported():
    import lazytensor.onnx
    with pytest.raises(NotImplementedError, match="cannot export ONNX"):
        lazytensor.onnx.export(lt.nn.Linear(2, 2), lt.ones(1, 2), "model.onnx")


@pytest.mark.parametrize("name,flags", [("AdamW", dict(fused=True)), ("AdamW", dict(foreach=False, capturable=False)),
                                         ("Adam", dict(foreach=True)), ("SGD", dict(foreach=True, fused=False)),
                                         ("Adagrad", dict(foreach=None)), ("RMSprop", dict(foreach=True)),
                                         ("Adadelta", dict(foreach=True))])
def test_optimizers_accept_pytorchs_implementation_flags_and_step_as_without_them(name, flags):
    def run(**kwargs):
        w = lt.tensor([0.5, -1.0, 2.0], requires_grad=True)
        opt = getattr(lt.optim, name)([w], lr=0.1, **kwargs)
        for _ in range(2):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
        return w.tolist()
    assert run(**flags) == run()


def test_differentiable_optimizer_steps_are_refused():
    with pytest.raises(NotImplementedError, match="differentiable=True"):
        lt.optim.AdamW([lt.ones(2, requires_grad=True)], differentiable=True)


def test_cuda_memory_counters_follow_the_devices_accounting(cuda_device):
    cuda_device()
    before = lt.cuda.memory_allocated()
    x = (lt.ones(256, 256, device="cuda") * 2).realize()
    assert lt.cuda.memory_allocated() >= before + 256 * 256 * 4
    assert lt.cuda.max_memory_allocated() >= lt.cuda.memory_allocated()
    del x
    lt.cuda.reset_peak_memory_stats()
    assert lt.cuda.max_memory_allocated() == lt.cuda.memory_allocated()
    assert lt.cuda.memory_reserved() >= lt.cuda.memory_allocated()
    lt.cuda.empty_cache()


def test_cuda_memory_counters_are_zero_without_cuda():
    lt.set_device("cpu")
    assert lt.cuda.memory_allocated() == lt.cuda.max_memory_allocated() == 0


def test_a_tensor_says_which_kind_of_device_it_is_on(torch):
    for x in (torch.ones(2), lt.ones(2, device="cpu")):
        assert (x.is_cpu, x.is_cuda, x.is_xpu, x.is_mps, x.is_meta) == (True, False, False, False, False)
    unplaced = lt.ones(2)  # on the active device
    assert (unplaced.is_cpu, unplaced.is_cuda) == (lt.get_device() == "cpu", lt.get_device() == "cuda")
    assert lt.ones(2).pin_memory().tolist() == [1.0, 1.0]


def test_accelerator_is_the_active_device_when_it_is_not_the_host():
    assert lt.accelerator.is_available() is (lt.get_device() != "cpu")
    current = lt.accelerator.current_accelerator()
    assert (current is None) if lt.get_device() == "cpu" else (current.type == lt.get_device())
    lt.accelerator.set_device_index(0)
    assert lt.accelerator.current_device_index() == 0


def test_cuda_set_device_records_the_index_a_rank_names():
    lt.cuda.set_device("cuda:1")
    try:
        assert lt.cuda.current_device() == 1
    finally:
        lt.cuda.set_device(0)
    with pytest.raises(ValueError, match="expected an index or 'cuda:N'"):
        lt.cuda.set_device("mps")


def test_backends_namespaces_import_as_modules():
    import lazytensor.backends.cuda as cuda_flags
    import lazytensor.backends.cudnn as cudnn
    assert cudnn is lt.backends.cudnn and cuda_flags is lt.backends.cuda


@pytest.mark.parametrize("make", ["zeros", "ones", "empty", "rand", "randn"])
def test_creation_takes_the_size_keyword(torch, make):
    assert tuple(getattr(lt, make)(size=(2, 3)).shape) == tuple(getattr(torch, make)(size=(2, 3)).shape)
    with pytest.raises(TypeError, match=rf"{make}\(\) got sizes both as arguments"):
        getattr(lt, make)(2, size=(3,))
