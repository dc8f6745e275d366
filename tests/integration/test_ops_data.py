"""Factories, dtypes and the data API (numpy, item, tolist, repr, len, hash, ...) against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

import gt


@pytest.mark.parametrize(
    "data,dtype,want",
    [
        ([1.5, 2.0], None, np.array([1.5, 2.0], np.float32)),
        ([[1, 2], [3, 4]], None, np.array([[1, 2], [3, 4]], np.int64)),
        ([True, False], None, np.array([True, False])),
        (3.0, None, np.array(3.0, np.float32)),
        ([1, 2], gt.float64, np.array([1.0, 2.0])),
        ([1.7, -2.2], "int32", np.array([1, -2], np.int32)),
        ([0.5], gt.float16, np.array([0.5], np.float16)),
        (np.arange(3, dtype=np.float64), None, np.arange(3, dtype=np.float64)),
    ],
)
def test_tensor_factory_dtypes_follow_pytorch(conn, data, dtype, want):
    t = gt.tensor(data, dtype=dtype)
    got = t.numpy()
    assert t.dtype == want.dtype.name and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_constant_factories_match_numpy(conn):
    checks = [
        (gt.zeros(2, 3), np.zeros((2, 3), np.float32)),
        (gt.ones((2,), dtype="int32"), np.ones(2, np.int32)),
        (gt.full((2, 2), 7), np.full((2, 2), 7, np.int64)),
        (gt.full((2,), 1.5, dtype=gt.float64), np.full(2, 1.5)),
        (gt.full((1,), True), np.array([True])),
        (gt.arange(5), np.arange(5)),
        (gt.arange(1, 2, 0.25), np.arange(1, 2, 0.25, dtype=np.float32)),
        (gt.arange(5, 0, -2), np.arange(5, 0, -2)),
        (gt.arange(0), np.arange(0)),
        (gt.eye(3, 2), np.eye(3, 2, dtype=np.float32)),
        (gt.linspace(0, 1, 5), np.linspace(0, 1, 5, dtype=np.float32)),
        (gt.zeros_like(gt.ones(2, dtype="int32")), np.zeros(2, np.int32)),
        (gt.ones_like(gt.zeros(2, 2), dtype=gt.float64), np.ones((2, 2))),
        (gt.full_like(gt.zeros(3), 4.0), np.full(3, 4.0, np.float32)),
        (gt.empty(2, 0), np.zeros((2, 0), np.float32)),
    ]
    for t, want in checks:
        got = t.numpy()
        assert t.shape == want.shape and t.dtype == want.dtype.name and got.dtype == want.dtype
        np.testing.assert_allclose(got, want)


def test_random_factories_have_the_right_shapes_ranges_and_dtypes(conn):
    r = gt.rand(1000)
    n = gt.randn(20, 50, dtype=gt.float64)
    i = gt.randint(3, 7, (500,))
    j = gt.randint(4, size=(2, 2), dtype="int32")
    like = gt.randn_like(gt.zeros(2, 3, dtype="float16"))
    rv, nv, iv = r.numpy(), n.numpy(), i.numpy()
    assert rv.min() >= 0 and rv.max() < 1 and 0.4 < rv.mean() < 0.6
    assert nv.dtype == np.float64 and abs(nv.mean()) < 0.2 and 0.8 < nv.std() < 1.2
    assert iv.dtype == np.int64 and set(np.unique(iv)) == {3, 4, 5, 6}
    assert (
        j.dtype == "int32"
        and j.shape == (2, 2)
        and like.dtype == "float16"
        and like.shape == (2, 3)
    )
    assert sorted(gt.randperm(6).tolist()) == list(range(6))


def test_manual_seed_makes_random_factories_reproducible(conn):
    gt.manual_seed(42)
    a = gt.randn(5).numpy()
    b = gt.rand(3).numpy()
    gt.manual_seed(42)
    np.testing.assert_array_equal(gt.randn(5).numpy(), a)
    np.testing.assert_array_equal(gt.rand(3).numpy(), b)
    gt.manual_seed(43)
    assert not np.array_equal(gt.randn(5).numpy(), a)


def test_factories_accept_requires_grad(conn):
    for t in (
        gt.tensor([1.0]),
        gt.zeros(2),
        gt.ones(2),
        gt.randn(2),
        gt.rand(2),
        gt.full((2,), 1.0),
        gt.eye(2),
        gt.arange(2.0),
    ):
        assert not t.requires_grad
    made = [
        gt.tensor([1.0], requires_grad=True),
        gt.from_numpy(np.ones(2, np.float32), requires_grad=True),
        gt.zeros(2, requires_grad=True),
        gt.randn(2, requires_grad=True),
        gt.arange(3.0, requires_grad=True),
        gt.zeros_like(gt.ones(2), requires_grad=True),
    ]
    assert all(t.requires_grad and t.is_leaf for t in made)


@pytest.mark.parametrize(
    "dtype", ["float32", "float64", "float16", "int16", "int32", "int64", "bool"]
)
def test_to_converts_like_numpy_astype(conn, dtype):
    a = np.array([-1.5, 0.0, 2.7], np.float32)
    t = gt.from_numpy(a).to(dtype)
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.numpy(), a.astype(dtype))


def test_conversion_shortcuts(conn):
    t = gt.tensor([1.9, -2.0])
    assert t.float() is t
    assert t.double().dtype == "float64" and t.half().dtype == "float16"
    assert (
        t.long().tolist() == [1, -2]
        and t.int().dtype == "int32"
        and t.bool().tolist() == [True, True]
    )
    assert t.to(gt.zeros(1, dtype="float64")).dtype == "float64"
    assert t.to("cpu") is t and t.cuda() is t and t.cpu() is t


def test_data_access(conn):
    t = gt.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t.data.numpy().tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t[1, 0].item() == 3.0 and isinstance(t[1, 0].item(), float)
    assert gt.tensor(5).item() == 5 and isinstance(gt.tensor(5).item(), int)
    assert float(t.sum()) == 10.0 and int(t[0, 1]) == 2 and bool(t[0, 0] > 0)
    assert np.asarray(t).shape == (2, 2) and np.array(t, dtype=np.float64).dtype == np.float64
    assert (
        t.shape == (2, 2)
        and t.ndim == 2
        and t.dim() == 2
        and t.size() == (2, 2)
        and t.size(-1) == 2
    )
    assert len(t) == 2 and t.numel() == 4 and t.dtype == gt.float32 and t.is_floating_point()
    assert [r.tolist() for r in t] == [[1.0, 2.0], [3.0, 4.0]]
    assert f"{t.sum():.1f}" == "10.0"
    assert [1, 2, 3][gt.tensor(1)] == 2
    with pytest.raises(RuntimeError, match="4 elements cannot be converted"):
        t.item()
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(t)
    with pytest.raises(TypeError, match="0-d"):
        len(gt.tensor(1.0))


def test_tensors_are_hashable_by_identity(conn):
    a, b = gt.zeros(2), gt.zeros(2)
    d = {a: "a", b: "b"}
    assert d[a] == "a" and d[b] == "b" and len({a, b, a}) == 2


def test_repr_shows_data_dtype_and_autograd_state(conn):
    assert repr(gt.tensor([[0.1234, -1.2345]])) == "tensor([[ 0.1234, -1.2345]])"
    assert repr(gt.tensor([1, 2], dtype="int32")) == "tensor([1, 2], dtype=gt.int32)"
    w = gt.tensor([1.0, 2.0], requires_grad=True)
    assert repr(w) == "tensor([1., 2.], requires_grad=True)"
    assert repr(w * 2) == "tensor([2., 4.], grad_fn=<MulBackward0>)"
    assert repr(w.sum()) == "tensor(3., grad_fn=<SumBackward0>)"
    assert str(gt.zeros(2, dtype="float64")) == "tensor([0., 0.], dtype=gt.float64)"
    assert (
        repr(gt.nn.Parameter(gt.ones(1)))
        == "Parameter containing:\ntensor([1.], requires_grad=True)"
    )


def test_functional_spellings_match_methods(conn):
    x = gt.tensor([[1.0, -2.0], [3.0, 0.5]])
    assert gt.sum(x, dim=1).tolist() == x.sum(1).tolist()
    assert gt.exp(x).tolist() == x.exp().tolist()
    assert gt.max(x).item() == 3.0
    assert gt.transpose(x).tolist() == [[1.0, 3.0], [-2.0, 0.5]]
    assert gt.concat([x, x]).shape == (4, 2)
