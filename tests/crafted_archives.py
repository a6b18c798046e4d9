"""Building PyTorch-format archives byte by byte, as an attacker would: a pickle written opcode by opcode
(`Pickle`) and a zip around it (`archive`), with the zip's fields open to tampering."""
import io
import struct
import zipfile


class Pickle:
    """Pickle opcodes appended one call at a time; `bytes()` is the stream so far."""

    def __init__(self, protocol=2):
        self.out = bytearray(b"\x80" + bytes([protocol]))

    def raw(self, data):
        self.out += data
        return self

    def glob(self, module, name):
        return self.raw(f"c{module}\n{name}\n".encode())

    def mark(self):
        return self.raw(b"(")

    def tuple(self):
        return self.raw(b"t")

    def int(self, n):
        return self.raw(b"K" + bytes([n]) if 0 <= n < 256 else b"J" + struct.pack("<i", n))

    def float(self, x):
        return self.raw(b"G" + struct.pack(">d", x))

    def str(self, s):
        data = s.encode()
        return self.raw(b"X" + struct.pack("<I", len(data)) + data)

    def none(self):
        return self.raw(b"N")

    def false(self):
        return self.raw(b"\x89")

    def ints(self, values):
        self.mark()
        for v in values:
            self.int(v)
        return self.tuple()

    def storage(self, key, numel, kind="FloatStorage"):
        """A persistent id naming storage `key` of `numel` elements."""
        self.mark().str("storage").glob("torch", kind).str(key).str("cpu").int(numel).tuple()
        return self.raw(b"Q")

    def tensor(self, key, numel, offset, size, stride, kind="FloatStorage", between=None):
        """`_rebuild_tensor_v2(storage, offset, size, stride, False, OrderedDict())`; `between(self)`
        writes opcodes right after the storage is pushed."""
        self.glob("torch._utils", "_rebuild_tensor_v2").mark().storage(key, numel, kind)
        if between is not None:
            between(self)
        self.int(offset).ints(size).ints(stride).false()
        self.glob("collections", "OrderedDict").raw(b")R")
        return self.tuple().raw(b"R")

    def stop(self):
        return bytes(self.out + b".")


def archive(pickle_bytes, storages=(), extra=(), name="archive", compression=zipfile.ZIP_STORED):
    """The bytes of a zip holding `name/data.pkl`, `name/data/<key>` for (key, bytes) in `storages`,
    and (entry, bytes) pairs `extra` as they are."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        z.writestr(f"{name}/data.pkl", pickle_bytes)
        for key, data in storages:
            z.writestr(f"{name}/data/{key}", data)
        for entry, data in extra:
            z.writestr(entry, data)
        z.writestr(f"{name}/version", "3\n")
    return buf.getvalue()


def with_headers(data, flags=None, method=None):
    """`data` (a zip) with every local and central file header's general-purpose flags and/or
    compression method set as given (the entries' bytes unchanged)."""
    data = bytearray(data)
    for sig, at_flags in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(sig)
        while at >= 0:
            if flags is not None:
                struct.pack_into("<H", data, at + at_flags, flags)
            if method is not None:
                struct.pack_into("<H", data, at + at_flags + 2, method)
            at = data.find(sig, at + 4)
    return bytes(data)
