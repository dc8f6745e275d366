"""``layer_norm`` and ``group_norm`` send one ``normalize`` instruction forward and one
``normalize_backward`` back, give the normalized values and gradients, and stay differentiable
twice when the backward pass is recorded."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F
from gt.runtime import ops as O

NORMALIZE = O.OPCODE["normalize"]
BACKWARD = O.OPCODE["normalize_backward"]
rng = np.random.default_rng(11)


def _layer_norm_ref(x, w, b, eps, k=1):
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axes, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _layer_norm_grads(x, w, g, eps):
    """``x``'s and ``w``'s gradients of ``sum(g * layer_norm(x))`` over the last axis."""
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    gx = g * w
    dx = rstd * (gx - gx.mean(-1, keepdims=True) - xhat * (gx * xhat).mean(-1, keepdims=True))
    return dx, (g * xhat).reshape(-1, x.shape[-1]).sum(0)


def test_layer_norm_is_one_instruction_each_way_with_its_gradients(conn, sent):
    x = rng.standard_normal((3, 5, 16))
    w, b, g = rng.standard_normal(16), rng.standard_normal(16), rng.standard_normal((3, 5, 16))
    X, W, B = (gt.tensor(a, requires_grad=True) for a in (x, w, b))
    sent.clear()
    y = F.layer_norm(X, (16,), W, B, eps=1e-3)
    assert sent.count(NORMALIZE) == 1 and len(sent) <= 3  # normalize, the weight, the bias
    assert y.grad_fn.name() == "NativeLayerNormBackward0"
    assert np.allclose(y.detach().numpy(), _layer_norm_ref(x, w, b, 1e-3), rtol=1e-12, atol=1e-12)
    sent.clear()
    y.backward(gt.tensor(g))
    assert sent.count(BACKWARD) == 1 and NORMALIZE not in sent
    dx, dw = _layer_norm_grads(x, w, g, 1e-3)
    assert np.allclose(X.grad.numpy(), dx, rtol=1e-10, atol=1e-12)
    assert np.allclose(W.grad.numpy(), dw, rtol=1e-10, atol=1e-12)
    assert np.allclose(B.grad.numpy(), g.reshape(-1, 16).sum(0), rtol=1e-12)


def test_a_layer_norm_over_two_dims_normalizes_them_together(conn):
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    y = F.layer_norm(gt.tensor(x), (4, 5))
    assert y.shape == (2, 3, 4, 5)
    assert np.allclose(y.numpy(), _layer_norm_ref(x, 1.0, 0.0, 1e-5, k=2), atol=2e-6)


def test_group_norm_is_one_instruction_and_keeps_a_constant_group_at_zero(conn, sent):
    x = rng.standard_normal((2, 6, 3, 3)).astype(np.float32)
    x[0, :2] = 0.3  # the first group of the first sample is constant
    sent.clear()
    y = F.group_norm(gt.tensor(x, requires_grad=True), 3)
    assert sent.count(NORMALIZE) == 1
    got = y.detach().numpy()
    assert not np.any(got[0, :2])
    groups = x.reshape(2, 3, -1).astype(np.float64)  # (float32 would not find 0.3 its own mean)
    mu, var = groups.mean(-1, keepdims=True), groups.var(-1, keepdims=True)
    assert np.allclose(got, ((groups - mu) / np.sqrt(var + 1e-5)).reshape(x.shape), atol=3e-6)


@pytest.mark.parametrize("norm", ["layer", "group"])
def test_a_recorded_backward_gives_the_second_derivative(conn, norm):
    x0 = rng.standard_normal((2, 4, 6))

    def f(x):
        y = F.layer_norm(x, (6,), eps=1e-2) if norm == "layer" else F.group_norm(x, 2, eps=1e-2)
        return (y**3).sum()

    X = gt.tensor(x0, requires_grad=True)
    (gx,) = gt.autograd.grad(f(X), X, create_graph=True)
    v = rng.standard_normal(x0.shape)
    (hv,) = gt.autograd.grad((gx * gt.tensor(v)).sum(), X)

    def grad_at(a):  # the first derivative at ``a``, by the (tested) first-order path
        A = gt.tensor(a, requires_grad=True)
        f(A).backward()
        return A.grad.numpy()

    h = 1e-5
    numeric = (grad_at(x0 + h * v) - grad_at(x0 - h * v)) / (2 * h)  # a Hessian-vector product
    assert np.allclose(hv.numpy(), numeric, rtol=1e-5, atol=1e-6)


def test_a_layer_norm_sharded_by_rows_runs_per_shard_each_way(cluster, conn):
    from gt.runtime.control import request

    x0 = rng.standard_normal((8, 32)).astype(np.float32)
    g0 = rng.standard_normal((8, 32)).astype(np.float32)
    want = F.layer_norm(gt.tensor(x0), (32,)).numpy()
    Xr = gt.tensor(x0, requires_grad=True)
    F.layer_norm(Xr, (32,)).backward(gt.tensor(g0))
    gt.load_config({"rows": {"shard": {"axis": 0}}})
    try:
        with gt.signal.context("rows"):
            X = gt.tensor(x0, requires_grad=True)
            G = gt.tensor(g0)
            y = F.layer_norm(X, (32,))
            y.backward(G)
        gt.sync()
        layouts = request(cluster.address, "placement")[conn.client_no]
        assert layouts[y.id].startswith("shard(axis=0, [0, 1]")
        assert layouts[X.grad.id].startswith("shard(axis=0, [0, 1]")
        assert np.array_equal(y.detach().numpy(), want)
        assert np.array_equal(X.grad.numpy(), Xr.grad.numpy())
    finally:
        gt.config.clear()


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_in_eval_is_one_scale_and_one_shift_per_channel(conn, affine):
    x = rng.standard_normal((4, 6, 5, 5)).astype(np.float32)
    rm = (rng.standard_normal(6) * 0.1).astype(np.float32)
    rv = (rng.random(6) + 0.5).astype(np.float32)
    w = rng.standard_normal(6).astype(np.float32) if affine else None
    b = rng.standard_normal(6).astype(np.float32) if affine else None
    X = gt.tensor(x, requires_grad=True)
    W, B = (gt.tensor(a, requires_grad=True) if a is not None else None for a in (w, b))
    y = F.batch_norm(X, gt.tensor(rm), gt.tensor(rv), W, B, training=False, eps=1e-5)
    assert y.grad_fn.name() == "NativeBatchNormBackward0"
    # PyTorch's evaluation kernel: alpha = w / sqrt(var + eps), beta = b - mean * alpha
    alpha = np.float32(1.0) / np.sqrt(rv + np.float32(1e-5))
    if affine:
        alpha = alpha * w
    beta = (b if affine else np.float32(0.0)) - rm * alpha
    want = x * alpha.reshape(1, -1, 1, 1) + beta.reshape(1, -1, 1, 1)
    np.testing.assert_array_equal(y.detach().numpy(), want)
    g = rng.standard_normal(x.shape).astype(np.float32)
    y.backward(gt.tensor(g))
    np.testing.assert_allclose(X.grad.numpy(), g * alpha.reshape(1, -1, 1, 1), rtol=1e-6)
    if affine:
        xhat = (x - rm.reshape(1, -1, 1, 1)) / np.sqrt(rv.reshape(1, -1, 1, 1) + 1e-5)
        np.testing.assert_allclose(W.grad.numpy(), (g * xhat).sum((0, 2, 3)), rtol=2e-4, atol=2e-5)
        np.testing.assert_allclose(B.grad.numpy(), g.sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
