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


def _scatter_add(shape, dtype, key, g):
    """zeros(shape) with g added at `key`, repeated indices accumulated in index order in float64
    (int64 for integers) and rounded once: deterministic, no atomics."""
    dtype = np.dtype(dtype)
    wide = np.float64 if dtype.kind == "f" else np.int64
    acc = np.zeros(shape, dtype=wide)
    np.add.at(acc, key, g.astype(wide, copy=False))
    return acc.astype(dtype)


def scatter_take(attrs, g, index):
    """The gradient of take (index_select / embedding lookup): scatter-add rows back."""
    axis = attrs["axis"]
    shape = attrs["shape"]
    index = np.where(index < 0, index + shape[axis], index)
    key = (slice(None),) * axis + (index,)
    return _scatter_add(shape, g.dtype, key, g)


def scatter_take_along(attrs, g, index):
    """The gradient of take_along (gather)."""
    axis, shape = attrs["axis"], attrs["shape"]
    index = np.where(index < 0, index + shape[axis], index)
    index = np.broadcast_to(index, g.shape)
    grids = np.meshgrid(*(np.arange(n) for n in g.shape), indexing="ij", sparse=True)
    key = tuple(index if d == axis else grids[d] for d in range(g.ndim))
    return _scatter_add(shape, g.dtype, key, g)


def scatter_index(attrs, g, *indices):
    """The gradient of advanced indexing."""
    key, it = [], iter(indices)
    for item in attrs["key"]:
        key.append(next(it) if isinstance(item, tuple) and item[0] == "input" else item)
    return _scatter_add(attrs["shape"], g.dtype, tuple(key), g)


def scatter_along(attrs, x, src, index):
    """PyTorch's scatter: x with src written at `index` along `axis` (for axis 0, out[index[i][j]][j] =
    src[i][j]; src has index's shape). Where positions repeat, the last in index's row-major order
    wins (PyTorch leaves it unspecified). Indices are in [0, size): negative ones are errors, as there."""
    axis = attrs["axis"]
    size = x.shape[axis]
    if index.size and (index.min() < 0 or index.max() >= size):
        bad = index[(index < 0) | (index >= size)].reshape(-1)[0]
        raise IndexError(f"scatter: index {int(bad)} is out of range for dimension {axis} with size {size}")
    out = np.array(x, copy=True)
    if index.size == 0:
        return out
    grids = np.indices(index.shape, sparse=True)
    key = np.broadcast_arrays(*(index if d == axis else grids[d] for d in range(x.ndim)))
    flat = np.ravel_multi_index(key, x.shape).reshape(-1)
    _, first_from_end = np.unique(flat[::-1], return_index=True)
    last = flat.size - 1 - first_from_end
    out.reshape(-1)[flat[last]] = np.asarray(src).reshape(-1)[last]
    return out


INDEX_KERNELS.update({"scatter_take": scatter_take, "scatter_take_along": scatter_take_along,
                      "scatter_index": scatter_index, "scatter_along": scatter_along})
