"""Gradients of every differentiable op against central finite differences in float64.

``gradcheck`` projects the op's output onto a fixed random tensor (so every output element
matters), runs ``backward()``, and compares each input's ``.grad`` with finite differences computed
by GT's own forward pass on perturbed inputs. All perturbed evaluations are stacked into one tensor,
so a whole check costs a couple of sync points.
"""

from __future__ import annotations

import numpy as np
import pytest

import gt
import gt.distributions as D
import gt.nn.functional as F

EPS = 1e-6


def gradcheck(
    fn, *arrays: np.ndarray, atol: float = 1e-6, rtol: float = 1e-5, seed: int = 0
) -> None:
    """Assert that autograd's gradients of ``fn`` match finite differences at ``arrays``."""
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    inputs = [gt.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*inputs)
    w = gt.tensor(np.random.default_rng(seed).standard_normal(out.shape))
    (out * w).sum().backward()
    evals = []
    with gt.no_grad():
        # Every perturbed copy of an input goes up in one stacked upload (few, large messages).
        moved_sets = [[] for _ in arrays]
        for i, a in enumerate(arrays):
            for j in range(a.size):
                for sign in (1.0, -1.0):
                    for k, x in enumerate(arrays):
                        m = x.copy()
                        if k == i:
                            m.flat[j] += sign * EPS
                        moved_sets[k].append(m)
        stacks = [gt.tensor(np.stack(ms)) for ms in moved_sets] if moved_sets[0] else []
        for e in range(len(moved_sets[0])):
            evals.append((fn(*[st[e] for st in stacks]) * w).sum())
        numeric = gt.stack(evals).numpy() if evals else np.zeros(0)
    k = 0
    for i, (a, t) in enumerate(zip(arrays, inputs)):
        fd = (numeric[k : k + 2 * a.size : 2] - numeric[k + 1 : k + 2 * a.size : 2]) / (2 * EPS)
        k += 2 * a.size
        got = t.grad.numpy() if t.grad is not None else np.zeros_like(a)
        assert got.shape == a.shape, f"grad of input {i} has shape {got.shape}, not {a.shape}"
        np.testing.assert_allclose(got.reshape(-1), fd, atol=atol, rtol=rtol, err_msg=f"input {i}")


def _r(*shape, seed=0, low=None):
    rng = np.random.default_rng(seed + 17 * len(shape))
    if low is not None:
        return rng.uniform(low, low + 1.5, shape)
    return rng.standard_normal(shape)


def _sq(seed: int = 3) -> np.ndarray:
    """A batch of two well-conditioned 3 x 3 matrices (eigenvalues near 3)."""
    return np.random.default_rng(seed).standard_normal((2, 3, 3)) * 0.5 + 3 * np.eye(3)


def _flat(*parts, square: tuple = ()):
    """Results of a decomposition as one vector; ``square``: parts whose sign is arbitrary
    (eigen- and singular vectors), squared so the check does not depend on it."""
    return gt.cat([(p * p if i in square else p).reshape(-1) for i, p in enumerate(parts)])


def _eye(n: int):
    return gt.eye(n, dtype="float64")


IDX = np.array([2, 0, 2])  # repeated index: gradients must add up

CASES = [
    # elementwise binary, with broadcasting both ways
    ("add_broadcast", lambda a, b: a + b, [_r(2, 3), _r(3, seed=1)]),
    ("sub_broadcast_column", lambda a, b: a - b, [_r(2, 3), _r(2, 1, seed=1)]),
    ("rsub_scalar", lambda a: 3.0 - a, [_r(2, 3)]),
    ("mul_broadcast", lambda a, b: a * b, [_r(2, 1, 3), _r(4, 1, seed=1)]),
    ("div", lambda a, b: a / b, [_r(2, 3), _r(3, seed=1, low=0.5)]),
    ("rdiv_scalar", lambda a: 2.0 / a, [_r(2, 3, low=0.5)]),
    ("pow_square", lambda a: a**2, [_r(2, 3)]),
    ("pow_fractional", lambda a: a**1.5, [_r(2, 3, low=0.5)]),
    ("pow_negative", lambda a: a**-0.5, [_r(2, 3, low=0.5)]),
    ("pow_tensor_both", lambda a, b: a**b, [_r(2, 3, low=0.5), _r(3, seed=1)]),
    ("rpow_scalar_base", lambda a: 2.0**a, [_r(2, 3)]),
    ("maximum", lambda a, b: a.maximum(b), [_r(2, 3), _r(3, seed=1)]),
    ("minimum", lambda a, b: gt.minimum(a, b), [_r(2, 3), _r(2, 3, seed=1)]),
    ("where", lambda a, b: gt.where(a > 0, a * 2, b), [_r(2, 3), _r(3, seed=1)]),
    ("remainder", lambda a: a % 0.7, [_r(4, low=0.1)]),
    # unary
    ("neg", lambda a: -a, [_r(2, 3)]),
    ("abs", lambda a: a.abs(), [_r(2, 3)]),
    ("exp", lambda a: a.exp(), [_r(2, 3)]),
    ("log", lambda a: a.log(), [_r(2, 3, low=0.5)]),
    ("sqrt", lambda a: a.sqrt(), [_r(2, 3, low=0.5)]),
    ("rsqrt", lambda a: a.rsqrt(), [_r(2, 3, low=0.5)]),
    ("sin", lambda a: a.sin(), [_r(2, 3)]),
    ("cos", lambda a: a.cos(), [_r(2, 3)]),
    ("tanh", lambda a: a.tanh(), [_r(2, 3)]),
    ("sigmoid", lambda a: a.sigmoid(), [_r(2, 3)]),
    ("relu", lambda a: a.relu(), [_r(2, 3)]),
    ("erf", lambda a: a.erf(), [_r(2, 3)]),
    ("gelu", lambda a: a.gelu(), [_r(2, 3)]),
    ("gelu_tanh", lambda a: a.gelu("tanh"), [_r(2, 3)]),
    ("silu", lambda a: a.silu(), [_r(2, 3)]),
    ("softplus", lambda a: a.softplus(beta=2.0), [_r(2, 3)]),
    ("log1p", lambda a: a.log1p(), [_r(2, 3, low=0.5)]),
    ("clamp_scalars", lambda a: a.clamp(-0.5, 0.5), [_r(3, 4)]),
    ("clamp_tensor_bounds", lambda a, lo: a.clamp(min=lo), [_r(3, 4), _r(4, seed=1)]),
    # matmul
    ("matmul_2d", lambda a, b: a @ b, [_r(3, 4), _r(4, 2, seed=1)]),
    ("matmul_vec_mat", lambda a, b: a @ b, [_r(4), _r(4, 2, seed=1)]),
    ("matmul_mat_vec", lambda a, b: a @ b, [_r(3, 4), _r(4, seed=1)]),
    ("matmul_dot", lambda a, b: a @ b, [_r(4), _r(4, seed=1)]),
    ("matmul_batched_broadcast", lambda a, b: a @ b, [_r(2, 1, 2, 3), _r(3, 3, 2, seed=1)]),
    ("matmul_batch_by_matrix", lambda a, b: a @ b, [_r(2, 2, 3), _r(3, 2, seed=1)]),
    # reductions
    ("sum_all", lambda a: a.sum(), [_r(2, 3, 2)]),
    ("sum_axes_keepdims", lambda a: a.sum(axis=(0, 2), keepdims=True), [_r(2, 3, 2)]),
    ("sum_negative_dim", lambda a: a.sum(dim=-2), [_r(2, 3, 2)]),
    ("mean_axis", lambda a: a.mean(1), [_r(2, 3, 2)]),
    ("max_all", lambda a: a.max(), [_r(2, 3)]),
    ("max_dim_values", lambda a: a.max(dim=1).values, [_r(2, 3, 2)]),
    ("amin_tuple_keepdim", lambda a: a.amin((0, 2), keepdim=True), [_r(2, 3, 2)]),
    ("var", lambda a: a.var(1), [_r(3, 4)]),
    ("std_all_biased", lambda a: a.std(unbiased=False), [_r(3, 4)]),
    ("norm", lambda a: a.norm(dim=1), [_r(3, 4)]),
    ("softmax", lambda a: a.softmax(-1), [_r(3, 4)]),
    ("softmax_dim0", lambda a: gt.softmax(a, 0), [_r(3, 4)]),
    ("log_softmax", lambda a: a.log_softmax(1), [_r(3, 4)]),
    ("logsumexp", lambda a: a.logsumexp((0, 1)), [_r(3, 4)]),
    ("cumsum", lambda a: a.cumsum(1), [_r(3, 4)]),
    ("cumsum_then_square", lambda a: (a.cumsum(0) ** 2).sum(1), [_r(4, 2)]),
    # shapes
    ("reshape", lambda a: a.reshape(3, 2) * _c(3, 2), [_r(2, 3)]),
    ("flatten", lambda a: a.flatten(1), [_r(2, 3, 2)]),
    ("transpose", lambda a: a.transpose(0, 2), [_r(2, 3, 2)]),
    ("T_then_matmul", lambda a: a.T @ a, [_r(3, 2)]),
    ("permute", lambda a: a.permute(1, 2, 0), [_r(2, 3, 2)]),
    ("squeeze_unsqueeze", lambda a: a.unsqueeze(0).squeeze(-1), [_r(3, 1)]),
    ("expand", lambda a: a.expand(2, 3, 4), [_r(3, 1)]),
    ("repeat", lambda a: a.repeat(2, 1, 3), [_r(2, 2)]),
    ("split", lambda a: a.split(2, dim=1)[1] * 3 + a.split(2, dim=1)[0], [_r(2, 4)]),
    ("chunk", lambda a: gt.stack([c.sum() for c in a.chunk(3)]), [_r(7)]),
    ("unbind", lambda a: a.unbind(1)[2] * a.unbind(1)[0], [_r(2, 3)]),
    ("cat", lambda a, b: gt.cat([a, b, a], dim=1), [_r(2, 2), _r(2, 1, seed=1)]),
    ("stack", lambda a, b: gt.stack([a, b], dim=1), [_r(2, 3), _r(2, 3, seed=1)]),
    # indexing
    ("getitem_int", lambda a: a[1], [_r(3, 4)]),
    ("getitem_slice_step", lambda a: a[::2, 1::2], [_r(5, 4)]),
    ("getitem_none_ellipsis", lambda a: a[None, ..., -1], [_r(2, 3, 2)]),
    ("getitem_empty_slice", lambda a: a[3:1].sum() + a[0], [_r(3, 2)]),
    ("getitem_repeated_list", lambda a: a[IDX.tolist()], [_r(3, 2)]),
    ("getitem_int_tensor", lambda a: a[:, gt.tensor(IDX[:2])], [_r(2, 3)]),
    ("getitem_two_tensors", lambda a: a[gt.tensor(IDX), gt.tensor([1, 1, 0])], [_r(3, 2)]),
    (
        "getitem_bool_mask",
        lambda a: a[gt.tensor([[True, False], [True, True], [False, True]])],
        [_r(3, 2)],
    ),
    ("index_select", lambda a: a.index_select(0, gt.tensor([2, 0, 2])), [_r(3, 2)]),
    ("gather", lambda a: a.gather(1, gt.tensor([[0, 0], [2, 1]])), [_r(2, 3)]),
    ("flip", lambda a: a.flip(1) * _c(2, 3), [_r(2, 3)]),
    (
        "masked_fill_causal",
        lambda a: a.masked_fill(gt.ones(3, 3, dtype="bool").triu(1), -1e9).softmax(-1),
        [_r(3, 3)],
    ),
    ("tril", lambda a: a.tril(), [_r(3, 3)]),
    # in-place updates recorded for autograd
    ("setitem_value_and_base", lambda a, v: _set(a * 1.0, (1,), v), [_r(3, 2), _r(2, seed=1)]),
    (
        "setitem_broadcast_value",
        lambda a, v: _set(a * 2.0, (slice(None), 0), v),
        [_r(3, 2), _r(1, seed=1)],
    ),
    ("setitem_mask", lambda a: _set(a * 1.0, a > 0, 0.0), [_r(3, 2)]),
    ("iadd_non_leaf", lambda a, b: _iadd(a * a, b), [_r(2, 3), _r(3, seed=1)]),
    # (sin saves its input: exp would save its output, which *= changes, and PyTorch raises)
    ("imul_non_leaf", lambda a, b: _imul(a.sin(), b), [_r(2, 3), _r(2, 3, seed=1)]),
    ("clone_then_inplace", lambda a: _iadd(a.clone(), a), [_r(3)]),
    # composed graphs: the same tensor used several times
    ("reuse_many_times", lambda a: a * a + a.exp() * a - (a / (1.0 + a * a)), [_r(2, 3)]),
    ("diamond", lambda a, b: (a @ b).relu() @ b.T + a, [_r(2, 3), _r(3, 3, seed=1)]),
    (
        "attention_like",
        lambda q, k: ((q @ k.T) * 0.5).softmax(-1) @ k,
        [_r(3, 4), _r(5, 4, seed=1)],
    ),
    # nn.functional
    ("linear", lambda x, w, b: F.linear(x, w, b), [_r(3, 4), _r(2, 4, seed=1), _r(2, seed=2)]),
    (
        "layer_norm",
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        [_r(3, 4), _r(4, seed=1), _r(4, seed=2)],
    ),
    ("mse_loss", lambda x, y: F.mse_loss(x, y), [_r(3, 2), _r(3, 2, seed=1)]),
    ("l1_loss_sum", lambda x, y: F.l1_loss(x, y, reduction="sum"), [_r(3, 2), _r(3, 2, seed=1)]),
    ("cross_entropy", lambda x: F.cross_entropy(x, gt.tensor([2, 0, 1])), [_r(3, 4)]),
    (
        "cross_entropy_ignore_index",
        lambda x: F.cross_entropy(x, gt.tensor([2, -100, 1]), reduction="sum"),
        [_r(3, 4)],
    ),
    (
        "cross_entropy_smoothing_weight",
        lambda x, w: F.cross_entropy(x, gt.tensor([2, 0, 1]), weight=w, label_smoothing=0.1),
        [_r(3, 4), _r(4, low=0.5)],
    ),
    (
        "cross_entropy_probabilities",
        lambda x, p: F.cross_entropy(x, p.softmax(1)),
        [_r(3, 4), _r(3, 4, seed=1)],
    ),
    (
        "cross_entropy_spatial",
        lambda x: F.cross_entropy(x, gt.tensor([[0, 2], [1, 1]])),
        [_r(2, 3, 2)],
    ),
    ("nll_loss", lambda x: F.nll_loss(x.log_softmax(1), gt.tensor([1, 0])), [_r(2, 3)]),
    (
        "binary_cross_entropy",
        lambda p, y: F.binary_cross_entropy(p.sigmoid(), y),
        [_r(4), _r(4, seed=1, low=0.0) / 2],
    ),
    (
        "bce_with_logits",
        lambda x, y: F.binary_cross_entropy_with_logits(
            x, y, pos_weight=gt.tensor([2.0], dtype="float64")
        ),
        [_r(4) * 3, _r(4, seed=1, low=0.0) / 2],
    ),
    ("embedding", lambda w: F.embedding(gt.tensor([[1, 0], [1, 2]]), w), [_r(3, 2)]),
    # primitives for stable math, products, sorting, windows, scatter
    ("expm1", lambda a: a.expm1(), [_r(2, 3)]),
    ("softplus_threshold", lambda a: F.softplus(a * 3.0, beta=0.5, threshold=2.0), [_r(2, 3)]),
    ("rounding_has_zero_gradient", lambda a: a.floor() + a.round() * a, [_r(2, 3)]),
    ("prod_all", lambda a: a.prod(), [_r(2, 3)]),
    ("prod_dim_keepdim", lambda a: a.prod(1, keepdim=True), [_r(3, 4)]),
    (
        "prod_with_a_zero",
        lambda a: (a * gt.tensor([1.0, 0.0, 1.0], dtype="float64")).prod(),
        [_r(3)],
    ),
    ("cumprod", lambda a: a.cumprod(1), [_r(2, 4)]),
    (
        "cumprod_through_zero",
        lambda a: (a * gt.tensor([1.0, 0.0, 1.0, 1.0], dtype="float64")).cumprod(0),
        [_r(4)],
    ),
    ("sort_values", lambda a: a.sort(dim=1, descending=True).values * _c(3, 4), [_r(3, 4)]),
    ("topk_values", lambda a: a.topk(2, dim=0).values, [_r(4, 3)]),
    ("median_dim", lambda a: a.median(dim=1).values, [_r(3, 5)]),
    ("max_dim_routes_to_index", lambda a: a.max(dim=1).values, [_r(3, 4)]),
    (
        "einsum_contraction",
        lambda a, b: gt.einsum("bij,jk->bik", a, b),
        [_r(2, 2, 3), _r(3, 2, seed=1)],
    ),
    ("einsum_trace_outer", lambda a, b: gt.einsum("ii,j->j", a, b), [_r(3, 3), _r(2, seed=1)]),
    ("roll", lambda a: a.roll(1, 1) * _c(2, 3), [_r(2, 3)]),
    (
        "scatter_add_source",
        lambda a, s: a.scatter_add(1, gt.tensor([[0, 0], [2, 1]]), s),
        [_r(2, 3), _r(2, 2, seed=1)],
    ),  # fmt: skip
    ("scatter_overwrite", lambda a: a.scatter(0, gt.tensor([[1, 0]]), 0.5) * _c(2, 2), [_r(2, 2)]),
    # scatter_reduce: distinct values (no ties), one position addressed twice, one not at all
    *(
        (
            f"scatter_reduce_{red}_{'with' if inc else 'without'}_self",
            lambda a, s, red=red, inc=inc: a.scatter_reduce(
                1, gt.tensor([[0, 0, 2], [1, 1, 1]]), s, red, include_self=inc
            ),
            [_r(2, 3) + np.arange(6).reshape(2, 3), _r(2, 3, seed=1) * 0.5 + 3.0],
        )
        for red in ("amax", "amin", "prod")
        for inc in (True, False)
    ),
    (
        "index_add",
        lambda a, s: a.index_add(0, gt.tensor([2, 0, 2]), s),
        [_r(3, 2), _r(3, 2, seed=1)],
    ),
    (
        "conv2d",
        lambda x, w, b: F.conv2d(x, w, b, padding=1),
        [_r(1, 2, 4, 3), _r(3, 2, 3, 2, seed=1), _r(3, seed=2)],
    ),
    (
        "conv2d_groups_stride_dilation",
        lambda x, w: F.conv2d(x, w, stride=2, dilation=(2, 1), groups=2),
        [_r(1, 4, 6, 5), _r(2, 2, 2, 2, seed=1)],
    ),  # fmt: skip
    (
        "conv_transpose2d",
        lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
        [_r(1, 2, 3, 2), _r(2, 1, 3, 3, seed=1)],
    ),  # fmt: skip
    ("conv1d", lambda x, w: F.conv1d(x, w, padding="same"), [_r(1, 2, 5), _r(2, 2, 4, seed=1)]),
    ("max_pool2d_padded", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [_r(1, 2, 5, 4)]),
    (
        "avg_pool2d_excluding_padding",
        lambda x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False),
        [_r(1, 1, 3, 4)],
    ),  # fmt: skip
    ("adaptive_avg_pool2d", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [_r(1, 1, 5, 4)]),
    (
        "conv3d",
        lambda x, w, b: F.conv3d(x, w, b, stride=(1, 2, 1), padding=1),
        [_r(1, 2, 3, 3, 2), _r(2, 2, 2, 2, 2, seed=1), _r(2, seed=2)],
    ),  # fmt: skip
    (
        "conv3d_groups_dilation_same",
        lambda x, w: F.conv3d(x, w, padding="same", dilation=(2, 1, 1), groups=2),
        [_r(1, 2, 3, 3, 3), _r(2, 1, 2, 2, 2, seed=1)],
    ),  # fmt: skip
    (
        "conv_transpose3d_groups",
        lambda x, w: F.conv_transpose3d(x, w, stride=2, padding=1, output_padding=1, groups=2),
        [_r(1, 2, 2, 2, 2), _r(2, 1, 3, 2, 2, seed=1)],
    ),  # fmt: skip
    (
        "max_pool3d_padded_ceil",
        lambda x: F.max_pool3d(x, 2, stride=(2, 1, 2), padding=1, ceil_mode=True),
        [_r(1, 1, 4, 3, 3)],
    ),  # fmt: skip
    (
        "avg_pool3d_excluding_padding_ceil",
        lambda x: F.avg_pool3d(x, 2, padding=1, ceil_mode=True, count_include_pad=False),
        [_r(1, 1, 3, 4, 3)],
    ),  # fmt: skip
    ("adaptive_avg_pool3d", lambda x: F.adaptive_avg_pool3d(x, (2, 3, 3)), [_r(1, 1, 3, 5, 4)]),
    ("adaptive_max_pool3d", lambda x: F.adaptive_max_pool3d(x, (2, 3, 2)), [_r(1, 1, 3, 4, 5)]),
    (
        "unfold_fold",
        lambda x: F.fold(F.unfold(x, 2, padding=1), (3, 4), 2, padding=1) * _c(1, 1, 3, 4),
        [_r(1, 1, 3, 4)],
    ),  # fmt: skip
    (
        "interpolate_bilinear",
        lambda x: F.interpolate(x, size=(4, 5), mode="bilinear"),
        [_r(1, 1, 2, 3)],
    ),
    ("pad_reflect", lambda x: F.pad(x, (2, 1), mode="reflect") * _c(2, 6), [_r(2, 3)]),
    (
        "batch_norm_training",
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        [_r(4, 3), _r(3, seed=1), _r(3, seed=2)],
    ),  # fmt: skip
    ("group_norm", lambda x, w: F.group_norm(x, 2, w), [_r(2, 4, 3), _r(4, seed=1)]),
    ("rms_norm", lambda x, w: F.rms_norm(x, (4,), w), [_r(3, 4), _r(4, seed=1)]),
    ("std_then_norm", lambda x: x.std(1) + x.norm(dim=0).sum(), [_r(3, 4)]),
    ("normalize", lambda x: F.normalize(x, dim=1), [_r(3, 4)]),
    (
        "bce_probabilities_and_targets",
        lambda p, t: F.binary_cross_entropy(p.sigmoid(), t.sigmoid()),
        [_r(4), _r(4, seed=1)],
    ),  # fmt: skip
    (
        "leaky_relu_elu_hardtanh",
        lambda x: F.leaky_relu(x, 0.2) + F.elu(x) + F.hardtanh(x * 2),
        [_r(2, 4)],
    ),
    (
        "sdpa_causal",
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [_r(1, 3, 2), _r(1, 3, 2, seed=1), _r(1, 3, 2, seed=2)],
    ),  # fmt: skip
    (
        "smooth_l1_huber",
        lambda x, y: F.smooth_l1_loss(x, y, beta=0.5) + F.huber_loss(x, y, delta=0.7),
        [_r(3, 2), _r(3, 2, seed=1)],
    ),  # fmt: skip
    (
        "kl_div",
        lambda a, b: F.kl_div(a.log_softmax(1), b.softmax(1), reduction="batchmean"),
        [_r(2, 3), _r(2, 3, seed=1)],
    ),  # fmt: skip
    # gt.nn.more_functional and gt.nn.more_losses
    ("pixel_shuffle_unshuffle", lambda x: F.pixel_shuffle(x, 2) * _c(1, 1, 4, 4) + (F.pixel_unshuffle(x, 2) * _c(1, 16, 1, 1)).sum(), [_r(1, 4, 2, 2)]),
    ("channel_shuffle", lambda x: F.channel_shuffle(x, 2) * _c(1, 4, 2), [_r(1, 4, 2)]),
    ("bilinear", lambda a, b, w, c: F.bilinear(a, b, w, c), [_r(2, 3), _r(2, 2, seed=1), _r(4, 3, 2, seed=2), _r(4, seed=3)]),
    ("shrinks_and_rrelu_eval", lambda x: F.hardshrink(x, 0.3) + F.softshrink(x, 0.3) + F.rrelu(x), [np.array([-1.2, -0.6, -0.1, 0.2, 0.5, 1.4])]),
    ("triplet_margin_swap", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=2.0, swap=True), [_r(3, 4), _r(3, 4, seed=1), _r(3, 4, seed=2)]),
    ("gaussian_nll_full", lambda x, t, v: F.gaussian_nll_loss(x, t, v.exp(), full=True), [_r(3, 2), _r(3, 2, seed=1), _r(3, 1, seed=2)]),
    ("poisson_nll_full", lambda x: F.poisson_nll_loss(x, gt.tensor(np.array([0.0, 1.0, 3.0, 4.0])), full=True), [_r(4)]),
    ("hinge_embedding_soft_margin", lambda x: F.hinge_embedding_loss(x, _pm()) + F.soft_margin_loss(x, _pm()), [_r(6)]),
    ("multilabel_soft_margin", lambda x, t: F.multilabel_soft_margin_loss(x, t.sigmoid()), [_r(2, 3), _r(2, 3, seed=1)]),
    ("multi_margin_p2_weighted", lambda x: F.multi_margin_loss(x, gt.tensor(np.array([1, 0, 2])), p=2, weight=gt.tensor(np.array([1.0, 0.5, 2.0]))), [_r(3, 3)]),
    ("multilabel_margin", lambda x: F.multilabel_margin_loss(x, gt.tensor(np.array([[2, -1, 0], [0, 1, -1]]))), [_r(2, 3)]),
    # linear algebra (gt.linalg), on small well-conditioned matrices
    ("linalg_inv", lambda a: gt.linalg.inv(a), [_sq()]),
    ("linalg_solve_matrix_broadcast", lambda a, b: gt.linalg.solve(a, b), [_sq(), _r(3, 2)]),
    ("linalg_solve_vector_left_false", lambda a, b: gt.linalg.solve(a, b, left=False), [_sq(), _r(2, 3)]),
    ("linalg_det", lambda a: gt.linalg.det(a), [_sq()]),
    ("linalg_slogdet", lambda a: gt.linalg.slogdet(a).logabsdet, [_sq()]),
    ("linalg_cholesky", lambda a: gt.linalg.cholesky(a @ a.mT + _eye(3)), [_sq()]),
    ("linalg_cholesky_upper", lambda a: gt.linalg.cholesky(a @ a.mT + _eye(3), upper=True), [_sq()]),
    ("linalg_solve_triangular_upper", lambda a, b: gt.linalg.solve_triangular(a, b, upper=True), [_sq(), _r(2, 3, 2)]),
    ("linalg_solve_triangular_lower_unit_right", lambda a, b: gt.linalg.solve_triangular(a, b, upper=False, left=False, unitriangular=True), [_sq(), _r(2, 3)]),
    ("linalg_matrix_power_negative", lambda a: gt.linalg.matrix_power(a, -2), [_sq()]),
    ("linalg_norms", lambda a: gt.linalg.matrix_norm(a, 1) + gt.linalg.matrix_norm(a) + gt.linalg.vector_norm(a, 3, dim=-1).sum(-1), [_sq()]),
    ("linalg_cross_multi_dot", lambda a, b: gt.linalg.cross(a, b) + gt.linalg.multi_dot([a, b.mT, a]), [_r(3, 3), _r(3, 3, seed=1)]),
    ("linalg_qr_tall", lambda a: _flat(*gt.linalg.qr(a)), [_r(2, 4, 3)]),
    ("linalg_eigh", lambda a: _flat(*gt.linalg.eigh(a + a.mT), square=(1,)), [_r(2, 3, 3)]),
    ("linalg_svd_tall", lambda a: _flat(*gt.linalg.svd(a, full_matrices=False), square=(0, 2)), [_r(4, 3)]),
    ("linalg_svd_wide", lambda a: _flat(*gt.linalg.svd(a, full_matrices=False), square=(0, 2)), [_r(2, 3, 4)]),
    ("linalg_pinv_nuc_norm", lambda a: gt.linalg.pinv(a) * gt.linalg.matrix_norm(a, "nuc"), [_r(4, 3)]),
    # the gamma family and erfinv, and the distributions made of them
    ("lgamma", lambda a: a.lgamma(), [_r(2, 3, low=0.3)]),
    ("lgamma_negative_reflection", lambda a: (a * 0.4 - 2.9).lgamma(), [_r(2, 3, low=0.2)]),
    ("digamma", lambda a: a.digamma() + (a * 0.4 - 2.9).digamma(), [_r(2, 3, low=0.3)]),
    ("polygamma_1_and_3", lambda a: gt.polygamma(1, a) + a.polygamma(3), [_r(2, 3, low=0.5)]),
    ("erfinv", lambda a: (a * 0.5).tanh().erfinv(), [_r(2, 3)]),
    ("mvlgamma", lambda a: gt.mvlgamma(a + 2.0, 3), [_r(2, 3, low=0.3)]),
    ("gamma_log_prob_entropy", lambda c, r: D.Gamma(c, r).log_prob(gt.tensor(np.array([0.5, 1.7]))) + D.Gamma(c, r).entropy(), [_r(2, low=0.5), _r(2, low=0.5, seed=1)]),
    ("beta_log_prob_entropy", lambda a, b: D.Beta(a, b).log_prob(gt.tensor(np.array([0.3, 0.8]))) + D.Beta(a, b).entropy(), [_r(2, low=0.5), _r(2, low=0.5, seed=1)]),
    ("dirichlet_log_prob_kl", lambda a, b: D.Dirichlet(a).log_prob(gt.tensor(np.array([0.2, 0.3, 0.5]))) + D.kl_divergence(D.Dirichlet(a), D.Dirichlet(b)), [_r(3, low=0.5), _r(3, low=0.5, seed=1)]),
    ("student_t_log_prob_entropy", lambda d, m, s: D.StudentT(d + 1.0, m, s).log_prob(gt.tensor(np.array([0.5, -1.0]))) + D.StudentT(d + 1.0, m, s).entropy(), [_r(2, low=0.5), _r(2), _r(2, low=0.5, seed=1)]),
    # x is exactly 0 at one point: the derivative there is still log(y) (PyTorch's)
    ("xlogy_xlog1py_at_zero", lambda x, y: gt.xlogy(x, y.exp()) + gt.special.xlog1py(x, y.exp()), [np.array([0.0, 0.5, -1.2]), _r(3, seed=1)]),
    # inverse trigonometric and hyperbolic primitives, atan2, fmod, and composed functions
    ("inverse_trig", lambda a: a.asin() + a.acos() * 2 + (a * 3).atan() + a.atanh() * 0.5, [_r(2, 3) * 0.3]),
    ("inverse_hyperbolic", lambda a: (a * 4).asinh() + (a.abs() + 1.2).acosh(), [_r(2, 3)]),
    ("atan2_broadcast", lambda y, x: gt.atan2(y, x), [_r(2, 3), _r(3, seed=1)]),
    ("fmod", lambda a, b: gt.fmod(a * 3, b.abs() + 0.5), [_r(2, 3), _r(2, 3, seed=1)]),
    ("hypot_copysign_logaddexp2", lambda a, b: gt.hypot(a, b) + a.copysign(b) + a.logaddexp2(b), [_r(2, 3), _r(2, 3, seed=1)]),
    ("diff_trapezoid", lambda y, x: y.diff(n=2) .sum(-1) + gt.trapezoid(y, x.cumsum(0)) + gt.cumulative_trapezoid(y, dx=0.5).sum(-1), [_r(2, 5), _r(5, low=0.2)]),
    ("kron_diag_embed_rot90", lambda a, b: gt.kron(a, b).sum() + a.diag_embed(1).rot90().sum(0), [_r(2, 3), _r(2, 2, seed=1)]),
    ("cov_corrcoef_dist", lambda a, b: a.cov() + a.corrcoef() * 2 + gt.dist(a, b), [_r(3, 6), _r(3, 6, seed=1)]),
    ("cummax_cummin_values", lambda a: a.cummax(1).values + gt.cummin(a, 0).values * 2, [_r(3, 4)]),
    ("logcumsumexp", lambda a: a.logcumsumexp(1) + (a * 30).logcumsumexp(0) / 30, [_r(3, 4)]),
    ("bessel_i0_i1_scaled", lambda a: a.i0() + gt.special.i1(a) * 2 + gt.special.i0e(a * 3) + gt.special.i1e(a * 3), [_r(2, 3)]),
    ("zeta_in_q_incomplete_gamma_in_x", lambda q, x: gt.special.zeta(3.0, q + 1.0) + gt.special.gammainc(2.5, x) + gt.special.gammaincc(gt.tensor(np.array([0.7, 1.5, 4.0])), x), [_r(3, low=0.2), _r(3, low=0.5)]),
    ("erfcx", lambda a: gt.special.erfcx(a * 1.5), [_r(2, 3)]),  # (erfcx(-5) is 1e11: FD noise)
    ("gamma_cdf_in_value_and_rate", lambda v, r: D.Gamma(gt.tensor(np.array([0.8, 2.5])), r).cdf(v), [_r(2, low=0.3), _r(2, low=0.5)]),
    ("ctc_loss", lambda x: F.ctc_loss(x.log_softmax(-1), gt.tensor([[1, 2], [2, 2]]), [4, 3], [2, 1]), [_r(4, 2, 3)]),
    ("embedding_bag_max", lambda w: F.embedding_bag(gt.tensor([1, 0, 2, 1]), w, [0, 1], mode="max"), [_r(3, 2)]),
    ("lp_pool2d", lambda x: F.lp_pool2d(x, 3, 2), [_r(1, 2, 4, 4, low=0.5)]),
    ("pdist", lambda x: F.pdist(x, 1.5), [_r(4, 3)]),
    ("grid_sample_bilinear_reflection", lambda x, g: F.grid_sample(x, g.tanh() * 1.2, padding_mode="reflection"), [_r(1, 2, 3, 4), _r(1, 2, 3, 2, seed=1)]),
    # gt/ops/compat.py, gt/ops/compat_inplace.py: in-place forms, aliases, composed methods
    ("inplace_trig_chain", lambda a, b: (a * 1).asin_().hypot_(b).atan2_(b).mul_(0.5).sinh_(), [_r(2, 3) * 0.3, _r(2, 3, seed=1)]),
    # (each on a fresh tensor: chained, one changes the output another's derivative reads, which
    # PyTorch refuses at backward)
    ("inplace_math_chain", lambda a: (a * 0.5).expm1_() + (a * 0.3).exp2_() + (a * 0.2).erf_() + (a * 0.4).xlogy_(a.abs() + 0.5) + (a * 0.1 + 0.5).logit_(0.1), [_r(2, 3)]),
    ("xlogy_method_at_zero", lambda x, y: x.xlogy(y.exp()), [np.array([0.0, 0.5, -1.2]), _r(3, seed=1)]),
    ("aliases_divide_remainder", lambda a, b: gt.divide(a, b) + a.multiply(b) - gt.subtract(a, b, alpha=2) + a.remainder(0.7) + gt.negative(b).absolute(), [_r(2, 3), _r(2, 3, seed=1, low=0.5)]),
    ("fmax_fmin", lambda a, b: gt.fmax(a, b) + a.fmin(b * 2), [_r(2, 3), _r(2, 3, seed=1)]),
    ("aminmax_dim", lambda a: a.aminmax(dim=1).min.unsqueeze(1) + gt.aminmax(a, dim=0, keepdim=True).max, [_r(3, 4)]),
    ("nanmedian_mode_values", lambda a: a.nanmedian(1).values + gt.mode(a, 1).values + a.nanmedian(), [_r(3, 5)]),
    ("unfold_tensor_split", lambda a: a.unfold(1, 3, 2).sum() + a.hsplit([2])[1].sum() * 2 + a.tensor_split(3, 1)[2].sum() * 3, [_r(3, 5)]),
    ("index_copy_masked_scatter", lambda a, s: a.index_copy(0, gt.tensor([2, 0]), s) + a.masked_scatter(a.detach() > 0, s.reshape(-1).repeat(2)), [_r(3, 4), _r(2, 4, seed=1)]),
    ("select_slice_diagonal_scatter", lambda a, s: a.select_scatter(s[0, :4], 1, 2) + a.slice_scatter(s[:, :3], 0, 1, 4, 2) + a.diagonal_scatter(s[1, :3], -1), [_r(4, 3), _r(2, 4, seed=1)]),
    ("index_put_put_take", lambda a, s: a.index_put((gt.tensor([0, 2, 0]),), s[0, :3], accumulate=True) + a.put(gt.tensor([1, 5]), s[1, :2]) + a.take(gt.tensor([[0, 11], [5, 5]])).sum(), [_r(4, 3), _r(2, 4, seed=1)]),
    ("addmv_addr_addbmm_baddbmm", lambda m, v, b1, b2: gt.addmv(v[:3], m, v, beta=0.5, alpha=2).sum() + gt.addr(m, v[:3], v, alpha=-1).sum() + gt.addbmm(m[:, :3], b1, b2).sum() + m[:, :3].baddbmm(b1, b2, beta=2, alpha=0.5).sum(), [_r(3, 4), _r(4, seed=1), _r(2, 3, 4, seed=2), _r(2, 4, 3, seed=3)]),
    ("vdot_mv_chain_matmul", lambda m, v: gt.vdot(v, v * 2) + m.mv(v).sum() + gt.chain_matmul(m, m.mT, m).sum(), [_r(3, 4), _r(4, seed=1)]),
    ("matrix_power_logdet", lambda a: a.matrix_power(3).sum() + gt.matrix_power(a, -2).sum() + (a @ a.mT).logdet().sum(), [_sq()]),
    ("renorm_sum_to_size_diagflat", lambda a: a.renorm(2, 0, 1.0) + a.renorm(1, 1, 0.8) + a.sum_to_size(1, 4) + gt.diagflat(a[0, :3], 1)[:3], [_r(3, 4)]),
    ("mvlgamma_method", lambda a: (a + 2.0).mvlgamma(3), [_r(2, 3, low=0.3)]),
    ("stacking_functions", lambda a, b: gt.column_stack([a, b]) + gt.vstack([a.T, b]) + gt.hstack([b, b]).sum() + gt.dstack([a, a]).sum(), [_r(3, 2), _r(3, seed=1)]),
    ("combinations_cartesian_prod", lambda v: gt.combinations(v, 2).prod(1).sum() + gt.cartesian_prod(v, v * 2).prod(1).sum(), [_r(4)]),
    ("std_mean_var_mean", lambda a: sum(gt.std_mean(a, 1)) + sum(gt.var_mean(a, 1, correction=0)), [_r(3, 4)]),
    ("matrix_exp_lu_solve", lambda a, b: gt.linalg.matrix_exp(a * 0.3) .sum() + gt.linalg.lu_solve(*gt.linalg.lu_factor(a), b).sum(), [_sq(), _r(2, 3, 2, seed=1)]),
    ("normal_icdf", lambda m, s, p: D.Normal(m, s).icdf(p.sigmoid()), [_r(2), _r(2, low=0.5), _r(2, seed=2)]),
]  # fmt: skip


def _pm():
    return gt.tensor(np.array([1.0, -1.0, -1.0, 1.0, -1.0, 1.0]))


def _c(*shape):
    return gt.tensor(np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape))


def _set(x, key, value):
    x[key] = value
    return x


def _iadd(x, y):
    x += y
    return x


def _imul(x, y):
    x *= y
    return x


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_gradient_matches_finite_differences(conn, case):
    _, fn, arrays = case
    gradcheck(fn, *arrays)


def test_every_differentiable_primitive_has_a_derivative_rule():
    from gt.runtime.ops import BY_NAME

    differentiable = set(
        "add sub mul div pow maximum minimum where clip remainder neg abs exp log sqrt "
        "sin cos tanh sigmoid relu erf cast copy matmul sum max min reshape transpose expand getitem "
        "setitem concat log_softmax cumsum log1p expm1 softplus floor ceil round trunc "
        "binary_cross_entropy prod cumprod cumprod_grad im2col col2im scatter_add scatter_reduce linalg_inv linalg_solve linalg_det "
        "linalg_slogdet linalg_cholesky linalg_solve_triangular linalg_qr linalg_eigh linalg_svd "
        "lgamma digamma polygamma erfinv standard_gamma asin acos atan asinh acosh atanh atan2 "
        "fmod logcumsumexp i0 i0e i1 i1e zeta gammainc gammaincc erfcx".split()
    )
    assert differentiable <= set(BY_NAME)
    assert {n for n in differentiable if BY_NAME[n].grad is None} == set()


def test_cumsum_gradient_is_a_suffix_sum_without_cancellation(conn):
    # d/dx_i of sum_j w_j * cumsum(x)_j is the sum of w from i on. Computed as the total minus the
    # running sum, the 1e8 swallows the small terms and element 1 would get 1.0 instead of 2.0
    # (a cumsum-and-exp parallel scan's gradients went wrong this way on CuPy).
    x = gt.zeros(3, requires_grad=True)
    w = gt.tensor([1e8, 1.0, 1.0])
    (x.cumsum(0) * w).sum().backward()
    assert x.grad.tolist() == [1e8, 2.0, 1.0]
