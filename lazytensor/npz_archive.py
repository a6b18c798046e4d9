"""Reading an .npz archive with a JSON record beside its arrays, as lt.save wrote them before PyTorch's
format and as the training app writes its checkpoints: never unpickling, memory proportional to the file
(every array's declared size is checked against its bytes before anything is allocated), every failure
one of a few error types."""
import json
import math
import zipfile
import zlib

import numpy as np


# What reading a damaged or foreign .npz raises (np.load with allow_pickle=False never unpickles; a bad
# JSON record or its text raises ValueErrors).
ARCHIVE_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, RecursionError, zlib.error,
                  NotImplementedError, RuntimeError, MemoryError)

# Deflate's largest ratio is 1032:1; an entry declaring more bytes than this per stored byte lies.
_MAX_RATIO = 1100


def read_archive(path, record_key):
    """(the JSON record stored under `record_key`, or None when there is none; the other arrays by name)
    from the .npz at `path`. Raises one of ARCHIVE_ERRORS for a file that is not a readable archive."""
    check_sizes(path)
    with np.load(path, allow_pickle=False) as z:
        if record_key not in z.files:
            return None, {}
        record = json.loads(z[record_key].tobytes().decode())
        return record, {k: z[k] for k in z.files if k != record_key}


def check_sizes(path):
    """ValueError unless every member of the .npz at `path` is stored or deflated, unencrypted, and
    holds the bytes its array header declares (so reading it allocates no more than the file holds)."""
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if info.flag_bits & 0x1:
                raise ValueError(f"member {info.filename[:60]!r} is encrypted")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise ValueError(f"member {info.filename[:60]!r} uses compression method {info.compress_type}")
            if info.file_size > max(info.compress_size, 1) * _MAX_RATIO:
                raise ValueError(f"member {info.filename[:60]!r} declares {info.file_size} bytes from "
                                 f"{info.compress_size}")
            if not info.filename.endswith(".npy"):
                continue
            with z.open(info) as member:
                version = np.lib.format.read_magic(member)
                read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, _, dtype = read_header(member)
                header_end = member.tell()
            if dtype.hasobject:
                raise ValueError(f"member {info.filename[:60]!r} holds Python objects")
            need = math.prod(shape) * dtype.itemsize
            if need > info.file_size - header_end:
                raise ValueError(f"member {info.filename[:60]!r} declares shape {shape[:8]} of {dtype} ({need} "
                                 f"bytes) but holds {info.file_size - header_end}")
