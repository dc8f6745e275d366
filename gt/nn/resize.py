"""``F.interpolate``: resizing the spatial dimensions of ``[N, C, *spatial]``, one dimension at a
time, with PyTorch's source coordinates and filters.

Every mode is a gather of input positions along one dimension, weighted and summed: ``nearest``
one tap, ``linear`` two, ``bicubic`` four (PyTorch's cubic convolution, ``A = -0.75``, positions
clamped at the borders), and with ``antialias=True`` as many as the filter covers, its support
widened by the downscaling factor and the weights normalized (PyTorch's and PIL's filters: the
triangle, and the cubic with ``A = -0.5``). ``area`` is adaptive average pooling. The taps and
weights are computed on the client from the sizes alone; the gradient comes from the gathers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from gt.errors import ShapeError
from gt.grad_graph import labels
from gt.ops.layout import keep_channels_last
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names

_LINEAR = ("linear", "bilinear", "trilinear")
_CUBIC_A = -0.75  # PyTorch's bicubic (without antialiasing)
_AA_CUBIC_A = -0.5  # PyTorch's antialiased bicubic (PIL's)


def _upsample_node(input: Tensor, *args: Any, mode: str = "nearest", **kwargs: Any) -> str | None:
    """PyTorch's node for ``interpolate``'s result (``area`` ends in an adaptive pool: kept)."""
    mode = args[2] if len(args) > 2 else mode
    kind = {"nearest": "Nearest", "nearest-exact": "NearestExact", "linear": "Linear",
            "bilinear": "Bilinear", "bicubic": "Bicubic", "trilinear": "Trilinear"}.get(mode)  # fmt: skip
    return None if kind is None else f"Upsample{kind}{input.ndim - 2}DBackward0"


@labels(_upsample_node)
def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:  # fmt: skip
    """Resize the spatial dimensions of ``[N, C, *spatial]``: ``"nearest"``, ``"nearest-exact"``,
    ``"linear"``/``"bilinear"``/``"trilinear"``, ``"bicubic"`` or ``"area"``, with ``antialias``
    for bilinear and bicubic downscaling (PyTorch's source coordinates, ``align_corners``
    included)."""
    spatial = input.ndim - 2
    if spatial < 1:
        raise ShapeError(
            f"interpolate: expected at least a 3-d input, got shape {list(input.shape)}"
        )
    wants = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}.get(mode)
    if wants is not None and input.ndim != wants:  # (PyTorch's: no mode of another rank)
        if mode == "bicubic":
            raise NotImplementedError(
                f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
                "the modes: nearest | linear | bilinear | bicubic | trilinear | area | "
                f"nearest-exact (got {mode})"
            )
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs {wants}D input")
    if antialias and (mode not in ("bilinear", "bicubic") or input.ndim != 4):
        raise ValueError(
            "Anti-alias option is restricted to bilinear and bicubic modes and requires a 4-D "
            "tensor as input"
        )
    if align_corners is not None and mode not in (*_LINEAR, "bicubic"):
        raise ValueError(
            "align_corners option can only be set with the interpolating modes: linear | "
            "bilinear | bicubic | trilinear"
        )
    ins = input.shape[2:]
    scales: list[float | None]
    if size is not None:
        outs = [int(s) for s in (size if isinstance(size, (tuple, list)) else [size] * spatial)]
        scales = [None] * spatial
    elif scale_factor is not None:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor] * spatial
        outs = [int(math.floor(n * float(f))) for n, f in zip(ins, sf)]
        scales = [None if recompute_scale_factor else float(f) for f in sf]
    else:
        raise ValueError("interpolate: either size or scale_factor should be defined")
    if len(outs) != spatial:
        raise ValueError(
            f"interpolate: size has {len(outs)} entries for {spatial} spatial dimensions"
        )
    if min(outs) <= 0 or min(ins) <= 0:
        raise RuntimeError(_bad_sizes(ins, outs))
    if mode == "area":
        from gt.nn.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d  # noqa: PLC0415, I001 - pooling imports the convolutions

        pools = {1: adaptive_avg_pool1d, 2: adaptive_avg_pool2d, 3: adaptive_avg_pool3d}
        return keep_channels_last(pools[spatial](input, outs), input)
    if input.dtype == "uint8" and mode not in ("nearest", "nearest-exact"):
        out = _uint8_resize(input, outs, scales, mode, bool(align_corners), antialias)
        return keep_channels_last(out if out is not input else input.clone(), input)
    # half precision is weighted and summed in float32 and rounded once (PyTorch's opmath)
    low = input.dtype in ("float16", "bfloat16") and mode not in ("nearest", "nearest-exact")
    out = input.float() if low else input
    for i, (n_in, n_out, sc) in enumerate(zip(ins, outs, scales)):
        idx, wgt = _taps(n_in, n_out, sc, mode, bool(align_corners), antialias)
        if low and wgt is not None and (mode == "bicubic" or spatial == 1) and not antialias:
            # PyTorch's bicubic and 1-d linear kernels compute their weights in half precision
            # (linear: lambda, then 1 - lambda, each rounded); bilinear and trilinear in float
            half = np.dtype(input.dtype)
            if mode == "linear":
                lam = wgt[:, 1].astype(half).astype(np.float64)
                wgt = np.stack([(1.0 - lam).astype(half).astype(np.float64), lam], 1)
            else:
                wgt = wgt.astype(half).astype(np.float64)
        out = _resample(out, 2 + i, idx, wgt)
    out = out.to(input.dtype) if low else out
    return keep_channels_last(out, input)  # (PyTorch keeps a channels-last input's layout)


def _bad_sizes(ins: tuple, outs: list) -> str:
    """PyTorch's message for an empty input or output size of ``interpolate``."""
    names = "DHW"[-len(ins) :]
    i = ", ".join(f"{a}: {n}" for a, n in zip(names, ins))
    o = ", ".join(f"{a}: {n}" for a, n in zip(names, outs))
    joint = " and" if len(ins) == 1 else ""
    return (
        f"Input and output sizes should be greater than 0, but got input ({i}){joint} output ({o})"
    )


def _uint8_resize(x: Tensor, outs: list[int], scales: list, mode: str, align_corners: bool,
                  antialias: bool) -> Tensor:  # fmt: skip
    """PyTorch's uint8 path for bilinear and bicubic resizing of images, as
    torchvision's ``resize`` uses it on uint8 tensors: PIL's separable passes, width first, then
    height (a dimension whose size does not change is skipped), each with 16-bit fixed-point
    weights, rounded and saturated back to uint8 between the passes."""
    if x.ndim != 4 or mode not in ("bilinear", "bicubic"):
        raise NotImplementedError(
            f"interpolate: uint8 input is supported for 'nearest', 'nearest-exact' and 4-d "
            f"'bilinear' and 'bicubic', got mode {mode!r} on a {x.ndim}-d input (convert it to "
            "float first)"
        )
    out = x
    for d in (3, 2):
        n_in, n_out = out.shape[d], outs[d - 2]
        if n_in == n_out:
            continue
        idx, wgt, precision = _uint8_taps(n_in, n_out, scales[d - 2], mode, align_corners,
                                          antialias)  # fmt: skip
        wide = out.to("int64")
        lead = (slice(None),) * d
        shape = [1] * out.ndim
        shape[d] = n_out
        acc = None
        for k in range(idx.shape[1]):
            w = out._upload(np.ascontiguousarray(wgt[:, k].reshape(shape)))
            term = wide[lead + (idx[:, k].tolist(),)] * w
            acc = term if acc is None else acc + term
        if precision > 0:
            acc = acc + (1 << (precision - 1))
        out = (acc >> precision).clamp(0, 255).to("uint8")
    return out


def _uint8_taps(n_in: int, n_out: int, scale: float | None, mode: str, align_corners: bool,
                antialias: bool) -> tuple[np.ndarray, np.ndarray, int]:  # fmt: skip
    """PyTorch's ``compute_index_ranges_int16_weights``: the filter's taps (PIL's triangle, its
    cubic with ``a = -0.5`` when antialiased, the clamped ``a = -0.75`` cubic otherwise), then
    scaled by ``2**precision`` (the most bits that keep the largest weight within int16) and
    rounded half away from zero."""
    interp, filt = (2, _triangle) if mode == "bilinear" else (4, _cubic(_AA_CUBIC_A))
    ratio = _ratio(n_in, n_out, scale, align_corners)
    if mode == "bicubic" and not antialias:
        idx, wgt = _clamped_cubic_taps(n_in, n_out, ratio, align_corners)
    else:
        idx, wgt = _filter_taps(n_in, n_out, ratio, interp, filt, align_corners, antialias)
    w_max = float(wgt.max()) if wgt.size else 0.0
    precision = 0
    for precision in range(22):  # noqa: B007 - the loop leaves the precision behind
        if int(0.5 + w_max * (1 << (precision + 1))) >= (1 << 15):
            break
    scaled = wgt * (1 << precision)
    return (
        idx,
        np.trunc(np.where(scaled < 0, scaled - 0.5, scaled + 0.5)).astype(np.int64),
        precision,
    )


def _clamped_cubic_taps(n_in: int, n_out: int, ratio: float, align_corners: bool
                        ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Bicubic without antialiasing (``a = -0.75``): the four taps around each source position,
    those beyond the border moved onto it (their weights added to the edge pixel's)."""
    cubic = _cubic(_CUBIC_A)
    idx = np.zeros((n_out, 4), np.int64)
    wgt = np.zeros((n_out, 4), np.float64)
    for i in range(n_out):
        src = ratio * i if align_corners else ratio * (i + 0.5) - 0.5
        base = math.floor(src)
        t = src - base
        taps: dict[int, float] = {}
        for k, w in enumerate((cubic(t + 1.0), cubic(t), cubic(1.0 - t), cubic(2.0 - t))):
            p = min(max(base - 1 + k, 0), n_in - 1)
            taps[p] = taps.get(p, 0.0) + float(w)
        lo = min(taps)
        for p, w in taps.items():
            idx[i, p - lo] = p
            wgt[i, p - lo] = w
    return idx, wgt


def _filter_taps(n_in: int, n_out: int, ratio: float, interp: int, filt: Callable,
                 align_corners: bool, antialias: bool) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The filter's taps over the input positions it covers, normalized (PyTorch's
    ``_compute_indices_min_size_weights_aa``, also used without antialiasing for uint8)."""
    if antialias:
        support = interp * 0.5 * ratio if ratio >= 1.0 else interp * 0.5
        max_taps = int(math.ceil(support)) * 2 + 1
    else:
        support = interp * 0.5
        max_taps = interp
    delta = 0.5 if align_corners and not antialias else 0.0
    inv = 1.0 / ratio if ratio >= 1.0 and antialias else 1.0
    idx = np.zeros((n_out, max_taps), np.int64)
    wgt = np.zeros((n_out, max_taps), np.float64)
    for i in range(n_out):
        center = ratio * (i + 0.5 - delta)
        lo = max(int(center - support + 0.5 + delta), 0)
        size = min(max(min(int(center + support + 0.5 + delta), n_in) - lo, 0), max_taps)
        w = filt((np.arange(size) + lo - center + 0.5 - delta) * inv)
        total = w.sum()
        idx[i, :size] = np.arange(lo, lo + size)
        wgt[i, :size] = w / total if total != 0.0 else w
    return idx, wgt


def _ratio(n_in: int, n_out: int, scale: float | None, align_corners: bool) -> float:
    """PyTorch's ``area_pixel_compute_scale``: input positions per output position."""
    if align_corners:
        return (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    return 1.0 / scale if scale else n_in / n_out


def _taps(n_in: int, n_out: int, scale: float | None, mode: str, align_corners: bool,
          antialias: bool) -> tuple[np.ndarray, np.ndarray | None]:  # fmt: skip
    """Input positions ``[n_out, K]`` and their weights (``None``: one tap of weight 1)."""
    dst = np.arange(n_out, dtype=np.float64)
    ratio = _ratio(n_in, n_out, scale, align_corners)
    if mode in ("nearest", "nearest-exact"):
        ratio = (1.0 / scale) if scale else n_in / n_out
        src = np.floor(dst * ratio) if mode == "nearest" else np.floor((dst + 0.5) * ratio)
        return np.minimum(src.astype(np.int64), n_in - 1)[:, None], None
    if antialias:
        filt, size = (_triangle, 2) if mode == "bilinear" else (_cubic(_AA_CUBIC_A), 4)
        return _antialias_taps(n_in, n_out, ratio, filt, size)
    if mode in _LINEAR:
        if align_corners:
            src = dst * ratio
        else:
            src = np.maximum((dst + 0.5) * ratio - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        frac = src - i0
        return np.stack([i0, np.minimum(i0 + 1, n_in - 1)], 1), np.stack([1.0 - frac, frac], 1)
    if mode == "bicubic":
        src = dst * ratio if align_corners else (dst + 0.5) * ratio - 0.5  # not clamped
        base = np.floor(src)
        t = src - base
        cubic = _cubic(_CUBIC_A)
        wgt = np.stack([cubic(t + 1.0), cubic(t), cubic(1.0 - t), cubic(2.0 - t)], 1)
        idx = base.astype(np.int64)[:, None] + np.arange(-1, 3)[None, :]
        return np.clip(idx, 0, n_in - 1), wgt
    raise NotImplementedError(f"interpolate: mode {mode!r} is not supported")


def _triangle(x: np.ndarray) -> np.ndarray:
    return np.maximum(1.0 - np.abs(x), 0.0)


def _cubic(a: float) -> Callable[[np.ndarray], np.ndarray]:
    """Keys' cubic convolution kernel with parameter ``a``."""

    def k(x: np.ndarray) -> np.ndarray:
        x = np.abs(x)
        near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        far = (((x - 5.0) * x + 8.0) * x - 4.0) * a
        return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))

    return k


def _antialias_taps(n_in: int, n_out: int, ratio: float, filt: Callable, size: int
                    ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """PyTorch's antialiased weights: the filter stretched by the downscaling factor, over the
    input positions it covers, normalized to sum to one (unused taps: position 0, weight 0)."""
    support = size * 0.5 * ratio if ratio >= 1.0 else size * 0.5
    inv = 1.0 / ratio if ratio >= 1.0 else 1.0
    rows = []
    for i in range(n_out):
        center = ratio * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), n_in)
        pos = np.arange(lo, hi)
        w = filt((pos - center + 0.5) * inv)
        total = w.sum()
        rows.append((pos, w / total if total != 0.0 else w))
    k = max(1, max(len(p) for p, _ in rows))
    idx = np.zeros((n_out, k), np.int64)
    wgt = np.zeros((n_out, k), np.float64)
    for i, (p, w) in enumerate(rows):
        idx[i, : len(p)], wgt[i, : len(w)] = p, w
    return idx, wgt


def _resample(x: Tensor, d: int, idx: np.ndarray, wgt: np.ndarray | None) -> Tensor:
    """``sum_k x[..., idx[:, k], ...] * wgt[:, k]`` along dimension ``d``."""
    lead = (slice(None),) * d
    if wgt is None:
        return x[lead + (idx[:, 0].tolist(),)]
    shape = [1] * x.ndim
    shape[d] = idx.shape[0]
    out = None
    for k in range(idx.shape[1]):
        w = x._upload(np.ascontiguousarray(wgt[:, k].reshape(shape), dtype=np.dtype(x.dtype)))
        term = x[lead + (idx[:, k].tolist(),)] * w
        out = term if out is None else out + term
    return out


def upsample(input: Tensor, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
             align_corners: bool | None = None) -> Tensor:  # fmt: skip
    """The deprecated spelling of :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_bilinear(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` in ``bilinear`` mode with ``align_corners=True``."""
    return interpolate(input, size, scale_factor, "bilinear", True)


def upsample_nearest(input: Tensor, size: Any = None, scale_factor: Any = None) -> Tensor:
    """Deprecated: :func:`interpolate` in ``nearest`` mode."""
    return interpolate(input, size, scale_factor, "nearest")


__all__ = ["interpolate", "upsample", "upsample_bilinear", "upsample_nearest"]
