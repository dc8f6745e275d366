"""Idioms of mixed precision training code that GT got wrong: ``nn.MultiheadAttention`` with a
padding or attention mask under CPU autocast gave float32 attention weights (the float32 mask was
added to the bfloat16 scores after the product; PyTorch's ``baddbmm`` casts it with them), and
the older ``torch.get_autocast_cpu_dtype()``/``get_autocast_gpu_dtype()`` spellings were missing,
bfloat16 host arrays could not be uploaded (``memoryview`` has no format for ml_dtypes' bfloat16:
``gt.tensor`` of one, and ``F.affine_grid`` of a bfloat16 ``theta`` under autocast, failed), and
bfloat16 tensors printed as ``tensor([0.0, 1.5])`` rather than PyTorch's ``tensor([0.0000, 1.5000],
dtype=torch.bfloat16)``; a worker holding a bfloat16 NumPy scalar (``clip_grad_norm_`` of bfloat16
gradients) died when it counted its memory (``getattr(scalar, "data")`` raises for that dtype)."""

from __future__ import annotations

import numpy as np
import pytest

import gt


def test_masked_multihead_attention_weights_keep_the_autocast_dtype(conn):
    mha = gt.nn.MultiheadAttention(4, 2, batch_first=True)
    x = gt.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32))
    pad = gt.tensor([[False, False, False], [False, False, True]])
    causal = gt.nn.Transformer.generate_square_subsequent_mask(3)
    with gt.autocast("cpu", dtype=gt.bfloat16):
        out, w = mha(x, x, x, key_padding_mask=pad)
        out2, w2 = mha(x, x, x, attn_mask=causal)
        _, w3 = mha(x, x, x)
    assert (out.dtype, w.dtype, out2.dtype, w2.dtype, w3.dtype) == (gt.bfloat16,) * 5
    assert float(w[1, :, 2].float().abs().max()) == 0.0  # the padded key gets no weight
    assert float(w2[:, 0, 1:].float().abs().max()) == 0.0  # nor do future positions
    _, w32 = mha(x, x, x, key_padding_mask=pad)  # outside the region: float32 as before
    assert w32.dtype == gt.float32
    np.testing.assert_allclose(w.float().detach().numpy(), w32.detach().numpy(), atol=2e-2)


def test_the_deprecated_autocast_dtype_getters_exist_and_warn():
    with pytest.warns(DeprecationWarning, match="get_autocast_dtype\\('cpu'\\)"):
        assert gt.get_autocast_cpu_dtype() == gt.bfloat16
    with gt.autocast("cpu", dtype=gt.float16), pytest.warns(DeprecationWarning):
        assert gt.get_autocast_cpu_dtype() == gt.float16
    with pytest.warns(DeprecationWarning, match="get_autocast_dtype\\('cuda'\\)"):
        assert gt.get_autocast_gpu_dtype() == gt.float16


def test_bfloat16_host_arrays_upload_small_and_large(conn):
    import ml_dtypes

    small = (np.arange(5) * 1.5).astype(ml_dtypes.bfloat16)
    t = gt.tensor(small)
    assert t.dtype == gt.bfloat16
    np.testing.assert_array_equal(t.float().numpy(), small.astype(np.float32))
    big = np.linspace(-1, 1, 70_000).astype(ml_dtypes.bfloat16)  # (past the direct-socket size)
    np.testing.assert_array_equal(gt.tensor(big).float().numpy(), big.astype(np.float32))


def test_affine_grid_of_a_bfloat16_theta(conn):
    theta = gt.tensor([[[1.0, 0.1, 0.0], [0.0, 0.9, 0.2]]]).bfloat16()
    grid = gt.nn.functional.affine_grid(theta, (1, 1, 2, 3), align_corners=False)
    assert grid.dtype == gt.bfloat16
    want = [-0.71875, -0.24902344, -0.05004883, -0.24902344, 0.6171875, -0.24902344,
            -0.6171875, 0.6484375, 0.05004883, 0.6484375, 0.71875, 0.6484375]  # fmt: skip
    np.testing.assert_allclose(grid.float().numpy().ravel(), want, rtol=1e-2)


def test_bfloat16_tensors_print_as_pytorch_prints_them(conn):
    assert repr(gt.tensor([0, 1.5, 3]).bfloat16()) == (
        "tensor([0.0000, 1.5000, 3.0000], dtype=gt.bfloat16)"
    )
    assert repr(gt.tensor([1.0, 2.0]).bfloat16()) == "tensor([1., 2.], dtype=gt.bfloat16)"
    assert str(gt.tensor([0.123456, 100.5]).bfloat16()) == (
        "tensor([  0.1235, 100.5000], dtype=gt.bfloat16)"
    )


def test_a_worker_counts_the_memory_of_bfloat16_numpy_scalars():
    import ml_dtypes

    from gt.runtime.worker.spill import root_of

    value = ml_dtypes.bfloat16(0.640625)  # what a bfloat16 reduction kernel can hand back
    key, root, nbytes = root_of(value)
    assert root is value and nbytes == 2
    assert root_of(np.float32(1.5))[2] == 4
