"""Padding modules, pixel/channel shuffles, distances, ``Bilinear``, shrink activations, ``RReLU``,
alpha dropout, ``InstanceNorm3d``, the extra losses, ``gumbel_softmax``, lazy modules and
``Transformer``, against NumPy references."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.nn as nn
import gt.nn.functional as F


def _r(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float64)


def _close(t, ref, **kw):
    np.testing.assert_allclose(
        t.detach().numpy(), ref, rtol=kw.get("rtol", 1e-6), atol=kw.get("atol", 1e-8)
    )


# ------------------------------------------------------------------ padding
@pytest.mark.parametrize(
    ("cls", "np_mode", "dims"),
    [
        (nn.ReflectionPad1d, "reflect", 1),
        (nn.ReflectionPad2d, "reflect", 2),
        (nn.ReflectionPad3d, "reflect", 3),
        (nn.ReplicationPad1d, "edge", 1),
        (nn.ReplicationPad2d, "edge", 2),
        (nn.ReplicationPad3d, "edge", 3),
        (nn.CircularPad1d, "wrap", 1),
        (nn.CircularPad2d, "wrap", 2),
        (nn.CircularPad3d, "wrap", 3),
        (nn.ZeroPad1d, "constant", 1),
        (nn.ZeroPad3d, "constant", 3),
    ],
)
def test_padding_modules_match_numpy_pad(conn, cls, np_mode, dims):
    x = _r(2, 3, 4, 5, 4)[(0,) * (3 - dims)] if dims < 3 else _r(2, 3, 4, 5, 4)
    sizes = (1, 2, 2, 0, 1, 3)[: 2 * dims]
    out = cls(sizes)(gt.tensor(x))
    width = [(0, 0)] * (x.ndim - dims) + [
        (sizes[2 * k], sizes[2 * k + 1]) for k in reversed(range(dims))
    ]
    _close(out, np.pad(x, width, mode=np_mode))
    assert repr(cls(2)) == f"{cls.__name__}({(2,) * (2 * dims)})"


def test_constant_pad_value_and_repr(conn):
    x = _r(2, 3, 4)
    out = nn.ConstantPad2d((1, 0, 2, 1), 3.5)(gt.tensor(x))
    _close(out, np.pad(x, [(0, 0), (2, 1), (1, 0)], constant_values=3.5))
    assert repr(nn.ConstantPad1d(2, 1.5)) == "ConstantPad1d(padding=(2, 2), value=1.5)"
    assert repr(nn.ConstantPad3d(1, 0.0)) == "ConstantPad3d(padding=(1, 1, 1, 1, 1, 1), value=0.0)"


def test_reflection_pad_too_large_raises(conn):
    with pytest.raises(RuntimeError, match="Padding size should be less than"):
        nn.ReflectionPad1d(3)(gt.tensor(_r(1, 2, 3)))
    with pytest.raises(RuntimeError, match="wrapping around more than once"):
        nn.CircularPad1d(4)(gt.tensor(_r(1, 2, 3)))
    with pytest.raises(NotImplementedError, match="Padding size 4 is not supported for 2D input"):
        nn.ReplicationPad2d(1)(gt.tensor(_r(3, 4)))
    with pytest.raises(RuntimeError, match="lambda must be in range"):
        F.softshrink(gt.tensor(_r(3)), -1.0)
    with pytest.raises(RuntimeError, match="input2 size does not match weight size: got 2 but"):
        F.bilinear(gt.tensor(_r(2, 3)), gt.tensor(_r(2, 2)), gt.tensor(_r(4, 3, 3)))


# ------------------------------------------------------------------ shuffles
def test_pixel_shuffle_and_unshuffle_match_reference(conn):
    x = _r(2, 8, 3, 4)
    ref = x.reshape(2, 2, 2, 2, 3, 4).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 8)
    y = nn.PixelShuffle(2)(gt.tensor(x))
    _close(y, ref)
    _close(nn.PixelUnshuffle(2)(y), x)
    assert repr(nn.PixelShuffle(3)) == "PixelShuffle(upscale_factor=3)"
    assert repr(nn.PixelUnshuffle(2)) == "PixelUnshuffle(downscale_factor=2)"
    with pytest.raises(RuntimeError, match="divisible by the square of upscale_factor"):
        F.pixel_shuffle(gt.tensor(_r(1, 6, 2, 2)), 2)
    with pytest.raises(RuntimeError, match="height to be divisible by downscale_factor"):
        F.pixel_unshuffle(gt.tensor(_r(1, 1, 3, 4)), 2)


def test_channel_shuffle_interleaves_groups(conn):
    x = np.arange(12.0).reshape(1, 6, 2)
    out = nn.ChannelShuffle(2)(gt.tensor(x))
    _close(out, x[:, [0, 3, 1, 4, 2, 5]])
    assert repr(nn.ChannelShuffle(2)) == "ChannelShuffle(groups=2)"
    with pytest.raises(RuntimeError, match="Number of channels must be divisible by groups"):
        F.channel_shuffle(gt.tensor(x), 4)


def test_softmax2d_and_upsampling_modules(conn):
    x = _r(2, 3, 2, 2)
    e = np.exp(x - x.max(1, keepdims=True))
    _close(nn.Softmax2d()(gt.tensor(x)), e / e.sum(1, keepdims=True))
    with pytest.raises(ValueError, match="expected input to be 3D or 4D"):
        nn.Softmax2d()(gt.tensor(_r(2, 3)))
    _close(nn.UpsamplingNearest2d(scale_factor=2)(gt.tensor(x)), x.repeat(2, 2).repeat(2, 3))
    up = nn.UpsamplingBilinear2d(size=(3, 3))(gt.tensor(x))  # align_corners=True: midpoints
    _close(up[:, :, 1, 1], x.mean((2, 3)))
    assert repr(nn.UpsamplingNearest2d(scale_factor=2)) == (
        "UpsamplingNearest2d(scale_factor=2.0, mode='nearest')"
    )
    assert repr(nn.UpsamplingBilinear2d(size=4)) == "UpsamplingBilinear2d(size=4, mode='bilinear')"


# ------------------------------------------------------------------ distances, bilinear, activations
def test_cosine_similarity_and_pairwise_distance_modules(conn):
    a, b = _r(4, 5), _r(4, 5, seed=1)
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    _close(nn.CosineSimilarity()(gt.tensor(a), gt.tensor(b)), cos)
    _close(nn.PairwiseDistance(p=1.0)(gt.tensor(a), gt.tensor(b)), np.abs(a - b + 1e-6).sum(1))
    assert repr(nn.CosineSimilarity()) == "CosineSimilarity()"
    assert repr(nn.PairwiseDistance()) == "PairwiseDistance()"


def test_bilinear_matches_einsum(conn):
    x1, x2 = _r(3, 2, 4), _r(3, 2, 5, seed=1)
    m = nn.Bilinear(4, 5, 6).double()
    ref = (
        np.einsum("...i,oij,...j->...o", x1, m.weight.detach().numpy(), x2)
        + m.bias.detach().numpy()
    )
    _close(m(gt.tensor(x1), gt.tensor(x2)), ref)
    assert tuple(m.weight.shape) == (6, 4, 5)
    assert repr(m) == "Bilinear(in1_features=4, in2_features=5, out_features=6, bias=True)"


def test_shrink_activations_and_rrelu(conn):
    x = np.array([-1.0, -0.5, -0.2, 0.0, 0.3, 0.5, 2.0])
    _close(nn.Hardshrink()(gt.tensor(x)), np.where(np.abs(x) > 0.5, x, 0.0))
    soft = np.where(x > 0.4, x - 0.4, np.where(x < -0.4, x + 0.4, 0.0))
    _close(nn.Softshrink(0.4)(gt.tensor(x)), soft)
    assert repr(nn.Hardshrink()) == "Hardshrink(0.5)"
    assert repr(nn.Softshrink(0.4)) == "Softshrink(0.4)"
    r = nn.RReLU(0.1, 0.3).eval()
    _close(r(gt.tensor(x)), np.where(x >= 0, x, x * 0.2))
    y = r.train()(gt.tensor(np.full(1000, -1.0))).numpy()  # slopes sampled in [lower, upper)
    assert (-y >= 0.1).all() and (-y <= 0.3).all() and y.std() > 0.01
    assert repr(nn.RReLU()) == "RReLU(lower=0.125, upper=0.3333333333333333)"


# ------------------------------------------------------------------ dropout and norm
def test_dropout3d_zeroes_whole_channels(conn):
    y = nn.Dropout3d(0.5)(gt.tensor(np.ones((4, 8, 2, 2, 2)))).numpy()
    per_channel = y.reshape(4, 8, -1)
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel.min(-1) == per_channel.max(-1)).all()
    assert repr(nn.Dropout3d()) == "Dropout3d(p=0.5, inplace=False)"


def test_alpha_dropout_keeps_selu_statistics(conn):
    x = gt.tensor(np.random.default_rng(0).standard_normal(200_000))
    y = nn.AlphaDropout(0.2)(x).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02
    assert len(np.unique(np.round(y[:100], 12))) > 2
    _close(nn.AlphaDropout(0.2).eval()(x), x.numpy())
    f = nn.FeatureAlphaDropout(0.5)(gt.tensor(np.zeros((3, 6, 4)))).numpy()
    assert (f.min(-1) == f.max(-1)).all()  # one value per channel
    assert repr(nn.FeatureAlphaDropout(0.1)) == "FeatureAlphaDropout(p=0.1, inplace=False)"


def test_instance_norm3d_matches_reference(conn):
    x = _r(2, 3, 2, 3, 4)
    mu = x.mean((2, 3, 4), keepdims=True)
    var = x.var((2, 3, 4), keepdims=True)
    _close(nn.InstanceNorm3d(3)(gt.tensor(x)), (x - mu) / np.sqrt(var + 1e-5), rtol=1e-5)
    assert repr(nn.InstanceNorm3d(3)) == (
        "InstanceNorm3d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, track_running_stats=False)"
    )


# ------------------------------------------------------------------ losses
def test_triplet_margin_losses(conn):
    a, p, n = _r(4, 3), _r(4, 3, seed=1), _r(4, 3, seed=2)

    def d(x, y):
        return np.linalg.norm(x - y + 1e-6, axis=1)

    ref = np.maximum(d(a, p) - d(a, n) + 1.0, 0).mean()
    ta, tp, tn = gt.tensor(a), gt.tensor(p), gt.tensor(n)
    _close(nn.TripletMarginLoss()(ta, tp, tn), ref)
    swap = np.maximum(d(a, p) - np.minimum(d(a, n), d(p, n)) + 0.5, 0).sum()
    _close(F.triplet_margin_loss(ta, tp, tn, margin=0.5, swap=True, reduction="sum"), swap)
    _close(nn.TripletMarginWithDistanceLoss()(ta, tp, tn), ref)
    cosd = nn.TripletMarginWithDistanceLoss(
        distance_function=lambda x, y: 1.0 - F.cosine_similarity(x, y), margin=0.3
    )
    c = lambda x, y: 1 - (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1)  # noqa: E731
    _close(cosd(ta, tp, tn), np.maximum(c(a, p) - c(a, n) + 0.3, 0).mean())
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.triplet_margin_loss(ta, tp, tn[0])
    assert repr(nn.TripletMarginLoss()) == "TripletMarginLoss()"


def test_gaussian_and_poisson_nll(conn):
    x, t = _r(5, 2), _r(5, 2, seed=1)
    v = np.abs(_r(5, 1, seed=2)) + 0.1
    ref = 0.5 * (np.log(v) + (x - t) ** 2 / v)
    loss = nn.GaussianNLLLoss(full=True)(gt.tensor(x), gt.tensor(t), gt.tensor(v))
    _close(loss, (ref + 0.5 * math.log(2 * math.pi)).mean())
    _close(F.gaussian_nll_loss(gt.tensor(x), gt.tensor(t), gt.tensor(v[:, 0]), reduction="sum"), ref.sum())  # fmt: skip
    with pytest.raises(ValueError, match="var is of incorrect size"):
        F.gaussian_nll_loss(gt.tensor(x), gt.tensor(t), gt.tensor(v[:3]))
    with pytest.raises(ValueError, match="var has negative"):
        F.gaussian_nll_loss(gt.tensor(x), gt.tensor(t), gt.tensor(-v))
    target = np.array([0.0, 1.0, 3.0, 5.0])
    li = _r(4, seed=3)
    st = np.where(target > 1, target * np.log(np.maximum(target, 1)) - target
                  + 0.5 * np.log(2 * np.pi * np.maximum(target, 1)), 0)  # fmt: skip
    _close(
        nn.PoissonNLLLoss(full=True)(gt.tensor(li), gt.tensor(target)),
        (np.exp(li) - target * li + st).mean(),
    )
    rate = np.abs(li) + 0.5
    _close(
        F.poisson_nll_loss(gt.tensor(rate), gt.tensor(target), log_input=False, reduction="none"),
        rate - target * np.log(rate + 1e-8),
    )


def test_hinge_and_soft_margin_losses(conn):
    x = _r(6)
    y = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0])
    ref = np.where(y == 1, x, np.maximum(0, 0.7 - x))
    _close(nn.HingeEmbeddingLoss(0.7)(gt.tensor(x), gt.tensor(y)), ref.mean())
    _close(nn.SoftMarginLoss()(gt.tensor(x), gt.tensor(y)), np.log1p(np.exp(-y * x)).mean())


def test_multilabel_soft_margin_loss(conn):
    x = _r(3, 4)
    y = (np.random.default_rng(1).random((3, 4)) > 0.5).astype(np.float64)
    w = np.array([1.0, 2.0, 0.5, 1.5])
    sig = 1 / (1 + np.exp(-x))
    per = -(y * np.log(sig) + (1 - y) * np.log(1 - sig)) * w
    m = nn.MultiLabelSoftMarginLoss(weight=gt.tensor(w))
    _close(m(gt.tensor(x), gt.tensor(y)), per.mean(1).mean())
    assert "weight" in dict(m.named_buffers())


def _multi_margin_ref(x, y, p, margin, w):
    out = []
    for i in range(len(y)):
        m = np.maximum(0, margin - x[i, y[i]] + x[i]) ** p
        m[y[i]] = 0
        out.append(m.sum() / x.shape[1] * (w[y[i]] if w is not None else 1))
    return np.array(out)


def test_multi_margin_loss(conn):
    x, y = _r(5, 4), np.array([0, 3, 1, 1, 2])
    _close(nn.MultiMarginLoss()(gt.tensor(x), gt.tensor(y)), _multi_margin_ref(x, y, 1, 1, None).mean())  # fmt: skip
    w = np.array([1.0, 0.5, 2.0, 1.5])
    m = nn.MultiMarginLoss(p=2, margin=0.5, weight=gt.tensor(w), reduction="none")
    _close(m(gt.tensor(x), gt.tensor(y)), _multi_margin_ref(x, y, 2, 0.5, w))
    with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
        nn.MultiMarginLoss(p=3)


def test_multilabel_margin_loss_stops_at_first_minus_one(conn):
    x = _r(2, 4)
    y = np.array([[3, 0, -1, 1], [1, 2, 3, -1]])
    ref = []
    for i in range(2):
        tgt = []
        for v in y[i]:
            if v < 0:
                break
            tgt.append(v)
        s = sum(max(0, 1 - (x[i, j] - x[i, k])) for j in tgt for k in range(4) if k not in tgt)
        ref.append(s / 4)
    _close(nn.MultiLabelMarginLoss(reduction="none")(gt.tensor(x), gt.tensor(y)), np.array(ref))
    _close(F.multilabel_margin_loss(gt.tensor(x[0]), gt.tensor(y[0])), ref[0])


# ------------------------------------------------------------------ gumbel softmax
def test_gumbel_softmax_soft_and_hard_properties(conn):
    logits = gt.tensor(_r(64, 5), requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    s = soft.detach().numpy()
    assert (s >= 0).all() and np.allclose(s.sum(-1), 1.0)
    hard = F.gumbel_softmax(logits, hard=True, dim=1)
    h = hard.detach().numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(1) == 1).all()
    (hard * gt.tensor(_r(64, 5, seed=3))).sum().backward()  # straight-through: soft gradient
    assert logits.grad is not None and np.abs(logits.grad.numpy()).sum() > 0


# ------------------------------------------------------------------ lazy modules, transformer
def test_lazy_linear_materializes_at_first_call(conn):
    m = nn.LazyLinear(3)
    assert repr(m) == "LazyLinear(in_features=0, out_features=3, bias=True)"
    y = m(gt.tensor(_r(2, 5).astype(np.float32)))
    assert type(m) is nn.Linear and m.in_features == 5 and tuple(m.weight.shape) == (3, 5)
    assert tuple(y.shape) == (2, 3)
    assert repr(m) == "Linear(in_features=5, out_features=3, bias=True)"


def test_lazy_conv_and_batchnorm_materialize(conn):
    c = nn.LazyConv2d(4, 3, padding=1)
    assert repr(c) == "LazyConv2d(0, 4, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))"
    x = gt.tensor(_r(2, 3, 5, 5).astype(np.float32))
    assert tuple(c(x).shape) == (2, 4, 5, 5)
    assert type(c) is nn.Conv2d and tuple(c.weight.shape) == (4, 3, 3, 3)
    b = nn.LazyBatchNorm2d()
    y = b(x)
    assert type(b) is nn.BatchNorm2d and b.num_features == 3
    assert tuple(b.running_mean.shape) == (3,)
    _close(y, ((x.detach().numpy() - x.detach().numpy().mean((0, 2, 3), keepdims=True))
               / np.sqrt(x.numpy().var((0, 2, 3), keepdims=True) + 1e-5)), rtol=1e-4, atol=1e-5)  # fmt: skip
    c1 = nn.LazyConv1d(2, 2)
    assert tuple(c1(gt.tensor(_r(3, 6).astype(np.float32))).shape) == (2, 5)  # unbatched
    c3 = nn.LazyConv3d(2, 1)
    assert tuple(c3(gt.tensor(_r(1, 2, 2, 2, 2).astype(np.float32))).shape) == (1, 2, 2, 2, 2)


def test_transformer_wrapper_shapes_and_mask(conn):
    mask = nn.Transformer.generate_square_subsequent_mask(3).numpy()
    assert np.isneginf(mask[np.triu_indices(3, 1)]).all() and (mask[np.tril_indices(3)] == 0).all()
    t = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0)
    assert [n for n, _ in t.named_children()] == ["encoder", "decoder"]
    src = gt.tensor(_r(5, 2, 8).astype(np.float32))
    tgt = gt.tensor(_r(3, 2, 8).astype(np.float32))
    out = t(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(3))
    assert tuple(out.shape) == (3, 2, 8)
    with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
        t(src, gt.tensor(_r(3, 1, 8).astype(np.float32)))
    with pytest.raises(RuntimeError, match="feature number of src and tgt must be equal"):
        t(src, gt.tensor(_r(3, 2, 4).astype(np.float32)))
