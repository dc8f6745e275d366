"""A ResNet-sized convolution's gradients (large enough for NumPy's folded column gradient and
batch-innermost ``col2im``) against a float64 reference, and its double backward against the
same computed in small batches (which take the batched products)."""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.nn.functional as F


def _windows(xp: np.ndarray, s: int, d: int, outs: int) -> np.ndarray:
    """``[n, c, y, x, i, j]``: the (float64) input each output position's 3x3 window reads."""
    v = np.lib.stride_tricks.sliding_window_view(xp, (2 * d + 1, 2 * d + 1), axis=(2, 3))
    return v[:, :, : s * (outs - 1) + 1 : s, : s * (outs - 1) + 1 : s, ::d, ::d]


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 2, 2)])
def test_resnet_sized_conv2d_gradients_match_a_float64_reference(conn, stride, padding, dilation):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((16, 16, 16, 16)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1
    gx, gw = gt.tensor(x, requires_grad=True), gt.tensor(w, requires_grad=True)
    out = F.conv2d(gx, gw, stride=stride, padding=padding, dilation=dilation)
    (out * out).sum().backward()
    p, outs = padding, (16 + 2 * padding - 2 * dilation - 1) // stride + 1
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    win = _windows(xp, stride, dilation, outs)
    ref = np.einsum("ncyxij,ocij->noyx", win, w.astype(np.float64))
    dxp = np.zeros_like(xp)  # d sum(out^2) = 2 out, scattered back through every window
    g = 2 * ref
    for i in range(3):
        for j in range(3):
            sl = np.s_[:, :, i * dilation : i * dilation + stride * (outs - 1) + 1 : stride,
                       j * dilation : j * dilation + stride * (outs - 1) + 1 : stride]  # fmt: skip
            dxp[sl] += np.einsum("noyx,oc->ncyx", g, w[:, :, i, j].astype(np.float64))
    ref_dw = np.einsum("noyx,ncyxij->ocij", g, win)
    np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gx.grad.numpy(), dxp[:, :, p : p + 16, p : p + 16], atol=1e-3)
    np.testing.assert_allclose(gw.grad.numpy(), ref_dw, rtol=1e-4, atol=1e-2)


def test_resnet_sized_conv2d_double_backward_matches_small_batches(conn):
    # (batches of 2 take the batched products, 16 the folded one: the sum of the small batches'
    # second-order gradients is the whole batch's, since each sample's loss is its own)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.1

    def second_order(xs: np.ndarray) -> tuple:
        gx, gw = gt.tensor(xs, requires_grad=True), gt.tensor(w, requires_grad=True)
        out = F.conv2d(gx, gw, padding=1).square().sum()
        (dx,) = gt.autograd.grad(out, [gx], create_graph=True)
        dx.square().sum().backward()
        return dx.detach().numpy(), gw.grad.numpy()

    dx, dw = second_order(x)
    parts = [second_order(x[i : i + 2]) for i in range(0, 16, 2)]
    np.testing.assert_allclose(dx, np.concatenate([p[0] for p in parts]), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(dw, sum(p[1] for p in parts), rtol=1e-3, atol=1e-1)
