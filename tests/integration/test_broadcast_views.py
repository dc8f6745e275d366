"""Broadcasts and windows are views, as in PyTorch: ``expand``/``broadcast_to``/``expand_as``,
``unfold``, ``as_strided`` of a contiguous tensor and ``view_as_real``/``view_as_complex`` follow
their base's in-place changes, and the changes PyTorch allows through them reach the base. Where a
view sees one element more than once, PyTorch refuses most in-place ops (not ``fill_``/``zero_``,
and ``masked_fill_``/``index_fill_``/``x[indices] = v`` with a deprecation warning): so does GT.
The expected values are PyTorch 2.13's. Every test runs on NumPy workers and on workers whose CuPy
is the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)

OVERLAP = "more than one element of the written-to tensor refers to a single memory location"


def test_a_broadcast_follows_its_base(conn):
    x = gt.zeros(3)
    y, b, e = x.expand(2, 3), gt.broadcast_to(x, (2, 3)), x.expand_as(gt.zeros(4, 3))
    t = x.expand(2, 3).t()
    x.add_(1)
    x[1] = 4.0
    assert y.tolist() == b.tolist() == [[1.0, 4.0, 1.0]] * 2
    assert e.tolist() == [[1.0, 4.0, 1.0]] * 4
    assert t.tolist() == [[1.0, 1.0], [4.0, 4.0], [1.0, 1.0]]
    col = gt.zeros(2, 1)
    wide = col.expand(2, 3)
    col.fill_(3.0)
    assert wide.tolist() == [[3.0] * 3] * 2


def test_a_fill_through_a_broadcast_writes_its_base(conn):
    x = gt.zeros(3)
    y = x.expand(2, 3)
    y.fill_(2.0)
    assert x.tolist() == [2.0] * 3
    y.zero_()
    assert x.tolist() == [0.0] * 3
    assert gt.zeros(3, dtype=gt.int64).expand(2, 3).fill_(7).tolist() == [[7] * 3] * 2
    ints = gt.zeros(3, dtype=gt.int64)
    ints.expand(2, 3).fill_(7)
    assert ints.tolist() == [7] * 3
    z = gt.zeros(3, dtype=gt.complex64)
    z.expand(2, 3).fill_(1 + 1j)
    assert z.tolist() == [1 + 1j] * 3
    neg = gt.zeros(3)
    neg.expand(2, 3).fill_(-0.0)  # (told apart from 0.0 by its bits)
    assert [str(v) for v in neg.tolist()] == ["-0.0"] * 3


def test_a_row_of_a_broadcast_writes_the_whole_broadcast(conn):
    x = gt.zeros(3)
    y = x.expand(2, 3)
    y[0] = 5.0
    assert x.tolist() == [5.0] * 3 and y.tolist() == [[5.0] * 3] * 2
    y[1] = gt.tensor([1.0, 2.0, 3.0])
    assert x.tolist() == [1.0, 2.0, 3.0] and y.tolist() == [[1.0, 2.0, 3.0]] * 2
    row = y[1]
    row.add_(1)
    assert x.tolist() == [2.0, 3.0, 4.0]
    x3 = gt.zeros(3)
    x3.expand(2, 2, 3)[0, 1].add_(1)
    assert x3.tolist() == [1.0] * 3
    same = gt.zeros(2, 3)
    same.expand(2, 3).add_(1)  # (no dimension broadcast: an ordinary in-place op)
    assert same.tolist() == [[1.0] * 3] * 2


def test_in_place_ops_on_a_tensor_that_sees_an_element_twice_raise_as_in_pytorch(conn):
    x = gt.ones(3)
    y = x.expand(2, 3)
    for op in (
        lambda: y.add_(1),
        lambda: y.mul_(2),
        lambda: y.copy_(gt.zeros(2, 3)),
        lambda: y.clamp_(0, 1),
        lambda: y.normal_(),
        lambda: y.__setitem__((slice(None), 0), 7.0),
        lambda: gt.zeros(6).as_strided((2, 3), (0, 1)).add_(1),
    ):
        with pytest.raises(RuntimeError, match=OVERLAP):
            op()
    assert x.tolist() == [1.0] * 3  # (refused before anything ran)


def test_indexed_writes_into_a_broadcast_warn_and_write_through(conn):
    x = gt.zeros(3)
    y = x.expand(2, 3)
    with pytest.warns(UserWarning, match="Use of masked_fill_ on expanded tensors is deprecated"):
        y.masked_fill_(gt.tensor([True, False, True]), 6.0)
    assert x.tolist() == [6.0, 0.0, 6.0]
    with pytest.warns(UserWarning, match="Use of index_fill_ on expanded tensors"):
        y.index_fill_(1, gt.tensor([1]), 5.0)
    assert x.tolist() == [6.0, 5.0, 6.0]
    with pytest.warns(UserWarning, match="Use of index_put_ on expanded tensors"):
        y[:, gt.tensor([0])] = 3.0
    assert x.tolist() == [3.0, 5.0, 6.0]


def test_a_leaf_that_requires_grad_is_refused_through_a_broadcast(conn):
    w = gt.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="view of a leaf Variable"):
        w.expand(2, 3).fill_(1.0)
    with gt.no_grad():
        w.expand(2, 3).fill_(1.0)
    assert w.tolist() == [1.0] * 3


def test_a_broadcast_is_placed_in_its_base_storage(conn):
    x = gt.zeros(3, 2)
    y = x.expand(4, 3, 2)
    assert y._base is x and y.data_ptr() == x.data_ptr() and y.stride() == (0, 2, 1)
    assert y[1, 2].storage_offset() == 4
    six = gt.zeros(6)
    assert six.unfold(0, 2, 1)[1].data_ptr() - six.data_ptr() == 4
    z = gt.zeros(3, dtype=gt.complex64)
    assert gt.view_as_real(z)[1].data_ptr() - z.data_ptr() == 8


def test_windows_follow_and_write_their_base(conn):
    x = gt.arange(6.0)
    u = x.unfold(0, 3, 1)
    x.mul_(2)
    assert u.tolist() == [[0.0, 2.0, 4.0], [2.0, 4.0, 6.0], [4.0, 6.0, 8.0], [6.0, 8.0, 10.0]]
    apart = gt.arange(6.0)
    w = apart.unfold(0, 2, 2)
    w.add_(1)  # (windows that do not overlap: an ordinary in-place op)
    w[:, 0] = 9.0
    assert apart.tolist() == [9.0, 2.0, 9.0, 4.0, 9.0, 6.0]
    grid = gt.arange(12.0).reshape(3, 4)
    grid.unfold(1, 2, 1).zero_()
    assert grid.tolist() == [[0.0] * 4] * 3
    flat = gt.zeros(6)
    s = flat.as_strided((2, 2), (3, 1), 1)
    s[1, 1] = 5.0
    assert flat.tolist() == [0.0, 0.0, 0.0, 0.0, 0.0, 5.0]
    flat.add_(1)
    assert s.tolist() == [[1.0, 1.0], [1.0, 6.0]]


def test_view_as_real_and_view_as_complex_are_views(conn):
    z = gt.zeros(2, dtype=gt.complex64)
    r = gt.view_as_real(z)
    r[0, 1] = 3.0
    assert z.tolist() == [3j, 0j]
    z.add_(1j)
    assert r.tolist() == [[0.0, 4.0], [0.0, 1.0]]
    pairs = gt.tensor([[1.0, 2.0], [3.0, 4.0]])
    c = gt.view_as_complex(pairs)
    c.mul_(1j)
    assert pairs.tolist() == [[-2.0, 1.0], [-4.0, 3.0]]


def test_gradients_through_a_broadcast_written_in_place(conn):
    w = gt.ones(3, requires_grad=True)
    a = w * 1
    a.expand(2, 3)[0] = w * 3
    (a * gt.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert w.grad.tolist() == [3.0, 6.0, 9.0]
    v = gt.ones(3, requires_grad=True)
    b = v * 2
    e = b.expand(2, 3)
    (e * e).sum().backward()
    assert v.grad.tolist() == [16.0] * 3


def test_a_broadcast_of_a_temporary_keeps_its_copies_in_step(conn):
    y = gt.zeros(3).expand(2, 3)  # (the base lives on in the broadcast, as PyTorch's storage)
    y[0, 0] = 1.0
    assert y.tolist() == [[1.0, 0.0, 0.0]] * 2
    with pytest.warns(UserWarning, match="index_put_"):
        z = gt.zeros(3).expand(2, 3).index_put_((gt.tensor([0]),), gt.tensor(1.0))
    assert z.tolist() == [[1.0] * 3] * 2


def test_repeat_is_a_new_tensor(conn):
    x = gt.arange(3.0)
    r = x.repeat(2, 1)
    assert r.is_contiguous() and r.stride() == (3, 1)
    r.add_(1)  # (no broadcast behind it: an ordinary in-place op)
    assert x.tolist() == [0.0, 1.0, 2.0] and r.tolist() == [[1.0, 2.0, 3.0]] * 2
    ri = x.repeat_interleave(2)
    ri.mul_(2)
    assert x.tolist() == [0.0, 1.0, 2.0] and ri.tolist() == [0.0, 0.0, 2.0, 2.0, 4.0, 4.0]
