"""What a probe of sparse tensors against PyTorch 2.13 found on Dec 6 (4,444 cases), as PyTorch
behaves: the sum of two coalesced tensors is merged and coalesced (it concatenated their entries,
so a loop of ``acc = acc + x`` grew without bound); a tensor of one entry or none is coalesced;
``sparse.addmm(beta=0)`` does not read its input; ``sparse.sum`` over every sparse dimension is
dense. Every test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import math

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_the_sum_of_coalesced_tensors_is_merged(conn):
    e, b = gt.eye(2).to_sparse(), gt.tensor([[0.0, 1.0], [0.0, 3.0]]).to_sparse()
    c = e + b
    assert c._nnz() == 3 and c.is_coalesced()
    assert c.indices().tolist() == [[0, 0, 1], [0, 1, 1]] and c.values().tolist() == [1, 1, 4]
    acc = e
    for _ in range(4):
        acc = acc + acc
    assert acc._nnz() == 2 and acc.to_dense().tolist() == [[16.0, 0.0], [0.0, 16.0]]
    loose = gt.sparse_coo_tensor(gt.tensor([[0, 0], [1, 1]]), gt.tensor([1.0, 2.0]), (2, 2))
    assert not (loose + e).is_coalesced()  # (an uncoalesced operand: entries concatenated)


def test_one_entry_or_none_is_coalesced(conn):
    one = gt.sparse_coo_tensor(gt.tensor([[0], [1]]), gt.tensor([2.0]), (2, 2))
    assert one.is_coalesced() and one.values().tolist() == [2.0]
    none = gt.sparse_coo_tensor(gt.zeros(2, 0, dtype=gt.int64), gt.zeros(0), (2, 2))
    assert none.is_coalesced() and none.indices().shape == (2, 0)


def test_addmm_with_beta_zero_does_not_read_its_input(conn):
    out = gt.sparse.addmm(gt.full((2, 2), math.nan), gt.eye(2).to_sparse(), gt.ones(2, 2), beta=0)
    assert out.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_sparse_sum_is_dense_over_every_sparse_dimension(conn):
    s = gt.tensor([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]).to_sparse()
    total = gt.sparse.sum(s, (0, 1))
    assert isinstance(total, gt.Tensor) and float(total) == 6.0
    columns = gt.sparse.sum(s, 0)
    assert columns.is_sparse and columns.to_dense().tolist() == [1.0, 3.0, 2.0]
    hybrid = gt.tensor([[[1.0, 2.0], [0.0, 0.0]], [[0.0, 0.0], [3.0, 4.0]]]).to_sparse(2)
    assert gt.sparse.sum(hybrid, (0, 1)).tolist() == [4.0, 6.0]
    rows = gt.sparse.sum(hybrid, 0)
    assert rows.is_sparse and rows.dense_dim() == 1 and rows.to_dense().tolist() == [[1, 2], [3, 4]]
    assert gt.sparse.sum(s, ()) is s


def test_sparse_products_elementwise_ops_and_conversions(conn):
    a = gt.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0], [0.0, 2.0, 0.0]]).to_sparse()
    d = gt.tensor([[2.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 1.0]]).to_sparse()
    normalized = gt.sparse.mm(gt.sparse.mm(d, a), d)  # (the normalized-adjacency idiom)
    assert normalized.is_sparse
    assert normalized.to_dense().tolist() == [[0, 6, 0], [6, 0, 6], [0, 6, 0]]
    assert (a * gt.full((3, 3), 2.0)).to_dense().tolist() == [[0, 2, 0], [2, 0, 4], [0, 4, 0]]
    assert (a * a).to_dense().tolist() == [[0, 1, 0], [1, 0, 4], [0, 4, 0]]
    assert (-a).abs().pow(2).to_dense().tolist() == [[0, 1, 0], [1, 0, 4], [0, 4, 0]]
    assert a.long().dtype == gt.int64 and a.numel() == 9 and len(a) == 3


def test_nonlinear_entry_functions_add_duplicates_first(conn):
    twice = gt.sparse_coo_tensor(gt.tensor([[1, 1], [0, 0]]), gt.tensor([1.0, 1.0]), (2, 2))
    assert not twice.is_coalesced() and twice.pow(2).to_dense().tolist() == [[0, 0], [4, 0]]
    one = gt.tensor([[0.0, 1.0], [0.0, 0.0]]).to_sparse()
    assert one.is_coalesced() and not one.t().is_coalesced()  # (as PyTorch's flags)
