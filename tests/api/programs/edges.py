"""Stability at the edges: kinks at 0, saturation, ties, constant inputs, tiny and huge values."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr


def _grad(torch, fn, values, dtype=None):
    x = torch.tensor(np.asarray(values, dtype=dtype or np.float32), requires_grad=True)
    y = fn(x)
    y.sum().backward()
    return {"y": y, "grad": x.grad}


@program
def softplus_and_bce_logits_at_zero(torch):
    F = torch.nn.functional
    z = [0.0, 0.0, -1e-3, 25.0, -30.0]
    t = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0])
    return {
        "softplus": _grad(torch, F.softplus, z),
        "softplus_beta": _grad(torch, lambda x: F.softplus(x, beta=3.0, threshold=5.0), z),
        "bce_logits": _grad(torch, lambda x: F.binary_cross_entropy_with_logits(x, t), z),
        "bce_logits_pos_weight": _grad(
            torch,
            lambda x: F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor(3.0)),
            z,
        ),  # fmt: skip
        "logsigmoid": _grad(torch, F.logsigmoid, z),
    }


@program
def sigmoid_then_bce_saturated(torch):
    t = torch.tensor([0.0, 1.0, 1.0, 0.0])
    return {
        "bce": _grad(
            torch, lambda x: torch.nn.BCELoss()(torch.sigmoid(x), t), [40.0, -40.0, 20.0, -20.0]
        ),
        "bce_sum": _grad(
            torch,
            lambda x: torch.nn.functional.binary_cross_entropy(
                torch.sigmoid(x), t, reduction="sum"
            ),
            [17.0, -17.0, 0.0, 3.0],
        ),  # fmt: skip
        "exact_probs": _grad(
            torch,
            lambda x: torch.nn.functional.binary_cross_entropy(x, t, reduction="none"),
            [0.0, 1.0, 0.5, 0.999],
        ),  # fmt: skip
    }


@program
def norm_and_std_at_zero_and_constant(torch):
    return {
        "norm_zero": _grad(torch, lambda x: x.norm(), [0.0, 0.0, 0.0]),
        "norm_dim_zero_row": _grad(torch, lambda x: x.norm(dim=1), [[0.0, 0.0], [3.0, 4.0]]),
        "norm_p3_zero": _grad(torch, lambda x: x.norm(p=3), [0.0, 0.0]),
        "linalg_style": _grad(torch, lambda x: torch.norm(x, dim=-1, keepdim=True), [[0.0, 0.0]]),
        "std_const": _grad(torch, lambda x: x.std(), [2.0, 2.0, 2.0]),
        "std_dim_const": _grad(torch, lambda x: x.std(dim=0), [[1.0, 2.0], [1.0, 5.0]]),
        "var_const": _grad(torch, lambda x: x.var(), [1.5, 1.5]),
        "normalize_zero": _grad(
            torch, lambda x: torch.nn.functional.normalize(x, dim=1), [[0.0, 0.0], [1.0, 2.0]]
        ),  # fmt: skip
    }


@program
def max_min_ties_follow_the_index(torch):
    vals = [[1.0, 3.0, 3.0], [2.0, 2.0, 1.0], [5.0, 5.0, 5.0]]
    x = torch.tensor(vals, requires_grad=True)
    v, i = x.max(dim=1)
    w, j = torch.min(x, 1, keepdim=True)
    (v.sum() + 2 * w.sum()).backward()
    return {
        "values": v, "indices": i, "min_values": w, "min_indices": j, "grad": x.grad,
        "max_all": _grad(torch, lambda t: t.max(), vals),
        "amax_ties": _grad(torch, lambda t: t.amax(dim=1), vals),
        "maximum_ties": _grad(torch, lambda t: torch.maximum(t, torch.tensor(3.0)), vals),
        "argmax_first": torch.tensor(vals).argmax(dim=1),
    }  # fmt: skip


@program
def log1p_expm1_tiny_values(torch):
    tiny = [1e-10, -1e-8, 1e-5, 0.0, 3.0]
    return {"log1p": _grad(torch, torch.log1p, tiny), "expm1": _grad(torch, torch.expm1, tiny),
            "log1p_neg_one": torch.log1p(torch.tensor([-1.0]))}  # fmt: skip


@program
def large_logits_softmax_and_lse(torch):
    x = [[1000.0, 1000.0, -1000.0], [-1e4, 0.0, 1e4]]
    F = torch.nn.functional
    return {
        "softmax": _grad(torch, lambda t: torch.softmax(t, 1) * torch.tensor([1.0, 2.0, 3.0]), x),
        "log_softmax": _grad(torch, lambda t: F.log_softmax(t, -1)[:, 0], x),
        "logsumexp": _grad(torch, lambda t: torch.logsumexp(t, dim=1), x),
        "lse_neg_inf": torch.logsumexp(torch.tensor([[-np.inf, 0.0], [1.0, 2.0]]), 1),
        "cross_entropy": _grad(torch, lambda t: F.cross_entropy(t, torch.tensor([2, 0])), x),
    }


@program
def activation_kinks(torch):
    z = [-6.0, -1.0, 0.0, 1.0, 6.0]
    F = torch.nn.functional
    return {
        "relu": _grad(torch, torch.relu, z),
        "leaky": _grad(torch, lambda t: F.leaky_relu(t, 0.1), z),
        "elu": _grad(torch, lambda t: F.elu(t, alpha=0.5), z),
        "hardtanh": _grad(torch, F.hardtanh, [-1.0, 1.0, 0.5]),
        "relu6": _grad(torch, F.relu6, z),
        "clamp": _grad(torch, lambda t: t.clamp(-1.0, 1.0), [-1.0, 1.0, 2.0]),
        "abs": _grad(torch, torch.abs, z),
        "pow2": _grad(torch, lambda t: t**2, z),
        "sqrt_pos": _grad(torch, torch.sqrt, [0.25, 4.0]),
        "where_masked_log": _grad(
            torch, lambda t: torch.where(t > 0, t.log(), torch.zeros_like(t)), [-1.0, 2.0]
        ),  # fmt: skip
    }


@program
def rounding_and_integer_division(torch):
    x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.234567], requires_grad=True)
    r = x.round() + x.floor() + x.ceil() + x.trunc() + torch.round(x, decimals=2)
    r.sum().backward()
    a = torch.tensor([-7, 7, -7, 7])
    b = torch.tensor([2, -2, -2, 2])
    return {"rounded": [x.round(), x.floor(), x.ceil(), x.trunc(), torch.round(x, decimals=2),
                        x.frac()], "grad": x.grad, "floordiv": a // b, "rem": a % b,
            "div_floor": torch.div(a, b, rounding_mode="floor"), "true_div": a / b}  # fmt: skip


@program
def products_with_zeros(torch):
    return {
        "prod": _grad(torch, lambda t: t.prod(), [2.0, 0.0, 3.0]),
        "prod_two_zeros": _grad(torch, lambda t: t.prod(), [0.0, 0.0, 3.0]),
        "prod_dim": _grad(torch, lambda t: t.prod(dim=1), [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0]]),
        "cumprod": _grad(
            torch, lambda t: t.cumprod(0) * torch.tensor([1.0, 2.0, 3.0, 4.0]), [2.0, 0.0, 3.0, 4.0]
        ),  # fmt: skip
        "cumsum_grad": _grad(torch, lambda t: t.cumsum(-1).pow(2), [[1.0, -2.0, 3.0]]),
    }


@program
def sort_and_topk_stability(torch):
    x = torch.tensor([3.0, 1.0, 3.0, 2.0, 1.0], requires_grad=True)
    s = torch.sort(x, stable=True)
    sd = torch.sort(x, descending=True, stable=True)
    (s.values * torch.arange(5).float()).sum().backward()
    distinct = torch.tensor([0.3, 4.0, -1.0, 2.5, 9.0])
    return {"sorted": s.values, "idx": s.indices, "desc": sd.values, "desc_idx": sd.indices,
            "grad": x.grad, "argsort": torch.argsort(distinct, descending=True),
            "topk": distinct.topk(3), "topk_smallest": distinct.topk(2, largest=False)}  # fmt: skip


@program
def degenerate_statistics(torch):
    one = torch.tensor([4.0])
    return {"var_one": one.var(), "std_biased_one": one.std(unbiased=False),
            "mean_empty_is_nan": bool(torch.isnan(torch.tensor([]).mean())),
            "div_zero": torch.tensor([1.0, -1.0, 0.0]) / 0.0,
            "isinf": torch.isinf(torch.tensor([1.0, np.inf, -np.inf, np.nan])),
            "isfinite": torch.isfinite(torch.tensor([1.0, np.inf, np.nan])),
            "nan_to_max": torch.tensor([1.0, np.nan]).max()}  # fmt: skip


@program
def float64_precision_kept(torch):
    x = torch.tensor(arr(1, 5, dtype=np.float64) * 1e-3, requires_grad=True)
    y = (x.exp() - 1 - x).sum() / (x * x).sum()
    y.backward()
    return {"y": y, "grad": x.grad, "dtype_ok": y.dtype == torch.float64}


@program
def integer_and_bool_semantics(torch):
    a = torch.tensor([1, 2, 3], dtype=torch.int32)
    b = torch.tensor([True, False, True])
    return {"int_plus_float": a + 0.5, "int_mean": a.float().mean(), "int_sum": a.sum(),
            "bool_sum": b.sum(), "bool_and": b & torch.tensor([True, True, False]),
            "cumsum_int": a.cumsum(0), "int_times_bool": a * b, "max_int": a.max()}  # fmt: skip
