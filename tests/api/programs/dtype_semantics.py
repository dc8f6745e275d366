"""Dtype and numeric semantics that real code leans on without saying so: type promotion between
tensors, Python scalars and 0-d tensors; integer division and remainders of negatives; int8, uint8
and int16 wrap-around; float16 rounding in arithmetic and reductions; bool arithmetic and
counting; float-to-int casts; NaN and inf in reductions, sorting and clamping; isclose with
``equal_nan``; ``iinfo``/``finfo`` in quantisation and attention masks; integer ``pow`` and bit
twiddling; round half to even; and a uint8 image pipeline. Results that are dtypes are returned
as their names so that the dtype itself is compared, not only the values."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints


def _name(dtype) -> str:
    return str(dtype)


def _raises(fn, kind=RuntimeError) -> bool:
    try:
        fn()
    except kind:
        return True
    return False


@program
def type_promotion_with_scalars_and_zero_dim_tensors(torch):
    """The promotion rules mixed-precision and data code depends on: a Python float promotes an
    int tensor to the default dtype but never widens a float16 tensor; a 0-d tensor does not
    widen a dimensioned one of the same category; uint8 with int8 goes to int16; and the in-place
    ``+=`` that would need a wider result is refused. Also ``result_type``, ``promote_types``
    and ``can_cast`` as dtype-dispatching utilities call them."""
    i32 = torch.tensor([1, 2, 3], dtype=torch.int32)
    i64 = torch.tensor([4, 5, 6])
    u8 = torch.tensor([250, 3, 7], dtype=torch.uint8)
    s8 = torch.tensor([-1, 2, -3], dtype=torch.int8)
    h = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float16)
    f = torch.tensor([0.25, 0.5, 0.75])
    d0 = torch.tensor(2.0, dtype=torch.float64)
    l0 = torch.tensor(7)
    b = torch.tensor([True, False, True])
    mixes = {
        "int32_plus_pyfloat": i32 + 0.5,
        "int32_times_pyint": i32 * 1_000,
        "int32_plus_int64_0d": i32 + l0,
        "int32_plus_int64": i32 + i64,
        "uint8_plus_int8": u8 + s8,
        "uint8_plus_pyint": u8 + 10,
        "half_plus_float64_0d": h + d0,
        "half_times_pyfloat": h * 3.14159,
        "half_plus_float32": h + f,
        "float32_plus_float64_0d": f + d0,
        "float32_plus_float64": f + torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64),
        "int_0d_plus_float_0d": l0 + torch.tensor(0.5),
        "bool_plus_int32": b + i32,
        "bool_times_pyfloat": b * 0.5,
        "int64_plus_pybool": i64 + True,
        "int32_where_float": torch.where(b, i32, 0.5),
    }
    out = {k: v for k, v in mixes.items()}
    out["dtypes"] = [_name(v.dtype) for v in mixes.values()]
    acc = torch.zeros(3, dtype=torch.int64)
    refused = _raises(lambda: acc.add_(f))
    acc += i32  # widening an int32 into an int64 accumulator is fine
    fac = torch.zeros(3)
    fac += i64  # and an int into a float accumulator
    out.update({
        "inplace_float_into_int_refused": refused, "acc": acc, "fac": fac,
        "result_type": [_name(torch.result_type(i32, 2.5)), _name(torch.result_type(u8, s8)),
                        _name(torch.result_type(h, d0)), _name(torch.result_type(l0, 1.0)),
                        _name(torch.result_type(b, True)), _name(torch.result_type(i32, l0))],
        "promote_types": [_name(torch.promote_types(torch.uint8, torch.int8)),
                          _name(torch.promote_types(torch.float16, torch.bfloat16)),
                          _name(torch.promote_types(torch.int64, torch.float16)),
                          _name(torch.promote_types(torch.bool, torch.uint8)),
                          _name(torch.promote_types(torch.int16, torch.int32))],
        "can_cast": [torch.can_cast(torch.float32, torch.int32),
                     torch.can_cast(torch.int32, torch.float32),
                     torch.can_cast(torch.float64, torch.float16),
                     torch.can_cast(torch.int64, torch.uint8),
                     torch.can_cast(torch.bool, torch.int8),
                     torch.can_cast(torch.uint8, torch.bool)],
        "default_dtype": _name(torch.get_default_dtype()),
        "literal_dtypes": [_name(torch.tensor(3).dtype), _name(torch.tensor(3.0).dtype),
                           _name(torch.tensor(True).dtype), _name(torch.tensor([1, 2.0]).dtype),
                           _name(torch.arange(5).dtype), _name(torch.arange(0, 1, 0.25).dtype),
                           _name(torch.full((2,), 7).dtype), _name(torch.zeros(2).dtype)],
    })  # fmt: skip
    return out


@program
def index_arithmetic_with_floor_division_and_remainders(torch):
    """Flat indices to (row, col) with ``//`` and ``%``, circular shifts ``(i - k) % n`` that go
    negative, and the four rounding conventions side by side on negative operands: ``//`` and
    ``floor_divide`` (floor), ``div(rounding_mode="trunc")``, ``remainder`` (sign of the divisor)
    and ``fmod`` (sign of the dividend), for integers and floats, as positional-encoding and
    ring-buffer code writes them."""
    n_cols = 7
    flat = torch.tensor(ints(1, 60, 12))
    rows, cols = flat // n_cols, flat % n_cols
    roundtrip = rows * n_cols + cols
    n = 5
    pos = torch.arange(n)
    shifted = (pos - 2) % n
    back = (pos + torch.tensor([-7, -1, 0, 3, 11])) % n
    a = torch.tensor([-7, -6, -1, 0, 1, 6, 7])
    b = torch.tensor([2, -2, 3, -3, 4, -4, 5])
    x = torch.tensor([-7.5, -6.0, -1.25, 0.0, 1.25, 6.0, 7.5])
    return {
        "rows": rows, "cols": cols, "roundtrip": roundtrip, "shifted": shifted, "back": back,
        "floor": a // b, "floor_divide": torch.floor_divide(a, b),
        "trunc": torch.div(a, b, rounding_mode="trunc"),
        "floor_mode": torch.div(a, b, rounding_mode="floor"),
        "true_div": torch.div(a, b), "true_divide": torch.true_divide(a, 4),
        "remainder": torch.remainder(a, b), "mod_op": a % b, "fmod": torch.fmod(a, b),
        "scalar_remainder": a % 3, "scalar_fmod": torch.fmod(a, 3), "neg_divisor": a % -3,
        "rsub_floor": 10 // torch.tensor([3, -3, 4]),
        "float_floor": x // 2.0, "float_remainder": x % 2.0, "float_fmod": torch.fmod(x, 2.0),
        "float_trunc": torch.div(x, -2.0, rounding_mode="trunc"),
        "float_neg_mod": x % -2.5,
        "int32_stays": _name((a.to(torch.int32) // 2).dtype),
        "int_true_div_dtype": _name((a / 2).dtype),
        "angle_wrap": torch.remainder(torch.tensor([-3.5, 7.0, 3.2, -0.1]) + np.pi, 2 * np.pi)
        - np.pi,
    }  # fmt: skip


@program
def small_integer_overflow_wraps_around(torch):
    """The classic silent bugs of small integer dtypes: uint8 brightness that wraps past 255,
    subtracting uint8 frames (0 - 1 = 255), int8 products and negation of -128, an int16 running
    sum that overflows with ``cumsum(dtype=torch.int16)``, and the reductions that quietly widen
    (``sum``/``cumsum``/``prod`` of small ints give int64), int32 hash arithmetic that wraps."""
    rng = np.random.default_rng(4)
    frame_a = torch.tensor(rng.integers(0, 256, (4, 5)).astype(np.uint8))
    frame_b = torch.tensor(rng.integers(0, 256, (4, 5)).astype(np.uint8))
    brighter = frame_a + 60
    naive_diff = frame_a - frame_b
    abs_diff = (frame_a.to(torch.int16) - frame_b.to(torch.int16)).abs().to(torch.uint8)
    s8 = torch.tensor([-128, -100, -3, 0, 5, 100, 127], dtype=torch.int8)
    i16 = torch.tensor(rng.integers(1000, 9000, 12).astype(np.int16))
    h32 = torch.tensor(ints(5, 100_000, 6).astype(np.int32))
    mixed = h32 * 2_654_435 + 12345
    return {
        "brighter": brighter, "naive_diff": naive_diff, "abs_diff": abs_diff,
        "saturating": (frame_a.to(torch.int16) + 60).clamp(0, 255).to(torch.uint8),
        "u8_neg": -frame_a[0], "u8_mul": frame_a[0] * 3, "u8_inplace": frame_b[1].add_(200),
        "s8_mul": s8 * 2, "s8_neg": -s8, "s8_abs": s8.abs(), "s8_add": s8 + s8,
        "s8_sub_scalar": s8 - 100,
        "i16_cumsum_wraps": i16.cumsum(0, dtype=torch.int16), "i16_cumsum": i16.cumsum(0),
        "i16_sum": i16.sum(), "i16_sum_dtype": _name(i16.sum().dtype),
        "u8_sum": frame_a.sum(), "u8_sum_dim": frame_a.sum(1),
        "u8_sum_dtype": _name(frame_a.sum().dtype), "u8_cumsum_dtype": _name(frame_a.cumsum(0).dtype),
        "s8_prod": s8[2:5].prod(), "s8_prod_dtype": _name(s8.prod().dtype),
        "i16_mul": i16 * i16, "i32_hash": mixed, "i32_hash_dtype": _name(mixed.dtype),
        "u8_max_min": [frame_a.max(), frame_a.min()], "u8_max_dtype": _name(frame_a.max().dtype),
    }  # fmt: skip


@program
def float16_rounding_in_arithmetic_and_reductions(torch):
    """What float16 does to numbers: ``2048 + 1`` is 2048, values past 65504 overflow to inf,
    0.1 is stored as 0.0999755859375, sums and means of many halves are accumulated in float32
    and rounded once (a half accumulator would stall), ``cumsum`` rounds every running total, and
    the float32 -> half -> float32 round trip error that mixed-precision code checks."""
    tenths = torch.full((1000,), 0.1, dtype=torch.float16)
    ones_h = torch.ones(4096, dtype=torch.float16)
    big = torch.tensor([2048.0, 4096.0, 60000.0, 65504.0], dtype=torch.float16)
    x = torch.tensor(arr(1, 40))
    third_h = torch.tensor([1.0], dtype=torch.float16) / 3
    return {
        "h_add_one": big + 1, "h_double": big * 2, "h_max_ok": big.max(),
        "h_tenth": torch.tensor(0.1, dtype=torch.float16).float(),
        "h_sum_tenths": tenths.sum(), "h_mean_tenths": tenths.mean(),
        "h_sum_ones": ones_h.sum(), "h_sum_dtype": _name(tenths.sum().dtype),
        "h_cumsum_tail": tenths.cumsum(0)[-5:], "h_cumsum_ones_tail": ones_h.cumsum(0)[-3:],
        "h_third": third_h, "h_third_times_3": third_h * 3,
        "roundtrip_err_h": (x.half().float() - x).abs().max(), "h_values": x.half()[:8],
        "h_exp_overflow": torch.tensor([10.0, 11.0, 12.0], dtype=torch.float16).exp(),
        "h_from_big_float": torch.tensor([65519.0, 65520.0, 1e-8]).half(),
        "h_sum_float32_dtype": tenths.sum(dtype=torch.float32),
        "dtype_of_ops": [_name((big + 1).dtype), _name((big * 2.5).dtype),
                         _name((big.float() + big).dtype), _name((big + 1.5).dtype)],
    }  # fmt: skip


@program
def bool_masks_arithmetic_and_counting(torch):
    """Masks as classification metrics use them: ``(pred == y).sum()`` is an int64 count,
    ``.float().mean()`` an accuracy, a mask times a float a masked value, ``mask + mask`` and
    ``mask * mask`` stay bool (or and and), ``~`` inverts, ``-`` on bools is refused, and
    ``cumsum``/``count_nonzero``/``any``/``all`` of masks; precision and recall from the
    confusion counts."""
    logits = torch.tensor(arr(2, 24, 4))
    y = torch.tensor(ints(3, 4, 24))
    pred = logits.argmax(1)
    correct = pred == y
    pos_pred, pos_true = pred == 1, y == 1
    tp = (pos_pred & pos_true).sum()
    fp = (pos_pred & ~pos_true).sum()
    fn = (~pos_pred & pos_true).sum()
    valid = torch.tensor(np.arange(24) % 5 != 0)
    loss_each = torch.tensor(arr(4, 24)).abs()
    masked_mean = (loss_each * valid).sum() / valid.sum()
    return {
        "n_correct": correct.sum(), "n_correct_dtype": _name(correct.sum().dtype),
        "n_correct_item": correct.sum().item(), "accuracy": correct.float().mean(),
        "accuracy_py": correct.sum().item() / len(y), "tp_fp_fn": [tp, fp, fn],
        "precision": tp / (tp + fp).clamp(min=1), "recall": tp.float() / (tp + fn),
        "masked_mean": masked_mean, "masked_dtype": _name((loss_each * valid).dtype),
        "or_add": pos_pred + pos_true, "and_mul": pos_pred * pos_true,
        "or_add_dtype": _name((pos_pred + pos_true).dtype),
        "sub_refused": _raises(lambda: pos_pred - pos_true),
        "neg_refused": _raises(lambda: -pos_pred),
        "plus_one": valid + 1, "plus_one_dtype": _name((valid + 1).dtype),
        "cumsum": valid.cumsum(0), "cumsum_dtype": _name(valid.cumsum(0).dtype),
        "count_nonzero": torch.count_nonzero(correct), "per_class": torch.stack(
            [(y == c).sum() for c in range(4)]),
        "any_all": [bool(correct.any()), bool(correct.all()), valid.all().item()],
        "sum_dim": correct.reshape(4, 6).sum(1), "mean_of_int": valid.int().float().mean(),
        "xor": pos_pred ^ pos_true, "bool_to_int": valid.int()[:6], "bool_max": valid.max(),
        "sum_float_dtype": correct.sum(dtype=torch.float32),
    }  # fmt: skip


@program
def float_to_int_casts_and_round_trips(torch):
    """Casts the way pixel-coordinate and bucketing code does them: ``.long()`` truncates toward
    zero (so -1.7 becomes -1, not -2), ``floor().long()`` is what grid code wants, ``round()``
    first for nearest; large integers lose bits through float32; float64 -> float32 -> float64
    and float32 -> float16 -> float32 round trips; ``.to(dtype)`` with ``copy`` semantics."""
    x = torch.tensor([-2.9, -1.7, -1.5, -0.4, 0.0, 0.4, 1.5, 1.7, 2.9, 254.6])
    coords = torch.tensor(arr(5, 10, scale=3.0))
    W = 8
    ix = ((coords + 1) * (W - 1) / 2).floor().long().clamp(0, W - 1)
    big = torch.tensor([2**24, 2**24 + 1, 2**24 + 3, 2**31 - 1, 2**40 + 1])
    d = torch.tensor(np.array([0.1, 1 / 3, 1e-50, 1e300, 123456789.123456789]))
    same = x.to(torch.float32)
    copied = x.to(torch.float32, copy=True)
    return {
        "long": x.long(), "int": x.int(), "int16": x.to(torch.int16), "floor_long": x.floor().long(),
        "round_long": x.round().long(), "ceil_int": x.ceil().int(),
        "u8": x.abs().to(torch.uint8), "to_bool": x.bool(), "ix": ix,
        "big_to_f32": big.float(), "big_back": big.float().long(), "big_to_f64_back": big.double().long(),
        "d_f32": d.float(), "d_roundtrip": d.float().double(), "d_roundtrip_err": d.float().double() - d,
        "f16_roundtrip": x.half().float(), "int_to_half": torch.arange(2040, 2056).half(),
        "same_is_self": same is x, "copied_is_self": copied is x,
        "to_other": x.to(torch.tensor([1], dtype=torch.int32)),
        "type_str": x.type(torch.int64).dtype == torch.int64,
        "dtypes": [_name(x.long().dtype), _name(x.half().dtype), _name(x.double().dtype),
                   _name(x.to(torch.int16).dtype), _name(x.type_as(big).dtype)],
        "is_floating": [x.is_floating_point(), big.is_floating_point(),
                        torch.is_floating_point(x.half())],
    }  # fmt: skip


@program
def nan_and_inf_in_reductions_sorting_and_clamping(torch):
    """NaN and inf where they are easy to forget: ``max``/``min``/``amax``/``argmax`` propagate
    NaN, ``sort`` and ``topk`` put NaN above every number, ``clamp`` lets NaN through,
    ``maximum`` propagates it where ``fmax`` ignores it, ``nansum``/``nanmean`` skip it,
    ``nan_to_num`` maps inf to the dtype's extremes, and a NaN-guarded loss is masked before
    averaging."""
    nan, inf = float("nan"), float("inf")
    v = torch.tensor([3.0, nan, -1.0, inf, 0.5, -inf, 2.0])
    rows = torch.tensor([[1.0, nan, 3.0], [4.0, 5.0, -inf], [inf, 0.0, 1.0]])
    w = torch.tensor([1.0, 2.0, nan, -inf, 5.0, nan, 0.0])
    s = torch.sort(v)
    sd = torch.sort(v, descending=True)
    finite = torch.isfinite(v)
    return {
        "max": v.max(), "min": v.min(), "amax_rows": rows.amax(1), "amin_rows": rows.amin(1),
        "argmax": v.argmax(), "argmin": v.argmin(), "row_max": rows.max(1),
        "argmax_rows": rows.argmax(1),
        "sorted": s.values, "sort_idx": s.indices, "sorted_desc": sd.values,
        "sort_desc_idx": sd.indices, "topk": v.topk(3), "topk_small": v.topk(2, largest=False),
        "clamp": v.clamp(-1.0, 2.0), "clamp_min": v.clamp(min=0.0),
        "maximum": torch.maximum(v, w), "minimum": torch.minimum(v, w),
        "fmax": torch.fmax(v, w), "fmin": torch.fmin(v, w),
        "nansum": torch.nansum(v[finite | v.isnan()]), "nanmean": w.nanmean(),
        "nan_to_num": torch.nan_to_num(v), "nan_to_num_set": torch.nan_to_num(v, nan=0.0,
                                                                               posinf=1e3, neginf=-1e3),
        "masked_mean": v[finite].mean(), "isnan": v.isnan(), "isinf": v.isinf(),
        "isposinf": torch.isposinf(v), "isneginf": torch.isneginf(v),
        "sum": v.sum(), "inf_minus_inf": v[3] + v[5], "zero_times_inf": 0.0 * v[3],
        "max_dim_nan_row": rows.max(0).values, "cummax": torch.cummax(w, 0).values,
        "relu_nan": torch.relu(v), "sign": torch.sign(v),
        "logsumexp_inf": torch.logsumexp(torch.tensor([-inf, -inf]), 0),
    }  # fmt: skip


@program
def isclose_allclose_for_test_assertions(torch):
    """Tolerance checks as unit tests write them: ``isclose`` with ``rtol``/``atol`` (relative to
    the second argument), NaN unequal unless ``equal_nan=True``, infinities equal only to
    themselves, integer tensors compared exactly, and ``allclose`` over a whole result; the
    tolerance rule checked against its definition."""
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([1.0, 1.0001, 100.0, nan, inf, -inf, 0.0, 1e-9])
    b = torch.tensor([1.0, 1.0, 100.01, nan, inf, inf, 1e-9, 0.0])
    ref = torch.tensor(arr(6, 12))
    noisy = ref + torch.tensor(arr(7, 12, scale=1e-6))
    i = torch.tensor([1, 2, 3])
    rule = (a - b).abs() <= 1e-8 + 1e-5 * b.abs()
    return {
        "default": torch.isclose(a, b), "equal_nan": torch.isclose(a, b, equal_nan=True),
        "loose": torch.isclose(a, b, rtol=1e-3, atol=1e-6),
        "asym": [torch.isclose(torch.tensor(1.0), torch.tensor(1.1), rtol=0.1, atol=0.0).item(),
                 torch.isclose(torch.tensor(1.1), torch.tensor(1.0), rtol=0.1, atol=0.0).item()],
        "rule": rule, "ints": torch.isclose(i, torch.tensor([1, 3, 3])),
        "allclose": [torch.allclose(ref, noisy), torch.allclose(ref, noisy, rtol=0, atol=1e-8),
                     torch.allclose(a, a), torch.allclose(a, a, equal_nan=True),
                     torch.allclose(ref, noisy.double().float())],
        "equal": [torch.equal(ref, ref.clone()), torch.equal(a, a), torch.equal(i, i.clone())],
        "eq_nan": a == a, "ne_nan": a != a,
        "allclose_type": type(torch.allclose(ref, noisy)).__name__,
    }  # fmt: skip


@program
def iinfo_finfo_in_quantisation_and_attention_masks(torch):
    """``iinfo`` and ``finfo`` where real code reads them: symmetric int8 quantisation with
    ``scale = absmax / iinfo(int8).max`` and a clamp to ``[min, max]``; an attention mask filled
    with ``finfo(dtype).min`` (as transformer libraries do) so fully masked positions get zero
    weight without NaN; ``finfo.eps`` as a safe division floor; and the fields themselves."""
    x = torch.tensor(arr(8, 6, 16, scale=2.0))
    qinfo = torch.iinfo(torch.int8)
    scale = x.abs().amax(dim=1, keepdim=True) / qinfo.max
    q = torch.clamp(torch.round(x / scale), qinfo.min, qinfo.max).to(torch.int8)
    deq = q.float() * scale
    scores = torch.tensor(arr(9, 2, 4, 4))
    mask = torch.tensor(np.triu(np.ones((4, 4), dtype=bool), 1))
    masked = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    attn = masked.softmax(-1)
    hs = scores.half()
    attn_h = hs.masked_fill(mask, torch.finfo(hs.dtype).min).float().softmax(-1)
    denom = torch.tensor([0.0, 1e-12, 2.0])
    safe = torch.tensor([1.0, 1.0, 1.0]) / denom.clamp(min=torch.finfo(torch.float32).eps)

    def fi(dt):
        f = torch.finfo(dt)
        return [f.bits, f.eps, f.max, f.min, f.tiny, f.smallest_normal, f.resolution]

    def ii(dt):
        i = torch.iinfo(dt)
        return [i.bits, i.min, i.max]

    return {
        "q": q, "deq_err": (deq - x).abs().max(), "scale": scale.squeeze(1),
        "attn": attn, "attn_h": attn_h, "masked_row0": masked[0, 0],
        "safe": safe, "eps_added": 1.0 + torch.finfo(torch.float32).eps / 2 == 1.0,
        "finfo_f32": fi(torch.float32), "finfo_f64": fi(torch.float64),
        "finfo_f16": fi(torch.float16), "finfo_bf16": fi(torch.bfloat16),
        "iinfo": [ii(torch.int8), ii(torch.uint8), ii(torch.int16), ii(torch.int32),
                  ii(torch.int64)],
        "finfo_default": torch.finfo().eps, "finfo_dtype": str(torch.finfo(torch.float16).dtype),
        "iinfo_dtype": str(torch.iinfo(torch.int16).dtype),
        "max_plus_one_wraps": torch.tensor([qinfo.max], dtype=torch.int8) + 1,
    }  # fmt: skip


@program
def integer_reductions_and_true_division(torch):
    """Class-frequency weighting as training scripts compute it from integer labels: ``bincount``
    and ``sum`` work on int64 but ``mean`` refuses an integer tensor (the error users hit), so the
    counts are divided (``/`` is true division, int / int gives float32) or cast first; ``median``
    and ``mode`` of ints stay int; ``mean(dtype=...)``; inverse-frequency weights fed to
    ``cross_entropy``."""
    y = torch.tensor(ints(10, 5, 40))
    counts = torch.bincount(y, minlength=5)
    freq = counts / counts.sum()
    weights = counts.sum() / (len(counts) * counts)
    logits = torch.tensor(arr(11, 40, 5))
    loss_w = torch.nn.functional.cross_entropy(logits, y, weight=weights)
    mean_refused = _raises(lambda: y.mean())
    std_refused = _raises(lambda: y.std())
    return {
        "counts": counts, "freq": freq, "freq_dtype": _name(freq.dtype), "weights": weights,
        "loss_w": loss_w, "mean_refused": mean_refused, "std_refused": std_refused,
        "mean_float": y.float().mean(), "mean_dtype_arg": y.mean(dtype=torch.float64),
        "sum": y.sum(), "sum_dim": y.reshape(4, 10).sum(1), "median": y.median(),
        "median_dtype": _name(y.median().dtype), "mode": torch.mode(y).values,
        "true_divide": torch.true_divide(counts, 3), "div_scalar": counts / 4,
        "div_int32": counts.int() / counts.int().max(), "div_dtype": _name((counts.int() / 2).dtype),
        "floor_div": counts // 3, "item_div": counts.sum().item() / 3,
        "int_div_zero": counts[:2] / 0, "max_over_len": y.max().item() / len(y),
        "prod": torch.tensor([2, 3, 4], dtype=torch.int32).prod(),
        "float_mean_of_bool": (y == 2).float().mean(),
    }  # fmt: skip


@program
def pow_with_integer_exponents_and_negative_bases(torch):
    """Polynomial features and power laws: an int tensor squared stays int, ``2 ** t`` of an int
    tensor is int while ``2.0 ** t`` is float, negative integer exponents of ints are refused,
    negative float bases with integral exponents keep their sign while fractional exponents give
    NaN (and the ``sign * abs ** p`` workaround), ``0 ** 0 == 1``, and int32 powers that wrap."""
    n = torch.tensor([-3, -2, -1, 0, 1, 2, 3])
    x = torch.tensor([-2.0, -1.5, -0.5, 0.0, 0.5, 1.5, 2.0])
    feats = torch.stack([x**k for k in range(4)], dim=1)
    return {
        "sq": n**2, "sq_dtype": _name((n**2).dtype), "cube": n**3, "pow_fn": torch.pow(n, 3),
        "two_pow": 2**n.abs(), "two_pow_dtype": _name((2 ** n.abs()).dtype),
        "two_f_pow": 2.0**n, "two_f_pow_dtype": _name((2.0**n).dtype),
        "neg_exp_refused": _raises(lambda: n**-1), "neg_exp_float": n.float() ** -1,
        "int_half_pow": n**0.5, "int_half_pow_dtype": _name((n**0.5).dtype),
        "odd": x**3, "even": x**2.0, "frac": x**0.5, "cbrt_nan": x ** (1 / 3),
        "cbrt_signed": x.sign() * x.abs() ** (1 / 3), "zero_zero": torch.tensor([0.0, 0.0]) ** 0,
        "int_zero_zero": torch.tensor([0]) ** 0, "feats": feats, "tensor_exp": x ** n.float(),
        "int_tensor_exp": n.abs() ** torch.tensor([1, 2, 3, 0, 1, 2, 3]),
        "i32_wrap": torch.tensor([3, -3, 7], dtype=torch.int32) ** 21,
        "i64_big": torch.tensor([3, 10]) ** torch.tensor([39, 18]),
        "square": torch.square(n), "square_dtype": _name(torch.square(n).dtype),
        "float_pow_int_tensor": x.pow(torch.tensor(2)), "rpow_neg": (-2.0) ** torch.tensor([1.0, 2.0, 0.5]),
        "half_pow": torch.tensor([2.0, -3.0], dtype=torch.float16) ** 2,
    }  # fmt: skip


@program
def bit_flags_and_morton_codes(torch):
    """Integer bit manipulation as spatial hashing and flag handling write it: 10-bit Morton
    codes interleaving three coordinates with shift-and-mask spreading, decoding them back,
    permission flags with ``|``/``&``/``~``, arithmetic right shift of negatives, Gray codes,
    RGB565 packing of uint8 channels into int32, and a population count."""
    rng = np.random.default_rng(12)
    pts = torch.tensor(rng.integers(0, 1024, (10, 3)).astype(np.int64))

    def spread(v):
        v = (v | (v << 16)) & 0x030000FF
        v = (v | (v << 8)) & 0x0300F00F
        v = (v | (v << 4)) & 0x030C30C3
        return (v | (v << 2)) & 0x09249249

    def compact(v):
        v = v & 0x09249249
        v = (v | (v >> 2)) & 0x030C30C3
        v = (v | (v >> 4)) & 0x0300F00F
        v = (v | (v >> 8)) & 0x030000FF
        return (v | (v >> 16)) & 0x000003FF

    code = spread(pts[:, 0]) | (spread(pts[:, 1]) << 1) | (spread(pts[:, 2]) << 2)
    decoded = torch.stack([compact(code >> k) for k in range(3)], dim=1)
    READ, WRITE, EXEC = 1, 2, 4
    perms = torch.tensor([0, READ, READ | WRITE, 7, EXEC])
    granted = perms | WRITE
    revoked = perms & ~EXEC
    i = torch.arange(16)
    gray = i ^ (i >> 1)
    rgb = torch.tensor(rng.integers(0, 256, (6, 3)).astype(np.uint8))
    r, g, b = rgb.int().unbind(1)
    rgb565 = ((r >> 3) << 11) | ((g >> 2) << 5) | (b >> 3)
    pop = torch.zeros_like(code)
    c = code.clone()
    while bool((c != 0).any()):
        pop += c & 1
        c >>= 1
    neg = torch.tensor([-1, -2, -7, -1024, 5], dtype=torch.int32)
    return {
        "code": code, "decoded_ok": bool((decoded == pts).all()), "decoded": decoded,
        "sorted_by_code": pts[code.argsort()], "granted": granted, "revoked": revoked,
        "can_write": (perms & WRITE) != 0, "gray": gray, "rgb565": rgb565,
        "rgb565_dtype": _name(rgb565.dtype), "popcount": pop, "neg_shift": neg >> 1,
        "neg_shift_big": neg >> 4, "neg_lshift": neg << 3, "neg_and": neg & 0xFF,
        "invert": ~neg, "u8_invert": ~rgb[0], "u8_shift_out": rgb[0] << 4,
        "u8_xor": rgb[0] ^ rgb[1], "bool_xor": (i > 5) ^ (i % 2 == 0),
    }  # fmt: skip


@program
def round_half_to_even_and_decimals(torch):
    """Rounding as reporting and quantisation code meets it: ``round`` ties go to the even
    neighbour (2.5 -> 2, -0.5 -> -0), ``round(decimals=...)`` for reporting (including negative
    decimals to tens), ``x.round() == x.floor() + 0.5``-style expectations that fail, round in
    half precision, fake quantisation ``round(x / s) * s``, and the gap between ``round`` and
    Python's formatted strings."""
    ties = torch.tensor([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 4.5])
    prices = torch.tensor([1.005, 2.675, 0.125, 10.555, 123.456, -7.895])
    big = torch.tensor([1234.5, 15.0, 25.0, -35.0, 1250.0])
    x = torch.tensor(arr(13, 12))
    s = 0.1
    fq = torch.round(x / s) * s
    half_up = torch.floor(ties + 0.5)
    return {
        "ties": ties.round(), "half_up": half_up, "differ": ties.round() != half_up,
        "neg_zero_sign": torch.signbit(ties.round()),
        "decimals_2": torch.round(prices, decimals=2), "decimals_1": prices.round(decimals=1),
        "decimals_neg1": torch.round(big, decimals=-1), "decimals_neg2": big.round(decimals=-2),
        "f64_decimals": torch.round(prices.double(), decimals=2),
        "half_round": ties.half().round(), "fq": fq, "fq_levels": torch.round(x / s).long(),
        "formatted": [f"{v:.2f}" for v in prices.tolist()],
        "python_round": [round(v) for v in ties.tolist()],
        "item_round": round(prices[0].item(), 2), "int_round": torch.tensor([3, -4]).round(),
        "int_round_dtype": _name(torch.tensor([3, -4]).round().dtype),
        "inplace": x.clone().round_(decimals=1),
    }  # fmt: skip


@program
def uint8_image_pipeline_normalise_augment_and_back(torch):
    """A torchvision-style pipeline on a uint8 HWC image: ``permute`` to CHW, ``/ 255`` (true
    division to float32), normalise with ImageNet mean/std, a brightness/contrast jitter, clamp,
    denormalise, and back to uint8 both with ``round`` and with the truncating ``.to(uint8)``
    (they differ); also the uint8 shortcuts that wrap (``img + 40``) or promote (``img * 1.2``),
    a grayscale conversion with integer weights, and a histogram of the result."""
    rng = np.random.default_rng(14)
    hwc = torch.tensor(rng.integers(0, 256, (6, 5, 3)).astype(np.uint8))
    img = hwc.permute(2, 0, 1)
    x = img / 255
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    norm = (x - mean) / std
    jit = x * 1.3 + 0.05
    gm = jit.mean(dim=(1, 2), keepdim=True)
    jit = ((jit - gm) * 0.8 + gm).clamp(0.0, 1.0)
    back = (norm * std + mean).clamp(0, 1)
    out_round = (jit * 255).round().to(torch.uint8)
    out_trunc = (jit * 255).to(torch.uint8)
    gray = ((img[0].int() * 299 + img[1].int() * 587 + img[2].int() * 114) // 1000).to(torch.uint8)
    return {
        "x_dtype": _name(x.dtype), "x": x[:, :2, :2], "norm": norm, "back_err": (back - x).abs().max(),
        "restored": (back * 255).round().to(torch.uint8).equal(img), "jit": jit,
        "out_round": out_round, "out_trunc": out_trunc,
        "n_differ": (out_round != out_trunc).sum(), "wrap_add": img + 40,
        "promote_mul": img * 1.2, "promote_mul_dtype": _name((img * 1.2).dtype),
        "int_mul_dtype": _name((img * 2).dtype), "gray": gray,
        "hist": torch.bincount(gray.flatten().long() // 32, minlength=8),
        "hist_u8": torch.histc(gray.float(), bins=4, min=0, max=255),
        "contiguous": img.is_contiguous(), "float_div": img.float().div(255).sum(),
        "mean_pixel": img.float().mean(dim=(1, 2)), "max_pixel": img.amax(dim=(1, 2)),
        "to_chw_float": img.to(torch.float32)[1, 0],
    }  # fmt: skip
