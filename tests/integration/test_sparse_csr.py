"""Sparse CSR matrices: construction and conversions agree with the dense matrix, products give
the dense product's values and gradients, and what is not built is refused clearly."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.errors import ShapeError

DENSE = np.array([[1.0, 0, 2, 0], [0, 0, 3, 0], [0, 0, 0, 0], [4, 5, 0, 6]], np.float32)
CROW, COL, VALS = [0, 2, 3, 3, 6], [0, 2, 2, 0, 1, 3], [1.0, 2, 3, 4, 5, 6]


def test_dense_and_coo_convert_to_pytorchs_compressed_rows(conn):
    for csr in (gt.tensor(DENSE).to_sparse_csr(), gt.tensor(DENSE).to_sparse().to_sparse_csr(),
                gt.tensor(DENSE).to_sparse(layout=gt.sparse_csr)):  # fmt: skip
        assert csr.layout == gt.sparse_csr and csr.is_sparse_csr and not csr.is_sparse
        assert csr.crow_indices().tolist() == CROW
        assert csr.col_indices().tolist() == COL
        assert csr.values().tolist() == VALS
        assert csr._nnz() == 6 and tuple(csr.shape) == (4, 4)
        np.testing.assert_array_equal(csr.to_dense().numpy(), DENSE)


def test_a_built_matrix_converts_back_to_coo_and_dense(conn):
    csr = gt.sparse_csr_tensor(CROW, COL, VALS, size=(4, 4))
    coo = csr.to_sparse_coo()
    assert coo.is_coalesced()
    assert coo.indices().tolist() == [[0, 0, 1, 3, 3, 3], COL]
    np.testing.assert_array_equal(csr.to_dense().numpy(), DENSE)
    # without a size: as many columns as one past the largest column index
    assert tuple(gt.sparse_csr_tensor([0, 1, 1], [2], [7.0]).shape) == (2, 3)


@pytest.mark.parametrize("spell", ["@", "mm", "sparse.mm", "matmul"])
def test_every_spelling_of_the_product_gives_the_dense_products_values_and_gradients(conn, spell):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = gt.tensor(VALS, requires_grad=True)
    tx = gt.tensor(x, requires_grad=True)
    csr = gt.sparse_csr_tensor(CROW, COL, w, size=(4, 4))
    y = {"@": lambda: csr @ tx, "mm": lambda: gt.mm(csr, tx),
         "sparse.mm": lambda: gt.sparse.mm(csr, tx), "matmul": lambda: gt.matmul(csr, tx)}[spell]()  # fmt: skip
    np.testing.assert_allclose(y.detach().numpy(), DENSE @ x, rtol=1e-6)
    (y * y).sum().backward()
    g = 2 * DENSE @ x
    np.testing.assert_allclose(tx.grad.numpy(), DENSE.T @ g, rtol=1e-5)
    rows = np.repeat(np.arange(4), np.diff(CROW))
    want_w = [float(g[r] @ x[c]) for r, c in zip(rows, COL)]
    np.testing.assert_allclose(w.grad.numpy(), want_w, rtol=1e-5)


def test_a_vector_product_scaling_and_dtype(conn):
    csr = gt.tensor(DENSE).to_sparse_csr()
    v = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose((csr @ gt.tensor(v)).numpy(), DENSE @ v)
    np.testing.assert_array_equal((2 * csr).to_dense().numpy(), 2 * DENSE)
    np.testing.assert_array_equal((csr / 2).values().numpy(), np.array(VALS, np.float32) / 2)
    assert csr.double().dtype == "float64" and csr.double().layout == gt.sparse_csr


def test_repr_is_pytorchs(conn):
    text = repr(gt.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], size=(2, 3)))
    assert text == (
        "tensor(crow_indices=tensor([0, 2, 3]),\n"
        "       col_indices=tensor([0, 2, 1]),\n"
        "       values=tensor([1., 2., 3.]), size=(2, 3), nnz=3,\n"
        "       layout=gt.sparse_csr)"
    )


def test_bad_parts_and_the_transpose_are_refused_clearly(conn):
    with pytest.raises(ShapeError, match="one length"):
        gt.sparse_csr_tensor([0, 1], [0, 1], [1.0])
    with pytest.raises(ShapeError, match="rows"):
        gt.sparse_csr_tensor([0, 1], [0], [1.0], size=(3, 3))
    with pytest.raises(ShapeError, match="rise"):
        gt.sparse_csr_tensor([0, 2, 1], [0, 1], [1.0, 2.0], size=(2, 2), check_invariants=True)
    with pytest.raises(ShapeError, match="out of bounds"):
        gt.sparse_csr_tensor([0, 1], [5], [1.0], size=(1, 2), check_invariants=True)
    with pytest.raises(NotImplementedError, match="CSC"):
        gt.tensor(DENSE).to_sparse_csr().t()
    with pytest.raises(ShapeError, match="2-d"):
        gt.ones(2, 2, 2).to_sparse_csr()
