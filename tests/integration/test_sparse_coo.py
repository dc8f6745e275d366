"""Sparse COO matrices (gt.sparse) as graph code uses them. Every expected value is what PyTorch
2.13 gives for the same lines."""

from __future__ import annotations

import numpy as np
import pytest

import gt

IDX = [[0, 2, 1, 0], [1, 0, 2, 1]]  # (0, 1) twice: an uncoalesced matrix
VAL = [1.0, 2.0, 3.0, 4.0]


def test_coalesce_sorts_the_entries_and_adds_up_duplicates(conn):
    a = gt.sparse_coo_tensor(gt.tensor(IDX), gt.tensor(VAL), (3, 3))
    assert not a.is_coalesced() and a._nnz() == 4 and a.is_sparse and a.layout == gt.sparse_coo
    with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
        a.indices()
    c = a.coalesce()
    assert c.indices().tolist() == [[0, 1, 2], [1, 2, 0]] and c.values().tolist() == [5.0, 3.0, 2.0]
    assert a.to_dense().tolist() == [[0.0, 5.0, 0.0], [0.0, 0.0, 3.0], [2.0, 0.0, 0.0]]
    assert a.t().to_dense().tolist() == [[0.0, 0.0, 2.0], [5.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
    assert not a.t().is_coalesced()


def test_every_spelling_of_the_product_gives_pytorchs_result_and_gradients(conn):
    a = gt.sparse_coo_tensor(gt.tensor(IDX), gt.tensor(VAL), (3, 3))
    x = gt.arange(6.0).reshape(3, 2).requires_grad_()
    y = gt.sparse.mm(a, x)
    assert y.tolist() == [[10.0, 15.0], [12.0, 15.0], [0.0, 2.0]]
    y.sum().backward()
    assert x.grad.tolist() == [[2.0, 2.0], [5.0, 5.0], [3.0, 3.0]]
    for other in (gt.spmm(a, x), gt.mm(a, x), a @ x, gt.matmul(a, x), a.mm(x)):
        assert other.tolist() == y.tolist()
    v = gt.tensor(VAL, requires_grad=True)
    gt.sparse.mm(gt.sparse_coo_tensor(gt.tensor(IDX), v, (3, 3)), x.detach()).sum().backward()
    assert v.grad.tolist() == [5.0, 1.0, 9.0, 5.0]


def test_sums_conversions_and_the_legacy_constructor(conn):
    a = gt.sparse.FloatTensor(gt.tensor(IDX), gt.tensor(VAL), gt.Size([3, 3]))
    assert gt.sparse.sum(a, dim=1).to_dense().tolist() == [5.0, 3.0, 2.0]
    assert gt.sparse.sum(a).item() == 10.0 and (a * 2).to_dense().sum().item() == 20.0
    d = gt.tensor([[0.0, 1.0], [2.0, 0.0]]).to_sparse()
    assert d.indices().tolist() == [[0, 1], [1, 0]] and d.values().tolist() == [1.0, 2.0]
    assert gt.sparse_coo_tensor(gt.tensor(IDX), gt.tensor(VAL)).shape == (3, 3)
    assert "nnz=4, layout=gt.sparse_coo" in repr(a)


def test_a_bad_product_says_which_shapes(conn):
    a = gt.sparse_coo_tensor(gt.tensor(IDX), gt.tensor(VAL), (3, 3))
    with pytest.raises(gt.ShapeError, match=r"\[3, 3\] and \[2, 2\] cannot be multiplied"):
        gt.sparse.mm(a, gt.zeros(2, 2))


def test_a_sparse_embedding_gets_one_gradient_entry_per_lookup_and_sparse_adam_uses_them(conn):
    e = gt.nn.Embedding(5, 2, sparse=True, padding_idx=4)
    with gt.no_grad():
        e.weight.copy_(gt.arange(10.0).reshape(5, 2))
    (e(gt.tensor([[1, 4], [1, 3]])) * gt.tensor([1.0, 2.0])).sum().backward()
    g = e.weight.grad
    assert g.is_sparse and g._indices().tolist() == [[1, 1, 3]]  # (padding left out)
    assert g._values().tolist() == [[1.0, 2.0]] * 3
    e(gt.tensor([2, 0])).sum().backward()  # appended after the held entries, as PyTorch does
    assert e.weight.grad._indices().tolist() == [[1, 1, 3, 2, 0]]
    dense = e.weight.grad.coalesce().to_dense().tolist()
    assert dense == [[1.0, 1.0], [2.0, 4.0], [1.0, 1.0], [1.0, 2.0], [0.0, 0.0]]
    e.weight.grad = None
    e(gt.tensor([[1, 4], [1, 3]])).sum().backward()
    opt = gt.optim.SparseAdam(e.parameters(), lr=0.1)
    opt.step()
    opt.zero_grad()
    e(gt.tensor([3])).sum().backward()
    opt.step()
    want = [0.0, 1.0, 1.9, 2.9, 4.0, 5.0, 5.8, 6.8, 8.0, 9.0]  # PyTorch 2.13's
    assert e.weight.reshape(-1).tolist() == pytest.approx(want, abs=1e-6)
    p = gt.nn.Parameter(gt.zeros(2))
    p.sum().backward()
    with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
        gt.optim.SparseAdam([p]).step()


@pytest.mark.parametrize(
    "make", [lambda ps: gt.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
             lambda ps: gt.optim.Adagrad(ps, lr=0.1)],
    ids=["sgd_nesterov", "adagrad"],
)  # fmt: skip
def test_sgd_and_adagrad_take_sparse_embedding_gradients_as_dense_ones(conn, make):
    """PyTorch's SGD and Adagrad accept sparse gradients; their update equals the dense one
    (a row no index touched changes by exactly zero)."""
    weights = np.random.default_rng(3).standard_normal((6, 3)).astype(np.float32)
    got = []
    for sparse in (True, False):
        emb = gt.nn.Embedding(6, 3, sparse=sparse)
        with gt.no_grad():
            emb.weight.copy_(gt.tensor(weights))
        opt = make(emb.parameters())
        for idx in ([0, 2, 2], [4, 0]):
            opt.zero_grad()
            (emb(gt.tensor(idx)) ** 2).sum().backward()
            assert emb.weight.grad.is_sparse is sparse
            opt.step()
        got.append(emb.weight.detach().numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-6)
    np.testing.assert_array_equal(got[0][[1, 3, 5]], weights[[1, 3, 5]])


def test_optimizers_without_sparse_support_refuse_sparse_gradients_as_pytorchs(conn):
    emb = gt.nn.Embedding(4, 2, sparse=True)
    emb(gt.tensor([1])).sum().backward()
    with pytest.raises(
        RuntimeError, match="Adam does not support sparse gradients, please consider SparseAdam"
    ):
        gt.optim.AdamW(emb.parameters()).step()
    with pytest.raises(RuntimeError, match="RMSprop does not support sparse gradients"):
        gt.optim.RMSprop(emb.parameters()).step()
    with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
        gt.optim.SGD(emb.parameters(), lr=0.1, weight_decay=0.01).step()


def test_embedding_bag_sparse_gradients_have_pytorchs_entries(conn):
    """One entry per index in input order, padding left out, scaled by the bag's count (mean) or
    the per-sample weight (sum): the entries torch 2.13 gives for these bags."""
    bag = gt.nn.EmbeddingBag(5, 2, mode="mean", sparse=True, padding_idx=4)
    bag(gt.tensor([0, 2, 2, 4, 1]), gt.tensor([0, 3])).sum().backward()
    g = bag.weight.grad
    assert g.is_sparse and g._indices().tolist() == [[0, 2, 2, 1]]
    np.testing.assert_allclose(g._values().numpy(), [[1 / 3] * 2] * 3 + [[1.0, 1.0]], rtol=1e-6)
    weighted = gt.nn.EmbeddingBag(5, 2, mode="sum", sparse=True)
    psw = gt.tensor([[1.0, 2.0], [3.0, 4.0]])
    weighted(gt.tensor([[0, 2], [2, 1]]), per_sample_weights=psw).sum().backward()
    np.testing.assert_array_equal(weighted.weight.grad._values().numpy()[:, 0], [1, 2, 3, 4])
    before = weighted.weight.detach().numpy().copy()
    gt.optim.SparseAdam(weighted.parameters(), lr=0.1).step()
    after = weighted.weight.detach().numpy()
    assert (after[[0, 1, 2]] != before[[0, 1, 2]]).all() and (after[[3, 4]] == before[[3, 4]]).all()
