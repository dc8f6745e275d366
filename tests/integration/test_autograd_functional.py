"""``gt.autograd.functional`` (Jacobians, Hessians, vector products) through a real cluster,
against derivatives written out by hand (PyTorch's own values are in the differential program
``tests/api/programs/autograd_functional.py``)."""

from __future__ import annotations

import numpy as np
import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def _af():
    return gt.autograd.functional


def test_it_is_installed_as_gt_autograd_functional():
    from gt.autograd.functional import jacobian  # noqa: PLC0415 - the import path under test

    assert jacobian is _af().jacobian


def test_jacobian_of_a_map_and_hessian_of_a_quadratic(conn):
    a = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
    x = gt.tensor([0.3, -0.7], dtype="float64")
    jac = _af().jacobian(lambda t: gt.tensor(a) @ t.sin(), x).numpy()
    np.testing.assert_allclose(jac, a * np.cos([0.3, -0.7]), rtol=1e-12)
    q = np.array([[2.0, 1.0], [1.0, 3.0]])
    h = _af().hessian(lambda t: t @ gt.tensor(q) @ t + t.pow(3).sum(), x).numpy()
    np.testing.assert_allclose(h, 2 * q + np.diag(6 * np.array([0.3, -0.7])), rtol=1e-12)


def test_vector_products_agree_with_the_jacobian(conn):
    x = gt.tensor(np.array([[0.2, 0.4], [1.0, -0.5]]), dtype="float64")
    v = gt.tensor(np.array([[1.0, 2.0], [0.0, -1.0]]), dtype="float64")

    def f(t):
        return (t * t).sum(1) + t[:, 0].exp()

    jac = _af().jacobian(f, x).numpy().reshape(2, 4)
    out, jvp = _af().jvp(f, x, v)
    np.testing.assert_allclose(jvp.numpy(), jac @ v.numpy().reshape(-1), rtol=1e-12)
    _, vjp = _af().vjp(f, x, gt.tensor([1.0, -2.0], dtype="float64"))
    np.testing.assert_allclose(vjp.numpy().reshape(-1), np.array([1.0, -2.0]) @ jac, rtol=1e-12)
    np.testing.assert_allclose(out.numpy(), f(x).numpy())

    def g(t):
        return (t.pow(3)).sum()

    _, hvp = _af().hvp(g, x, v)
    np.testing.assert_allclose(hvp.numpy(), 6 * x.numpy() * v.numpy(), rtol=1e-12)


def test_strict_mode_and_bad_arguments_raise_as_pytorch(conn):
    x, y = gt.tensor([1.0, 2.0]), gt.tensor([3.0])
    zero = _af().jacobian(lambda a, b: a * 2, (x, y))[1].numpy()
    assert zero.shape == (2, 1) and (zero == 0).all()
    with pytest.raises(RuntimeError, match="independent of input 1"):
        _af().jacobian(lambda a, b: a * 2, (x, y), strict=True)
    with pytest.raises(RuntimeError, match="v can only be None"):
        _af().vjp(lambda a: a * 2, x)
    with pytest.raises(TypeError, match="Tensor or a tuple of Tensors"):
        _af().jacobian(lambda a: a, [1.0])


def test_func_transforms_compose_and_check_their_arguments(conn):
    fn = gt.func
    x = gt.tensor([0.5, -1.0, 2.0], dtype="float64")
    np.testing.assert_allclose(fn.grad(lambda t: t.pow(3).sum())(x).numpy(), 3 * x.numpy() ** 2)
    second = fn.grad(lambda t: fn.grad(lambda s: s.pow(3).sum())(t).sum())(x)
    np.testing.assert_allclose(second.numpy(), 6 * x.numpy())
    rows = gt.tensor(np.arange(6.0).reshape(2, 3), dtype="float64")
    per_row = fn.vmap(fn.grad(lambda r: (r * r).sum()))(rows)
    np.testing.assert_allclose(per_row.numpy(), 2 * rows.numpy())
    assert not x.requires_grad  # the transforms leave their arguments alone
    with pytest.raises(RuntimeError, match="scalar"):
        fn.grad(lambda t: t * 2)(x)
    with pytest.raises(ValueError, match="same size in the mapped dimension"):
        fn.vmap(lambda a, b: a + b)(gt.zeros(2, 3), gt.zeros(3, 3))
    with pytest.raises(RuntimeError, match="argnums"):
        fn.grad(lambda t: t.sum(), argnums=2)(x)


def test_linearize_gives_the_output_and_a_reusable_jacobian_vector_product(conn):
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7]])
    x0, b0 = np.array([0.2, -0.4, 1.1]), np.array([0.1, -0.2])

    def f(x, b):  # tanh(W x + b), and |x|^2
        return (gt.tensor(w) @ x + b).tanh(), (x * x).sum()

    out, jvp_fn = gt.func.linearize(f, gt.tensor(x0), gt.tensor(b0))
    y = np.tanh(w @ x0 + b0)
    np.testing.assert_allclose(out[0].numpy(), y)
    jac_x, jac_b = (1 - y**2)[:, None] * w, np.diag(1 - y**2)  # written out by hand
    for tx, tb in [(np.array([1.0, 0.0, -2.0]), np.array([0.5, 3.0])), (np.ones(3), np.zeros(2))]:
        jy, jn = jvp_fn(gt.tensor(tx), gt.tensor(tb))
        np.testing.assert_allclose(jy.numpy(), jac_x @ tx + jac_b @ tb, rtol=1e-12)
        np.testing.assert_allclose(jn.numpy(), 2 * x0 @ tx, rtol=1e-12)
        assert not jy.requires_grad  # (plain tangents: a plain result, as PyTorch's)
    same = gt.func.jvp(f, (gt.tensor(x0), gt.tensor(b0)), (gt.tensor(tx), gt.tensor(tb)))[1]
    np.testing.assert_allclose(same[0].numpy(), jy.numpy())


def test_linearize_checks_the_tangents_against_the_primals(conn):
    _, jvp_fn = gt.func.linearize(lambda a, b: a * b, gt.ones(3), gt.ones(3))
    with pytest.raises(RuntimeError, match="same argspec as the primals"):
        jvp_fn(gt.ones(3))
    with pytest.raises(RuntimeError, match=r"tangent:1 with shape \(2,\)"):
        jvp_fn(gt.ones(3), gt.ones(2))
    with pytest.raises(RuntimeError, match="tangent:0 with dtype gt.float64"):
        jvp_fn(gt.ones(3, dtype="float64"), gt.ones(3))
    leaf = gt.tensor([1.0, 2.0], requires_grad=True)
    out, jvp_fn = gt.func.linearize(lambda a: a.exp(), leaf)
    assert out.requires_grad  # the output is a plain call's: connected to the primals
    tangent = gt.tensor([1.0, -1.0], requires_grad=True)
    jvp_fn(tangent).sum().backward()  # linear in the tangents, so differentiable in them
    np.testing.assert_allclose(tangent.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
