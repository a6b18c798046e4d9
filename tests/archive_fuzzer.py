"""Random PyTorch-format archives against `lt.load`, under an address-space limit: random pickle opcodes
over the allow-list (storages of random types and sizes, tensors with random offsets, sizes and strides,
containers, memo records, BUILD and REDUCE on whatever is on the stack) and random damage to the zip.
Every load either returns or raises LoadError, never asks for more memory than the limit leaves, and
leaves the library's dtypes as they were. Run as a script (tests/test_load_safety.py does, in a process
of its own); prints a summary line."""
import io
import resource
import struct
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import lazytensor as lt
from lazytensor.serialization import LoadError
from crafted_archives import Pickle, archive

STORAGES = ["FloatStorage", "DoubleStorage", "HalfStorage", "LongStorage", "ByteStorage", "BoolStorage",
            "NoSuchStorage"]
GLOBALS = [("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_parameter"),
           ("collections", "OrderedDict"), ("torch", "float32"), ("torch", "FloatStorage"), ("builtins", "set"),
           ("builtins", "complex"), ("builtins", "slice"), ("torch", "device"), ("os", "system"),
           ("builtins", "getattr"), ("numpy.core.multiarray", "_reconstruct"), ("numpy", "ndarray"),
           ("numpy", "dtype"), ("_codecs", "encode"), ("numpy._core.multiarray", "scalar")]
SIZES = st.integers(-3, 1 << 40) | st.integers(0, 40)


def _fragment(draw):
    kind = draw(st.sampled_from(["int", "float", "str", "storage", "tensor", "mark", "tuple", "list", "append",
                                 "appends", "dict", "setitem", "setitems", "build", "reduce", "global", "put",
                                 "get", "dup", "pop", "byte", "empty"]))
    p = Pickle()
    del p.out[:]
    if kind == "int":
        p.raw(b"J" + struct.pack("<i", draw(st.integers(-2**31, 2**31 - 1))))
    elif kind == "float":
        p.float(draw(st.floats(allow_nan=True)))
    elif kind == "str":
        p.str(draw(st.sampled_from(["storage", "array", "0", "1", "cpu", "cuda:0", "name", "np", "__class__", "f4",
                                    "O", "latin1", "b", "<", ">"])))
    elif kind == "storage":
        p.storage(draw(st.sampled_from(["0", "1", "2"])), draw(st.integers(0, 1 << 20)),
                  draw(st.sampled_from(STORAGES)))
    elif kind == "tensor":
        ndim = draw(st.integers(0, 4))
        sizes = draw(st.lists(st.integers(0, 1 << 20) | st.integers(0, 5), min_size=ndim, max_size=ndim))
        strides = draw(st.lists(st.integers(0, 1 << 20) | st.integers(0, 5), min_size=ndim, max_size=ndim))
        p.tensor(draw(st.sampled_from(["0", "1"])), draw(st.integers(0, 64)), draw(st.integers(0, 70)), sizes,
                 strides, draw(st.sampled_from(STORAGES)))
    elif kind == "mark":
        p.mark()
    elif kind in ("tuple", "list", "append", "appends", "dict", "setitem", "setitems", "build", "reduce", "dup",
                  "pop", "empty"):
        p.raw({"tuple": b"t", "list": b"l", "append": b"a", "appends": b"e", "dict": b"d", "setitem": b"s",
               "setitems": b"u", "build": b"b", "reduce": b"R", "dup": b"2", "pop": b"0",
               "empty": draw(st.sampled_from([b"]", b"}", b")", b"N", b"\x8f"]))}[kind])
    elif kind == "global":
        p.glob(*draw(st.sampled_from(GLOBALS)))
    elif kind == "put":
        p.raw(b"r" + struct.pack("<I", draw(st.integers(0, 2**32 - 1))))
    elif kind == "get":
        p.raw(b"j" + struct.pack("<I", draw(st.integers(0, 3))))
    else:
        p.raw(bytes([draw(st.integers(0, 255))]))
    return bytes(p.out)


@st.composite
def tensor_lists(draw):
    """Well-formed archives of a list of tensors over random storages, offsets, sizes and strides."""
    p = Pickle().raw(b"]").mark()
    storages = {}
    small = st.integers(0, 9)
    for _ in range(draw(st.integers(1, 6))):
        key = draw(st.sampled_from(["0", "1"]))
        kind, numel = storages.setdefault(key, (draw(st.sampled_from(STORAGES[:-1])), draw(st.integers(0, 64))))
        ndim = draw(st.integers(0, 3))
        dims = st.lists(small | small | SIZES.filter(lambda n: 0 <= n < 2**31), min_size=ndim, max_size=ndim)
        p.tensor(key, numel, draw(small | st.integers(0, 70)), draw(dims), draw(dims), kind)
    data = [(k, np.arange(n * 8, dtype=np.uint8).tobytes()[:n * 8 - draw(st.integers(0, 2)) * draw(small)])
            for k, (_, n) in storages.items()]
    return archive(p.raw(b"e").stop(), data)


@st.composite
def damaged(draw):
    body = b"\x80\x02" + b"".join(draw(st.lists(st.builds(lambda: None).flatmap(
        lambda _: st.composite(lambda d: _fragment(d))()), max_size=30))) + b"."
    storages = [(k, draw(st.binary(max_size=64))) for k in draw(st.sets(st.sampled_from(["0", "1", "2"])))]
    data = bytearray(archive(body, storages))
    for _ in range(draw(st.integers(0, 3))):  # damage to the zip itself
        at = draw(st.integers(0, len(data) - 1))
        data[at] = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


SEEN = {"loaded": 0, "refused": 0}


@settings(max_examples=int(sys.argv[1]) if len(sys.argv) > 1 else 400, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(tensor_lists() | damaged(), st.sampled_from([None, "cpu"]))
def fuzz(data, where):
    before = (repr(lt.float32), lt.float32.np, lt.int32.np)
    try:
        out = lt.load(io.BytesIO(data), map_location=where)
    except LoadError as exc:
        assert "more memory" not in str(exc), str(exc)
        SEEN["refused"] += 1
    else:
        SEEN["loaded"] += 1
        for t in out if isinstance(out, list) else [out]:
            if isinstance(t, lt.Tensor) and t.numel() < 1000:
                assert t.numpy().shape == t.shape
    assert (repr(lt.float32), lt.float32.np, lt.int32.np) == before


def _limit_address_space(extra_bytes):
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + extra_bytes, resource.RLIM_INFINITY))


if __name__ == "__main__":
    lt.ones(3).tolist()  # the kernels the loads may touch, compiled before the limit
    np.zeros(1)
    _limit_address_space(512 << 20)
    fuzz()
    print(f"{SEEN['loaded'] + SEEN['refused']} archives loaded or refused ({SEEN['loaded']} loaded, "
          f"{SEEN['refused']} LoadError) under a 512 MiB address-space allowance")
