"""`lt.load` of files made to hurt: every crafted archive is a LoadError (or the value PyTorch loads),
in memory proportional to the file, with nothing in the library changed; a missing file is a
FileNotFoundError; devices and text files get a message that fits them."""
import io
import os
import struct
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

import lazytensor as lt
from lazytensor.serialization import LoadError
from crafted_archives import Pickle, archive, with_headers

FLOATS4 = np.arange(4, dtype=np.float32).tobytes()
HUNDRED_MB = 100 << 20


def _load(data, **kwargs):
    """lt.load of archive bytes, asserting it allocated under 100 MB; returns the loaded value."""
    tracemalloc.start()
    try:
        return lt.load(io.BytesIO(data), **kwargs)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < HUNDRED_MB, f"lt.load allocated {peak / 2**20:.0f} MB"


def _refused(data, match, **kwargs):
    with pytest.raises(LoadError, match=match):
        _load(data, **kwargs)


def test_a_storage_replaced_through_build_by_a_two_dimensional_array_is_refused():
    # The pickle swaps the storage's array for a (2, 16) one made by calling FloatStorage on nested lists;
    # a 30-element tensor over it would read 14 floats of heap past the buffer.
    def swap(p):
        p.raw(b"}").str("array").glob("torch", "FloatStorage").mark()
        p.raw(b"]").mark()
        for _ in range(2):
            p.raw(b"]").mark()
            for _ in range(16):
                p.float(1.0)
            p.raw(b"e")
        p.raw(b"e").tuple().raw(b"R").raw(b"s").raw(b"b")
    data = archive(Pickle().tensor("0", 4, 1, (30,), (1,), between=swap).stop(), [("0", FLOATS4)])
    _refused(data, r"sets the state of a _Storage|calls a Tag")


def test_calling_a_storage_type_on_nested_lists_is_refused():
    data = archive(Pickle().glob("torch", "FloatStorage").mark().raw(b"]").float(1.0).raw(b"a").tuple()
                   .raw(b"R").stop())
    _refused(data, "not a callable it may use")


def test_build_on_an_allow_listed_dtype_is_refused_and_leaves_the_dtype_alone():
    data = archive(b"\x80\x02ctorch\nfloat32\n(N(dVname\nVint8\nsVnp\nctorch\nHalfStorage\nstb.")
    _refused(data, r"sets the state of a DType")
    assert repr(lt.float32) == "lt.float32" and lt.float32.name == "float32"
    assert lt.ones(3).tolist() == [1.0, 1.0, 1.0]


def test_a_huge_zero_stride_view_of_one_float_loads_as_a_view_without_copying():
    data = archive(Pickle().tensor("0", 1, 0, (100000, 100000), (0, 0)).stop(), [("0", FLOATS4[4:8])])
    t = _load(data)
    assert t.shape == (100000, 100000) and t[5, 7].item() == 1.0


def test_tensors_over_one_storage_share_it_as_pytorch_does():
    numel = 1 << 18  # 1 MiB of float32
    p = Pickle().raw(b"]").mark()
    for i in range(2000):
        p.tensor("0", numel, i, (numel - 2000,), (1,))
    data = archive(p.raw(b"e").stop(), [("0", np.arange(numel, dtype=np.float32).tobytes())])
    loaded = _load(data)
    assert len(loaded) == 2000 and loaded[1999][0].item() == 1999.0 and loaded[3][2].item() == 5.0


def test_a_write_to_a_tensor_sharing_a_storage_leaves_the_others_unchanged():
    p = Pickle().raw(b"]").mark()
    p.tensor("0", 4, 0, (4,), (1,)).tensor("0", 4, 1, (3,), (1,))
    a, b = _load(archive(p.raw(b"e").stop(), [("0", FLOATS4)]))
    a[1] = 10.0
    a.add_(1)
    assert a.tolist() == [1.0, 11.0, 3.0, 4.0] and b.tolist() == [1.0, 2.0, 3.0]


def test_a_memo_index_of_a_hundred_million_costs_nothing():
    assert _load(archive(b"\x80\x02Nr\x00\xe1\xf5\x05.")) is None


@pytest.mark.parametrize("opcode", [b"\x8e", b"B", b"X", b"\x8d"])
def test_a_length_past_the_end_of_the_pickle_is_refused(opcode):
    width = 8 if opcode in (b"\x8e", b"\x8d") else 4
    data = archive(b"\x80\x02" + opcode + (1 << 40 if width == 8 else 1 << 31).to_bytes(width, "little") + b".")
    _refused(data, r"needs \d+ bytes; only \d+ remain")


def test_an_archive_with_a_bad_checksum_is_a_load_error():
    data = bytearray(archive(Pickle().tensor("0", 4, 0, (4,), (1,)).stop(), [("0", FLOATS4)]))
    at = bytes(data).find(FLOATS4)
    data[at + 5] ^= 0xFF
    _refused(bytes(data), r"damaged archive \(BadZipFile")


def test_a_broken_deflate_stream_is_a_load_error():
    payload = np.zeros(4096, np.float32).tobytes()
    data = bytearray(archive(Pickle().tensor("0", 4096, 0, (4096,), (1,)).stop(), [("0", payload)],
                             compression=zipfile.ZIP_DEFLATED))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as z:
        info = z.getinfo("archive/data/0")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start:start + 8] = b"\xff" * 8
    _refused(bytes(data), "damaged archive")


def test_an_encrypted_entry_is_a_load_error():
    data = with_headers(archive(Pickle().none().stop()), flags=0x1)
    _refused(data, "is encrypted")


def test_an_unknown_compression_method_is_a_load_error():
    data = with_headers(archive(Pickle().none().stop()), method=99)
    _refused(data, "compressed with method 99")


def test_lists_nested_a_hundred_thousand_deep_load_and_map_location_is_fine():
    depth = 100_000
    data = archive(b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")
    out = _load(data, map_location="cpu")
    for _ in range(depth - 1):
        assert len(out) == 1
        out = out[0]
    assert out == []


def test_a_list_that_contains_itself_loads_with_map_location():
    data = archive(b"\x80\x02]q\x00h\x00a.")  # l = []; l.append(l)
    out = _load(data, map_location="cpu")
    assert out[0] is out


def _huge_npz(tmp_path):
    """An .npz whose one array declares shape (10**12,) of float64 and holds 8 bytes."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": (10 ** 12,)})
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w.npy", member.getvalue() + b"\0" * 8)
    return path


def test_an_npz_declaring_a_huge_shape_is_a_load_error(tmp_path):
    path = _huge_npz(tmp_path)
    with pytest.raises(LoadError, match=r"declares shape \(1000000000000,\)"):
        lt.load(path)


def test_resuming_from_an_npz_declaring_a_huge_shape_prints_one_line_and_exits_2(tmp_path):
    path = _huge_npz(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "lazytensor_train", "train", "--resume", str(path), "--steps", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "huge.npz" in proc.stderr


def test_loading_a_device_file_fails_at_once():
    with pytest.raises(LoadError, match="not a regular file"):
        lt.load("/dev/zero")


def test_loading_a_missing_file_raises_file_not_found_as_torch_load_does(tmp_path):
    with pytest.raises(FileNotFoundError):
        lt.load(tmp_path / "missing.pt")
    try:  # the resume pattern of PyTorch scripts
        lt.load(str(tmp_path / "missing.pt"))
    except FileNotFoundError as exc:
        assert "missing.pt" in str(exc)


def test_a_text_file_is_named_as_not_a_checkpoint_without_pickle_advice(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello, these are notes\n")
    with pytest.raises(LoadError, match="not a zip archive") as info:
        lt.load(path)
    assert "allow_pickle" not in str(info.value)


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_storage_entry_written_twice_is_refused():
    data = archive(Pickle().tensor("0", 4, 0, (4,), (1,)).stop(), [("0", FLOATS4), ("0", FLOATS4[::-1])])
    _refused(data, "twice")


def test_a_garbage_byteorder_is_refused():
    data = archive(Pickle().tensor("0", 4, 0, (4,), (1,)).stop(), [("0", FLOATS4)],
                   extra=[("archive/byteorder", "sideways")])
    _refused(data, "byteorder record says 'sideways'")


def test_a_big_endian_archive_loads_its_values():
    data = archive(Pickle().tensor("0", 4, 0, (4,), (1,)).stop(),
                   [("0", np.arange(4, dtype=">f4").tobytes())], extra=[("archive/byteorder", "big")])
    assert _load(data).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_negative_storage_size_is_refused():
    p = Pickle().glob("torch._utils", "_rebuild_tensor_v2").mark()
    p.mark().str("storage").glob("torch", "FloatStorage").str("0").str("cpu").raw(b"J" + struct.pack("<i", -1))
    p.tuple().raw(b"Q").int(0).ints((1,)).ints((1,)).false().glob("collections", "OrderedDict").raw(b")R")
    _refused(archive(p.tuple().raw(b"R").stop(), [("0", FLOATS4)]), "has -1 elements")


def test_a_fractional_size_is_refused():
    p = Pickle().glob("torch._utils", "_rebuild_tensor_v2").mark().storage("0", 4)
    p.int(0).mark().float(2.5).tuple().ints((1,)).false().glob("collections", "OrderedDict").raw(b")R")
    _refused(archive(p.tuple().raw(b"R").stop(), [("0", FLOATS4)]), "size is float 2.5, not an integer")


def test_the_allow_listed_objects_are_the_same_after_every_crafted_file():
    before = (repr(lt.float32), lt.float32.np, lt.int32.np, lt.ones(2).tolist())
    for data in (archive(b"\x80\x02ctorch\nfloat32\n}VnpN\x86b."),
                 archive(b"\x80\x02ctorch\nfloat32\n}V__class__ctorch\nint8\nsb."),
                 archive(b"\x80\x02ccollections\nOrderedDict\n)R(}V__class__NsNtb.")):
        with pytest.raises(LoadError):
            _load(data)
    assert (repr(lt.float32), lt.float32.np, lt.int32.np, lt.ones(2).tolist()) == before


def test_a_state_dicts_metadata_is_kept_on_the_loaded_ordered_dict(tmp_path):
    torch = pytest.importorskip("torch")
    torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "sd.pt")
    sd = lt.load(tmp_path / "sd.pt")
    assert list(sd) == ["weight", "bias"] and sd._metadata[""] == {"version": 1}


def test_the_archive_fuzzer_finds_only_load_errors_under_a_memory_limit():
    here = os.path.dirname(__file__)
    proc = subprocess.run([sys.executable, os.path.join(here, "archive_fuzzer.py")], capture_output=True,
                          text=True, timeout=600, cwd=here)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "archives loaded or refused" in proc.stdout


def _numpy_array_pickle(shape=(2,), code="f4", raw=b"\0" * 8, byteorder="<", builds=1):
    """NumPy's protocol-2 pickle of an array, opcode by opcode, with its parts open to tampering."""
    p = Pickle().glob("numpy.core.multiarray", "_reconstruct").glob("numpy", "ndarray").int(0).raw(b"\x85")
    p.glob("_codecs", "encode").str("b").str("latin1").raw(b"\x86R").raw(b"\x87R").raw(b"q\x00")
    for _ in range(builds):  # BUILD leaves the array on the stack
        p.mark().int(1).ints(shape).glob("numpy", "dtype").str(code).raw(b"\x89\x88\x87R")
        p.mark().int(3).str(byteorder).none().none().none().raw((b"J" + struct.pack("<i", -1)) * 2).int(0)
        p.tuple().raw(b"b")
        p.false().glob("_codecs", "encode").str(raw.decode("latin1")).str("latin1").raw(b"\x86R").tuple().raw(b"b")
    return p.stop()


def test_a_numpy_array_record_loads_as_that_array():
    raw = np.array([1.5, -2.0], np.float32).tobytes()
    out = _load(archive(_numpy_array_pickle(raw=raw)))
    assert isinstance(out, np.ndarray) and out.tolist() == [1.5, -2.0]


@pytest.mark.parametrize("change, match", [
    (dict(raw=b"\0" * 12), "needs 8 bytes, the record holds 12"),
    (dict(code="O"), "not a plain number type"),
    (dict(byteorder=">"), "byte order '>'"),
    (dict(builds=2), "arrays this file made"),
])
def test_a_tampered_numpy_array_record_is_refused(change, match):
    _refused(archive(_numpy_array_pickle(**change)), match)
    assert np.dtype("f4").byteorder == "=" and np.dtype("f4").str == "<f4"


def test_numpy_reconstruct_of_anything_but_an_ndarray_and_other_encodings_are_refused():
    p = Pickle().glob("numpy.core.multiarray", "_reconstruct").glob("collections", "OrderedDict").int(0)
    _refused(archive(p.raw(b"\x85").str("b").raw(b"\x87R").stop()), "only for a plain ndarray")
    p = Pickle().glob("_codecs", "encode").str("x").str("utf-7").raw(b"\x86R")
    _refused(archive(p.stop()), "latin-1")
