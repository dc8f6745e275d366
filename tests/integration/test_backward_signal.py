"""Gradients of ops made under `signal.context(name, backward=...)` run where the backward rule says."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.runtime.launch import LocalCluster


@pytest.fixture(scope="module")
def two_workers():
    with LocalCluster(workers=2) as c:
        yield c


def test_gradient_ops_follow_the_backward_signal(two_workers):
    conn = gt.connect(two_workers.address, timeout=60)
    try:
        gt.load_config({"fwd": {"workers": [0]}, "bwd": {"workers": [1]}})
        rng = np.random.default_rng(0)
        x_np = rng.standard_normal((4, 3)).astype(np.float32)
        w_np = rng.standard_normal((3, 2)).astype(np.float32)
        x = gt.from_numpy(x_np).requires_grad_()
        w = gt.from_numpy(w_np).requires_grad_()
        with gt.signal.context("fwd", backward="bwd"):
            y = x @ w
        y.sum().backward()
        np.testing.assert_allclose(x.grad.numpy(), np.ones((4, 2)) @ w_np.T, rtol=1e-5)
        where = conn.control("placement")[conn.client_no]
        assert where[y.id] == "local(0)"  # forward under "fwd"
        assert where[x.grad.id] == "local(1)"  # its gradients under "bwd"
        assert where[w.grad.id] == "local(1)"
    finally:
        gt.disconnect()
