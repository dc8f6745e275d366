"""``inplace=True`` of ``gt.nn.functional``'s activations (and their modules, and the ``F.*_``
spellings) overwrites the input, as PyTorch's does, with gradients that still flow."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F

pytestmark = pytest.mark.timeout(120)
X = [-1.5, -0.25, 0.0, 0.5, 2.0]
CASES = {
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1, inplace=True), lambda a: np.where(a > 0, a, 0.1 * a)),
    "leaky_relu_": (lambda x: F.leaky_relu_(x, 0.1), lambda a: np.where(a > 0, a, 0.1 * a)),
    "elu": (lambda x: F.elu(x, inplace=True), lambda a: np.where(a > 0, a, np.expm1(a))),
    "elu_": (F.elu_, lambda a: np.where(a > 0, a, np.expm1(a))),
    "celu_": (lambda x: F.celu_(x, 2.0), lambda a: np.where(a > 0, a, 2 * np.expm1(a / 2))),
    "hardtanh_": (F.hardtanh_, lambda a: np.clip(a, -1, 1)),
    "relu6 module": (gt.nn.ReLU6(inplace=True), lambda a: np.clip(a, 0, 6)),
    "threshold_": (lambda x: F.threshold_(x, 0.25, -9.0), lambda a: np.where(a > 0.25, a, -9.0)),
    "silu module": (gt.nn.SiLU(inplace=True), lambda a: a / (1 + np.exp(-a))),
    "hardswish": (lambda x: F.hardswish(x, inplace=True), lambda a: a * np.clip(a + 3, 0, 6) / 6),
    "rrelu_ (eval)": (F.rrelu_, lambda a: np.where(a > 0, a, a * (1 / 8 + 1 / 3) / 2)),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_inplace_activations_overwrite_their_input(conn, name):
    fn, want = CASES[name]
    x = gt.tensor(X, dtype=gt.float64)
    y = fn(x)
    assert y is x
    np.testing.assert_allclose(x.numpy(), want(np.array(X)), rtol=1e-12)


def test_gradients_flow_through_an_inplace_activation_and_a_leaf_is_refused(conn):
    w = gt.tensor(X, dtype=gt.float64, requires_grad=True)
    h = w * 2.0
    y = F.elu(h, inplace=True)
    assert y is h
    (y * y).sum().backward()
    a = 2 * np.array(X)
    e = np.where(a > 0, a, np.expm1(a))
    np.testing.assert_allclose(w.grad.numpy(), 2 * e * np.where(a > 0, 1, np.exp(a)) * 2)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        F.leaky_relu(w, inplace=True)
