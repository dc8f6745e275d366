"""Index keys read as PyTorch reads them.

PyTorch's order for keys that mix integers with advanced indices: the integers are applied first
(as selects), so ``x[0, :, [1, 3]]`` keeps the broadcast dimension in place where NumPy, counting
the int as advanced, would move it first; checked on the shape rule, on the getitem, setitem and
index_add kernels (NumPy and the CuPy test double), and end to end with gradients. Then lists used
as whole keys (``x[[rows, cols]]`` is ``x[rows, cols]``), 2-d lists of ints as indices, the
``nonzero`` of a 0-d tensor and ``einsum``'s sublist form."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt import shapes as S

L = np.array([0, 1])
# (key, PyTorch's shape) for x of shape (2, 3, 4, 5), as torch 2.x gives them.
CASES = [
    ((0, slice(None), L), (3, 2, 5)),
    ((np.array(0), slice(None), L), (3, 2, 5)),
    ((slice(None), 0, slice(None), L), (2, 4, 2)),
    ((0, slice(None), 0, L), (3, 2)),
    ((L, None, L), (2, 1, 4, 5)),
    ((L, slice(None), 0, L), (2, 3)),
    ((0, L, None, L), (2, 1, 5)),
    ((Ellipsis, 0, L), (2, 3, 2)),
    ((np.array([[0], [1]]), 1, slice(None), np.array([1, 2, 3])), (2, 3, 4)),
    ((1, np.array([True, False, True]), slice(None), L), (2, 4)),
    ((0, slice(None), np.array([True, False, True, False]), L), (3, 2)),
]


@pytest.mark.parametrize(("key", "want"), CASES)
def test_index_shape_applies_integers_before_advanced_indices(key, want):
    assert S.index_shape((2, 3, 4, 5), key) == want


def test_keys_without_an_integer_next_to_an_advanced_index_keep_numpys_rule():
    assert S.split_int_indices((0, slice(None), 1)) is None
    assert S.split_int_indices((L, slice(None), L)) is None
    assert S.index_shape((2, 3, 4, 5), (slice(None), L, slice(None), L)) == (2, 2, 4)


def _torch_order(x: np.ndarray, key: tuple) -> np.ndarray:
    """The oracle: integers as selects first, then the rest of the key."""
    ints, rest = S.split_int_indices(key)
    return x[ints][rest]


WIRE = [["i", 0], ["s", None, None, None], ["l", [1, 3]]]  # x[0, :, [1, 3]]
WIRE_T = [["s", None, None, None], ["i", 1], ["s", None, None, None], ["t", 0]]  # x[:, 1, :, t]


def test_getitem_kernel_applies_integers_first(run):
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    got = run("getitem", [x], {"key": WIRE})
    np.testing.assert_array_equal(got, x[0][:, [1, 3]])
    assert got.shape == (3, 2, 5)
    t = np.array([0, 4, 4])
    got_t = run("getitem", [x, t], {"key": WIRE_T})
    assert got_t.shape == (2, 4, 3)
    np.testing.assert_array_equal(got_t, x[:, 1][:, :, t])


def test_setitem_and_index_add_kernels_write_in_pytorchs_layout(run):
    x = np.zeros((2, 3, 4, 5), dtype=np.float32)
    value = np.arange(3 * 2 * 5, dtype=np.float32).reshape(3, 2, 5)
    got = run("setitem", [x, value], {"key": WIRE})
    want = x.copy()
    want[0][:, [1, 3]] = value
    np.testing.assert_array_equal(got, want)
    t = np.array([0, 4, 4])  # repeated: index_add accumulates
    src = np.ones((2, 4, 3), dtype=np.float32)
    added = run("scatter_add", [x, src, t], {"key": WIRE_T})
    want = x.copy()
    np.add.at(want[:, 1], (slice(None), slice(None), t), src)
    np.testing.assert_array_equal(added, want)
    assert added[:, 1, :, 4].max() == 2.0


def test_mixed_keys_read_write_and_differentiate_as_in_pytorch(conn):
    data = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
    x = gt.tensor(data, requires_grad=True)
    y = x[0, :, [1, 3]]
    assert y.shape == (3, 2, 5)
    np.testing.assert_array_equal(
        y.detach().numpy(), _torch_order(data, (0, slice(None), np.array([1, 3])))
    )
    z = x[:, 1, :, gt.tensor([0, 4, 4])]
    assert z.shape == (2, 4, 3)
    (y * gt.arange(2.0)[:, None]).sum().backward()
    grad = np.zeros_like(data)
    grad[0, :, 3] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), grad)
    canvas = gt.zeros(2, 3, 4, 5)
    canvas[1, :, [0, 2]] = gt.arange(2.0)[:, None]
    want = np.zeros((2, 3, 4, 5), dtype=np.float32)
    want[1, :, 2] = 1.0
    np.testing.assert_array_equal(canvas.numpy(), want)


def test_a_list_holding_tensors_or_lists_is_a_tuple_of_indices(conn):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = gt.tensor(data, requires_grad=True)
    rows, cols = gt.tensor([0, 2]), gt.tensor([1, 3])
    np.testing.assert_array_equal(x[[rows, cols]].detach().numpy(), [1.0, 11.0])
    np.testing.assert_array_equal(x[[[0, 1], [1, 0]]].detach().numpy(), [1.0, 4.0])
    np.testing.assert_array_equal(x[[0, slice(1, 3)]].detach().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(x[[[0, 1]]].detach().numpy(), data[[0, 1]])
    assert x[[0, 2]].shape == (2, 4)  # a plain list of ints stays one index
    x[[rows, cols]].sum().backward()
    want = np.zeros_like(data)
    want[0, 1] = want[2, 3] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_two_d_lists_of_ints_broadcast_as_index_tensors(conn):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = gt.tensor(data)
    got = x[[[0, 1], [1, 0]], [[1], [2]]]
    np.testing.assert_array_equal(got.numpy(), data[[[0, 1], [1, 0]], [[1], [2]]])
    y = gt.zeros(3, 4)
    y[[[0, 2]], [[1], [3]]] = 5.0
    want = np.zeros((3, 4), dtype=np.float32)
    want[[[0, 2]], [[1], [3]]] = 5.0
    np.testing.assert_array_equal(y.numpy(), want)


def test_a_tuple_inside_a_key_is_a_list_of_indices(conn):
    # K-planes' pts[..., (0, 1)] and x[(0, 2), 1] read the inner tuple as a list, as in PyTorch
    data = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    x = gt.tensor(data, requires_grad=True)
    np.testing.assert_array_equal(x[..., (0, 2)].detach().numpy(), data[..., [0, 2]])
    np.testing.assert_array_equal(x[(1, 0), 1].detach().numpy(), data[[1, 0], 1])
    x[..., (0, 2)].sum().backward()
    want = np.zeros_like(data)
    want[..., [0, 2]] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    y = gt.zeros(2, 4, 3)
    y[..., (1, 2)] = 7.0
    want = np.zeros((2, 4, 3), dtype=np.float32)
    want[..., [1, 2]] = 7.0
    np.testing.assert_array_equal(y.numpy(), want)


def test_nonzero_of_a_zero_dim_tensor_has_no_coordinates(conn):
    assert gt.tensor(3.0).nonzero().shape == (1, 0)
    assert gt.tensor(0).nonzero().shape == (0, 0)
    assert gt.argwhere(gt.tensor(True)).shape == (1, 0)
    (idx,) = gt.tensor(2).nonzero(as_tuple=True)
    np.testing.assert_array_equal(idx.numpy(), [0])


def test_einsum_sublist_form(conn):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = gt.einsum(gt.tensor(a), [0, 1], gt.tensor(b), [1, 2], [0, 2])
    np.testing.assert_allclose(got.numpy(), a @ b)
    m = np.arange(18, dtype=np.float32).reshape(2, 3, 3)
    diag = gt.einsum(gt.tensor(m), [..., 1, 1], [..., 1])
    np.testing.assert_array_equal(diag.numpy(), np.einsum("...ii->...i", m))
    assert float(gt.einsum(gt.tensor(a), [0, 27], [])) == 15.0
    with pytest.raises(ValueError, match="subscript"):
        gt.einsum(gt.tensor(a), [0, 60])
