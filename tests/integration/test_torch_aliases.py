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
