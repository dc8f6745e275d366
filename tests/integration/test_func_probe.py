"""What a probe of ``torch.func``, forward-mode AD and ``autograd.functional`` against PyTorch 2.13
found on Dec 6 (8,161 cases), as PyTorch behaves: forward mode through ``eigh``/``svd`` (and so
``pinv``) and ``logcumsumexp``; ``jvp``/``hvp`` of functions with a constant or integer output;
``torch.return_types`` kept through the transforms; ``vmap(out_dims=None)``. Every test runs on
NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import each_backend_cluster

import gt

pytestmark = pytest.mark.timeout(120)

cluster = each_backend_cluster(workers=1)

_RNG = np.random.default_rng(7)
_A = _RNG.standard_normal((3, 3))
_SPD = _A @ _A.T + 3 * np.eye(3)
_SYM = (lambda v: v + v.T)(_RNG.standard_normal((3, 3)))
_B, _W = _RNG.standard_normal((4, 3)), _RNG.standard_normal((4, 3))


def _t(a: np.ndarray) -> gt.Tensor:
    return gt.tensor(a, dtype=gt.float64)


def test_forward_mode_through_eigh_and_svd_is_not_zero(conn):
    _, tangent = gt.func.jvp(gt.linalg.eigvalsh, (_t(_SPD),), (_t(_SYM),))
    _, vecs = np.linalg.eigh(_SPD)  # (a value's derivative: v^T dA v)
    np.testing.assert_allclose(tangent.numpy(), np.einsum("ji,jk,ki->i", vecs, _SYM, vecs))
    _, tangent = gt.func.jvp(lambda m: gt.linalg.eigh(m).eigenvectors, (_t(_SPD),), (_t(_SYM),))
    assert np.abs(tangent.numpy()).max() > 0.01
    _, tangent = gt.func.jvp(gt.linalg.pinv, (_t(_B),), (_t(_W),))
    eps = 1e-6
    central = (np.linalg.pinv(_B + eps * _W) - np.linalg.pinv(_B - eps * _W)) / (2 * eps)
    np.testing.assert_allclose(tangent.numpy(), central, rtol=1e-5, atol=1e-7)


def test_a_gradient_of_eigenvalues_at_a_repeated_value_stays_finite(conn):
    x = gt.eye(3, dtype=gt.float64, requires_grad=True)
    gt.linalg.eigvalsh(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.eye(3))


def test_forward_mode_through_logcumsumexp(conn):
    x, v = _RNG.standard_normal(5), _RNG.standard_normal(5)
    _, tangent = gt.func.jvp(lambda a: a.logcumsumexp(0), (_t(x),), (_t(v),))
    out = np.logaddexp.accumulate(x)
    want = [sum(np.exp(x[i] - out[j]) * v[i] for i in range(j + 1)) for j in range(5)]
    np.testing.assert_allclose(tangent.numpy(), want, rtol=1e-12)


def test_jvp_and_hvp_with_constant_and_integer_outputs(conn):
    x, v = _t([3.0, 1.0, 2.0]), _t([1.0, 1.0, 1.0])
    _, (t1, t2) = gt.func.jvp(lambda a: (a * 2, gt.ones(2, dtype=gt.float64)), (x,), (v,))
    assert t1.tolist() == [2.0, 2.0, 2.0] and t2.tolist() == [0.0, 0.0]
    out, tangent = gt.func.jvp(gt.sort, (x,), (v,))
    assert type(out).__name__ == "sort" and out.indices.tolist() == [1, 2, 0]
    assert tangent.values.tolist() == [1.0, 1.0, 1.0] and tangent.indices.tolist() == [0, 0, 0]
    w, b, data = _t([0.5, -1.0, 2.0]), _t([0.3]), _t(_A)

    def loss(w, b):  # (the bias's gradient is a constant: no graph to differentiate)
        return (w @ data + b).sum() + (w**3).sum()

    _, (hw, hb) = gt.autograd.functional.hvp(loss, (w, b), (_t([1.0, 1.0, 1.0]), _t([1.0])))
    np.testing.assert_allclose(hw.numpy(), 6 * np.array([0.5, -1.0, 2.0]))
    assert hb.tolist() == [0.0]


def test_vmap_results_with_out_dims_none_are_not_stacked(conn):
    x = gt.ones(3)
    total, same = gt.func.vmap(lambda a: (a.sum(), x * 2), out_dims=(0, None))(gt.ones(2, 3))
    assert total.shape == (2,) and same.shape == (3,) and same.tolist() == [2.0, 2.0, 2.0]
    values = gt.func.vmap(gt.linalg.eigh)(_t(np.stack([_SPD, _SPD]))).eigenvalues
    assert values.shape == (2, 3)


def test_hessian_and_forward_mode_of_products(conn):
    x = _t([0.5, 1.5, 2.0])
    np.testing.assert_allclose(
        gt.func.hessian(lambda a: a.prod())(x).numpy(),
        [[0.0, 2.0, 1.5], [2.0, 0.0, 0.5], [1.5, 0.5, 0.0]],
    )
    _, tangent = gt.func.jvp(lambda a: a.cumprod(0), (x,), (_t([1.0, 1.0, 1.0]),))
    np.testing.assert_allclose(tangent.numpy(), [1.0, 2.0, 4.75])
    y = x.clone().requires_grad_()
    (g,) = gt.autograd.grad(y.prod(), y, create_graph=True)
    (h,) = gt.autograd.grad(g.sum(), y, create_graph=True)
    np.testing.assert_allclose(h.detach().numpy(), [3.5, 2.5, 2.0])
    with pytest.raises(NotImplementedError, match="third derivative through prod"):
        gt.autograd.grad(h.sum(), y)  # (not implemented: it raises, never a wrong value)


def test_vmap_takes_in_dims_and_out_dims_nested_as_the_arguments_are(conn):
    m, x = gt.arange(6.0).reshape(2, 3), gt.ones(3)
    got = gt.func.vmap(lambda d: d["a"] * d["b"], in_dims=({"a": 0, "b": None},))({"a": m, "b": x})
    assert got.tolist() == m.tolist()
    assert gt.func.vmap(lambda p: p[0] + p[1], in_dims=((0, None),))((m, x)).tolist() == [
        [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]  # fmt: skip
    first, (second, _) = gt.func.vmap(lambda t: (t, (t * 2, t * 3)), out_dims=(1, 0))(m)
    assert first.shape == (3, 2) and second.shape == (2, 3)
    out = gt.func.vmap(lambda t: {"p": t, "q": t.sum()}, out_dims={"p": 1, "q": 0})(m)
    assert out["p"].shape == (3, 2) and out["q"].tolist() == [3.0, 12.0]
    # (per entry: cummax has no batching rule)
    runs = gt.func.vmap(lambda p: p[0].cummax(0).values + p[1], in_dims=((1, None),))(
        (m, gt.ones(2))
    )
    assert runs.tolist() == [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]]
    with pytest.raises(ValueError, match="in_dims"):
        gt.func.vmap(lambda a: a, in_dims=[0])(m)


def test_copysign_keeps_its_sign_operand_in_the_graph(conn):
    a = gt.tensor([1.0, -2.0, 3.0], requires_grad=True)
    b = gt.tensor([-1.0, 1.0, -0.0], requires_grad=True)
    out = gt.copysign(a, b)
    assert out.tolist() == [-1.0, 2.0, -3.0] and math.copysign(1.0, out[2].item()) < 0
    ga, gb = gt.autograd.grad(out.sum(), (a, b))  # (it said b was not used)
    assert ga.tolist() == [-1.0, -1.0, -1.0] and gb.tolist() == [0.0, 0.0, 0.0]
    zeros = gt.copysign(gt.tensor([0.0, 2.0]), gt.tensor([-1.0, -1.0]))
    assert [math.copysign(1.0, v) for v in zeros.tolist()] == [-1.0, -1.0]
