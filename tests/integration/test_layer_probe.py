"""What a probe of ``torch.nn`` layers called as programs call them (unbatched, batch 0, half and
double modules, channels_last, eval) against PyTorch 2.13 found on Dec 6 (9,406 cases), as PyTorch
behaves: a batch of none through attention, batch, group and instance norms; ``track_running_stats``
turned off after construction; RMSNorm and InstanceNorm keeping a half input half with float32
parameters; a zero-norm distance in the graph; PReLU of a 0-d input; KL divergence of a negative
target. Every test runs on NumPy workers and on workers whose CuPy is the test double."""

from __future__ import annotations

import math

import pytest
from helpers import each_backend_cluster

import gt
from gt import nn

pytestmark = pytest.mark.timeout(90)

cluster = each_backend_cluster(workers=1)


def test_an_empty_batch_goes_through_attention_and_the_norms(conn):
    mha = nn.MultiheadAttention(8, 2)
    out, weights = mha(gt.zeros(4, 0, 8), gt.zeros(4, 0, 8), gt.zeros(4, 0, 8))
    assert out.shape == (4, 0, 8) and weights.shape == (0, 4, 4)
    enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    assert enc(gt.zeros(3, 0, 8)).shape == (3, 0, 8)
    bn = nn.BatchNorm2d(3)
    assert bn(gt.zeros(0, 3, 4, 4)).shape == (0, 3, 4, 4)
    assert bn.running_mean.tolist() == [0.0] * 3 and bn.num_batches_tracked.item() == 1
    bn(gt.zeros(0, 3, 4, 4)).sum().backward()
    assert bn.bias.grad.tolist() == [0.0] * 3 and bn.weight.grad.tolist() == [0.0] * 3
    assert nn.GroupNorm(2, 4)(gt.zeros(0, 4, 3)).shape == (0, 4, 3)
    assert nn.InstanceNorm1d(2, track_running_stats=True)(gt.zeros(0, 2, 5)).shape == (0, 2, 5)


def test_batch_norm_in_eval_uses_the_buffers_it_has(conn):
    m = nn.BatchNorm1d(2)
    m.track_running_stats = False
    m.eval()
    out = (
        m(gt.tensor([[1.0, 2.0], [3.0, 6.0]])).detach().numpy()
    )  # (x / sqrt(1 + eps): the buffers')
    assert abs(out - [[1.0, 2.0], [3.0, 6.0]]).max() < 1e-4
    assert m.running_mean.tolist() == [0.0, 0.0]


def test_norms_keep_a_half_input_half_with_float32_parameters(conn):
    r = nn.RMSNorm(2)(gt.tensor([[1.0, 3.0]]).half())
    assert r.dtype == gt.float16 and nn.Linear(2, 2).half()(r).dtype == gt.float16
    assert nn.RMSNorm(2).double()(gt.tensor([[1.0, 3.0]])).dtype == gt.float32
    i = nn.InstanceNorm1d(2, affine=True)(gt.arange(6.0).reshape(1, 2, 3).half())
    assert i.dtype == gt.float16
    assert abs(i.float()[0, 0, 0].item() + 1.2247) < 2e-3


def test_small_cases_of_activations_distances_and_losses(conn):
    a = gt.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    d = nn.PairwiseDistance(p=0)(a, gt.tensor([[1.0, 0.0, 3.0]]))
    assert d.requires_grad and d.tolist() == [3.0]  # (eps counts in every slot)
    d.sum().backward()
    assert a.grad.tolist() == [[0.0, 0.0, 0.0]]
    assert nn.PReLU()(gt.tensor(-2.0)).shape == ()
    kl = nn.functional.kl_div(gt.tensor([-1, -0.5]), gt.tensor([0.5, -0.3]), reduction="none")
    assert abs(kl[0].item() - 0.1534264) < 1e-6 and math.isnan(kl[1].item())


def test_interpolation_modes_refuse_inputs_of_another_rank(conn):
    # (bilinear on a 3-d input interpolated its last dimension only; PyTorch refuses it)
    with pytest.raises(NotImplementedError, match="Got 3D input, but bilinear mode needs 4D"):
        nn.functional.interpolate(gt.zeros(2, 3, 4), scale_factor=2, mode="bilinear")
    with pytest.raises(NotImplementedError, match="trilinear mode needs 5D"):
        nn.Upsample(scale_factor=2, mode="trilinear")(gt.zeros(1, 2, 3, 4))
    assert nn.functional.interpolate(gt.zeros(1, 2, 3), scale_factor=2, mode="linear").shape == (
        1, 2, 6)  # fmt: skip


def test_mse_smooth_l1_and_huber_take_a_bool_target(conn):
    x, t = gt.tensor([0.5, 2.0]), gt.tensor([True, False])
    assert nn.MSELoss()(x, t).item() == 2.125
    assert nn.SmoothL1Loss()(x, t).item() == 0.8125 and nn.HuberLoss()(x, t).item() == 0.8125
    with pytest.raises(Exception, match="bool"):  # (L1 refuses it, as PyTorch's)
        nn.L1Loss()(x, t)


def test_a_lazy_norm_converted_before_its_first_call(conn):
    m = nn.LazyBatchNorm1d().double()
    assert isinstance(m.running_mean, nn.UninitializedBuffer) and m.running_mean.dtype == gt.float64
    y = m(gt.ones(3, 4, dtype=gt.float64))
    assert y.dtype == gt.float64 and m.running_mean.shape == (4,)
    assert m.running_mean.dtype == gt.float64
