"""Integer and order-statistics numerics: feature hashing and bit packing with bitwise ops and
shifts, histogram binning with ``bucketize``/``searchsorted``, robust statistics with
``quantile``/``nanquantile`` (and a gradient through them), and ``unique`` for label encoding."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints


@program
def feature_hashing_and_bit_packing(torch):
    # Hash token ids into 2**10 buckets with an xor-shift mix (int64 wraps like C), pack 8 binary
    # features per byte, and count set bits with shifts and masks.
    tokens = torch.tensor(ints(1, 50_000, 6, 9))
    h = tokens * 2654435761
    h = h ^ (h >> 16)
    h = (h * 73244475) & 0xFFFFFFFF
    h = h ^ (h >> 13)
    bucket = h & 1023
    sign = ((h >> 11) & 1) * 2 - 1
    features = torch.tensor(np.random.default_rng(2).random((5, 16)) > 0.5)
    bits = features.to(torch.uint8).reshape(5, 2, 8)
    weights = torch.tensor(np.array([1 << i for i in range(8)], dtype=np.uint8))
    packed = (bits * weights).sum(-1).to(torch.uint8)
    unpacked = (packed.unsqueeze(-1) >> torch.arange(8, dtype=torch.uint8)) & 1
    pop = torch.zeros_like(packed)
    x = packed.clone()
    for _ in range(8):
        pop += x & 1
        x >>= 1
    small = torch.tensor(np.array([1, -2, 127, -128], dtype=np.int8))
    return {"bucket": bucket, "sign": sign, "packed": packed,
            "roundtrip": bool((unpacked.reshape(5, 16).bool() == features).all()),
            "popcount": pop, "not": ~packed, "int8_wrap": small & 255, "int8_or": small | 300,
            "int8_shift": small << 3, "past_width": torch.tensor([5, -8]) >> 70,
            "left_past_width": torch.tensor([5, -8]) << 64,
            "reflected": 3 << torch.tensor([0, 1, 4]), "mask_bool": (bucket > 500) & (sign > 0),
            "bool_shift": torch.tensor([True, False]) << 1, "bool_int": (bucket > 500) | 4,
            "xor_fn": torch.bitwise_xor(bucket, 0x155), "not_fn": torch.bitwise_not(bucket),
            "shift_fns": torch.bitwise_left_shift(bucket, 2) - torch.bitwise_right_shift(bucket, 1),
            "and_fn": torch.bitwise_and(bucket, torch.tensor(np.int64(0x3F)))}  # fmt: skip


@program
def histogram_binning_with_bucketize(torch):
    # Equal-width and quantile bins for a feature, counts per bin, and searchsorted over per-row
    # sorted tables (e.g. a cumulative distribution per class).
    edges = torch.linspace(-4.0, 4.0, 9)
    values = torch.cat([torch.tensor(arr(3, 200, scale=2.0)), edges])  # edges land on a side
    bins = torch.bucketize(values, edges)
    bins_right = torch.bucketize(values, edges, right=True)
    counts = torch.zeros(10, dtype=torch.int64).index_add(0, bins, torch.ones_like(bins))
    qedges = torch.quantile(values, torch.linspace(0.0, 1.0, 5)[1:-1])
    qbins = torch.bucketize(values, qedges, out_int32=True)
    cdf = torch.softmax(torch.tensor(arr(4, 3, 12)), dim=-1).cumsum(-1)
    u = torch.tensor(np.random.default_rng(5).random((3, 7)).astype(np.float32))
    draws = torch.searchsorted(cdf, u)
    ints_seq = torch.tensor([0, 2, 2, 2, 5, 9])
    probe = torch.tensor([[2, 3], [9, -1]])
    order = torch.tensor([1, 2, 3, 0])  # sorts unsorted (searchsorted needs that)
    unsorted = torch.tensor([30.0, 5.0, 10.0, 20.0])
    return {"bins": bins, "bins_right": bins_right, "counts": counts, "qedges": qedges,
            "qbins": qbins, "draws": draws,
            "left": torch.searchsorted(ints_seq, probe),
            "right": torch.searchsorted(ints_seq, probe, right=True),
            "side": torch.searchsorted(ints_seq, probe, side="right", out_int32=True),
            "scalar": torch.searchsorted(ints_seq, 2), "bucket_scalar": torch.bucketize(3, ints_seq),
            "sorter": torch.searchsorted(unsorted, torch.tensor([7.0, 25.0, 40.0]), sorter=order),
            "mixed": torch.searchsorted(ints_seq, torch.tensor([2.5, 4.0]))}  # fmt: skip


@program
def robust_statistics_with_quantiles(torch):
    # Median/IQR scaling, winsorizing at the 5th/95th percentiles, every interpolation mode, and
    # nanquantile over rows with missing values.
    x = torch.tensor(arr(6, 8, 25, scale=3.0))
    med = x.quantile(0.5, dim=1, keepdim=True)
    q1, q3 = torch.quantile(x, torch.tensor([0.25, 0.75]), dim=1, keepdim=True)
    scaled = (x - med) / (q3 - q1)
    lo, hi = x.quantile(torch.tensor([0.05, 0.95]))
    winsor = x.clamp(lo.item(), hi.item())
    modes = {m: torch.quantile(x, 0.37, dim=0, interpolation=m)
             for m in ("linear", "lower", "higher", "midpoint", "nearest")}  # fmt: skip
    missing = x.clone()
    missing[missing > 5.0] = float("nan")
    missing[2] = float("nan")
    return {"median": med, "iqr": q3 - q1, "scaled": scaled, "winsor": winsor,
            "modes": modes, "global": torch.quantile(x, 0.9), "keep_all": x.quantile(0.2, keepdim=True),
            "nan_propagates": missing.quantile(0.5, dim=1),
            "nanquantile": torch.nanquantile(missing, torch.tensor([0.1, 0.5, 1.0]), dim=1),
            "nan_methods": missing.nanquantile(0.3, dim=-1, interpolation="nearest"),
            "double": torch.quantile(x.double(), 0.123, dim=1)}  # fmt: skip


@program
def quantile_loss_gradients(torch):
    # A trimmed objective: the gradient of a quantile flows to the sorted neighbours it reads
    # (as through sort/gather), weighted by the interpolation.
    w = torch.tensor(arr(7, 4, 9), requires_grad=True)
    q = torch.tensor([0.1, 0.5, 0.9])
    spread = w.quantile(q, dim=1)
    loss = (spread[2] - spread[0]).pow(2).sum() + w.quantile(0.3, interpolation="midpoint")
    loss = loss + torch.nanquantile(w, 0.6, dim=0, interpolation="lower").sum()
    loss.backward()
    return {"loss": loss, "grad": w.grad}


@program
def label_encoding_with_unique(torch):
    # Encode string-like category ids as dense labels, count them, and rebuild the input.
    raw = torch.tensor(ints(8, 12, 5, 6) * 7 + 100)
    classes, labels, counts = torch.unique(raw, return_inverse=True, return_counts=True)
    plain = torch.unique(raw)
    floats = torch.unique(torch.tensor([2.5, -1.0, 2.5, 0.0, -1.0]), return_counts=True)
    flags = torch.unique(torch.tensor([True, False, True]))
    return {"classes": classes, "labels": labels, "counts": counts, "plain": plain,
            "rebuilt": bool((classes[labels] == raw).all()), "floats": floats, "flags": flags,
            "n_classes": int(classes.numel())}  # fmt: skip
