"""``gt.autograd.forward_ad``: dual tensors give PyTorch's Jacobian-vector products (values checked
against torch 2.13 by hand: ``sin(x**2)`` at [1, 2] along [1, 0.5] is [1.0806, -1.3073])."""

from __future__ import annotations

import numpy as np
import pytest

import gt

fwAD = gt.autograd.forward_ad


def test_tangents_are_jacobian_vector_products(conn):
    x, v = gt.tensor([1.0, 2.0]), gt.tensor([1.0, 0.5])
    with fwAD.dual_level():
        d = fwAD.make_dual(x, v)
        y = (d**2).sin()
        primal, tangent = fwAD.unpack_dual(y)
        assert not primal.requires_grad and not tangent.requires_grad
        want = np.cos(np.array([1.0, 4.0])) * 2 * np.array([1.0, 2.0]) * np.array([1.0, 0.5])
        np.testing.assert_allclose(tangent.numpy(), want, rtol=1e-6)
        np.testing.assert_array_equal(fwAD.unpack_dual(d).tangent.numpy(), [1.0, 0.5])
        np.testing.assert_array_equal(fwAD.unpack_dual(d * 3 + 1).tangent.numpy(), [3.0, 1.5])
        assert fwAD.unpack_dual(x).tangent is None  # (not a dual: no tangent)
    assert fwAD.unpack_dual(y).tangent is None  # (the level is gone)


def test_tangents_stay_differentiable_with_respect_to_what_requires_grad(conn):
    v = gt.tensor([1.0, 0.5])
    w = gt.ones(2, requires_grad=True)
    xg = gt.tensor([0.5, 1.5], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(gt.tensor([1.0, 2.0]), v)
        _, tz = fwAD.unpack_dual((d * w).sum())
        tz.backward()
        np.testing.assert_array_equal(w.grad.numpy(), [1.0, 0.5])
        dd = fwAD.make_dual(xg, v)
        _, tq = fwAD.unpack_dual((dd**3).sum())  # 3 x^2 . v
        assert tq.item() == pytest.approx(4.125)
        tq.backward()  # d/dx (3 x^2 . v) = 6 x v
        np.testing.assert_allclose(xg.grad.numpy(), [3.0, 4.5], rtol=1e-6)


def test_dual_tensors_need_a_level_and_a_tangent_of_their_shape(conn):
    x = gt.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="no level exists"):
        fwAD.make_dual(x, x)
    with fwAD.dual_level(), pytest.raises(RuntimeError, match="different size"):
        fwAD.make_dual(x, gt.ones(3))
