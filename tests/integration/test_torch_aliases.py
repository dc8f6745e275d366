"""The native spellings' own behaviour (their values are PyTorch's in the differential programs of
``tests/api/programs/torch_aliases.py``)."""

from __future__ import annotations

import pytest

import gt


def test_an_integer_reduction_outside_none_mean_sum_is_refused(conn):
    x = gt.tensor([[0.1, 0.9]]).log()
    with pytest.raises(ValueError, match=r"torch.kl_div: reduction must be 0 \(none\), 1"):
        gt.kl_div(x, gt.tensor([[0.5, 0.5]]), 3)
    with pytest.raises(ValueError, match="reduction must be"):
        gt.margin_ranking_loss(x[0], x[0], gt.tensor([1, 1]), 0.0, "mean")


def test_copy_forms_are_new_storage_and_keep_autograd(conn):
    a = gt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    t = gt.t_copy(a)
    (t * gt.tensor([[1.0, 0.0], [0.0, 0.0]])).sum().backward()
    assert a.grad.tolist() == [[1.0, 0.0], [0.0, 0.0]]
    with gt.no_grad():
        v = gt.view_copy(a, [4])
        v.zero_()
    assert a.tolist() == [[1.0, 2.0], [3.0, 4.0]]


def test_segment_reduce_refuses_what_it_cannot_do(conn):
    d = gt.tensor([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="reduce must be sum, mean, max, min or prod"):
        gt.segment_reduce(d, "median", lengths=gt.tensor([3]))
    with pytest.raises(ValueError, match="exactly one of lengths and offsets"):
        gt.segment_reduce(d, "sum")
    with pytest.raises(ValueError, match="the segments cover 2 entries, not the 3"):
        gt.segment_reduce(d, "sum", lengths=gt.tensor([1, 1]))
    with pytest.raises(NotImplementedError, match="indices is not supported"):
        gt.segment_reduce(d, "sum", indices=gt.tensor([0, 0, 1]))
    assert gt.segment_reduce(d, "sum", lengths=[1, 2]).tolist() == [1.0, 5.0]


def test_triangular_solve_uses_the_triangle_asked_for_and_returns_a_copy_of_a(conn):
    import numpy as np

    a = np.array([[2.0, 1.0, 4.0], [5.0, 3.0, 1.0], [7.0, 2.0, 4.0]])
    b = np.array([[1.0], [2.0], [3.0]])
    at, bt = gt.tensor(a), gt.tensor(b)
    upper = gt.triangular_solve(bt, at)
    np.testing.assert_allclose(upper.solution.numpy(), np.linalg.solve(np.triu(a), b))
    assert upper.cloned_coefficient.tolist() == a.tolist()
    lower_t = bt.triangular_solve(at, upper=False, transpose=True, unitriangular=True)
    unit_lower = np.tril(a, -1) + np.eye(3)
    np.testing.assert_allclose(lower_t.solution.numpy(), np.linalg.solve(unit_lower.T, b))


def test_the_legacy_new_constructor_reads_sizes_sizes_objects_and_data(conn):
    x = gt.tensor([1, 2], dtype=gt.int32)
    sized = x.new(2, 3)
    assert tuple(sized.shape) == (2, 3) and sized.dtype == "int32"
    assert x.new([1.5, 2.0]).tolist() == [1, 2]  # data, in x's dtype
    assert x.new((2, 3)).tolist() == [2, 3]  # a tuple is data, as in PyTorch
    assert tuple(x.new(gt.Size([4])).shape) == (4,)  # a Size is a size
    assert tuple(x.new().shape) == (0,)


def test_dim_order_and_the_unsafe_splits(conn):
    assert gt.zeros(2, 3, 4).permute(2, 0, 1).dim_order() == (1, 2, 0)
    assert gt.zeros(2, 3).dim_order() == (0, 1)
    pieces = gt.arange(5).unsafe_split(2)
    assert [p.tolist() for p in pieces] == [[0, 1], [2, 3], [4]]
    assert [p.tolist() for p in gt.arange(4).unsafe_split_with_sizes([1, 3])] == [[0], [1, 2, 3]]
    assert len(gt.arange(6).unsafe_chunk(3)) == 3
