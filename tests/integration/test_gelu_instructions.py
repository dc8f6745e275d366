"""The exact ``gelu`` is one ``gelu`` instruction forward and one ``gelu_backward`` back (it was
five forward and about ten back), close to the exact values in float32 (PyTorch's CPU formula)
and exact to rounding in float64, and stays differentiable twice when the backward is recorded."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.nn.functional as F
from gt.runtime import ops as O
from gt.runtime.ops.error_function import erf

GELU = O.OPCODE["gelu"]
BACKWARD = O.OPCODE["gelu_backward"]
rng = np.random.default_rng(23)


def _exact(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = x.astype(np.float64)
    cdf = 0.5 * (1.0 + erf(x / math.sqrt(2.0)))
    return x * cdf, cdf + x * np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_gelu_is_one_instruction_each_way_with_its_gradient(conn, sent, dtype):
    x = (rng.standard_normal((4, 300)) * 3).astype(dtype)
    g = rng.standard_normal(x.shape).astype(dtype)
    X = gt.tensor(x, requires_grad=True)
    sent.clear()
    y = F.gelu(X)
    assert sent == [GELU]
    assert y.grad_fn.name() == "GeluBackward0" and y.dtype == dtype
    sent.clear()
    y.backward(gt.tensor(g))
    assert sent.count(BACKWARD) == 1 and GELU not in sent
    value, slope = _exact(x)
    tol = 1e-6 if dtype == "float32" else 1e-14
    np.testing.assert_allclose(y.detach().numpy(), value, rtol=tol, atol=tol)
    np.testing.assert_allclose(X.grad.numpy(), g * slope, rtol=tol, atol=tol)


def test_a_recorded_backward_gives_the_second_derivative(conn):
    x0 = rng.standard_normal((3, 7)) * 2
    X = gt.tensor(x0, requires_grad=True)
    (gx,) = gt.autograd.grad((F.gelu(X) ** 2).sum(), X, create_graph=True)
    (hv,) = gt.autograd.grad(gx.sum(), X)
    value, slope = _exact(x0)
    pdf = np.exp(-0.5 * x0 * x0) / math.sqrt(2.0 * math.pi)
    curvature = 2.0 * pdf - x0 * x0 * pdf  # gelu''(x) = pdf * (2 - x^2)
    want = 2.0 * (slope * slope + value * curvature)  # d2/dx2 of gelu(x)^2
    np.testing.assert_allclose(hv.numpy(), want, rtol=1e-10, atol=1e-12)


def test_half_precision_and_the_tanh_form_keep_their_paths(conn, sent):
    x = rng.standard_normal(64).astype(np.float32)
    half = F.gelu(gt.tensor(x.astype(np.float16))).numpy()
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, _exact(x.astype(np.float16))[0], rtol=2e-3, atol=1e-3)
    sent.clear()
    F.gelu(gt.tensor(x), approximate="tanh")
    assert GELU not in sent


def test_gelu_sharded_by_rows_runs_per_shard_each_way(cluster, conn):
    from gt.runtime.control import request

    x0 = (rng.standard_normal((8, 32)) * 2).astype(np.float32)
    g0 = rng.standard_normal((8, 32)).astype(np.float32)
    Xr = gt.tensor(x0, requires_grad=True)
    want = F.gelu(Xr)
    want.backward(gt.tensor(g0))
    gt.load_config({"rows": {"shard": {"axis": 0}}})
    try:
        with gt.signal.context("rows"):
            X = gt.tensor(x0, requires_grad=True)
            y = F.gelu(X)
            y.backward(gt.tensor(g0))
        gt.sync()
        layouts = request(cluster.address, "placement")[conn.client_no]
        assert layouts[y.id].startswith("shard(axis=0, [0, 1]")
        assert layouts[X.grad.id].startswith("shard(axis=0, [0, 1]")
        assert np.array_equal(y.detach().numpy(), want.detach().numpy())
        assert np.array_equal(X.grad.numpy(), Xr.grad.numpy())
    finally:
        gt.config.clear()
