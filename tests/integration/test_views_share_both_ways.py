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


def test_a_diagonal_is_a_view_both_ways_and_diag_of_a_matrix_a_copy(conn):
    a = gt.zeros(3, 3)
    d = a.diagonal()
    a.diagonal().add_(1.0)  # regularised in place, as GP and Kalman code write it
    assert a.tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    a.mul_(3)
    assert d.tolist() == [3.0, 3.0, 3.0]
    d[1:] *= 2
    assert a.tolist() == [[3.0, 0.0, 0.0], [0.0, 6.0, 0.0], [0.0, 0.0, 6.0]]
    b = gt.arange(9.0).reshape(3, 3)
    gt.diag(b).add_(100)
    assert b.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]
    e = gt.zeros(2, 2, 3)
    e.diagonal(1, dim1=-2, dim2=-1)[:, 0] = 7
    assert e.tolist() == [[[0.0, 7.0, 0.0], [0.0, 0.0, 0.0]]] * 2
    w = gt.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    x = w * 1
    x.diagonal().mul_(10)
    x.sum().backward()
    assert x.tolist() == [[10.0, 2.0], [3.0, 40.0]] and w.grad.tolist() == [
        [10.0, 1.0],
        [1.0, 10.0],
    ]


def test_setting_data_to_a_view_shares_it_as_flat_parameter_buffers_do(conn):
    lin = gt.nn.Linear(2, 2)
    flat = gt.arange(6.0)
    for p, (a, b) in zip(lin.parameters(), [(0, 4), (4, 6)]):
        p.data = flat[a:b].view_as(p)  # apex / Megatron
    row = lin.weight[1]
    flat.mul_(2)
    assert lin.weight.tolist() == [[0.0, 2.0], [4.0, 6.0]] and lin.bias.tolist() == [8.0, 10.0]
    assert row.tolist() == [4.0, 6.0] and lin.weight.requires_grad and lin.weight.is_leaf
    with gt.no_grad():
        lin.bias.sub_(8)  # an optimizer's step writes into the buffer
    lin.weight.data.add_(1)  # and so does a hand-written one through .data
    assert flat.tolist() == [1.0, 3.0, 5.0, 7.0, 0.0, 2.0] and row.tolist() == [5.0, 7.0]
    theta = gt.arange(6.0, dtype=gt.float64)
    gt.nn.utils.vector_to_parameters(theta, lin.parameters())
    theta.add_(1)  # PyTorch's vector_to_parameters sets .data: the parameters share theta
    assert lin.weight.tolist() == [[1.0, 2.0], [3.0, 4.0]] and lin.bias.tolist() == [5.0, 6.0]
    assert lin.weight.dtype == gt.float64
    assert row.tolist() == [5.0, 7.0]  # (a view of the old value keeps it)


def test_in_place_changes_through_data_of_a_view_reach_its_base(conn):
    x = gt.zeros(3, 3)
    x[1].data.fill_(5)
    x[:, 2].data[0] = 7
    assert x.tolist() == [[0.0, 0.0, 7.0], [5.0, 5.0, 5.0], [0.0, 0.0, 0.0]]
    w = gt.zeros(2, 2, requires_grad=True)
    r = w[0]
    r.data.add_(1)  # outside autograd: no leaf check, no history
    assert w.tolist() == [[1.0, 1.0], [0.0, 0.0]] and w.grad_fn is None


def test_a_transposed_view_changed_in_place_backpropagates(conn):
    m = gt.arange(12.0).reshape(3, 4).requires_grad_()
    masked = m * 1
    masked.t()[1].zero_()
    masked.sum().backward()
    assert m.grad.tolist() == [[1.0, 0.0, 1.0, 1.0]] * 3
    w = gt.ones(3, 2, requires_grad=True)
    v = w * 1
    a = gt.ones(4, 2, requires_grad=True)
    y = a @ v.t()  # matmul keeps v.t() for a's gradient: changing v makes backward raise
    v.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def _made(conn, run):
    conn._rec_instrs = []
    try:
        run()
    finally:
        made, conn._rec_instrs = conn._rec_instrs, None
    return [ins[0] for ins in made]


def test_augmented_assignment_through_a_subscript_writes_the_base_once(conn):
    from gt.runtime import ops as O  # noqa: PLC0415

    x = gt.zeros(3, 4)
    col = x[:, 1]
    made = _made(conn, lambda: x.__setitem__((1, slice(None)), x[1, :].__iadd__(2.0)))
    assert made.count(O.BY_NAME["setitem"].code) == 1
    x[:, 1][2] += 5  # through a temporary view of a view
    x.view(-1)[0] -= 1
    assert col.tolist() == [0.0, 2.0, 5.0]
    assert x.tolist() == [[-1.0, 0.0, 0.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 5.0, 0.0, 0.0]]


def test_a_write_into_one_part_leaves_views_of_other_parts_as_they_are(conn):
    from gt.runtime import ops as O  # noqa: PLC0415

    flat = gt.zeros(8)
    parts = [flat[0:4].view(2, 2), flat[4:8]]
    evens, odds = flat[0::2], flat[1::2]
    version = parts[1]._version
    made = _made(conn, lambda: flat.__setitem__(slice(0, 4), gt.ones(4)))
    assert made.count(O.BY_NAME["getitem"].code) == 3  # parts[0], evens, odds; not parts[1]
    assert parts[1]._version > version  # (PyTorch's shared version counter moves)
    assert parts[0].tolist() == [[1.0, 1.0], [1.0, 1.0]] and parts[1].tolist() == [0.0] * 4
    made = _made(conn, lambda: flat.__setitem__(slice(1, None, 2), gt.full((4,), 3.0)))
    assert made.count(O.BY_NAME["getitem"].code) == 3  # parts and odds; not evens (red-black)
    assert evens.tolist() == [1.0, 1.0, 0.0, 0.0] and odds.tolist() == [3.0] * 4
    assert flat.tolist() == [1.0, 3.0, 1.0, 3.0, 0.0, 3.0, 0.0, 3.0]


def test_an_update_of_a_parameter_view_writes_its_part_of_the_flat_buffer_directly(conn):
    from gt.runtime import ops as O  # noqa: PLC0415

    flat = gt.zeros(8)
    w, b = flat[0:6].view(2, 3), flat[6:8]
    made = _made(conn, lambda: w.add_(1))
    assert made.count(O.BY_NAME["getitem"].code) == 0  # no parent rebuilt, b left alone
    assert made.count(O.BY_NAME["setitem"].code) == 1
    b.sub_(2)
    assert flat.tolist() == [1.0] * 6 + [-2.0, -2.0] and w.tolist() == [[1.0] * 3] * 2


def test_a_parameter_shares_the_tensor_it_was_made_from(conn):
    w = gt.zeros(3)
    p = gt.nn.Parameter(w)
    w.add_(1)  # PyTorch's Parameter(w) shares w's storage
    assert p.tolist() == [1.0, 1.0, 1.0] and p.is_leaf and p.requires_grad
    with gt.no_grad():
        p.mul_(2)
    assert w.tolist() == [2.0, 2.0, 2.0] and not w.requires_grad
    (p * 3).sum().backward()
    gt.optim.SGD([p], lr=0.1).step()
    assert w.tolist() == pytest.approx([1.7, 1.7, 1.7]) and w.grad is None
    flat = gt.zeros(6)
    q = gt.nn.Parameter(flat[2:4])
    flat.fill_(5.0)
    assert q.tolist() == [5.0, 5.0] and q.data_ptr() - flat.data_ptr() == 8
