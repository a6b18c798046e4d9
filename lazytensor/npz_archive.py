"""Reading an .npz archive with a JSON record beside its arrays, as lt.save wrote them before PyTorch's
format and as the training app writes its checkpoints: never unpickling, every failure one of a few
error types."""
import json
import zipfile
import zlib

import numpy as np


# What reading a damaged or foreign .npz raises (np.load with allow_pickle=False never unpickles; a bad
# JSON record or its text raises ValueErrors).
ARCHIVE_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, RecursionError, zlib.error,
                  NotImplementedError)


def read_archive(path, record_key):
    """(the JSON record stored under `record_key`, or None when there is none; the other arrays by name)
    from the .npz at `path`. Raises one of ARCHIVE_ERRORS for a file that is not a readable archive."""
    with np.load(path, allow_pickle=False) as z:
        if record_key not in z.files:
            return None, {}
        record = json.loads(z[record_key].tobytes().decode())
        return record, {k: z[k] for k in z.files if k != record_key}
