"""``gt.autograd.gradcheck`` and ``gradgradcheck`` (found missing while writing the
``neural_odes_implicit`` programs, whose implicit layers are checked with ``gradcheck`` as the
deep-implicit-layers tutorial does): central differences against the analytical Jacobian, PyTorch's
arguments, messages and failure modes."""

from __future__ import annotations

import pytest

import gt

pytestmark = pytest.mark.timeout(120)


def test_gradcheck_passes_for_correct_gradients_of_several_inputs_and_outputs(conn):
    a = gt.tensor([[0.3, -1.2], [0.7, 0.1]], dtype=gt.float64, requires_grad=True)
    b = gt.tensor([0.5, -0.4], dtype=gt.float64, requires_grad=True)
    c = gt.tensor([1.0, 2.0], dtype=gt.float64)  # does not require grad: not checked

    def f(a, b, c):
        return gt.tanh(a @ b) * c, (a * a).sum()

    assert gt.autograd.gradcheck(f, (a, b, c)) is True
    assert gt.autograd.gradcheck(gt.sin, b, eps=1e-6, atol=1e-5, check_undefined_grad=False)
    assert gt.autograd.gradgradcheck(lambda a, b: gt.tanh(a @ b), (a, b))


def test_gradcheck_reports_a_wrong_backward_through_a_hook_like_pytorch(conn):
    x = gt.tensor([0.2, -0.3, 0.4], dtype=gt.float64, requires_grad=True)

    def bad(x):
        y = gt.sin(x)
        y.register_hook(lambda g: g * 2)  # doubles the gradient: the Jacobian is wrong
        return y

    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0") as e:  # fmt: skip
        gt.autograd.gradcheck(bad, (x,))
    assert type(e.value).__name__ == "GradcheckError"
    assert gt.autograd.gradcheck(bad, (x,), raise_exception=False) is False


def test_gradcheck_of_an_implicit_layer_with_a_solve_hook(conn):
    w = gt.tensor([[0.2, -0.1], [0.05, 0.3]], dtype=gt.float64)

    def layer(x):  # z = tanh(W z + x), the implicit gradient by a hook solving J^T g = grad
        with gt.no_grad():
            z = gt.zeros_like(x)
            for _ in range(60):
                z = gt.tanh(z @ w.T + x)
        z = gt.tanh(z @ w.T + x)
        J = gt.eye(2, dtype=gt.float64)[None] - (1 / gt.cosh(z @ w.T + x) ** 2)[:, :, None] * w[None]  # fmt: skip
        z.register_hook(lambda g: gt.linalg.solve(J.detach().transpose(1, 2), g[:, :, None])[:, :, 0])  # fmt: skip
        return z

    x = gt.tensor([[0.5, -0.2], [0.1, 0.3]], dtype=gt.float64, requires_grad=True)
    assert gt.autograd.gradcheck(layer, x, check_undefined_grad=False)


def test_gradcheck_needs_an_input_that_requires_grad_and_warns_on_single_precision(conn):
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        gt.autograd.gradcheck(gt.sin, (gt.ones(2, dtype=gt.float64),))
    x = gt.tensor([0.1, 0.2], requires_grad=True)
    with pytest.warns(UserWarning, match="is not a double precision"):
        gt.autograd.gradcheck(lambda t: t * 3, x, eps=1e-3, atol=1e-2)
