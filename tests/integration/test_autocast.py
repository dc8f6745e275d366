"""``gt.autocast`` casts as PyTorch's autocast does (its CPU lists probed on torch 2.13, its CUDA
lists as documented), gradients come back in the parameters' dtype, and ``GradScaler`` scales,
unscales and skips steps as PyTorch's does. Products of half tensors are rounded once."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gt
import gt.nn.functional as F

RNG = np.random.default_rng(7)
A = RNG.standard_normal((6, 5)).astype(np.float32)
B = RNG.standard_normal((5, 4)).astype(np.float32)
BF16 = ml_dtypes.bfloat16


def _bf16(a: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (and back, for comparing)."""
    return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def test_products_run_in_the_regions_dtype_and_the_rest_as_they_are(conn):
    a, b = gt.tensor(A), gt.tensor(B)
    w, bias = gt.tensor(B.T.copy()), gt.tensor(B[0].copy())
    with gt.autocast("cpu"):
        assert (a @ b).dtype == gt.bfloat16
        assert a.mm(b).dtype == gt.bfloat16 and gt.matmul(a, b).dtype == gt.bfloat16
        assert F.linear(a, w, bias).dtype == gt.bfloat16
        assert F.conv1d(a.reshape(1, 6, 5), gt.ones(2, 6, 3)).dtype == gt.bfloat16
        # not on PyTorch's CPU list: mv, dot, outer (and mv's own product is not cast either)
        assert a.mv(b[:, 0]).dtype == gt.float32 and b[:, 0].dot(b[:, 1]).dtype == gt.float32
        assert gt.exp(a).dtype == gt.float32 and a.softmax(-1).dtype == gt.float32
        assert (a.double() @ b.double()).dtype == gt.float64  # float64 is never cast
        with gt.autocast("cpu", enabled=False):
            assert (a @ b).dtype == gt.float32
        assert (a @ b).dtype == gt.bfloat16
    assert (a @ b).dtype == gt.float32
    np.testing.assert_array_equal(
        (lambda r: r.float().numpy())(gt.autocast("cpu")(lambda: a @ b)()),
        _bf16(_bf16(A) @ _bf16(B)),
    )


def test_a_region_for_the_tensors_own_device_type_is_pytorchs_cpu_region(conn):
    # Ported code writes ``autocast(device_type=x.device.type)``; a GT tensor's device is "cpu"
    # (there is no CUDA device in the program), so the region is the CPU one, in bfloat16.
    a, b = gt.tensor(A), gt.tensor(B)
    assert a.device == gt.device("cpu") and str(a.device) == "cpu"
    with gt.autocast(device_type=a.device.type):
        assert (a @ b).dtype == gt.bfloat16


def test_losses_and_linear_algebra_run_in_float32_and_cat_promotes(conn):
    h = gt.tensor(A).bfloat16()
    with gt.autocast("cpu"):
        assert F.mse_loss(h, h * 2).dtype == gt.float32
        assert F.cross_entropy(h, gt.tensor([0, 1, 2, 3, 4, 0])).dtype == gt.float32
        sq = (gt.tensor(A[:5]) @ gt.tensor(A[:5]).T).bfloat16() + gt.eye(5).bfloat16() * 8
        assert gt.linalg.inv(sq).dtype == gt.float32
        assert gt.fft.rfft(h[0]).dtype == gt.complex64
        assert gt.cat([h, gt.tensor(A)]).dtype == gt.float32
        assert F.pad(h.reshape(1, 1, 6, 5), (1, 1, 1, 1), mode="reflect").dtype == gt.float32
        assert F.pad(h.reshape(1, 1, 6, 5), (1, 1, 1, 1)).dtype == gt.bfloat16
        assert h.sum().dtype == gt.bfloat16  # (CPU: sums stay; CUDA's list has them in float32)
    with gt.autocast("cuda"):
        assert h.sum().dtype == gt.float32 and h.softmax(-1).dtype == gt.float32
        assert (gt.tensor(A) @ gt.tensor(B)).dtype == gt.float16


def test_gradients_come_back_in_the_parameters_dtype(conn):
    def step(region: bool) -> tuple:
        lin = gt.nn.Linear(5, 3)
        with gt.no_grad():
            lin.weight.copy_(gt.tensor(A[:3]))
            lin.bias.copy_(gt.tensor(B[0, :3].copy()))
        x = gt.tensor(A)
        with gt.autocast("cpu", enabled=region):
            out = lin(x)
            loss = F.mse_loss(out, gt.zeros(6, 3))
            loss.backward()  # (inside the region: backward keeps the forward ops' dtypes)
        return out.dtype, loss.dtype, lin.weight.grad.dtype, lin.weight.grad.numpy()

    o16, l16, g16, grad16 = step(True)
    o32, l32, g32, grad32 = step(False)
    assert (o16, l16, g16) == (gt.bfloat16, gt.float32, gt.float32)
    assert (o32, l32, g32) == (gt.float32, gt.float32, gt.float32)
    np.testing.assert_allclose(grad16, grad32, rtol=0.05, atol=0.05)
    assert not np.array_equal(grad16, grad32)  # (the product really ran in bfloat16)


def test_custom_fwd_casts_inputs_and_runs_without_autocast(conn):
    class Scale(gt.autograd.Function):
        @staticmethod
        @gt.amp.custom_fwd(device_type="cpu", cast_inputs=gt.float32)
        def forward(ctx, x):
            ctx.dtype = x.dtype
            return (x @ x.T) * 2

        @staticmethod
        @gt.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return g

    x = gt.tensor(A).bfloat16()
    with gt.cpu.amp.autocast():
        out = Scale.apply(x)
    assert out.dtype == gt.float32


def test_products_of_half_tensors_are_rounded_once(conn):
    a, b, c = _bf16(A), _bf16(B), _bf16(RNG.standard_normal((6, 4)).astype(np.float32))
    ga, gb, gc = (gt.tensor(v).bfloat16() for v in (a, b, c))
    np.testing.assert_array_equal(gt.addmm(gc, ga, gb).float().numpy(), _bf16(c + a @ b))
    x = _bf16(RNG.standard_normal((2, 3, 7)).astype(np.float32))
    k = _bf16(RNG.standard_normal((4, 3, 3)).astype(np.float32))
    kb = _bf16(RNG.standard_normal(4).astype(np.float32))
    cols = np.stack([x[:, :, i : i + 3].reshape(2, 9) for i in range(5)], -1)  # [2, 9, 5]
    want = _bf16(np.einsum("ow,nwl->nol", k.reshape(4, 9), cols) + kb[None, :, None])
    got = F.conv1d(gt.tensor(x).bfloat16(), gt.tensor(k).bfloat16(), gt.tensor(kb).bfloat16())
    np.testing.assert_array_equal(got.float().numpy(), want)
    # a half input with float32 affine parameters keeps its dtype (PyTorch's mixed kernels)
    h = gt.tensor(A).bfloat16().reshape(2, 3, 5)
    assert F.group_norm(h, 3, gt.ones(3), gt.zeros(3)).dtype == gt.bfloat16
    assert F.batch_norm(h, gt.zeros(3), gt.ones(3), gt.ones(3), gt.zeros(3)).dtype == gt.bfloat16


def test_grad_scaler_scales_unscales_and_skips_steps_that_are_not_finite(conn):
    p = gt.nn.Parameter(gt.ones(2))
    opt = gt.optim.SGD([p], lr=0.1)
    scaler = gt.amp.GradScaler("cpu", growth_interval=2)
    loss = (p * 3).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == 6 * 65536.0 and scaler.get_scale() == 65536.0
    assert scaler.scale(gt.tensor(1.0).bfloat16()).dtype == gt.float32  # (PyTorch's 0-d rule)
    scaled.backward()
    scaler.unscale_(opt)
    np.testing.assert_array_equal(p.grad.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="already been called"):
        scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 0.7], rtol=1e-6)
    p.grad = gt.tensor([float("inf"), 1.0])
    assert scaler.step(opt) is None  # skipped
    scaler.update()
    np.testing.assert_allclose(p.detach().numpy(), [0.7, 0.7], rtol=1e-6)
    assert scaler.get_scale() == 32768.0
    for _ in range(2):  # two good steps in a row: the scale doubles
        opt.zero_grad()
        scaler.scale((p * 1).sum()).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.state_dict() == {"scale": 65536.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 2, "_growth_tracker": 0}  # fmt: skip
    with pytest.raises(AssertionError, match="No inf checks"):
        scaler.update()
    off = gt.amp.GradScaler(enabled=False)
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}


def test_gt_composites_of_listed_ops_keep_their_dtype_as_pytorchs_kernels(conn):
    """GT builds ``elu``, ``nansum`` or ``rms_norm`` from ops CUDA's float32 list names (``expm1``,
    ``sum``, ``pow``); PyTorch's are kernels on no list, so they keep float16."""
    x = gt.tensor(A).half()
    with gt.autocast("cuda"):
        assert F.elu(x).dtype == gt.float16 and F.selu(x).dtype == gt.float16
        assert x.nansum().dtype == gt.float16 and x.nanmean().dtype == gt.float16
        assert F.rms_norm(x, (5,)).dtype == gt.float16
        assert x.sum().dtype == gt.float32 and x.square().dtype == gt.float32  # (sum, pow: listed)
