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


# ------------------------------------------------------------------ values checked on the worker
_BAD_P = r"Expected p_in >= 0 && p_in <= 1 to be true, but got false\."
CHECKED_VALUES = {
    "normal(std < 0)": (lambda: gt.normal(gt.zeros(2), gt.tensor([1.0, -1.0])),
                        r"normal expects all elements of std >= 0\.0"),
    "normal(mean, std < 0)": (lambda: gt.normal(0.0, gt.tensor([float("nan")])),
                              r"normal expects all elements of std >= 0\.0"),
    "bernoulli(p > 1)": (lambda: gt.bernoulli(gt.tensor([1.5])), _BAD_P),
    "bernoulli(p < 0)": (lambda: gt.tensor([-0.5]).bernoulli(), _BAD_P),
    "bernoulli_(tensor p)": (lambda: gt.zeros(2).bernoulli_(gt.tensor([0.5, 1.5])), _BAD_P),
    "poisson(rate < 0)": (lambda: gt.poisson(gt.tensor([1.0, -1.0])),
                          r"invalid Poisson rate, expected rate to be non-negative"),
    "multi_margin_loss(target >= C)": (
        lambda: F.multi_margin_loss(gt.zeros(2, 3), gt.tensor([0, 3])), r"target out of range"
    ),
    "multi_margin_loss(target < 0)": (
        lambda: F.multi_margin_loss(gt.zeros(2, 3), gt.tensor([-1, 0])), r"target out of range"
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CHECKED_VALUES))
def test_values_pytorch_checks_are_checked_on_the_worker(name):
    call, message = CHECKED_VALUES[name]
    out = call()  # (no round trip: it raises at the sync point)
    with pytest.raises(RuntimeError, match=message):
        out.tolist()


def test_checked_values_leave_good_values_and_gradients_alone():
    std = gt.tensor([1.0, 2.0], requires_grad=True)
    gt.normal(gt.zeros(2), std).sum().backward()
    assert std.grad.shape == (2,)
    assert set(gt.bernoulli(gt.tensor([0.0, 1.0])).tolist()) <= {0.0, 1.0}
    assert gt.poisson(gt.tensor([0.0])).tolist() == [0.0]
    x = gt.tensor([[0.1, 0.2, 0.4]], requires_grad=True)
    F.multi_margin_loss(x, gt.tensor([2])).backward()
    np.testing.assert_allclose(x.grad.numpy(), [[1 / 3, 1 / 3, -2 / 3]], rtol=1e-6)


def test_bincount_refuses_weights_of_another_length_at_the_call():
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length"):
        gt.bincount(gt.tensor([0, 1]), weights=gt.ones(3))
    with pytest.raises(RuntimeError, match="weights should be 1-d and have the same length"):
        gt.bincount(gt.tensor([0, 1]), weights=gt.ones(2, 1))
    assert gt.bincount(gt.tensor([0, 2]), weights=gt.tensor([0.5, 1.0])).tolist() == [0.5, 0, 1]


# ------------------------------------------------------------------ PyTorch's exception types
TYPES = {
    "bincount(negative)": (lambda: gt.bincount(gt.tensor([-1, 2])),
                           r"bincount only supports 1-d non-negative integral inputs\."),
    "randint(5, 5)": (lambda: gt.randint(5, 5, (2,)),
                      r"random_ expects 'from' to be less than 'to', but got from=5 >= to=5"),
    "arange(step=0)": (lambda: gt.arange(0, 5, 0), r"step must be nonzero"),
    "geometric_(2)": (lambda: gt.zeros(2).geometric_(2.0),
                      r"geometric_ expects p to be in \(0, 1\), but got p=2"),
    "gather(float index)": (lambda: gt.gather(gt.zeros(2, 3), 1, gt.tensor([[0.0]])),
                            r"gather\(\): Expected dtype int32/int64 for index"),
    "one_hot(float)": (lambda: F.one_hot(gt.tensor([0.0]), 3),
                       r"one_hot is only applicable to index tensor of type LongTensor\."),
    "interpolate(scale_factor=0)": (
        lambda: F.interpolate(gt.ones(1, 1, 2), scale_factor=0.0),
        r"Input and output sizes should be greater than 0, but got input \(W: 2\) and output "
        r"\(W: 0\)",
    ),
    "interpolate 2-d": (
        lambda: F.interpolate(gt.ones(1, 1, 2, 3), size=(2, 0)),
        r"got input \(H: 2, W: 3\) output \(H: 2, W: 0\)",
    ),
    # arguments refused at the call
    "randperm(-1)": (lambda: gt.randperm(-1),
                     r"Trying to create tensor with negative dimension -1: \[-1\]"),
    "bernoulli_(1.5)": (lambda: gt.zeros(2).bernoulli_(1.5),
                        r"bernoulli_ expects p to be in \[0, 1\], but got p=1\.5"),
    "bernoulli(x, p=-0.5)": (lambda: gt.bernoulli(gt.zeros(2), -0.5),
                             r"bernoulli_ expects p to be in \[0, 1\], but got p=-0\.5"),
    "normal_(0, -1)": (lambda: gt.zeros(2).normal_(0, -1),
                       r"normal expects std >= 0\.0, but found std -1"),
    "normal(0, -1)": (lambda: gt.normal(gt.zeros(2), -1.0),
                      r"normal expects std >= 0\.0, but found std -1"),
    "exponential_(-1)": (lambda: gt.zeros(2).exponential_(-1.0),
                         r"exponential_ expects lambda > 0\.0, but found lambda=-1"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(TYPES))
def test_pytorchs_exception_type_and_message_at_the_call(name):
    call, message = TYPES[name]
    with pytest.raises(RuntimeError, match=message) as info:
        call()
    assert not isinstance(info.value, (ValueError, TypeError, IndexError, gt.WorkerError))


def test_gt_assert_is_torchs():
    gt._assert(True, "unused")
    gt._assert(gt.tensor(1.0) > 0, "unused")
    with pytest.raises(AssertionError, match="x must be positive"):
        gt._assert(bool((gt.tensor([1.0, -1.0]) > 0).all()), "x must be positive")
    with pytest.raises(AssertionError, match="tensor condition"):
        gt._assert(gt.tensor(False), "tensor condition")
    assert "_assert" in gt.__all__


# ------------------------------------------------------------------ failed accumulating writes
def _bad() -> gt.Tensor:
    return gt.tensor([0, 9])


ACCUMULATING = {
    "index_add_": lambda x: x.index_add_(0, _bad(), gt.ones(2)),
    "scatter_add_": lambda x: x.scatter_add_(0, _bad(), gt.ones(2)),
    "scatter_reduce_(sum)": lambda x: x.scatter_reduce_(0, _bad(), gt.ones(2), "sum"),
    "scatter_reduce_(amax)": lambda x: x.scatter_reduce_(0, _bad(), gt.ones(2), "amax"),
    "scatter_reduce_(prod)": lambda x: x.scatter_reduce_(0, _bad(), gt.ones(2), "prod"),
    "index_put_(accumulate)": lambda x: x.index_put_((_bad(),), gt.ones(2), accumulate=True),
    "masked_scatter_": lambda x: x.masked_scatter_(gt.tensor([True] * 5), gt.ones(2)),
    "index_reduce_": lambda x: x.index_reduce_(0, _bad(), gt.ones(2), "amax"),
}


@pytest.mark.parametrize("name", sorted(ACCUMULATING))
def test_a_tensor_an_accumulating_write_failed_on_is_usable_once_caught(name):
    x = gt.arange(5.0)
    ACCUMULATING[name](x)
    with pytest.raises(RuntimeError):
        x.tolist()
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]  # as it was, as PyTorch's
    assert (x + 1).sum().item() == 15.0
    gt.sync()


def test_masked_scatter_with_too_short_a_source_has_pytorchs_message():
    x = gt.zeros(4)
    x.masked_scatter_(gt.tensor([True, True, True, False]), gt.ones(2))
    with pytest.raises(RuntimeError, match="Number of elements of source < number of ones in mask"):
        x.tolist()
    assert x.tolist() == [0.0] * 4


def test_accumulating_writes_still_compute_record_and_batch():
    x = gt.zeros(4)
    x.index_add_(0, gt.tensor([1, 1, 3]), gt.tensor([1.0, 2.0, 5.0]))
    x.scatter_reduce_(0, gt.tensor([0, 0]), gt.tensor([7.0, -1.0]), "amax")
    x.index_put_((gt.tensor([2]),), gt.tensor([4.0]), accumulate=True)
    y = x.masked_scatter(gt.tensor([False, True, False, False]), gt.tensor([9.0]))
    assert x.tolist() == [7.0, 3.0, 4.0, 5.0] and y.tolist() == [7.0, 9.0, 4.0, 5.0]
    base = gt.zeros(3)
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    (base.index_add(0, gt.tensor([2, 2]), w) * gt.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 3.0]
    rows = gt.func.vmap(lambda v: gt.zeros(3).index_add(0, gt.tensor([0, 0]), v))(
        gt.tensor([[1.0, 2.0], [3.0, 4.0]])
    )
    assert rows.tolist() == [[3.0, 0.0, 0.0], [7.0, 0.0, 0.0]]
