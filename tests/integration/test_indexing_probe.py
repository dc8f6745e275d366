"""What an indexing probe against PyTorch 2.13 found on Dec 6 (2,833 cases), as PyTorch behaves:
a 0-d integer tensor index is an int, so ``x[i][j] = v`` writes through a view; a uint8 tensor
is a mask (with PyTorch's warning); ``x[True]`` is a copy; an integer ``index_add_`` casts a
float ``alpha`` first; and an index out of range is an ``IndexError`` for ``except``. Every test
runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_a_0d_integer_tensor_index_is_an_int_and_gives_a_view(conn):
    x = gt.arange(12.0).reshape(3, 4)
    x[gt.tensor(1)][2] = -5.0
    x[x.sum(1).argmax()][0] = -7.0
    x[gt.tensor(0, dtype=gt.int32)].zero_()
    assert x.tolist() == [[0.0] * 4, [4.0, 5.0, -5.0, 7.0], [-7.0, 9.0, 10.0, 11.0]]
    row = x[gt.tensor(1)]
    x.add_(1)
    assert row.tolist() == [5.0, 6.0, -4.0, 8.0]  # (a view sees later changes)
    x[:, gt.tensor(3)] = 0.0
    assert x[:, 3].tolist() == [0.0, 0.0, 0.0]


def test_a_uint8_tensor_index_is_a_mask(conn):
    x = gt.arange(6.0).reshape(2, 3)
    with pytest.warns(UserWarning, match="uint8 is now deprecated"):
        rows = x[gt.tensor([1, 0], dtype=gt.uint8)]
    assert rows.tolist() == [[0.0, 1.0, 2.0]]
    with pytest.warns(UserWarning):
        assert x[(x > 2).to(gt.uint8)].tolist() == [3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x[(x > 2).to(gt.uint8)] = -1.0


def test_x_true_is_a_copy(conn):
    x = gt.arange(3.0)
    t = x[True]
    t.add_(100)
    assert x.tolist() == [0.0, 1.0, 2.0] and t.tolist() == [[100.0, 101.0, 102.0]]


def test_integer_index_add_casts_a_float_alpha_first(conn):
    out = gt.tensor([0, 1, 2]).index_add_(0, gt.tensor([1]), gt.tensor([5]), alpha=2.5)
    assert out.tolist() == [0, 11, 2]


def test_an_index_out_of_range_is_an_index_error(conn):
    with pytest.raises(IndexError, match="out of bounds"):
        gt.zeros(3)[gt.tensor([7])].tolist()
    with pytest.raises(gt.errors.WorkerError):  # (and still a WorkerError)
        gt.zeros(3).index_select(0, gt.tensor([5])).tolist()


def test_a_failed_in_place_write_leaves_the_tensor_as_it_was(conn):
    x = gt.zeros(3)
    x[gt.tensor([7])] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        x.tolist()  # (its first read says why, once: it used to fail every read after)
    assert x.tolist() == [0.0, 0.0, 0.0]
    gt.sync()  # (the error was raised once, by that read: the sync point does not repeat it)
    x[gt.tensor([1])] = 2.0
    assert x.tolist() == [0.0, 2.0, 0.0]
    y = gt.ones(2)
    y.index_fill_(0, gt.tensor([5]), 3.0)
    with pytest.raises(IndexError):
        y.tolist()
    assert y.tolist() == [1.0, 1.0]


def test_bool_keys_in_assignment_and_small_signatures(conn):
    x = gt.zeros(2, 3)
    x[True] = 1.0
    x[False] = 5.0
    assert x.tolist() == [[1.0] * 3] * 2
    x[gt.tensor(True)] = gt.tensor([[7.0, 8.0, 9.0]])
    x[gt.tensor(False)] = 2.0
    assert x.tolist() == [[7.0, 8.0, 9.0]] * 2
    r = gt.tensor([1, 2, 3])
    assert r.repeat_interleave(gt.tensor([2])).tolist() == [1, 1, 2, 2, 3, 3]
    g = gt.ones(2, 2).gather(1, gt.tensor([[0], [1]]), sparse_grad=False)
    assert g.tolist() == [[1.0], [1.0]]


def test_bools_inside_a_tuple_key_are_new_dimensions_indexed_as_pytorch_does(conn):
    x = gt.arange(24.0).reshape(2, 3, 4)
    assert x[True, 0].shape == (1, 3, 4) and x[True, 0].tolist() == [x[0].tolist()]
    assert x[0, True, 1:3].shape == (1, 2, 4)
    assert x[0, :, True].shape == (3, 1, 4)
    assert x[True, False].shape == (0, 2, 3, 4)
    assert x[..., True].shape == (2, 3, 4, 1)
    # (a bool is an advanced index: broadcast with the key's others, and the result is a copy)
    assert x[:, True, 1, [0, 1]].tolist() == [[4.0, 5.0], [16.0, 17.0]]
    assert x[[0, 1], True, 1].shape == (2, 4)
    assert x[gt.tensor(True), 1].tolist() == [x[1].tolist()]
    y = x[True, 0]
    y.fill_(-1.0)
    assert x[0, 0, 0].item() == 0.0
    x[True, 0] = 9.0
    x[1, False] = 7.0  # (selects nothing)
    assert x[0].tolist() == [[9.0] * 4] * 3 and x[1, 0, 0].item() == 12.0


def test_t_reverses_every_dimension_beyond_matrices_with_pytorchs_warning(conn):
    x = gt.arange(24.0).reshape(2, 3, 4)
    with pytest.warns(UserWarning, match="use of `x.T` on tensors of dimension other than 2"):
        t = x.T
    assert t.shape == (4, 3, 2) and t[3, 2, 1].item() == x[1, 2, 3].item()
    assert x[0].T.shape == (4, 3)
    with pytest.warns(UserWarning, match="deprecated on 0-D tensors"):
        assert gt.tensor(2.0).T.item() == 2.0


def test_masked_fill_broadcasts_its_input_to_a_larger_mask(conn):
    x = gt.arange(3.0)
    out = x.masked_fill(gt.tensor([[True, False, False], [False, False, True]]), -1.0)
    assert out.tolist() == [[-1.0, 1.0, 2.0], [0.0, 1.0, -1.0]]
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        x.masked_fill_(gt.ones(2, 3, dtype=gt.bool), 0.0)
