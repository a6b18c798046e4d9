"""PyTorch's checkpoint format: a state dict saved by PyTorch loads into the same lazytensor model and goes
back with the same bytes; paths and file objects; map_location; the older .npz format still loads;
an archive that would run code when unpickled raises a clear error and runs nothing."""
import io
import os
import pickle
import zipfile

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.serialization import LoadError


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _model(nn):
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2 * 4 * 4, 3), nn.LSTM(3, 4))


def test_a_pytorch_state_dict_loads_into_the_same_model_and_goes_back_with_equal_bytes(torch, tmp_path):
    theirs = _model(torch.nn)
    torch.save(theirs.state_dict(), tmp_path / "model.pt")
    ours = _model(lt.nn)
    result = ours.load_state_dict(lt.load(tmp_path / "model.pt"))
    assert result.missing_keys == [] and result.unexpected_keys == []
    lt.save(ours.state_dict(), tmp_path / "back.pt")
    back = torch.load(tmp_path / "back.pt", weights_only=True)
    assert list(back) == list(theirs.state_dict())
    for key, value in theirs.state_dict().items():
        assert back[key].dtype == value.dtype and back[key].numpy().tobytes() == value.numpy().tobytes(), key
    twin = _model(torch.nn)
    twin.load_state_dict(back)


def test_an_optimizer_state_saved_by_pytorch_loads_with_its_step_tensors(torch):
    w = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([w])
    w.sum().backward()
    opt.step()
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    state = lt.load(buf)
    assert state["param_groups"][0]["betas"] == (0.9, 0.999)
    assert float(state["state"][0]["step"]) == 1.0 and state["state"][0]["exp_avg"].shape == (3,)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
                                   "bool", "complex64"])
def test_every_dtype_round_trips_through_pytorch(torch, dtype):
    value = torch.arange(6).reshape(2, 3).to(getattr(torch, dtype))[:, 1:]  # a strided view
    buf = io.BytesIO()
    torch.save({"v": value}, buf)
    buf.seek(0)
    ours = lt.load(buf)["v"]
    assert ours.shape == (2, 2) and str(ours.dtype).endswith(dtype)
    out = io.BytesIO()
    lt.save({"v": ours}, out)
    out.seek(0)
    back = torch.load(out, weights_only=True)["v"]
    assert back.dtype == value.dtype and torch.equal(back, value)


def test_save_and_load_take_file_objects_and_containers():
    buf = io.BytesIO()
    lt.save({"w": lt.ones(2, 3), "epoch": 3, "hist": [1.5, None, "x"], "pair": (True, -1)}, buf)
    buf.seek(0)
    back = lt.load(buf)
    assert back["epoch"] == 3 and back["hist"] == [1.5, None, "x"] and back["pair"] == (True, -1)
    assert lt.equal(back["w"], lt.ones(2, 3))


def test_map_location_moves_loaded_tensors(virtual):
    virtual()
    buf = io.BytesIO()
    lt.save({"w": lt.ones(4)}, buf)
    buf.seek(0)
    w = lt.load(buf, map_location="virtual")["w"]
    assert w.device == "virtual" and w.residency in (lt.Residency.DEVICE, lt.Residency.BOTH)
    buf.seek(0)
    assert lt.load(buf, map_location={"cpu": "cpu"})["w"].device == "cpu"
    buf.seek(0)
    seen = []
    lt.load(buf, map_location=lambda t, where: seen.append(where) or t)
    assert seen == ["cpu"]


def test_a_whole_module_pickle_is_refused_naming_the_class(torch, tmp_path):
    torch.save(torch.nn.Linear(2, 2), tmp_path / "whole.pt")
    with pytest.raises(LoadError, match=r"refuses to unpickle torch\.nn\.modules\.linear\.Linear.*state_dict"):
        lt.load(tmp_path / "whole.pt")


def test_a_crafted_archive_that_would_run_code_raises_and_runs_nothing(tmp_path):
    ran = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(ran),))
    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("evil/data.pkl", pickle.dumps({"weight": Payload()}, protocol=2))
        z.writestr("evil/version", "3\n")
    with pytest.raises(LoadError, match=r"refuses to unpickle posix\.mkdir|refuses to unpickle os\.mkdir"):
        lt.load(path)
    assert not ran.exists()


def test_a_storage_record_that_reads_past_its_bytes_is_refused(tmp_path):
    buf = io.BytesIO()
    lt.save({"w": lt.ones(4)}, buf)
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as src, zipfile.ZipFile(tmp_path / "cut.pt", "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            dst.writestr(name, data[:8] if name.endswith("data/0") else data)
    with pytest.raises(LoadError, match="holds 8 bytes"):
        lt.load(tmp_path / "cut.pt")


def test_files_of_the_earlier_npz_format_still_load(tmp_path):
    header = np.frombuffer(b'{"format": "lazytensor-save-1", "structure": {"dict": [["w", {"tensor": "a0"}]]}}',
                           dtype=np.uint8)
    np.savez(tmp_path / "old.lt", __structure__=header, a0=np.arange(3.0))
    assert lt.load(tmp_path / "old.lt.npz")["w"].tolist() == [0.0, 1.0, 2.0]


def test_numpy_arrays_round_trip_as_arrays_and_numpy_scalars_as_numbers():
    buf = io.BytesIO()
    lt.save({"a": np.arange(3), "f": np.asfortranarray(np.ones((2, 3), np.float32)), "s": np.float32(1.5)}, buf)
    buf.seek(0)
    back = lt.load(buf)
    assert isinstance(back["a"], np.ndarray) and back["a"].tolist() == [0, 1, 2] and back["a"].dtype == np.int64
    assert back["f"].dtype == np.float32 and back["f"].shape == (2, 3) and back["f"].sum() == 6
    assert lt.from_numpy(back["a"]).tolist() == [0, 1, 2]  # a program's torch.from_numpy(torch.load(...))
    assert back["s"] == 1.5 and type(back["s"]) is float


def test_numpy_arrays_torch_saved_load_as_arrays(torch):
    buf = io.BytesIO()
    arrays = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "i": np.arange(4), "b": np.array([True, False]),
              "c": np.array([1 + 2j]), "t": np.ones((3, 2), np.float64).T, "s": np.float64(2.5)}
    torch.save(arrays, buf)
    buf.seek(0)
    back = lt.load(buf)
    for k, v in arrays.items():
        assert type(back[k]) is type(v) and back[k].dtype == v.dtype and np.array_equal(back[k], v), k


def test_numpy_arrays_lt_saved_load_in_pytorch_with_numpys_globals_allowed(torch):
    buf = io.BytesIO()
    lt.save({"a": np.arange(3.0)}, buf)
    buf.seek(0)
    assert torch.load(buf, weights_only=False)["a"].tolist() == [0.0, 1.0, 2.0]


def test_an_object_array_or_a_structured_one_is_refused_by_save():
    for bad in (np.array([{}], dtype=object), np.zeros(2, dtype=[("x", "f4")])):
        with pytest.raises(TypeError, match="cannot be saved as an array"):
            lt.save({"a": bad}, io.BytesIO())
