"""Sparse COO matrices as graph networks use them: a normalized adjacency built with sparse_coo_tensor,
torch.sparse.mm / spmm / mm / @ with a dense feature matrix, gradients to the features and the edge
weights, coalesce (duplicates summed), to_dense and to_sparse, against PyTorch."""
import warnings

import numpy as np
import pytest

import lazytensor as lt

torch = pytest.importorskip("torch")
R = np.random.default_rng(0)
EDGES = np.array([[0, 1, 1, 2, 0, 3, 3], [1, 0, 2, 2, 1, 0, 3]])  # (0, 1) twice: a duplicate
WEIGHTS = R.standard_normal(7).astype(np.float32)
X = R.standard_normal((4, 5)).astype(np.float32)


def _both(product):
    """product(lib, adjacency, x) in both libraries; returns the outputs and the gradients of x and the
    edge weights under a random weighting."""
    out = []
    for lib in (lt, torch):
        w, x = lib.tensor(WEIGHTS, requires_grad=True), lib.tensor(X, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # PyTorch's note on sparse invariant checks
            adjacency = lib.sparse_coo_tensor(lib.tensor(EDGES), w, (4, 4))
            y = product(lib, adjacency, x)
        g = np.random.default_rng(3).standard_normal(tuple(y.shape)).astype(np.float32)
        (y * lib.tensor(g)).sum().backward()
        out.append([t.detach().numpy() if lib is torch else t.numpy() for t in (y, x.grad, w.grad)])
    return out


@pytest.mark.parametrize("name,product", [
    ("sparse.mm", lambda lib, a, x: lib.sparse.mm(a, x)),
    ("spmm", lambda lib, a, x: lib.spmm(a, x)),
    ("mm", lambda lib, a, x: lib.mm(a, x)),
    ("matmul operator", lambda lib, a, x: a @ x),
    ("coalesced", lambda lib, a, x: lib.sparse.mm(a.coalesce(), x)),
    ("to_dense", lambda lib, a, x: a.to_dense() @ x),
    ("two layers", lambda lib, a, x: lib.sparse.mm(a, lib.sparse.mm(a, x).relu())),
])
def test_a_sparse_product_matches_pytorch_with_gradients_to_features_and_edge_weights(name, product):
    ours, theirs = _both(product)
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_coalesce_sums_duplicates_in_pytorchs_order():
    ours = lt.sparse_coo_tensor(lt.tensor(EDGES), lt.tensor(WEIGHTS), (4, 4)).coalesce()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.sparse_coo_tensor(torch.tensor(EDGES), torch.tensor(WEIGHTS), (4, 4)).coalesce()
    assert ours.indices().tolist() == theirs.indices().tolist() and ours._nnz() == theirs._nnz() == 6
    np.testing.assert_allclose(ours.values().numpy(), theirs.values().numpy(), rtol=1e-6)


def test_to_sparse_keeps_the_nonzeros_and_round_trips():
    dense = np.array([[0, 2.0, 0], [1.5, 0, 0], [0, 0, -3.0]], np.float32)
    sparse = lt.tensor(dense).to_sparse()
    assert sparse.is_sparse and sparse._nnz() == 3 and sparse.is_coalesced()
    assert sparse.to_dense().numpy().tolist() == dense.tolist()
    assert not lt.ones(2).is_sparse


def test_bad_sparse_input_names_the_problem():
    with pytest.raises(ValueError, match="out of bounds for size"):
        lt.sparse_coo_tensor(lt.tensor([[0, 5], [1, 1]]), lt.ones(2), (3, 3))
    with pytest.raises(ValueError, match=r"expected indices \(2, nnz\)"):
        lt.sparse_coo_tensor(lt.tensor([0, 1]), lt.ones(2), (3, 3))
    with pytest.raises(RuntimeError, match="call coalesce"):
        lt.sparse_coo_tensor(lt.tensor(EDGES), lt.tensor(WEIGHTS), (4, 4)).indices()
