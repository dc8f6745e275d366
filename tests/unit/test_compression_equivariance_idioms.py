"""Idioms of learned-compression code that GT once got wrong (found by the
``compression_equivariance`` programs). Expected values are PyTorch's (and ``math.erfc``'s)."""

from __future__ import annotations

import math

import numpy as np

import gt


def test_permute_takes_zero_dim_integer_tensors_and_numpy_integers_as_dims(conn):
    # CompressAI's EntropyBottleneck builds its permutation as a tensor and unpacks it:
    # ``x.permute(*torch.cat((torch.tensor([1, 0]), torch.arange(2, x.ndim))))``. GT kept the
    # 0-d tensors in the op's attributes, which then failed to serialise when the op ran.
    x = gt.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    perm = gt.cat((gt.tensor([1, 0], dtype=gt.long), gt.arange(2, x.ndim, dtype=gt.long)))
    y = x.permute(*perm).contiguous()
    assert y.shape == (3, 2, 4)
    np.testing.assert_array_equal(y.numpy(), np.arange(24).reshape(2, 3, 4).transpose(1, 0, 2))
    z = x.transpose(np.int64(0), gt.tensor(-1)).contiguous()
    np.testing.assert_array_equal(z.numpy(), np.arange(24).reshape(2, 3, 4).transpose(2, 1, 0))
    np.testing.assert_array_equal(x.permute(perm.tolist()).numpy(), y.numpy())


def test_erfc_keeps_its_relative_accuracy_in_the_upper_tail(conn):
    # A Gaussian conditional's likelihood ``0.5 * erfc(-(x) / sqrt(2))`` lives in erfc's upper
    # tail; GT computed ``1 - erf(x)``, which there keeps no digits (erfc(4) came out 30% off in
    # float32, erfc(6) as 0), so bits and their gradients differed.
    xs = [-3.0, -0.5, 0.0, 0.5, 2.0, 3.9, 4.0, 5.0, 6.0, 9.0]
    want = np.array([math.erfc(v) for v in xs])
    for dtype, rtol in ((gt.float32, 2e-6), (gt.float64, 1e-13)):
        x = gt.tensor(xs, dtype=dtype, requires_grad=True)
        y = gt.erfc(x)
        np.testing.assert_allclose(y.detach().numpy(), want, rtol=rtol, atol=0)
        y.sum().backward()
        dwant = np.array([-2.0 / math.sqrt(math.pi) * math.exp(-v * v) for v in xs])
        np.testing.assert_allclose(x.grad.numpy(), dwant, rtol=10 * rtol, atol=0)
        np.testing.assert_allclose(gt.special.erfc(x.detach()).numpy(), want, rtol=rtol, atol=0)
    edge = gt.tensor([math.inf, -math.inf, math.nan, 30.0]).erfc().numpy()
    assert edge[:2].tolist() == [0.0, 2.0] and math.isnan(edge[2]) and edge[3] == 0.0
    # half precision: computed in float32 and rounded once, as PyTorch does
    half = gt.tensor([-0.5, 2.0, 3.5], dtype=gt.bfloat16).erfc()
    assert half.dtype == gt.bfloat16
    assert half.float().numpy().tolist() == [1.5234375, 0.004669189453125, 7.413327693939209e-07]
    assert gt.erfc(gt.tensor([0, 3])).dtype == gt.float32
