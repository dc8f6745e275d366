"""What a fuzz of views, in-place ops and broadcasting against PyTorch 2.13 found on Dec 6
(10,000 programs), as PyTorch behaves: ``detach()``/``.data`` of a transposed or sliced tensor
keep its strides (a ``contiguous()`` of it was taken for the tensor itself and wrote into the
base); ``roll`` by whole turns and ``flip`` of size-1 dimensions are copies; a copy of a slice is
dense; a 0-d view takes ``[...] =``; a refused in-place op on a view of a leaf changes nothing."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_detach_and_data_keep_a_views_strides(conn):
    b = gt.arange(6.0).reshape(2, 3)
    assert b.t().detach().stride() == (1, 3) and not b.t().detach().is_contiguous()
    assert b.t().data.stride() == (1, 3)
    c = b.t().detach().contiguous()  # a copy: not b's value
    c[0, 1] = 100.0
    d = b.t().detach().reshape(6)
    d[0] = 50.0
    assert b.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_roll_by_whole_turns_and_flip_of_size_one_dims_are_copies(conn):
    x = gt.tensor([1.0, 2.0, 3.0])
    x.roll(0).add_(10)
    x.roll(3, 0).add_(10)
    y = gt.tensor([[1.0, 2.0]])
    z = y.flip(0)
    y.fill_(0)
    assert x.tolist() == [1.0, 2.0, 3.0] and z.tolist() == [[1.0, 2.0]]


def test_a_copy_of_a_slice_is_dense(conn):
    x = gt.arange(12.0).reshape(3, 4)
    c = x[:, 1].clone()
    assert c.stride() == (1,) and c.is_contiguous() and c.contiguous() is c
    assert x.t()[:, ::2].clone().stride() == (1, 4)


def test_a_zero_dim_view_takes_an_ellipsis_write(conn):
    x = gt.zeros(3)
    for i in range(3):
        x[i][...] = i + 1
    s = x[1]
    s[...] += 5
    x[2][None].fill_(9)
    assert x.tolist() == [1.0, 7.0, 9.0]
    o = gt.tensor(3.0) * 2
    o[...] = 0.5
    assert o.item() == 0.5


def test_a_refused_inplace_op_on_a_view_of_a_leaf_changes_nothing(conn):
    w = gt.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = w[:2]
    for op in (lambda: v.add_(1), lambda: v.mul_(10), lambda: v.__setitem__(0, 5.0)):
        with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
            op()
    assert v.tolist() == [1.0, 2.0] and w.tolist() == [1.0, 2.0, 3.0]
    with gt.no_grad():
        v.add_(1)  # still a view of w
    assert w.tolist() == [2.0, 3.0, 3.0]


def test_index_ops_of_a_zero_dim_tensor_and_the_physical_conjugate(conn):
    for op, want in [
        (lambda x: x.index_fill_(0, gt.tensor([0]), 1.0), 1.0),
        (lambda x: x.index_add_(0, gt.tensor([0]), gt.tensor(2.0)), 7.0),
        (lambda x: x.index_copy_(0, gt.tensor([0]), gt.tensor(7.0)), 7.0),
    ]:
        x = gt.tensor(5.0)
        op(x)
        assert x.shape == () and x.item() == want
    z = gt.tensor([1 + 2j, 3 - 1j])
    z.conj_physical().mul_(0)  # a new tensor, not a view of z
    assert z.tolist() == [1 + 2j, 3 - 1j]
    z.conj_physical_()
    assert z.tolist() == [1 - 2j, 3 + 1j]


def test_the_parts_of_a_complex_tensor_have_pytorchs_strides(conn):
    z = gt.tensor([1 + 2j, 3 - 1j])
    assert z.imag.stride() == (2,) and not z.imag.is_contiguous()
    z.imag.contiguous().zero_()  # a copy: z keeps its imaginary parts
    assert z.tolist() == [1 + 2j, 3 - 1j]
    z.imag.zero_()
    assert z.tolist() == [1 + 0j, 3 + 0j]
    w = gt.tensor([[1 + 2j, 3 - 1j], [1j, 2 + 2j]])
    assert w.t().real.stride() == (2, 4)
    s = gt.tensor(1 + 2j)
    assert s.real.item() == 1.0 and gt.stack([s.real, s.imag]).tolist() == [1.0, 2.0]
