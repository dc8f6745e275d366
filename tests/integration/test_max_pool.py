"""Max pooling through the client, the dispatcher and a worker: PyTorch's picks and gradients,
integer inputs, the dtypes PyTorch refuses, double backward and ``vmap``; max unpooling's index
check."""

from __future__ import annotations

import numpy as np
import pytest

import gt
from gt import func_batching

F = gt.nn.functional


def test_a_window_holding_nan_picks_its_last_nan_as_pytorch_does(conn):
    nan = float("nan")
    x = gt.tensor([[[[1.0, nan, 3.0, nan], [nan, 2.0, 5.0, 5.0],
                     [0.0, 0.0, 0.0, 0.0], [7.0, 7.0, 7.0, 7.0]]]], requires_grad=True)  # fmt: skip
    out, idx = F.max_pool2d(x, 2, return_indices=True)
    (out * gt.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])).sum().backward()
    # window (0, 0) holds NaNs at 1 and 4: PyTorch's loop (``val > max || isnan(val)``) keeps
    # the later one; the tied 7s go to the first of each window
    assert idx.tolist() == [[[[4, 3], [12, 14]]]]
    assert np.isnan(out.detach().numpy()[0, 0, 0]).all()
    assert x.grad.tolist() == [[[[0.0, 0.0, 0.0, 2.0], [1.0, 0.0, 0.0, 0.0],
                                 [0.0, 0.0, 0.0, 0.0], [3.0, 0.0, 4.0, 0.0]]]]  # fmt: skip


def test_integer_pooling_with_ceil_mode_pads_without_overflow(conn):
    x = gt.arange(25).reshape(1, 1, 5, 5)
    out = F.max_pool2d(x, 2, ceil_mode=True)
    assert out.dtype == gt.int64
    assert out.tolist() == [[[[6, 8, 9], [16, 18, 19], [21, 23, 24]]]]


@pytest.mark.parametrize("dtype, name", [(gt.bool, "Bool"), (gt.complex64, "ComplexFloat")])
def test_dtypes_pytorch_refuses_are_refused_with_its_message(conn, dtype, name):
    with pytest.raises(NotImplementedError, match=f"\"max_pool2d\" not implemented for '{name}'"):
        F.max_pool2d(gt.ones(1, 1, 4, 4, dtype=dtype), 2)


def test_a_gradient_penalty_through_max_pooling_is_the_pick_of_its_direction(conn):
    # d/dw <d(<pool(x), w>)/dx, v> = v read at each window's pick (max_pool_pick)
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((2, 3, 7, 6))
    vv = rng.standard_normal(xv.shape)
    x = gt.tensor(xv, requires_grad=True)
    out, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    w = gt.tensor(rng.standard_normal(out.shape), requires_grad=True)
    (gx,) = gt.autograd.grad((out * w).sum(), x, create_graph=True)
    (gw,) = gt.autograd.grad((gx * gt.tensor(vv)).sum(), w)
    want = np.take_along_axis(vv.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_allclose(gw.numpy(), want.reshape(out.shape), rtol=1e-12)


def test_per_sample_gradients_through_max_pooling_run_batched(conn):
    rng = np.random.default_rng(1)
    xs = gt.tensor(rng.standard_normal((4, 2, 3, 6, 6)).astype(np.float32))
    w = gt.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))

    def loss(w, x):
        return (F.max_pool2d(F.conv2d(x, w, padding=1), 3, 2, 1) ** 2).sum()

    before = dict(func_batching.RUNS)
    per_sample = gt.func.vmap(gt.func.grad(loss), in_dims=(None, 0))(w, xs)
    assert func_batching.RUNS["batched"] == before["batched"] + 1, func_batching.RUNS["why"]
    for i in range(4):
        np.testing.assert_allclose(per_sample[i].numpy(), gt.func.grad(loss)(w, xs[i]).numpy(),
                                   rtol=1e-5, atol=1e-5)  # fmt: skip


def test_unpooling_refuses_an_index_outside_its_plane_where_it_would_write_the_next(conn):
    x, idx = F.max_pool2d(gt.arange(98.0).view(2, 1, 7, 7), 2, return_indices=True)
    out = F.max_unpool2d(x, idx, 2)  # (6 x 6 planes: index 36 and up belong to no plane)
    with pytest.raises(RuntimeError, match=r"Found an invalid max index: \d+ \(output volumes "
                       r"are of size 6x6\)"):  # fmt: skip
        out.sum().item()
    with pytest.raises(
        RuntimeError, match=r"invalid max index: -1 \(output volumes are of size 4x1"
    ):
        F.max_unpool1d(gt.tensor([[[5.0, 6.0]]]), gt.tensor([[[1, -1]]]), 2).tolist()
    ok = F.max_unpool2d(*F.max_pool2d(gt.arange(36.0).view(1, 1, 6, 6), 2, return_indices=True), 2)
    assert ok.sum().item() == 7.0 + 9 + 11 + 19 + 21 + 23 + 31 + 33 + 35
