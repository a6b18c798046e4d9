"""Sparse COO matrices in PyTorch's shape, for graph networks: `lt.sparse_coo_tensor(indices, values, size)`,
`Tensor.to_sparse()`, `coalesce()`, `to_dense()`, and `lt.sparse.mm` / `lt.spmm` / `sparse @ dense`.

A SparseTensor is its (2, nnz) int64 indices, its (nnz,) values (a lazytensor Tensor, which may require
grad) and its shape. A product with a dense matrix gathers the dense rows its column indices name, scales
them by the values and adds them into the rows its row indices name (one index_select, one index_add), so
gradients reach the dense operand and the values. Indices are read on the host where coalescing needs
them (duplicates summed, order sorted).
"""
import numpy as np

from . import dtypes
from .creation import tensor, zeros
from .indexing import index_add
from .tensor import Tensor


class SparseTensor:
    """A 2-D sparse matrix in COO form (PyTorch's layout=torch.sparse_coo)."""

    is_sparse = True
    layout = "sparse_coo"

    def __init__(self, indices, values, size, coalesced=False):
        self._i, self._v, self.shape, self._coalesced = indices, values, tuple(size), coalesced

    # PyTorch's accessors
    def indices(self):
        if not self._coalesced:
            raise RuntimeError("indices(): call coalesce() first (PyTorch's rule; _indices() reads them as they are)")
        return self._i

    def values(self):
        if not self._coalesced:
            raise RuntimeError("values(): call coalesce() first (PyTorch's rule; _values() reads them as they are)")
        return self._v

    def _indices(self):
        return self._i

    def _values(self):
        return self._v

    def _nnz(self):
        return self._i.shape[1]

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return len(self.shape)

    @property
    def dtype(self):
        return self._v.dtype

    @property
    def requires_grad(self):
        return self._v.requires_grad

    def is_coalesced(self):
        return self._coalesced

    def coalesce(self):
        """Duplicate positions summed into one, positions in row-major order (values stay differentiable)."""
        if self._coalesced:
            return self
        rows, cols = self._i.numpy()
        flat = rows.astype(np.int64) * self.shape[1] + cols
        unique, inverse = np.unique(flat, return_inverse=True)
        values = index_add(zeros(len(unique), dtype=self._v.dtype), 0, tensor(inverse.astype(np.int64)), self._v)
        indices = np.stack([unique // self.shape[1], unique % self.shape[1]]).astype(np.int64)
        return SparseTensor(tensor(indices), values, self.shape, coalesced=True)

    def to_dense(self):
        """The dense matrix (duplicates added), differentiable in the values."""
        rows, cols = self._i[0], self._i[1]
        flat = rows * self.shape[1] + cols
        dense = index_add(zeros(self.shape[0] * self.shape[1], dtype=self._v.dtype), 0, flat, self._v)
        return dense.reshape(*self.shape)

    def t(self):
        return SparseTensor(self._i.flip(0), self._v, self.shape[::-1], coalesced=False)

    def __matmul__(self, other):
        return mm(self, other)

    def __add__(self, other):
        return self.to_dense() + (other.to_dense() if isinstance(other, SparseTensor) else other)

    __radd__ = __add__

    def mm(self, other):
        return mm(self, other)

    def __mul__(self, scalar):
        if isinstance(scalar, (int, float)):
            return SparseTensor(self._i, self._v * scalar, self.shape, self._coalesced)
        raise TypeError("a sparse tensor multiplies by a number here; use to_dense() for elementwise products")

    __rmul__ = __mul__

    def to(self, *args, **kwargs):
        return SparseTensor(self._i, self._v.to(*args, **kwargs), self.shape, self._coalesced)

    def __repr__(self):
        return f"SparseTensor(shape={self.shape}, nnz={self._nnz()}, dtype={self.dtype})"


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, requires_grad=False,
                      check_invariants=None, is_coalesced=None):
    """PyTorch's torch.sparse_coo_tensor for matrices: (2, nnz) indices, (nnz,) values, size (inferred
    from the largest indices when not given)."""
    indices = indices if isinstance(indices, Tensor) else tensor(np.asarray(indices, dtype=np.int64))
    indices = indices.to(dtypes.int64)
    values = values if isinstance(values, Tensor) else tensor(values, dtype=dtype)
    if dtype is not None:
        values = values.to(dtype)
    if indices.ndim != 2 or indices.shape[0] != 2 or values.ndim != 1 or values.shape[0] != indices.shape[1]:
        raise ValueError(f"sparse_coo_tensor: expected indices (2, nnz) and values (nnz,) for a matrix, got "
                         f"{indices.shape} and {values.shape}")
    host = indices.numpy()
    if host.size and host.min() < 0:
        raise ValueError("sparse_coo_tensor: indices must be non-negative")
    if size is None:
        size = tuple(int(m) + 1 for m in host.max(axis=1)) if host.size else (0, 0)
    size = tuple(size)
    if len(size) != 2:
        raise ValueError(f"sparse_coo_tensor: lazytensor's sparse tensors are matrices, got size {size}")
    if host.size and (host[0].max() >= size[0] or host[1].max() >= size[1]):
        raise ValueError(f"sparse_coo_tensor: an index is out of bounds for size {size}")
    if requires_grad:
        values.requires_grad_(True)
    return SparseTensor(indices, values, size, coalesced=bool(is_coalesced))


def to_sparse(self, sparse_dim=None):
    """The nonzero entries of a dense matrix as a coalesced SparseTensor (read on the host)."""
    if self.ndim != 2:
        raise ValueError(f"to_sparse: lazytensor's sparse tensors are matrices, got shape {self.shape}")
    rows, cols = np.nonzero(self.detach().numpy())
    indices = tensor(np.stack([rows, cols]).astype(np.int64))
    values = self[indices[0], indices[1]] if len(rows) else zeros(0, dtype=self.dtype)
    return SparseTensor(indices, values, self.shape, coalesced=True)


def mm(mat1, mat2):
    """sparse @ dense (PyTorch's torch.sparse.mm): out[i] = sum over entries (i, j, v) of v * mat2[j];
    gradients reach mat2 and the values. A dense first operand is an ordinary product."""
    if not isinstance(mat1, SparseTensor):
        return mat1 @ (mat2.to_dense() if isinstance(mat2, SparseTensor) else mat2)
    if isinstance(mat2, SparseTensor):
        mat2 = mat2.to_dense()
    if mat2.ndim != 2 or mat2.shape[0] != mat1.shape[1]:
        raise ValueError(f"sparse.mm: shapes {mat1.shape} and {mat2.shape} do not match")
    rows, cols = mat1._i[0], mat1._i[1]
    picked = mat2.index_select(0, cols) * mat1._v.to(mat2.dtype).unsqueeze(1)
    return index_add(zeros(mat1.shape[0], mat2.shape[1], dtype=mat2.dtype), 0, rows, picked)


spmm = mm


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0):
    """beta * mat + alpha * (mat1 @ mat2) with a sparse mat1 (torch.sparse.addmm)."""
    return mat * beta + mm(mat1, mat2) * alpha


def bind():
    """Tensor.to_sparse, Tensor.is_sparse, and dense + sparse, dense @ sparse (a dense result, as PyTorch)."""
    Tensor.to_sparse = to_sparse
    Tensor.is_sparse = False
    add, radd, matmul = Tensor.__add__, Tensor.__radd__, Tensor.__matmul__
    Tensor.__add__ = lambda self, other: add(self, other.to_dense() if isinstance(other, SparseTensor) else other)
    Tensor.__radd__ = lambda self, other: radd(self, other.to_dense() if isinstance(other, SparseTensor) else other)
    Tensor.__matmul__ = lambda self, other: mm(other.t(), self.mT).mT if isinstance(other, SparseTensor) \
        else matmul(self, other)
