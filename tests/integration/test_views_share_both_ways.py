"""Views share their base's value both ways, as PyTorch's views share storage (gt.ops.views).

Every expected value here is what PyTorch 2.13 gives for the same lines.
"""

from __future__ import annotations

import pytest

import gt


def test_a_chain_of_views_follows_its_root_and_writes_into_it(conn):
    x = gt.arange(6.0).reshape(2, 3)
    a = x[0]
    b = a[1:]
    x.mul_(2)
    assert b.tolist() == [2.0, 4.0] and a.tolist() == [0.0, 2.0, 4.0]
    b.add_(1)  # through a, into x; a sees it too
    assert x.tolist() == [[0.0, 3.0, 5.0], [6.0, 8.0, 10.0]]
    assert a.tolist() == [0.0, 3.0, 5.0] and b.tolist() == [3.0, 5.0]


def test_chained_temporary_views_write_into_the_root(conn):
    x = gt.zeros(3, 4)
    x.t()[2].fill_(7)
    x[:, 1][1].fill_(4)
    assert x.tolist() == [[0.0, 0.0, 7.0, 0.0], [0.0, 4.0, 7.0, 0.0], [0.0, 0.0, 7.0, 0.0]]


def test_a_flat_parameter_buffer_and_its_views_stay_one_value(conn):
    flat = gt.zeros(6)
    p1 = flat[:4].view(2, 2)
    p2 = flat[4:]
    flat.add_(gt.arange(6.0))
    assert p1.tolist() == [[0.0, 1.0], [2.0, 3.0]] and p2.tolist() == [4.0, 5.0]
    p2.mul_(10)
    assert flat.tolist() == [0.0, 1.0, 2.0, 3.0, 40.0, 50.0]
    assert p1.tolist() == [[0.0, 1.0], [2.0, 3.0]]


def test_a_view_rebased_on_an_in_place_change_gets_pytorchs_gradients(conn):
    w = gt.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    x = w * 1
    v = x[1:3]
    x.mul_(gt.tensor([1.0, 10.0, 100.0, 1000.0]))
    (v * v).sum().backward()
    assert v.tolist() == [20.0, 300.0]
    assert w.grad.tolist() == [0.0, 400.0, 60000.0, 0.0]

    w = gt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = w * 1
    col = x.t()[1]
    x.mul_(3)
    (col * col).sum().backward()
    assert col.tolist() == [6.0, 12.0] and w.grad.tolist() == [[0.0, 36.0], [0.0, 72.0]]


def test_changing_the_base_of_a_view_saved_for_backward_makes_backward_raise(conn):
    w = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = w * 1
    v = x[:2]
    y = (v * v).sum()
    x.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_a_view_of_a_leaf_follows_an_optimizer_step_and_keeps_its_history(conn):
    w = gt.ones(4, requires_grad=True)
    v = w[:2]
    with gt.no_grad():
        w.sub_(0.5)
    assert v.tolist() == [0.5, 0.5] and v.grad_fn is not None
    v.sum().backward()
    assert w.grad.tolist() == [1.0, 1.0, 0.0, 0.0]


def test_detached_views_follow_and_write_back(conn):
    x = gt.zeros(2, 2)
    d = x[0].detach()
    x.add_(3)
    assert d.tolist() == [3.0, 3.0]
    d.add_(1)
    assert x.tolist() == [[4.0, 4.0], [3.0, 3.0]]


def test_setting_data_gives_a_value_the_old_views_do_not_see(conn):
    x = gt.zeros(3)
    v = x[:2]
    x.data = gt.ones(3)
    x.add_(1)
    assert v.tolist() == [0.0, 0.0] and x.tolist() == [2.0, 2.0, 2.0]


def test_many_temporary_views_neither_pile_up_nor_change_results(conn):
    x = gt.zeros(4)
    for i in range(100):
        x[i % 4].add_(1)
    assert x.tolist() == [25.0, 25.0, 25.0, 25.0]
    assert len(x._vs) < 32  # dead views are dropped from the root's list
