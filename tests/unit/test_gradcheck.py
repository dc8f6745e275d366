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


class _NoUndefined(gt.autograd.Function):
    """Two outputs, no materialized gradients; backward turns an undefined one into the number 0."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(a, b)
        return a * b, a + b

    @staticmethod
    def backward(ctx, g1, g2):
        a, b = ctx.saved_tensors
        ga = (g1 * b if g1 is not None else 0) + (g2 if g2 is not None else 0)
        gb = (g1 * a if g1 is not None else 0) + (g2 if g2 is not None else 0)
        return ga, gb


class _HandlesUndefined(gt.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.set_materialize_grads(False)
        return a * 2, a * 3

    @staticmethod
    def backward(ctx, g1, g2):
        if g1 is None and g2 is None:
            return None
        return (0 if g1 is None else g1 * 2) + (0 if g2 is None else g2 * 3)


def test_gradcheck_fails_a_backward_that_cannot_take_undefined_output_grads_as_pytorch(conn):
    # (PyTorch 2.13's results: its check_undefined_grad passes undefined gradients, None in a
    # Function that does not materialize them; returning the number 0 is a RuntimeError there)
    a = gt.tensor([0.3, -0.7], dtype=gt.float64, requires_grad=True)
    b = gt.tensor([1.1, 0.4], dtype=gt.float64, requires_grad=True)

    def f(a, b):
        return _NoUndefined.apply(a, b)[0].sin() + _NoUndefined.apply(a, b)[1]

    msg = "Expected backward function to handle undefined output grads"
    with pytest.raises(gt.autograd.GradcheckError, match=msg):
        gt.autograd.gradcheck(f, (a, b))
    with pytest.raises(gt.autograd.GradcheckError, match=msg):
        gt.autograd.gradcheck(lambda a, b: _NoUndefined.apply(a, b), (a, b))
    assert gt.autograd.gradcheck(f, (a, b), raise_exception=False) is False
    assert gt.autograd.gradcheck(f, (a, b), check_undefined_grad=False) is True
    # a backward that takes None for them passes
    assert gt.autograd.gradcheck(lambda x: _HandlesUndefined.apply(x), (a,)) is True
    pair = lambda x: _HandlesUndefined.apply(x)[0].sin() * _HandlesUndefined.apply(x)[1]  # noqa: E731
    assert gt.autograd.gradcheck(pair, (a,)) is True


def test_a_function_whose_backward_returns_a_number_raises_pytorchs_runtime_error(conn):
    class Bad(gt.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return 0

    a = gt.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=r"expected Variable or None \(got int\)"):
        Bad.apply(a).sum().backward()
