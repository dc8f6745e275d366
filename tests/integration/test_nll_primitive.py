"""``nll_loss`` (and so ``cross_entropy``) as one primitive and its gradient as another: PyTorch's
values, gradients, second derivatives, errors and node names, in two instructions where the
composition took over twenty."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt.runtime import ops as O

F = gt.nn.functional
rng = np.random.default_rng(11)
NLL, NLL_BACK = O.OPCODE["nll_loss"], O.OPCODE["nll_loss_backward"]


def log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(1, keepdims=True)
    return z - np.log(np.exp(z).sum(1, keepdims=True))


def reference(z, t, w, ignore, reduction):
    """Cross entropy and its gradient in float64 NumPy, PyTorch's definitions."""
    lp = log_softmax(z.astype(np.float64))
    keep = t != ignore
    safe = np.where(keep, t, 0)
    wt = (w[safe] if w is not None else np.ones(len(t))) * keep
    loss = -lp[np.arange(len(t)), safe] * wt
    onehot = np.zeros_like(lp)
    onehot[np.arange(len(t)), safe] = wt
    p = np.exp(lp)
    per_row = p * onehot.sum(1, keepdims=True) - onehot  # w_i (p_i - e_t_i)
    if reduction == "mean":
        return loss.sum() / wt.sum(), per_row / wt.sum()
    return (loss.sum() if reduction == "sum" else loss), per_row


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "class weights"])
def test_cross_entropy_is_pytorchs_loss_and_gradient(conn, reduction, weighted):
    z = rng.standard_normal((7, 5)).astype(np.float32)
    t = np.array([0, 4, -100, 2, 2, 1, 3])
    w = rng.uniform(0.5, 2.0, 5).astype(np.float32) if weighted else None
    want, dz = reference(z, t, w, -100, reduction)
    x = gt.tensor(z, requires_grad=True)
    loss = F.cross_entropy(x, gt.tensor(t), None if w is None else gt.tensor(w),
                           reduction=reduction)  # fmt: skip
    assert loss.grad_fn.name() == "NllLossBackward0"
    np.testing.assert_allclose(loss.detach().numpy(), want, rtol=1e-5, atol=1e-6)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), dz, rtol=1e-5, atol=1e-6)
    assert not x.grad.numpy()[2].any()  # the ignored row gets nothing, +0.0


def test_the_loss_and_its_gradient_are_one_instruction_each(conn, sent):
    x = gt.tensor(rng.standard_normal((4, 3)).astype(np.float32), requires_grad=True)
    logp, t = x.log_softmax(1), gt.tensor([0, 2, 1, 1])
    sent.clear()
    loss = F.nll_loss(logp, t)
    assert sent == [NLL]
    sent.clear()
    (g,) = gt.autograd.grad(loss, logp)
    assert sent.count(NLL_BACK) == 1 and len(sent) <= 3  # (the incoming 1.0 and the gradient)
    np.testing.assert_allclose(g.numpy()[[0, 1, 2, 3], [0, 2, 1, 1]], [-0.25] * 4)


def test_second_derivatives_through_cross_entropy(conn):
    # the Hessian of the mean loss in the logits is (diag(p) - p p^T) / N row by row
    z = rng.standard_normal((3, 4))
    t = np.array([1, 0, 3])
    x = gt.tensor(z, requires_grad=True)
    loss = F.cross_entropy(x, gt.tensor(t))
    (g,) = gt.autograd.grad(loss, x, create_graph=True)
    v = rng.standard_normal((3, 4))
    (hv,) = gt.autograd.grad((g * gt.tensor(v)).sum(), x)
    p = np.exp(log_softmax(z))
    want = (p * v - p * (p * v).sum(1, keepdims=True)) / 3
    np.testing.assert_allclose(hv.numpy(), want, rtol=1e-10, atol=1e-12)


def test_a_gradient_of_the_gradient_in_its_incoming_gradient(conn):
    # d/dg of nll_loss_backward(g) is nll_loss of what comes back: a linear map and its adjoint
    logp = gt.tensor(rng.standard_normal((5, 3)), requires_grad=True)
    t = gt.tensor([2, 0, 1, 1, -100])
    loss = F.nll_loss(logp, t, reduction="none")
    g = gt.tensor(rng.standard_normal(5), requires_grad=True)
    (dlogp,) = gt.autograd.grad(loss, logp, grad_outputs=g, create_graph=True)
    u = rng.standard_normal((5, 3))
    (dg,) = gt.autograd.grad((dlogp * gt.tensor(u)).sum(), g)
    want = -u[np.arange(5), [2, 0, 1, 1, 0]] * np.array([1, 1, 1, 1, 0])
    np.testing.assert_allclose(dg.numpy(), want, rtol=1e-12)


def test_a_target_out_of_range_fails_as_pytorchs(conn):
    x = gt.tensor(rng.standard_normal((2, 3)).astype(np.float32))
    for bad in (3, -1):  # (-1 is not the ignore_index: no wrapping to the last class)
        loss = F.cross_entropy(x, gt.tensor([0, bad]))
        with pytest.raises(gt.WorkerError, match=f"Target {bad} is out of bounds"):
            loss.item()


def test_k_dimensional_inputs_and_unreduced_losses_keep_the_targets_shape(conn):
    z = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)  # N, C, H, W
    t = rng.integers(0, 3, (2, 4, 5))
    loss = F.cross_entropy(gt.tensor(z), gt.tensor(t), reduction="none")
    assert loss.shape == (2, 4, 5) and loss.grad_fn is None
    flat = np.moveaxis(z, 1, -1).reshape(-1, 3)
    want, _ = reference(flat, t.reshape(-1), None, -100, "none")
    np.testing.assert_allclose(loss.numpy().reshape(-1), want, rtol=1e-5)


def test_a_class_weight_that_wants_a_gradient_gets_one(conn):
    # PyTorch has no derivative for weight; GT's composition (used then) gives the true one
    logp = gt.tensor(np.log(np.full((2, 2), 0.5)), requires_grad=True)
    w = gt.tensor([1.0, 3.0], requires_grad=True)
    F.nll_loss(logp, gt.tensor([0, 1]), w, reduction="sum").backward()
    np.testing.assert_allclose(w.grad.numpy(), [np.log(2), np.log(2)])
