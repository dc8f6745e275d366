"""``t_``, ``transpose_``, ``squeeze_`` and ``unsqueeze_`` change a tensor's shape in place and keep
sharing its value as PyTorch's keep sharing storage: views taken before still write into it and
see its changes, and a view changed this way still writes into its base. The expected values are
PyTorch 2.13's. Every test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_views_taken_before_t_keep_sharing_both_ways(conn):
    y = gt.arange(6.0).reshape(2, 3)
    col, row = y[:, 1], y[0]
    y.t_()
    y[1] = -1.0  # (the old column 1)
    assert col.tolist() == [-1.0, -1.0]
    row.fill_(7.0)
    y.mul_(2)
    assert row.tolist() == [14.0, 14.0, 14.0]
    assert y.tolist() == [[14.0, 6.0], [14.0, -2.0], [14.0, 10.0]]
    assert y.stride() == (1, 3) and not y.is_contiguous()


def test_t_twice_and_transpose_keep_the_storage(conn):
    y = gt.arange(6.0).reshape(2, 3)
    flat = y.view(6)
    y.t_()
    y.t_()
    y[0, 1] = 10.0
    assert flat.tolist() == [0.0, 10.0, 2.0, 3.0, 4.0, 5.0]
    z = gt.arange(6.0).reshape(2, 3)
    wide = z.expand(2, 2, 3)
    z.transpose_(0, 1)
    z[0, 0] = 9.0
    assert wide.tolist() == [[[9.0, 1.0, 2.0], [3.0, 4.0, 5.0]]] * 2


def test_a_view_transposed_in_place_still_writes_its_base(conn):
    x = gt.arange(6.0).reshape(2, 3)
    y = x[:, :2]
    y.t_()
    y[0, 1] = 50.0
    assert x.tolist() == [[0.0, 1.0, 2.0], [50.0, 4.0, 5.0]]
    assert y.tolist() == [[0.0, 50.0], [1.0, 4.0]]
    s = gt.zeros(1, 3)
    r = s[0]
    s.squeeze_()
    s[0] = 5.0
    assert r.tolist() == [5.0, 0.0, 0.0] and s.shape == (3,)


def test_gradients_flow_through_a_view_changed_after_t_(conn):
    w = gt.ones(2, 3, requires_grad=True)
    y = w * 1
    v = y[0]
    y.t_()
    v.mul_(3)
    y.sum().backward()
    assert w.grad.tolist() == [[3.0, 3.0, 3.0], [1.0, 1.0, 1.0]]
