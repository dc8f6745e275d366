"""Errors GT raises where PyTorch does (found by an error probe against PyTorch): negative
indices the index ops refuse, values checked on the worker, the tensor an accumulating in-place op
failed on kept as it was, exception types and argument checks at the call."""

from __future__ import annotations

import numpy as np
import pytest

import gt

F = gt.nn.functional


def _neg() -> gt.Tensor:
    return gt.tensor([-1])


# ------------------------------------------------------------------ negative indices
NEGATIVE = {
    "gather": (lambda: gt.gather(gt.arange(3.0), 0, _neg()),
               r"gather\(\): index -1 is out of bounds for dimension 0 with size 3"),
    "gather_2d": (lambda: gt.zeros(2, 3).gather(1, gt.tensor([[0, -2], [1, 1]])),
                  r"index -2 is out of bounds for dimension 1 with size 3"),
    "scatter": (lambda: gt.zeros(3).scatter(0, _neg(), gt.ones(1)),
                r"scatter\(\): index -1 is out of bounds for dimension 0 with size 3"),
    "scatter_value": (lambda: gt.zeros(3).scatter(0, _neg(), 1.0), r"index -1 is out of bounds"),
    "scatter_add": (lambda: gt.zeros(3).scatter_add(0, _neg(), gt.ones(1)),
                    r"scatter_add\(\): index -1 is out of bounds for dimension 0 with size 3"),
    "scatter_reduce_amax": (lambda: gt.zeros(3).scatter_reduce(0, _neg(), gt.ones(1), "amax"),
                            r"index -1 is out of bounds for dimension 0 with size 3"),
    "scatter_reduce_sum": (lambda: gt.zeros(3).scatter_reduce(0, _neg(), gt.ones(1), "sum"),
                           r"index -1 is out of bounds for dimension 0 with size 3"),
    "index_select": (lambda: gt.arange(3.0).index_select(0, _neg()),
                     r"index_select\(\): index out of range in self"),
    "index_select_list": (lambda: gt.zeros(2, 3).index_select(1, gt.tensor([0, -3])),
                          r"index out of range in self"),
    "index_add_": (lambda: gt.zeros(3).index_add_(0, _neg(), gt.ones(1)),
                   r"index_add\(\): index out of range in self"),
    "index_copy_": (lambda: gt.zeros(3).index_copy_(0, _neg(), gt.ones(1)),
                    r"index_copy_\(\): index -1 is out of bounds for dimension 0 with size 3"),
    "embedding": (lambda: F.embedding(_neg(), gt.eye(3)),
                  r"embedding\(\): index out of range in self"),
    "nn.Embedding": (lambda: gt.nn.Embedding(3, 2)(gt.tensor([[0, -1]])),
                     r"index out of range in self"),
    "embedding_bag": (
        lambda: F.embedding_bag(gt.tensor([0, -1]), gt.eye(3), gt.tensor([0])),
        r"Index 1 of input takes value -1 which is not in the valid range \[0, 3\)",
    ),
    "embedding_bag_max": (
        lambda: F.embedding_bag(gt.tensor([[0, -1]]), gt.eye(3), mode="max"),
        r"takes value -1 which is not in the valid range \[0, 3\)",
    ),
    "take_along_dim": (lambda: gt.take_along_dim(gt.arange(3.0), _neg()),
                       r"index -1 is out of bounds for dimension 0 with size 3"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_a_negative_index_is_refused_as_in_pytorch(name):
    call, message = NEGATIVE[name]
    with pytest.raises(IndexError, match=message):  # (a RuntimeError too, as PyTorch's)
        call().tolist()
    assert gt.arange(2.0).tolist() == [0.0, 1.0]  # the connection goes on


@pytest.mark.parametrize(
    "call",
    [
        lambda: gt.gather(gt.arange(3.0), 0, gt.tensor([3])),
        lambda: gt.arange(3.0).index_select(0, gt.tensor([3])),
        lambda: F.embedding(gt.tensor([3]), gt.eye(3)),
        lambda: gt.zeros(3).index_add_(0, gt.tensor([3]), gt.ones(1)),
    ],
)
def test_an_index_past_the_end_names_the_op(call):
    with pytest.raises(gt.WorkerError, match=r"(gather|index_select|embedding|index_add)\(\)"):
        call().tolist()


def test_a_negative_index_still_counts_from_the_end_where_pytorch_allows_it():
    x = gt.arange(3.0)
    assert x[_neg()].tolist() == [2.0]
    assert gt.take(x, _neg()).tolist() == [2.0]
    assert gt.zeros(3).index_put_((_neg(),), gt.ones(1)).tolist() == [0.0, 0.0, 1.0]
    assert gt.zeros(3).index_fill_(0, _neg(), 1.0).tolist() == [0.0, 0.0, 1.0]
    m = gt.arange(6.0).reshape(2, 3)  # (take_along_dim with a dim wraps, as PyTorch's)
    assert gt.take_along_dim(m, gt.tensor([[-1], [0]]), 1).tolist() == [[2.0], [3.0]]


def test_valid_indices_give_the_same_values_and_gradients():
    w = gt.arange(6.0).reshape(3, 2).requires_grad_()
    idx = gt.tensor([2, 0, 2])
    out = F.embedding(idx, w).sum() + w.gather(0, gt.tensor([[1, 0]])).sum()
    out = (
        out
        + w.index_select(0, idx).sum()
        + gt.zeros(3, 2).scatter_add(0, gt.tensor([[0, 1]]), w[:1]).sum()
    )
    out.backward()
    np.testing.assert_allclose(w.grad.numpy(), [[3.0, 4.0], [1.0, 0.0], [4.0, 4.0]])  # (PyTorch's)
