"""The ops a perf sweep found 5-30x slower than PyTorch on NumPy workers, made with fewer or
cheaper instructions: what they send and that they still give NumPy's (and PyTorch's) values and
gradients."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.runtime import ops as O

GETITEM = O.OPCODE["getitem"]
rng = np.random.default_rng(11)


def test_flip_is_one_strided_index_with_no_index_list_and_its_gradient_is_a_flip(conn, sent):
    a = rng.standard_normal((30, 40, 50)).astype(np.float32)
    x = gt.from_numpy(a).requires_grad_()
    sent.clear()
    y = x.flip(0, 2)
    assert sent == [GETITEM]
    np.testing.assert_array_equal(y.detach().numpy(), np.flip(a, (0, 2)))
    w = rng.standard_normal(a.shape).astype(np.float32)
    (y * gt.from_numpy(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.flip(w, (0, 2)))
    assert y.grad_fn.name() == "FlipBackward0"


def test_a_flip_is_its_own_tensor_on_either_side_of_an_in_place_op(conn):
    x = gt.arange(6.0)
    y = x.flip(0)
    x.add_(100.0)
    assert y.tolist() == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0]
    y.mul_(2.0)
    assert x.tolist() == [100.0, 101.0, 102.0, 103.0, 104.0, 105.0]
    assert y.tolist() == [10.0, 8.0, 6.0, 4.0, 2.0, 0.0]


def test_flip_refuses_a_dim_named_twice_as_pytorch(conn):
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        gt.ones(2, 3).flip(0, -2)


ARGSORT = O.OPCODE["argsort"]


def test_topk_and_kthvalue_ask_the_worker_for_their_window_of_the_order_only(conn, monkeypatch):
    asked = []
    emit = conn.emit
    monkeypatch.setattr(conn, "emit", lambda op, out, args, attrs=None: (
        asked.append(attrs) if op == ARGSORT else None, emit(op, out, args, attrs))[1])  # fmt: skip
    a = rng.standard_normal((64, 500)).astype(np.float32)
    x = gt.from_numpy(a)
    values, idx = x.topk(7, dim=1)
    kth = x.kthvalue(100, dim=1)
    med = x.median(dim=1)
    assert [(q["start"], q["k"], q["descending"]) for q in asked] == [
        (0, 7, True),
        (99, 1, False),
        (249, 1, False),
    ]
    order = np.argsort(-a, axis=1, kind="stable")
    np.testing.assert_array_equal(idx.numpy(), order[:, :7])
    np.testing.assert_array_equal(values.numpy(), np.take_along_axis(a, order[:, :7], 1))
    up = np.argsort(a, axis=1, kind="stable")
    np.testing.assert_array_equal(kth.indices.numpy(), up[:, 99])
    np.testing.assert_array_equal(med.indices.numpy(), up[:, 249])
    # (the lower median of an even count, as PyTorch's)
    np.testing.assert_array_equal(
        med.values.numpy(), np.take_along_axis(a, up[:, 249:250], 1)[:, 0]
    )


def test_a_row_with_nan_has_the_first_nan_as_its_median(conn):
    a = rng.standard_normal((3, 200))
    a[1, [150, 20]] = np.nan
    med = gt.from_numpy(a).median(dim=1)
    assert med.indices.tolist()[1] == 20 and np.isnan(med.values.numpy()[1])
    assert med.indices.tolist()[0] == int(np.argsort(a[0], kind="stable")[99])


def test_a_large_masks_positions_go_as_index_tensors_not_lists_in_the_key(conn, monkeypatch):
    keys = []
    emit = conn.emit
    monkeypatch.setattr(conn, "emit", lambda op, out, args, attrs=None: (
        keys.append(attrs["key"]) if op == GETITEM else None, emit(op, out, args, attrs))[1])  # fmt: skip
    a = rng.standard_normal((300, 40)).astype(np.float32)
    big, small = rng.random((300, 40)) < 0.5, rng.random((300, 40)) < 0.01
    x = gt.from_numpy(a).requires_grad_()
    y = x[gt.from_numpy(big)]
    z = x[gt.from_numpy(small)]
    assert [it[0] for it in keys[0]] == ["t", "t"]  # (6,000 positions: two index tensors)
    assert [it[0] for it in keys[1]] == ["l", "l"]  # (a few: lists in the key, as before)
    np.testing.assert_array_equal(y.detach().numpy(), a[big])
    np.testing.assert_array_equal(z.detach().numpy(), a[small])
    (y.sum() + 2.0 * z.sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), big + 2.0 * small)


def test_adaptive_average_pooling_to_one_is_one_mean_over_the_plane(conn, sent):
    a = rng.standard_normal((4, 6, 14, 14)).astype(np.float32)
    x = gt.from_numpy(a).requires_grad_()
    sent.clear()
    y = gt.nn.functional.adaptive_avg_pool2d(x, 1)
    assert sent.count(O.OPCODE["sum"]) == 1  # (a mean per dimension took two)
    assert y.shape == (4, 6, 1, 1) and y.grad_fn.name() == "MeanBackward1"
    np.testing.assert_allclose(y.detach().numpy(), a.mean((2, 3), keepdims=True), rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(a.shape, np.float32(1 / 196)))
    z = gt.nn.functional.adaptive_avg_pool3d(gt.from_numpy(a[None]).requires_grad_(), 1)
    assert z.grad_fn.name() == "MeanBackward1"  # (PyTorch's, as for 2-d)


def test_adaptive_max_pooling_to_one_is_one_maximum_over_the_plane(conn, sent):
    a = np.round(rng.standard_normal((4, 6, 14, 14)) * 2).astype(np.float32)  # ties
    x = gt.from_numpy(a).requires_grad_()
    sent.clear()
    y, where = gt.nn.functional.adaptive_max_pool2d(x, 1, return_indices=True)
    assert sent.count(O.OPCODE["argmax"]) == 1  # (one per dimension, the first over short rows)
    assert y.shape == where.shape == (4, 6, 1, 1)
    assert y.grad_fn.name() == "AdaptiveMaxPool2DBackward0"
    flat = a.reshape(4, 6, -1)
    np.testing.assert_array_equal(y.detach().numpy().reshape(4, 6), flat.max(-1))
    first = flat.argmax(-1)  # (PyTorch's index: the first maximum in row-major order)
    np.testing.assert_array_equal(where.numpy().reshape(4, 6), first)
    g = rng.standard_normal((4, 6, 1, 1)).astype(np.float32)
    y.backward(gt.from_numpy(g))
    want = np.zeros_like(flat)
    np.put_along_axis(want, first[..., None], g.reshape(4, 6, 1), -1)
    np.testing.assert_array_equal(x.grad.numpy(), want.reshape(a.shape))


def test_hardtanh_is_one_clamp_with_hardtanhs_gradient(conn, sent):
    a = np.array([-7.0, -1.0, -0.5, 0.0, 0.5, 1.0, 7.0, np.nan], np.float32)
    x = gt.from_numpy(a).requires_grad_()
    sent.clear()
    y = gt.nn.functional.hardtanh(x)
    assert sent == [O.OPCODE["clip"]]
    np.testing.assert_array_equal(y.detach().numpy(), np.clip(a, -1, 1))
    y.sum().backward()  # (0 at the bounds and outside, where clamp's would pass; NaN keeps it)
    np.testing.assert_array_equal(x.grad.numpy(), [0, 0, 1, 1, 1, 0, 0, 1])
    (d1,) = gt.autograd.grad(gt.nn.functional.relu6(x).sum(), x, create_graph=True)
    assert d1.grad_fn.name() == "HardtanhBackwardBackward0"


def test_leaky_relu_is_a_maximum_with_the_same_bits_and_pytorchs_gradient(conn, sent):
    a = np.concatenate([rng.standard_normal(500), [0.0, -0.0, np.inf, -np.inf, np.nan]])
    a = a.astype(np.float32)
    x = gt.from_numpy(a).requires_grad_()
    sent.clear()
    y = gt.nn.functional.leaky_relu(x, 0.2)
    assert O.OPCODE["where"] not in sent and O.OPCODE["maximum"] in sent
    want = np.where(a > 0, a, a * np.float32(0.2))
    np.testing.assert_array_equal(y.detach().numpy().view(np.int32), want.view(np.int32))
    g = rng.standard_normal(a.shape).astype(np.float32)
    y.backward(gt.from_numpy(g))
    np.testing.assert_array_equal(x.grad.numpy(), np.where(a > 0, g, g * np.float32(0.2)))
    (d1,) = gt.autograd.grad(gt.nn.functional.leaky_relu(x, 0.2).sum(), x, create_graph=True)
    assert d1.grad_fn.name() == "LeakyReluBackwardBackward0"
    (d2,) = gt.autograd.grad(d1.sum(), x)
    assert not d2.numpy().any()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hardswish_rounds_as_pytorch_and_its_gradient_is_pytorchs_formula(conn, dtype):
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(5000) * 3).astype(dtype)
    x[:6] = [-3.0, 3.0, -0.0, 2.9999998, -3.0000002, np.nan]
    g = rng.standard_normal(5000).astype(dtype)
    X = gt.tensor(x, requires_grad=True)
    y = gt.nn.functional.hardswish(X)
    y.backward(gt.tensor(g))
    assert y.grad_fn.name() == "HardswishBackward0"
    # PyTorch's CPU kernel: multiplied, then divided by 6 (not times a rounded 1/6)
    want = x * np.clip(x + dtype(3), 0, 6) / dtype(6)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    # its vectorised backward: 0 at or below -3, g from 3 up, else g * (x / 3 + 0.5) (NaN too)
    with np.errstate(invalid="ignore"):
        grad = np.where(x <= -3, 0, np.where(x >= 3, g, g * (x / dtype(3) + dtype(0.5))))
    np.testing.assert_array_equal(X.grad.numpy(), grad.astype(dtype))
