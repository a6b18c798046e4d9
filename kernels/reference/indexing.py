"""Index-driven copies: take (index_select / embedding lookup), take_along (gather), fancy getitem."""
import numpy as np


def check_bounds(op, index, size, axis):
    """Raise IndexError naming the first index outside [-size, size)."""
    if index.size == 0:
        return
    bad = (index < -size) | (index >= size)
    if bad.any():
        value = int(index[bad].reshape(-1)[0])
        raise IndexError(f"{op}: index {value} is out of range for dimension {axis} with size {size}")


def take(attrs, x, index):
    axis = attrs["axis"]
    check_bounds("index_select", index, x.shape[axis], axis)
    return np.take(x, index, axis=axis)


def take_along(attrs, x, index):
    axis = attrs["axis"]
    check_bounds("gather", index, x.shape[axis], axis)
    return np.take_along_axis(x, index.astype(np.int64, copy=False), axis=axis)


def fancy_index(attrs, x, *indices):
    """NumPy advanced indexing; `key` holds slices/ints/None and ("input", i) for index arrays."""
    key, it = [], iter(indices)
    for item in attrs["key"]:
        key.append(next(it) if isinstance(item, tuple) and item[0] == "input" else item)
    axis = 0
    for item, raw in zip(key, attrs["key"]):
        if isinstance(raw, tuple):
            check_bounds("index", item, x.shape[axis], axis)
        if item is not None:
            axis += 1
    return np.asarray(x[tuple(key)])


INDEX_KERNELS = {"take": take, "take_along": take_along, "index": fancy_index}
