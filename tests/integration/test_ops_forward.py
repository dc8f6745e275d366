"""Every op against NumPy: values, shapes and dtypes, with broadcasting and edge cases.

Each case is written twice, once with GT and once with NumPy (the oracle), over the same inputs.
The NumPy side states the dtype GT must produce where PyTorch's promotion differs from NumPy's
(``int / int`` is float32, ``int + 0.5`` is float32, ``int32.sum()`` is int64, ...). A subset also
runs on a CuPy worker (marked ``gpu``; skipped without a GPU).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import gt
import gt.nn.functional as F
from gt.runtime.launch import LocalCluster

F32, F64, I64 = np.float32, np.float64, np.int64
_erf = np.vectorize(math.erf)


def _inputs(specs: list, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for kind, shape in specs:
        if kind == "f":
            out.append(rng.standard_normal(shape).astype(F32))
        elif kind == "d":
            out.append(rng.standard_normal(shape))
        elif kind == "h":
            out.append(rng.standard_normal(shape).astype(np.float16))
        elif kind == "p":
            out.append(rng.uniform(0.5, 2.0, shape).astype(F32))
        elif kind == "i":
            out.append(rng.integers(-5, 5, shape).astype(I64))
        elif kind == "n":  # non-negative ints
            out.append(rng.integers(0, 4, shape).astype(I64))
        elif kind == "j":
            out.append(rng.integers(-5, 5, shape).astype(np.int32))
        elif kind == "b":
            out.append(rng.random(shape) > 0.5)
        else:
            raise ValueError(kind)
    return out


def _softmax(a, axis):
    e = np.exp(a - a.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def _log_softmax(a, axis):
    s = a - a.max(axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis, keepdims=True))


M = [("f", (2, 3))]
M34 = [("f", (3, 4))]
T3 = [("f", (2, 3, 4))]

# (id, input specs, gt function, numpy function)
CASES = [
    # ---------------------------------------------------------------- elementwise binary
    ("add_broadcast_row", [("f", (2, 3)), ("f", (3,))], lambda a, b: a + b, lambda a, b: a + b),
    (
        "add_broadcast_both",
        [("f", (4, 1, 3)), ("f", (2, 1))],
        lambda a, b: a + b,
        lambda a, b: a + b,
    ),
    ("sub_scalar_reflected", M, lambda a: 1 - a, lambda a: 1 - a),
    ("mul_zero_dim", [("f", (2, 3)), ("f", ())], lambda a, b: a * b, lambda a, b: a * b),
    ("div_reflected", [("p", (2, 3))], lambda a: 2 / a, lambda a: 2 / a),
    (
        "div_int_by_int_is_float32",
        [("i", (5,)), ("n", (5,))],
        lambda a, b: a / (b + 1),
        lambda a, b: (a / (b + 1)).astype(F32),
    ),
    (
        "int_plus_float_scalar_is_float32",
        [("i", (4,))],
        lambda a: a + 0.5,
        lambda a: (a + 0.5).astype(F32),
    ),
    ("int_times_int_scalar_stays_int", [("j", (4,))], lambda a: a * 3, lambda a: a * np.int32(3)),
    (
        "float32_plus_float64_is_float64",
        [("f", (3,)), ("d", (3,))],
        lambda a, b: a + b,
        lambda a, b: a + b,
    ),
    (
        "float16_times_scalar_stays_half",
        [("h", (3,))],
        lambda a: a * 2.5,
        lambda a: a * np.float16(2.5),
    ),
    ("pow_square", M, lambda a: a**2, lambda a: a**2),
    ("pow_fractional", [("p", (2, 3))], lambda a: a**0.5, lambda a: a**0.5),
    ("pow_negative", [("p", (2, 3))], lambda a: a**-1.5, lambda a: a**-1.5),
    ("pow_tensor_exponent", [("p", (2, 3)), ("f", (3,))], lambda a, b: a**b, lambda a, b: a**b),
    ("rpow", M, lambda a: 2**a, lambda a: 2**a),
    ("int_pow_int", [("i", (4,))], lambda a: a**3, lambda a: a**3),
    ("floor_divide", [("i", (6,))], lambda a: a // 2, lambda a: a // 2),
    ("remainder", [("i", (6,))], lambda a: a % 3, lambda a: a % 3),
    ("neg", M, lambda a: -a, lambda a: -a),
    ("maximum_broadcast", [("f", (2, 3)), ("f", (3,))], lambda a, b: gt.maximum(a, b), np.maximum),
    ("minimum_scalar", M, lambda a: a.minimum(0.1), lambda a: np.minimum(a, F32(0.1))),
    ("max_of_two_tensors", [("f", (3,)), ("f", (3,))], lambda a, b: a.max(b), np.maximum),
    # ---------------------------------------------------------------- comparisons and logic
    ("lt", [("f", (2, 3)), ("f", (3,))], lambda a, b: a < b, lambda a, b: a < b),
    ("le_scalar", M, lambda a: a <= 0, lambda a: a <= 0),
    ("gt_int_float", [("i", (4,)), ("f", (4,))], lambda a, b: a > b, lambda a, b: a > b),
    ("ge", M, lambda a: a >= 0.5, lambda a: a >= 0.5),
    ("eq", [("i", (6,)), ("i", (6,))], lambda a, b: a == b, lambda a, b: a == b),
    ("ne", [("i", (6,))], lambda a: a != 0, lambda a: a != 0),
    (
        "and_or_not",
        [("b", (5,)), ("b", (5,))],
        lambda a, b: (a & b) | ~a,
        lambda a, b: (a & b) | ~a,
    ),
    ("xor", [("b", (5,)), ("b", (5,))], lambda a, b: a ^ b, lambda a, b: a ^ b),
    # ---------------------------------------------------------------- unary math and activations
    ("abs", M, lambda a: abs(a), np.abs),
    ("exp", M, lambda a: a.exp(), np.exp),
    ("log", [("p", (2, 3))], lambda a: a.log(), np.log),
    ("sqrt", [("p", (2, 3))], lambda a: a.sqrt(), np.sqrt),
    ("sin", M, lambda a: a.sin(), np.sin),
    ("cos", M, lambda a: gt.cos(a), np.cos),
    ("exp_of_int_is_float32", [("i", (4,))], lambda a: a.exp(), lambda a: np.exp(a).astype(F32)),
    ("relu", M, lambda a: a.relu(), lambda a: np.maximum(a, 0)),
    ("sigmoid", M, lambda a: a.sigmoid(), lambda a: (1 / (1 + np.exp(-a))).astype(F32)),
    (
        "sigmoid_extreme",
        [("f", (4,))],
        lambda a: (a * 1000).sigmoid(),
        lambda a: (1 / (1 + np.exp(-a.astype(F64) * 1000))).astype(F32),
    ),
    ("tanh", M, lambda a: a.tanh(), np.tanh),
    ("gelu", M, lambda a: a.gelu(), lambda a: (0.5 * a * (1 + _erf(a / np.sqrt(2)))).astype(F32)),
    (
        "gelu_tanh",
        M,
        lambda a: gt.nn.functional.gelu(a, approximate="tanh"),
        lambda a: (0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))).astype(F32),
    ),
    ("silu", M, lambda a: a.silu(), lambda a: (a / (1 + np.exp(-a))).astype(F32)),
    ("softplus", M, lambda a: a.softplus(), lambda a: np.log1p(np.exp(a)).astype(F32)),
    ("clamp_both", M, lambda a: a.clamp(-0.5, 0.5), lambda a: np.clip(a, -0.5, 0.5)),
    ("clamp_min_only", M, lambda a: a.clamp(min=0.0), lambda a: np.maximum(a, 0)),
    ("clamp_tensor_bounds", [("f", (2, 3)), ("f", (3,))], lambda a, b: a.clamp(max=b), np.minimum),
    (
        "clamp_int_with_float_is_float32",
        [("i", (5,))],
        lambda a: a.clamp(-1.5, 2.5),
        lambda a: np.clip(a, -1.5, 2.5).astype(F32),
    ),
    (
        "where_tensors",
        [("b", (2, 3)), ("f", (2, 3)), ("f", (3,))],
        lambda c, a, b: gt.where(c, a, b),
        np.where,
    ),
    (
        "where_scalar",
        [("f", (2, 3))],
        lambda a: gt.where(a > 0, a, 0.0),
        lambda a: np.where(a > 0, a, F32(0)),
    ),
    (
        "where_method",
        [("f", (4,))],
        lambda a: a.where(a < 0, -1.0),
        lambda a: np.where(a < 0, a, F32(-1)),
    ),
    # ---------------------------------------------------------------- matmul
    ("matmul_2d", [("f", (3, 4)), ("f", (4, 5))], lambda a, b: a @ b, np.matmul),
    ("matmul_vec_mat", [("f", (4,)), ("f", (4, 5))], lambda a, b: a @ b, np.matmul),
    ("matmul_mat_vec", [("f", (3, 4)), ("f", (4,))], lambda a, b: a.matmul(b), np.matmul),
    ("matmul_dot", [("f", (4,)), ("f", (4,))], lambda a, b: a @ b, np.matmul),
    (
        "matmul_batched_broadcast",
        [("f", (2, 1, 3, 4)), ("f", (5, 4, 2))],
        lambda a, b: a @ b,
        np.matmul,
    ),
    (
        "matmul_batch_by_matrix",
        [("f", (2, 3, 4)), ("f", (4, 2))],
        lambda a, b: gt.matmul(a, b),
        np.matmul,
    ),
    ("matmul_float64", [("d", (2, 3)), ("d", (3, 2))], lambda a, b: a @ b, np.matmul),
    ("matmul_int", [("i", (2, 3)), ("i", (3, 2))], lambda a, b: a @ b, np.matmul),
    # ---------------------------------------------------------------- reductions
    ("sum_all", T3, lambda a: a.sum(), lambda a: a.sum()),
    (
        "sum_axis_tuple_keepdims",
        T3,
        lambda a: a.sum(axis=(0, 2), keepdims=True),
        lambda a: a.sum((0, 2), keepdims=True),
    ),
    (
        "sum_dim_negative_keepdim",
        T3,
        lambda a: a.sum(dim=-1, keepdim=True),
        lambda a: a.sum(-1, keepdims=True),
    ),
    ("sum_int32_is_int64", [("j", (3, 4))], lambda a: a.sum(1), lambda a: a.sum(1, dtype=I64)),
    ("sum_bool_counts", [("b", (10,))], lambda a: a.sum(), lambda a: a.sum(dtype=I64)),
    ("sum_empty_is_zero", [("f", (0, 3))], lambda a: a.sum(0), lambda a: a.sum(0)),
    ("mean_all", T3, lambda a: a.mean(), lambda a: a.mean(dtype=F32)),
    ("mean_axis", T3, lambda a: a.mean(1), lambda a: a.mean(1)),
    (
        "mean_int_with_a_dtype",
        [("i", (3, 4))],
        lambda a: a.mean(0, dtype=F32),
        lambda a: a.mean(0).astype(F32),
    ),
    ("max_all", T3, lambda a: a.max(), lambda a: a.max()),
    ("max_axis_values", T3, lambda a: a.max(axis=1).values, lambda a: a.max(1)),
    ("max_dim_values_and_indices", T3, lambda a: a.max(dim=-1).values, lambda a: a.max(-1)),
    (
        "max_dim_indices",
        T3,
        lambda a: a.max(1, keepdim=True).indices,
        lambda a: a.argmax(1)[:, None, :],
    ),
    ("min_axis_tuple", T3, lambda a: a.min(axis=(0, 1)), lambda a: a.min((0, 1))),
    (
        "amax_keepdim",
        T3,
        lambda a: a.amax((1, 2), keepdim=True),
        lambda a: a.max((1, 2), keepdims=True),
    ),
    ("argmax_flat", T3, lambda a: a.argmax(), lambda a: np.int64(a.argmax())),
    ("argmax_dim", T3, lambda a: a.argmax(dim=1), lambda a: a.argmax(1)),
    ("argmin_keepdim", T3, lambda a: a.argmin(-1, keepdim=True), lambda a: a.argmin(-1)[..., None]),
    ("var_unbiased", T3, lambda a: a.var(1), lambda a: a.var(1, ddof=1)),
    ("var_biased_all", T3, lambda a: a.var(unbiased=False), lambda a: a.var(dtype=F32)),
    (
        "var_correction_tuple",
        T3,
        lambda a: a.var(dim=(0, 2), correction=0, keepdim=True),
        lambda a: a.var((0, 2), keepdims=True),
    ),
    ("std", T3, lambda a: a.std(-1), lambda a: a.std(-1, ddof=1)),
    ("norm", T3, lambda a: a.norm(), lambda a: np.sqrt((a * a).sum())),
    ("softmax", T3, lambda a: a.softmax(-1), lambda a: _softmax(a, -1)),
    (
        "softmax_large_logits",
        [("f", (2, 5))],
        lambda a: (a * 1000).softmax(1),
        lambda a: _softmax(a * F32(1000), 1),
    ),
    ("log_softmax", T3, lambda a: a.log_softmax(1), lambda a: _log_softmax(a, 1)),
    ("logsumexp", T3, lambda a: a.logsumexp(2), lambda a: np.log(np.exp(a).sum(2))),
    ("cumsum", T3, lambda a: a.cumsum(1), lambda a: np.cumsum(a, 1)),
    ("cumsum_function_last", T3, lambda a: gt.cumsum(a, -1), lambda a: np.cumsum(a, -1)),
    ("cumsum_ints", [("i", (3, 4))], lambda a: a.cumsum(0), lambda a: np.cumsum(a, 0)),
    ("any_all", [("b", (3, 4))], lambda a: a.any(1) & ~a.all(1), lambda a: a.any(1) & ~a.all(1)),
    # ---------------------------------------------------------------- shapes
    ("reshape_infer", T3, lambda a: a.reshape(4, -1), lambda a: a.reshape(4, -1)),
    ("view_tuple", T3, lambda a: a.view((6, 4)), lambda a: a.reshape(6, 4)),
    ("flatten_middle", T3, lambda a: a.flatten(1), lambda a: a.reshape(2, 12)),
    ("flatten_all", T3, lambda a: gt.flatten(a), lambda a: a.reshape(-1)),
    ("transpose_default_last_two", T3, lambda a: a.transpose(), lambda a: a.swapaxes(-1, -2)),
    ("transpose_dims", T3, lambda a: a.transpose(0, 2), lambda a: a.swapaxes(0, 2)),
    ("T_matrix", M34, lambda a: a.T, lambda a: a.T),
    ("mT_batched_swaps_last_two", T3, lambda a: a.mT, lambda a: a.swapaxes(-1, -2)),
    ("T_batched_reverses_all_dims", T3, lambda a: a.permute(2, 1, 0), lambda a: a.T),
    ("permute", T3, lambda a: a.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    ("squeeze_all", [("f", (1, 3, 1))], lambda a: a.squeeze(), lambda a: a.squeeze()),
    ("squeeze_dim", [("f", (1, 3, 1))], lambda a: a.squeeze(-1), lambda a: a.squeeze(-1)),
    ("squeeze_non_one_is_noop", M, lambda a: a.squeeze(0), lambda a: a),
    ("unsqueeze_negative", M, lambda a: a.unsqueeze(-1), lambda a: a[..., None]),
    (
        "expand",
        [("f", (3, 1))],
        lambda a: a.expand(2, 3, 4),
        lambda a: np.broadcast_to(a, (2, 3, 4)),
    ),
    (
        "expand_keep_dim",
        [("f", (3, 1))],
        lambda a: a.expand(-1, 5),
        lambda a: np.broadcast_to(a, (3, 5)),
    ),
    ("repeat", M, lambda a: a.repeat(2, 3), lambda a: np.tile(a, (2, 3))),
    (
        "repeat_new_dims",
        [("f", (3,))],
        lambda a: a.repeat(2, 1, 2),
        lambda a: np.tile(a, (2, 1, 2)),
    ),
    ("split_size", [("f", (5, 2))], lambda a: a.split(2), lambda a: (a[:2], a[2:4], a[4:])),
    (
        "split_sections",
        [("f", (2, 6))],
        lambda a: a.split([1, 2, 3], dim=1),
        lambda a: (a[:, :1], a[:, 1:3], a[:, 3:]),
    ),
    ("chunk_uneven", [("f", (7,))], lambda a: a.chunk(3), lambda a: (a[:3], a[3:6], a[6:])),
    ("unbind", M, lambda a: a.unbind(1), lambda a: tuple(a[:, i] for i in range(3))),
    ("narrow", M34, lambda a: a.narrow(1, 1, 2), lambda a: a[:, 1:3]),
    (
        "cat_dim1",
        [("f", (2, 3)), ("f", (2, 1))],
        lambda a, b: gt.cat([a, b], dim=1),
        lambda a, b: np.concatenate([a, b], 1),
    ),
    (
        "cat_promotes",
        [("f", (2,)), ("i", (3,))],
        lambda a, b: gt.cat([a, b]),
        lambda a, b: np.concatenate([a, b]).astype(F32),
    ),
    (
        "stack_negative_dim",
        [("f", (2, 3)), ("f", (2, 3))],
        lambda a, b: gt.stack([a, b], -1),
        lambda a, b: np.stack([a, b], -1),
    ),
    # ---------------------------------------------------------------- indexing
    ("index_int", M34, lambda a: a[1], lambda a: a[1]),
    ("index_negative", M34, lambda a: a[-1, -2], lambda a: a[-1, -2]),
    ("index_slice_step", [("f", (7, 4))], lambda a: a[1::2, ::3], lambda a: a[1::2, ::3]),
    ("index_empty_slice", M34, lambda a: a[2:1], lambda a: a[2:1]),
    ("index_none_ellipsis", T3, lambda a: a[None, ..., 1], lambda a: a[None, ..., 1]),
    ("index_list_with_repeats", M34, lambda a: a[[2, 0, 2]], lambda a: a[[2, 0, 2]]),
    (
        "index_int_tensor",
        [("f", (3, 4)), ("n", (2, 2))],
        lambda a, i: a[:, i],
        lambda a, i: a[:, i],
    ),
    (
        "index_two_tensors",
        [("f", (4, 4)), ("n", (3,)), ("n", (3,))],
        lambda a, i, j: a[i, j],
        lambda a, i, j: a[i, j],
    ),
    ("index_bool_mask", M34, lambda a: a[a > 0], lambda a: a[a > 0]),
    ("index_bool_rows", [("f", (3, 4)), ("b", (3,))], lambda a, m: a[m], lambda a, m: a[m]),
    ("index_scalar_of_vector", [("f", (5,))], lambda a: a[3], lambda a: a[3]),
    (
        "index_select",
        [("f", (3, 4)), ("n", (5,))],
        lambda a, i: a.index_select(1, i),
        lambda a, i: a[:, i],
    ),
    (
        "gather_dim1",
        [("f", (3, 4)), ("n", (3, 2))],
        lambda a, i: a.gather(1, i),
        lambda a, i: np.take_along_axis(a, i, 1),
    ),
    (
        "gather_dim0",
        [("f", (4, 3)), ("n", (2, 3))],
        lambda a, i: gt.gather(a, 0, i),
        lambda a, i: np.take_along_axis(a, i, 0),
    ),
    ("flip", T3, lambda a: a.flip(0, -1), lambda a: np.flip(a, (0, -1))),
    (
        "masked_fill",
        [("f", (3, 4)), ("b", (4,))],
        lambda a, m: a.masked_fill(m, -1e9),
        lambda a, m: np.where(m, F32(-1e9), a),
    ),
    ("tril", [("f", (3, 4))], lambda a: a.tril(), np.tril),
    ("triu_offset", [("f", (2, 3, 4))], lambda a: a.triu(1), lambda a: np.triu(a, 1)),
    ("tril_int", [("i", (3, 3))], lambda a: a.tril(-1), lambda a: np.tril(a, -1)),
    # ---------------------------------------------------------------- stable math and rounding
    ("log1p_tiny", M, lambda a: (a * 1e-9).log1p(), lambda a: np.log1p(a * F32(1e-9))),
    ("expm1_tiny", M, lambda a: gt.expm1(a * 1e-9), lambda a: np.expm1(a * F32(1e-9))),
    (
        "softplus_large_values",
        M,
        lambda a: (a * 30).softplus(),
        lambda a: np.logaddexp(F32(0), a * F32(30)),
    ),
    (
        "softplus_beta",
        M,
        lambda a: a.softplus(beta=2.0),
        lambda a: np.logaddexp(F32(0), 2 * a) / F32(2),
    ),
    (
        "floor_ceil",
        M,
        lambda a: (a * 3).floor() + (a * 3).ceil(),
        lambda a: np.floor(a * 3) + np.ceil(a * 3),
    ),
    ("round_half_even", M, lambda a: (a * 4).round(), lambda a: np.rint(a * 4)),
    ("round_decimals", M, lambda a: a.round(decimals=2), lambda a: np.round(a, 2)),
    ("trunc", M, lambda a: (a * 3).trunc(), lambda a: np.trunc(a * 3)),
    ("round_int_is_identity", [("i", (4,))], lambda a: a.round(), lambda a: a),
    # ---------------------------------------------------------------- products, sorting
    ("prod_dim", T3, lambda a: a.prod(1), lambda a: np.prod(a, 1)),
    ("prod_all_keepdim", M, lambda a: a.prod(keepdim=True), lambda a: np.prod(a, keepdims=True)),
    ("prod_int_is_int64", [("j", (2, 3))], lambda a: a.prod(1), lambda a: np.prod(a, 1, dtype=I64)),
    ("cumprod", T3, lambda a: a.cumprod(-1), lambda a: np.cumprod(a, -1)),
    (
        "sort_values_indices",
        M34,
        lambda a: tuple(a.sort(dim=1)),
        lambda a: (np.sort(a, 1), np.argsort(a, 1, kind="stable")),
    ),
    (
        "argsort_descending",
        T3,
        lambda a: a.argsort(dim=0, descending=True),
        lambda a: np.argsort(-a, 0, kind="stable"),
    ),
    (
        "topk",
        M34,
        lambda a: tuple(a.topk(2)),
        lambda a: (-np.sort(-a, 1)[:, :2], np.argsort(-a, 1, kind="stable")[:, :2]),
    ),
    ("median", [("f", (3, 5))], lambda a: a.median(), lambda a: np.sort(a.ravel())[7]),
    ("roll", T3, lambda a: a.roll((1, -2), (0, 2)), lambda a: np.roll(a, (1, -2), (0, 2))),
    (
        "einsum_batched",
        [("f", (2, 3, 4)), ("f", (2, 4, 5))],
        lambda a, b: gt.einsum("bij,bjk->bki", a, b),
        lambda a, b: np.einsum("bij,bjk->bki", a, b),
    ),
    (
        "einsum_diag_and_outer",
        [("f", (3, 3)), ("f", (4,))],
        lambda a, b: gt.einsum("ii,j->ij", a, b),
        lambda a, b: np.einsum("ii,j->ij", a, b),
    ),
    (
        "scatter_add",
        [("f", (3, 4)), ("n", (3, 4))],
        lambda a, i: gt.zeros(3, 4).scatter_add(1, i, a),
        lambda a, i: _scatter_add_np(np.zeros((3, 4), F32), i, a),
    ),
    (
        "index_add",
        [("f", (3, 4)), ("n", (3,))],
        lambda a, i: gt.zeros(4, 4).index_add(0, i, a),
        lambda a, i: _index_add_np(np.zeros((4, 4), F32), i, a),
    ),
    ("nonzero", [("b", (3, 4))], lambda a: a.nonzero(), lambda a: np.argwhere(a)),
    (
        "masked_select",
        [("f", (3, 4)), ("b", (4,))],
        lambda a, m: a.masked_select(m),
        lambda a, m: a[np.broadcast_to(m, a.shape)],
    ),  # fmt: skip
    # ---------------------------------------------------------------- convolution and pooling
    (
        "conv2d_padded",
        [("f", (2, 3, 6, 5)), ("f", (4, 3, 3, 3))],
        lambda x, w: F.conv2d(x, w, padding=1),
        lambda x, w: _conv2d_np(x, w, padding=1),
    ),
    (
        "conv2d_stride_dilation_groups",
        [("f", (1, 4, 9, 8)), ("f", (6, 2, 2, 3))],
        lambda x, w: F.conv2d(x, w, stride=(2, 1), dilation=(1, 2), groups=2),
        lambda x, w: _conv2d_np(x, w, stride=(2, 1), dilation=(1, 2), groups=2),
    ),
    (
        "conv1d",
        [("f", (2, 3, 7)), ("f", (2, 3, 3))],
        lambda x, w: F.conv1d(x, w, stride=2),
        lambda x, w: _conv2d_np(x[:, :, None], w[:, :, None], stride=(1, 2))[:, :, 0],
    ),
    (
        "max_pool2d",
        [("f", (2, 3, 6, 7))],
        lambda x: F.max_pool2d(x, 2),
        lambda x: x[:, :, :6, :6].reshape(2, 3, 3, 2, 3, 2).max((3, 5)),
    ),
    (
        "avg_pool2d",
        [("f", (2, 3, 6, 6))],
        lambda x: F.avg_pool2d(x, 3),
        lambda x: x.reshape(2, 3, 2, 3, 2, 3).mean((3, 5)),
    ),
    (
        "interpolate_nearest",
        [("f", (1, 2, 3, 4))],
        lambda x: F.interpolate(x, scale_factor=2),
        lambda x: x.repeat(2, 2).repeat(2, 3),
    ),
]


def _scatter_add_np(out, idx, src):
    for i in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            out[i, idx[i, j]] += src[i, j]
    return out


def _index_add_np(out, idx, src):
    np.add.at(out, idx, src)
    return out


def _conv2d_np(x, w, stride=1, padding=0, dilation=1, groups=1):
    """A direct loop over output positions (the oracle for the im2col composition)."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = (h - dh * (kh - 1) - 1) // sh + 1, (wd - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, o, oh, ow), x.dtype)
    per = o // groups
    for oc in range(o):
        g = oc // per
        for r in range(oh):
            for q in range(ow):
                patch = x[:, g * cg : (g + 1) * cg, r * sh : r * sh + dh * (kh - 1) + 1 : dh,
                          q * sw : q * sw + dw * (kw - 1) + 1 : dw]  # fmt: skip
                out[:, oc, r, q] = (patch * w[oc]).sum((1, 2, 3))
    return out


GPU_CASES = {
    "add_broadcast_both",
    "div_int_by_int_is_float32",
    "gelu",
    "matmul_batched_broadcast",
    "softmax",
    "index_two_tensors",
    "sum_axis_tuple_keepdims",
    "where_tensors",
    "conv2d_stride_dilation_groups",
    "sort_values_indices",
    "argsort_descending",
    "softplus_large_values",
    "cumprod",
    "scatter_add",
}


def _check(case: tuple) -> None:
    _, specs, gt_fn, np_fn = case
    arrays = _inputs(specs)
    tensors = [gt.from_numpy(a) for a in arrays]
    got = gt_fn(*tensors)
    want = np_fn(*arrays)
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        pairs = list(zip(got, want))
    else:
        pairs = [(got, np.asarray(want))]
    for g, w in pairs:
        w = np.asarray(w)
        assert g.shape == w.shape, f"shape {g.shape} != {w.shape}"
        assert g.dtype == w.dtype.name, f"dtype {g.dtype} != {w.dtype.name}"
        data = g.numpy()
        assert data.shape == w.shape and data.dtype == w.dtype
        tol = 2e-3 if w.dtype == np.float16 else (1e-5 if w.dtype == np.float32 else 1e-12)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(data, w, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(data, w)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_op_matches_numpy(conn, case):
    _check(case)


@pytest.fixture(scope="module")
def gpu_conn():
    """A connection to a one-worker cluster whose worker runs CuPy."""
    import os

    old = os.environ.get("GT_BACKEND")
    os.environ["GT_BACKEND"] = "cupy"
    try:
        cluster = LocalCluster(workers=1)
    finally:
        if old is None:
            os.environ.pop("GT_BACKEND")
        else:
            os.environ["GT_BACKEND"] = old
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "case",
    [c for c in CASES if c[0] in GPU_CASES],
    ids=sorted(GPU_CASES, key=[c[0] for c in CASES].index),
)
def test_op_matches_numpy_on_cupy_worker(gpu_conn, case):
    gt.connect(gpu_conn.address, timeout=60)
    try:
        _check(case)
    finally:
        gt.disconnect()
