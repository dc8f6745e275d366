"""``grad_fn`` names as PyTorch's (probed on torch 2.13): composite ops name the node of their
result after PyTorch's op (``MseLossBackward0``, ``SoftmaxBackward0``, ...), primitives after
PyTorch's (``CatBackward0``, ``ToCopyBackward0``, ``SelectBackward0``, ...), and the name follows
the arguments where PyTorch's does (``MeanBackward0`` / ``MeanBackward1``). Only names change:
gradients are the ones they were."""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.nn.functional as F


def _inputs():
    x = gt.ones(4, 5, requires_grad=True)
    return {
        "x": x,
        "y": gt.zeros(4, 5),
        "t": gt.tensor([0, 1, 2, 3]),
        "x3": gt.ones(2, 3, 4, requires_grad=True),
        "x4": gt.ones(2, 3, 4, 4, requires_grad=True),
        "v": gt.ones(5, requires_grad=True),
    }


# (op, how, PyTorch 2.13's name of the result's grad_fn)
CASES = [
    # losses
    ("mse_loss", lambda x, y, **_: F.mse_loss(x, y), "MseLossBackward0"),
    ("mse_loss_sum", lambda x, y, **_: F.mse_loss(x, y, reduction="sum"), "MseLossBackward0"),
    ("mse_loss_none", lambda x, y, **_: F.mse_loss(x, y, reduction="none"), "MseLossBackward0"),
    ("cross_entropy", lambda x, t, **_: F.cross_entropy(x, t), "NllLossBackward0"),
    (
        "cross_entropy_none",
        lambda x, t, **_: F.cross_entropy(x, t, reduction="none"),
        "NllLossBackward0",
    ),  # fmt: skip
    ("nll_loss", lambda x, t, **_: F.nll_loss(x, t), "NllLossBackward0"),
    ("l1_loss", lambda x, y, **_: F.l1_loss(x, y), "MeanBackward0"),
    (
        "bce",
        lambda x, y, **_: F.binary_cross_entropy(x.sigmoid(), y),
        "BinaryCrossEntropyBackward0",
    ),  # fmt: skip
    (
        "bce_logits",
        lambda x, y, **_: F.binary_cross_entropy_with_logits(x, y),
        "BinaryCrossEntropyWithLogitsBackward0",
    ),  # fmt: skip
    ("smooth_l1", lambda x, y, **_: F.smooth_l1_loss(x, y), "SmoothL1LossBackward0"),
    ("huber", lambda x, y, **_: F.huber_loss(x, y), "HuberLossBackward0"),
    ("kl_div", lambda x, y, **_: F.kl_div(x, y, reduction="batchmean"), "DivBackward0"),
    # activations
    ("relu", lambda x, **_: F.relu(x), "ReluBackward0"),
    ("relu6", lambda x, **_: F.relu6(x), "HardtanhBackward0"),
    ("softmax", lambda x, **_: x.softmax(-1), "SoftmaxBackward0"),
    ("F.softmax", lambda x, **_: F.softmax(x, -1), "SoftmaxBackward0"),
    ("softmin", lambda x, **_: F.softmin(x, -1), "SoftmaxBackward0"),
    ("log_softmax", lambda x, **_: x.log_softmax(-1), "LogSoftmaxBackward0"),
    ("gelu", lambda x, **_: F.gelu(x), "GeluBackward0"),
    ("gelu_tanh", lambda x, **_: F.gelu(x, approximate="tanh"), "GeluBackward0"),
    ("silu", lambda x, **_: F.silu(x), "SiluBackward0"),
    ("mish", lambda x, **_: F.mish(x), "MishBackward0"),
    ("leaky_relu", lambda x, **_: F.leaky_relu(x), "LeakyReluBackward0"),
    ("elu", lambda x, **_: F.elu(x), "EluBackward0"),
    ("selu", lambda x, **_: F.selu(x), "EluBackward0"),
    ("celu", lambda x, **_: F.celu(x), "CeluBackward0"),
    ("hardtanh", lambda x, **_: F.hardtanh(x), "HardtanhBackward0"),
    ("hardsigmoid", lambda x, **_: F.hardsigmoid(x), "HardsigmoidBackward0"),
    ("hardswish", lambda x, **_: F.hardswish(x), "HardswishBackward0"),
    ("logsigmoid", lambda x, **_: F.logsigmoid(x), "LogSigmoidBackward0"),
    ("glu", lambda x3, **_: F.glu(x3, -1), "GluBackward0"),
    ("prelu", lambda x, **_: F.prelu(x, gt.ones(1)), "PreluKernelBackward0"),
    # norms, layers
    ("layer_norm", lambda x, **_: F.layer_norm(x, (5,)), "NativeLayerNormBackward0"),
    ("group_norm", lambda x3, **_: F.group_norm(x3, 3), "NativeGroupNormBackward0"),
    (
        "batch_norm",
        lambda x, **_: F.batch_norm(x, None, None, training=True),
        "NativeBatchNormBackward0",
    ),  # fmt: skip
    ("instance_norm", lambda x3, **_: F.instance_norm(x3), "ViewBackward0"),
    ("linear", lambda x, **_: F.linear(x, gt.ones(3, 5)), "MmBackward0"),
    ("conv1d", lambda x, **_: F.conv1d(x[None], gt.ones(2, 4, 2)), "ConvolutionBackward0"),
    ("conv2d", lambda x4, **_: F.conv2d(x4, gt.ones(2, 3, 2, 2)), "ConvolutionBackward0"),
    (
        "conv_transpose1d",
        lambda x3, **_: F.conv_transpose1d(x3, gt.ones(3, 2, 2)),
        "ConvolutionBackward0",
    ),  # fmt: skip
    ("embedding", lambda x, t, **_: F.embedding(t, x), "EmbeddingBackward0"),
    ("max_pool1d", lambda x, **_: F.max_pool1d(x[None], 2), "SqueezeBackward1"),
    ("max_pool2d", lambda x4, **_: F.max_pool2d(x4, 2), "MaxPool2DWithIndicesBackward0"),
    ("avg_pool1d", lambda x, **_: F.avg_pool1d(x[None], 2), "SqueezeBackward1"),
    ("avg_pool2d", lambda x4, **_: F.avg_pool2d(x4, 2), "AvgPool2DBackward0"),
    ("adaptive_avg_pool2d_1", lambda x4, **_: F.adaptive_avg_pool2d(x4, 1), "MeanBackward1"),
    (
        "adaptive_max_pool2d",
        lambda x4, **_: F.adaptive_max_pool2d(x4, 1),
        "AdaptiveMaxPool2DBackward0",
    ),  # fmt: skip
    ("cosine_similarity", lambda x, **_: F.cosine_similarity(x, x), "SumBackward1"),
    ("pairwise_distance", lambda x, y, **_: F.pairwise_distance(x, y), "NormBackward1"),
    # reductions (the name follows the arguments)
    ("mean", lambda x, **_: x.mean(), "MeanBackward0"),
    ("mean_dim", lambda x, **_: x.mean(0), "MeanBackward1"),
    ("mean_keepdim", lambda x, **_: x.mean(1, keepdim=True), "MeanBackward1"),
    ("sum", lambda x, **_: x.sum(), "SumBackward0"),
    ("sum_dim", lambda x, **_: x.sum(0), "SumBackward1"),
    ("nansum", lambda x, **_: x.nansum(), "NansumBackward0"),
    ("max", lambda x, **_: x.max(), "MaxBackward1"),
    ("max_dim", lambda x, **_: x.max(0)[0], "MaxBackward0"),
    ("max_dim_values", lambda x, **_: x.max(1, keepdim=True).values, "MaxBackward0"),
    ("min", lambda x, **_: x.min(), "MinBackward1"),
    ("min_dim", lambda x, **_: x.min(1)[0], "MinBackward0"),
    ("amax", lambda x, **_: x.amax(0), "AmaxBackward0"),
    ("amin", lambda x, **_: x.amin(0), "AminBackward0"),
    ("norm", lambda x, **_: x.norm(), "LinalgVectorNormBackward0"),
    ("norm_dim", lambda x, **_: x.norm(dim=1), "LinalgVectorNormBackward0"),
    ("var", lambda x, **_: x.var(), "VarBackward0"),
    ("var_dim", lambda x, **_: x.var(0), "VarBackward0"),
    ("std", lambda x, **_: x.std(), "StdBackward0"),
    ("std_dim", lambda x, **_: x.std(1), "StdBackward0"),
    ("logsumexp", lambda x, **_: x.logsumexp(0), "LogsumexpBackward0"),
    ("prod", lambda x, **_: x.prod(), "ProdBackward0"),
    ("cumsum", lambda x, **_: x.cumsum(0), "CumsumBackward0"),
    # arithmetic
    ("rsub", lambda x, **_: 1 - x, "RsubBackward1"),
    ("sub", lambda x, **_: x - 1, "SubBackward0"),
    ("rdiv", lambda x, **_: 1 / x, "MulBackward0"),
    ("div", lambda x, **_: x / 2, "DivBackward0"),
    ("pow", lambda x, **_: x**2, "PowBackward0"),
    ("pow_tensor", lambda x, y, **_: x**y, "PowBackward1"),
    ("square", lambda x, **_: x.square(), "PowBackward0"),
    ("rsqrt", lambda x, **_: x.rsqrt(), "RsqrtBackward0"),
    ("reciprocal", lambda x, **_: x.reciprocal(), "ReciprocalBackward0"),
    ("log1p", lambda x, **_: x.log1p(), "Log1PBackward0"),
    ("clamp", lambda x, **_: x.clamp(0, 1), "ClampBackward1"),
    ("clamp_min_kw", lambda x, **_: x.clamp(min=0), "ClampBackward1"),
    ("clamp_min", lambda x, **_: x.clamp_min(0), "ClampMinBackward0"),
    ("clamp_tensor", lambda x, y, **_: x.clamp(y, y + 1), "ClampBackward0"),
    ("where", lambda x, y, **_: gt.where(x > 0, x, y), "WhereBackward0"),
    ("masked_fill", lambda x, y, **_: x.masked_fill(y > 0, 0.0), "MaskedFillBackward0"),
    ("lerp", lambda x, y, **_: x.lerp(y, 0.5), "LerpBackward0"),
    ("addcmul", lambda x, y, **_: x.addcmul(y, y), "AddcmulBackward0"),
    ("to_float64", lambda x, **_: x.double(), "ToCopyBackward0"),
    ("to_float16", lambda x, **_: x.half(), "ToCopyBackward0"),
    ("to_dtype", lambda x, **_: x.to(gt.float64), "ToCopyBackward0"),
    # products
    ("matmul", lambda x, **_: x @ x.T, "MmBackward0"),
    ("mm", lambda x, **_: x.mm(x.T), "MmBackward0"),
    ("bmm", lambda x, **_: x[None].bmm(x.T[None]), "BmmBackward0"),
    ("matmul_3d", lambda x3, **_: x3 @ x3.transpose(1, 2), "UnsafeViewBackward0"),
    ("mv", lambda x, v, **_: x @ v, "MvBackward0"),
    ("dot", lambda v, **_: v @ v, "DotBackward0"),
    ("addmm", lambda x, y, **_: gt.addmm(y[:, :4], x, x.T), "AddmmBackward0"),
    # joining, copying
    ("cat", lambda x, **_: gt.cat([x, x]), "CatBackward0"),
    ("stack", lambda x, **_: gt.stack([x, x]), "StackBackward0"),
    ("clone", lambda x, **_: x.clone(), "CloneBackward0"),
    ("contiguous", lambda x, **_: x.T.contiguous(), "CloneBackward0"),
    ("repeat", lambda x, **_: x.repeat(2, 1), "RepeatBackward0"),
    ("gather", lambda x, t, **_: x.gather(1, t[:, None]), "GatherBackward0"),
    ("index_select", lambda x, t, **_: x.index_select(0, t), "IndexSelectBackward0"),
    ("sort", lambda x, **_: x.sort(1)[0], "SortBackward0"),
    ("topk", lambda x, **_: x.topk(2)[0], "TopkBackward0"),
    ("flip", lambda x, **_: x.flip(0), "FlipBackward0"),
    ("roll", lambda x, **_: x.roll(1, 0), "RollBackward0"),
    ("tril", lambda x, **_: x.tril(), "TrilBackward0"),
    ("triu", lambda x, **_: x.triu(), "TriuBackward0"),
    # indexing and views
    ("select", lambda x, **_: x[0], "SelectBackward0"),
    ("select_dim1", lambda x, **_: x[:, 1], "SelectBackward0"),
    ("slice", lambda x, **_: x[1:3], "SliceBackward0"),
    ("slice_dim1", lambda x, **_: x[:, 1:3], "SliceBackward0"),
    ("slice_all", lambda x, **_: x[:], "SliceBackward0"),
    ("index_tensor", lambda x, t, **_: x[t], "IndexBackward0"),
    ("index_mask", lambda x, y, **_: x[y == 0], "IndexBackward0"),
    ("index_none", lambda x, **_: x[..., None], "UnsqueezeBackward0"),
    ("index_none_first", lambda x, **_: x[None], "UnsqueezeBackward0"),
    ("index_ellipsis", lambda x, **_: x[...], "AliasBackward0"),
    ("narrow", lambda x, **_: x.narrow(0, 1, 2), "SliceBackward0"),
    ("view", lambda x, **_: x.view(20), "ViewBackward0"),
    ("reshape", lambda x, **_: x.reshape(20), "ViewBackward0"),
    ("reshape_copy", lambda x, **_: x.T.reshape(20), "UnsafeViewBackward0"),
    ("flatten", lambda x, **_: x.flatten(), "ViewBackward0"),
    ("flatten_copy", lambda x, **_: x.T.flatten(), "UnsafeViewBackward0"),
    ("unflatten", lambda x, **_: x.unflatten(1, (5, 1)), "ViewBackward0"),
    ("T", lambda x, **_: x.T, "PermuteBackward0"),
    ("t", lambda x, **_: x.t(), "TBackward0"),
    ("mT", lambda x, **_: x.mT, "TransposeBackward0"),
    ("transpose", lambda x, **_: x.transpose(0, 1), "TransposeBackward0"),
    ("permute", lambda x3, **_: x3.permute(2, 0, 1), "PermuteBackward0"),
    ("movedim", lambda x3, **_: x3.movedim(0, 2), "PermuteBackward0"),
    ("squeeze", lambda x, **_: x[None].squeeze(), "SqueezeBackward0"),
    ("squeeze_dim", lambda x, **_: x[None].squeeze(0), "SqueezeBackward1"),
    ("unsqueeze", lambda x, **_: x.unsqueeze(0), "UnsqueezeBackward0"),
    ("expand", lambda x, **_: x[None].expand(2, 4, 5), "ExpandBackward0"),
    ("split", lambda x, **_: x.split(2)[0], "SplitBackward0"),
    ("split_sizes", lambda x, **_: x.split([1, 3])[1], "SplitWithSizesBackward0"),
    ("chunk", lambda x, **_: x.chunk(2)[1], "SplitBackward0"),
    ("unbind", lambda x, **_: x.unbind()[0], "UnbindBackward0"),
    ("diagonal", lambda x, **_: x.diagonal(), "DiagonalBackward0"),
    ("unfold", lambda x, **_: x.unfold(1, 2, 1), "UnfoldBackward0"),
    ("sign", lambda x, **_: x.sign(), "SignBackward0"),
    ("cummax", lambda x, **_: x.cummax(0).values, "CummaxBackward0"),
    ("cummin", lambda x, **_: x.cummin(1)[0], "CumminBackward0"),
    ("sgn", lambda x, **_: x.sgn(), "SgnBackward0"),
    # padding, scatters, distances, resizing
    ("pad", lambda x4, **_: F.pad(x4, (1, 1)), "ConstantPadNdBackward0"),
    (
        "pad_reflect_2d",
        lambda x4, **_: F.pad(x4, (1, 1, 1, 1), mode="reflect"),
        "ReflectionPad2DBackward0",
    ),
    (
        "pad_replicate_1d",
        lambda x3, **_: F.pad(x3, (1, 1), mode="replicate"),
        "ReplicationPad1DBackward0",
    ),
    ("pad_circular", lambda x4, **_: F.pad(x4, (1, 1, 1, 1), mode="circular"), "CopySlices"),
    ("scatter_src", lambda x, t, **_: x.scatter(0, t[None], x[:1]), "ScatterBackward0"),
    ("scatter_value", lambda x, t, **_: x.scatter(0, t[None], 2.0), "ScatterBackward1"),
    (
        "scatter_reduce",
        lambda x, t, **_: x.scatter_reduce(0, t[None], x[:1], "sum"),
        "ScatterReduceBackward0",
    ),
    ("index_add", lambda x, t, **_: x.index_add(0, t[:1], x[:1]), "IndexAddBackward0"),
    ("index_copy", lambda x, t, **_: x.index_copy(0, t[:1], x[:1]), "IndexCopyBackward0"),
    ("index_fill", lambda x, t, **_: x.index_fill(0, t[:1], 1.0), "IndexFillBackward0"),
    ("masked_scatter", lambda x, **_: x.masked_scatter(x > 0, x), "MaskedScatterBackward0"),
    ("cdist", lambda x, **_: gt.cdist(x, x), "CdistBackward0"),
    ("cdist_many_rows", lambda x, **_: gt.cdist(x.repeat(8, 1), x), "ViewBackward0"),
    (
        "interpolate",
        lambda x4, **_: F.interpolate(x4, scale_factor=2),
        "UpsampleNearest2DBackward0",
    ),
    (
        "bilinear_resize",
        lambda x4, **_: F.interpolate(x4, scale_factor=2, mode="bilinear"),
        "UpsampleBilinear2DBackward0",
    ),
    (
        "linear_resize",
        lambda x3, **_: F.interpolate(x3, size=7, mode="linear"),
        "UpsampleLinear1DBackward0",
    ),
    # composites PyTorch runs as one op of its own, or whose last step is a view
    ("hypot", lambda x, **_: gt.hypot(x, x), "HypotBackward0"),
    ("logaddexp", lambda x, **_: gt.logaddexp(x, x), "LogaddexpBackward0"),
    ("dist", lambda x, y, **_: gt.dist(x, y), "DistBackward0"),
    ("kron", lambda x, **_: gt.kron(x, x), "UnsafeViewBackward0"),
    ("diag_embed", lambda v, **_: gt.diag_embed(v), "DiagEmbedBackward0"),
    ("inner", lambda x, **_: gt.inner(x, x), "ViewBackward0"),
    ("tensordot", lambda x, **_: gt.tensordot(x, x.t(), dims=1), "ViewBackward0"),
    ("tensordot_outer", lambda v, **_: gt.tensordot(v, v, dims=0), "ViewBackward0"),
    ("einsum_mm", lambda x, **_: gt.einsum("ij,kj->ik", x, x), "ViewBackward0"),
    ("einsum_permuted", lambda x, **_: gt.einsum("ij,jk->ki", x, x.t()), "ViewBackward0"),
    ("einsum_outer", lambda v, **_: gt.einsum("i,j->ij", v, v), "MulBackward0"),
    ("multi_dot", lambda x, **_: gt.linalg.multi_dot([x, x.t(), x]), "ViewBackward0"),
    ("multi_dot_vector", lambda x, v, **_: gt.linalg.multi_dot([x, v]), "ViewBackward0"),
    ("addmv", lambda x, v, **_: gt.addmv(x[:, 0], x, v), "AddmvBackward0"),
    ("addr", lambda x, v, **_: gt.addr(x, x[:, 0], v), "AddrBackward0"),
    ("baddbmm", lambda x3, **_: gt.baddbmm(x3[:, :, :3], x3, x3.mT), "BaddbmmBackward0"),
    ("addbmm", lambda x3, **_: gt.addbmm(x3[0, :, :3], x3, x3.mT), "AddbmmBackward0"),
    ("prod_all", lambda x, **_: x.prod(), "ProdBackward0"),
    ("prod_dim", lambda x, **_: x.prod(1), "ProdBackward1"),
    ("matrix_norm_fro", lambda x, **_: gt.linalg.matrix_norm(x), "LinalgVectorNormBackward0"),
    ("matrix_norm_1", lambda x, **_: gt.linalg.matrix_norm(x, 1), "AmaxBackward0"),
    ("matrix_norm_-inf", lambda x, **_: gt.linalg.matrix_norm(x, -math.inf), "AminBackward0"),
    ("matrix_norm_2", lambda x, **_: gt.linalg.matrix_norm(x, 2), "AmaxBackward0"),
    ("var_mean", lambda x, **_: gt.var_mean(x, 1)[0], "VarMeanBackward0"),
    ("var_mean_mean", lambda x, **_: gt.var_mean(x, 1)[1], "VarMeanBackward0"),
    ("std_mean", lambda x, **_: gt.std_mean(x)[1], "StdMeanBackward0"),
    ("pdist", lambda x, **_: F.pdist(x), "PdistBackward0"),
    ("polar", lambda x, **_: gt.polar(x, x), "PolarBackward0"),
    ("setitem_slice", lambda x, y, **_: _assigned(y, (slice(1, None),), x[1:]), "CopySlices"),
    ("setitem_int", lambda x, y, **_: _assigned(y, (0,), x[1] * 2), "CopySlices"),
    ("setitem_index", lambda x, y, t, **_: _assigned(y, (t[:2],), x[:2]), "IndexPutBackward0"),
    (
        "setitem_list",
        lambda x, y, **_: _assigned(y, ([0, 1], [1, 2]), x[0, :2]),
        "IndexPutBackward0",
    ),
    ("setitem_full_mask", lambda x, y, **_: _assigned(y, (y == 0,), x.sum()), "IndexPutBackward0"),
    ("view_changed_in_place", lambda x, **_: _row_doubled(x * 1), "CopySlices"),
    ("exp2", lambda x, **_: x.exp2(), "Exp2Backward0"),
    ("log2", lambda x, **_: x.log2(), "Log2Backward0"),
    ("log10", lambda x, **_: x.log10(), "Log10Backward0"),
    ("frac", lambda x, **_: x.frac(), "FracBackward0"),
    ("logit", lambda x, **_: (x * 0.5).sigmoid().logit(), "LogitBackward0"),
    ("sinc", lambda x, **_: x.sinc(), "SincBackward0"),
    ("deg2rad", lambda x, **_: x.deg2rad(), "Deg2RadBackward0"),
    ("nan_to_num", lambda x, **_: x.nan_to_num(), "NanToNumBackward0"),
    ("rot90", lambda x, **_: x.rot90(), "Rot90Backward0"),
    ("fmax", lambda x, y, **_: x.fmax(y), "FmaxBackward0"),
    ("take", lambda x, t, **_: x.take(t), "TakeBackward0"),
    ("vdot", lambda v, **_: v.vdot(v), "VdotBackward0"),
    ("kthvalue", lambda x, **_: x.kthvalue(2, 1).values, "KthvalueBackward0"),
    ("fft_complex", lambda x, **_: gt.fft.fft(gt.complex(x, x)), "FftC2CBackward0"),
    ("rfft", lambda x, **_: gt.fft.rfft(x), "FftR2CBackward0"),
    ("fft_of_real", lambda x, **_: gt.fft.fft(x), "FftR2CBackward0"),
    ("ifft_of_real", lambda x, **_: gt.fft.ifft(x), "ConjBackward0"),
    ("fft2_of_real", lambda x, **_: gt.fft.fft2(x), "FftC2CBackward0"),
    ("irfft", lambda x, **_: gt.fft.irfft(gt.fft.rfft(x)), "FftC2RBackward0"),
    ("real", lambda x, **_: gt.complex(x, x).real, "SelectBackward0"),
    ("unfold", lambda x4, **_: F.unfold(x4, 2), "Im2ColBackward0"),
    ("fold", lambda x4, **_: F.fold(F.unfold(x4, 2), (4, 4), 2), "Col2ImBackward0"),
    ("soft_margin", lambda x, y, **_: F.soft_margin_loss(x, y), "SoftMarginLossBackward0"),
    ("multi_margin", lambda x, t, **_: F.multi_margin_loss(x, t), "MultiMarginLossBackward0"),
    ("smooth_l1_beta0", lambda x, y, **_: F.smooth_l1_loss(x, y, beta=0.0), "MeanBackward0"),
    (
        "pixel_shuffle",
        lambda x4, **_: F.pixel_shuffle(x4[:, :1].repeat(1, 4, 1, 1), 2),
        "PixelShuffleBackward0",
    ),  # fmt: skip
    (
        "grid_sample",
        lambda x4, **_: F.grid_sample(x4, gt.zeros(2, 2, 2, 2), align_corners=False),
        "GridSampler2DBackward0",
    ),  # fmt: skip
    ("entr", lambda x, **_: gt.special.entr(x.sigmoid()), "SpecialEntrBackward0"),
    ("log_ndtr", lambda x, **_: gt.special.log_ndtr(x), "SpecialLogNdtrBackward0"),
    ("erfcx", lambda x, **_: gt.special.erfcx(x), "SpecialErfcxBackward0"),
    ("quantile", lambda x, **_: x.quantile(0.3, dim=1), "SqueezeBackward4"),
    ("cov", lambda x, **_: x.cov(), "SqueezeBackward0"),
    ("ce_probabilities", lambda x, **_: F.cross_entropy(x, x.detach().softmax(1)), "DivBackward1"),
    (
        "ce_probabilities_sum",
        lambda x, **_: F.cross_entropy(x, x.detach().softmax(1), reduction="sum"),
        "NegBackward0",
    ),  # fmt: skip
    ("bilinear", lambda x, **_: F.bilinear(x, x, gt.ones(2, 5, 5)), "ViewBackward0"),
    (
        "embedding_bag",
        lambda x, t, **_: F.embedding_bag(t, x, gt.tensor([0, 2])),
        "EmbeddingBagBackward0",
    ),  # fmt: skip
    (
        "embedding_bag_max",
        lambda x, t, **_: F.embedding_bag(t, x, gt.tensor([0, 2]), mode="max"),
        "EmbeddingBagBackward0",
    ),  # fmt: skip
    ("mvlgamma", lambda x, **_: (x + 3).mvlgamma(2), "MvlgammaBackward0"),
    ("multigammaln", lambda x, **_: gt.special.multigammaln(x + 3, 2), "MvlgammaBackward0"),
    # stft: PyTorch squeezes the batch of one of a 1-d signal, else ends with a transpose
    (
        "stft_1d",
        lambda x, **_: gt.stft(x.reshape(-1), 8, window=gt.hann_window(8), return_complex=True),
        "SqueezeBackward4",
    ),  # fmt: skip
    (
        "stft_2d",
        lambda x, **_: gt.stft(x, 4, window=gt.hann_window(4), return_complex=True),
        "TransposeBackward1",
    ),  # fmt: skip
    (
        "stft_real_pairs",
        lambda x, **_: gt.stft(x, 4, window=gt.hann_window(4), return_complex=False),
        "ViewAsRealBackward0",
    ),  # fmt: skip
    # einsum of one operand: its diagonals, a permute, then any sum (a new view even unchanged)
    ("einsum_diagonal", lambda x4, **_: gt.einsum("ii->i", x4[0, 0]), "PermuteBackward0"),
    ("einsum_batch_diagonal", lambda x4, **_: gt.einsum("...ii->...i", x4), "PermuteBackward0"),
    ("einsum_trace", lambda x4, **_: gt.einsum("ii", x4[0, 0]), "SumBackward1"),
    ("einsum_diagonal_sum", lambda x3, **_: gt.einsum("bij->j", x3), "SumBackward1"),
    ("einsum_unchanged", lambda x, **_: gt.einsum("ij->ij", x), "PermuteBackward0"),
    ("einsum_transpose", lambda x, **_: gt.einsum("ij->ji", x), "PermuteBackward0"),
]


def _assigned(dst, key, value):
    dst = dst.clone()
    dst[key if len(key) > 1 else key[0]] = value
    return dst


def _row_doubled(h):
    h[0].mul_(2)
    return h


@pytest.mark.parametrize("how,name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_grad_fn_is_named_as_pytorchs(conn, how, name):
    out = how(**_inputs())
    assert out.grad_fn.name() == name
    assert type(out.grad_fn).__name__ == name
    assert f"grad_fn=<{name}>" in repr(out)


def test_squeeze_with_dims_and_select_of_a_full_slice(conn):
    x = gt.ones(1, 1, 3, requires_grad=True)
    assert x.squeeze((0, 1)).grad_fn.name() == "SqueezeBackward2"
    assert x[0, :].grad_fn.name() == "SelectBackward0"  # (the whole slice makes no view)
    assert x[:, :].grad_fn.name() == "AliasBackward0"
    assert x[0, 0, 1:].grad_fn.name() == "SliceBackward0"


def test_an_op_that_returns_its_input_leaves_the_inputs_name(conn):
    x = gt.ones(4, 5, requires_grad=True)
    y = x * 2
    assert y.reshape(4, 5) is y and y.reshape(4, 5).grad_fn.name() == "MulBackward0"
    assert y.squeeze().grad_fn.name() == "MulBackward0"  # (no size-1 dimension: y itself)
    assert y.flip(()).grad_fn.name() == "FlipBackward0"  # (a copy even so, as PyTorch's)
    assert y.contiguous().grad_fn.name() == "MulBackward0"
    assert y.transpose(0, 0).grad_fn.name() == "MulBackward0"
    assert F.dropout(y, 0.5, training=False).grad_fn.name() == "MulBackward0"


def test_no_node_without_grad(conn):
    x = gt.ones(4, 5, requires_grad=True)
    with gt.no_grad():
        assert F.mse_loss(x, gt.zeros(4, 5)).grad_fn is None
        assert x.softmax(-1).grad_fn is None and x[0].grad_fn is None
    assert F.gelu(gt.ones(3)).grad_fn is None


def test_names_do_not_change_gradients(conn):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 5)).astype(np.float32)
    x = gt.tensor(a, requires_grad=True)
    y = gt.tensor(np.zeros((4, 5), np.float32))
    loss = F.mse_loss(x, y) + x.softmax(-1)[:, 0].sum() + x.var() + x.t()[1:3].mean()
    assert loss.grad_fn.name() == "AddBackward0"
    loss.backward()
    e = np.exp(a - a.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    want = 2 * a / a.size  # mse
    want = want + s[:, :1] * ((np.arange(5) == 0) - s)  # softmax column 0
    want = want + 2 * (a - a.mean()) / (a.size - 1)  # var
    want[:, 1:3] += 1 / 8  # mean of x.t()[1:3]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "how",
    [lambda x: gt.floor_divide(x, 2.0), lambda x: x // gt.full((4, 5), 3.0), lambda x: 7.0 // x],
    ids=["scalar", "tensor", "reflected"],
)
def test_floor_divide_node_is_pytorchs_not_implemented(conn, how):
    # PyTorch 2.13: grad_fn.name() "torch::autograd::NotImplemented", its class NotImplemented,
    # and backward raises
    x = gt.ones(4, 5, requires_grad=True)
    out = how(x)
    assert out.requires_grad
    assert out.grad_fn.name() == "torch::autograd::NotImplemented"
    assert type(out.grad_fn).__name__ == "NotImplemented"
    assert "grad_fn=<NotImplemented>" in repr(out)
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        out.sum().backward()


def test_einsum_of_one_operand_unchanged_is_a_view_with_a_gradient(conn):
    x = gt.ones(4, 5, requires_grad=True)
    y = gt.einsum("ij->ij", x)
    assert y is not x
    (y * 2.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((4, 5), 2.0, np.float32))
