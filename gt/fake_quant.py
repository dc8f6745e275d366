"""``torch.fake_quantize_per_tensor_affine`` and ``torch.fake_quantize_per_channel_affine``: the
quantise-dequantise step of quantisation-aware training, composed from GT's primitives.

As PyTorch's kernels compute it: ``q = clamp(round(x * (1 / scale)) + zero_point, quant_min,
quant_max)`` with ``1 / scale`` taken in float32 and ties rounded to even, then
``(q - zero_point) * scale``. The gradient is the straight-through estimator: ``x``'s gradient
passes where ``round(x / scale) + zero_point`` lies within ``[quant_min, quant_max]`` and is zero
outside (PyTorch's mask); ``scale`` and ``zero_point`` get none. Imported by :mod:`gt._api` only.
"""

from __future__ import annotations

from typing import Any

from gt import shapes as S
from gt.ops.base import TensorBase


def _check_range(quant_min: int, quant_max: int, name: str) -> None:
    if quant_min > quant_max:
        raise ValueError(f"{name}: quant_min ({quant_min}) must not exceed quant_max ({quant_max})")


def _quantise(x: Any, inv_scale: Any, scale: Any, zero_point: Any, qmin: int, qmax: int) -> Any:
    base = x.detach()
    q = (base * inv_scale).round() + zero_point
    inside = ((q >= qmin) & (q <= qmax)).to(x.dtype)
    value = (q.clamp(qmin, qmax) - zero_point) * scale
    if not x.requires_grad:
        return value.to(x.dtype)
    # the value of ``value``, the gradient of ``x`` where it was not clamped (straight through)
    return value.to(x.dtype) + (x - base) * inside


def _float32(v: Any, like: Any) -> Any:
    """``v`` (a number or a tensor) as float32 on ``like``'s worker, as PyTorch's kernels take it."""
    if isinstance(v, TensorBase):
        return v.detach().to("float32")
    return like.new_tensor(float(v), dtype="float32")


def fake_quantize_per_tensor_affine(
    input: Any,  # noqa: A002 - PyTorch's name
    scale: Any,
    zero_point: Any,
    quant_min: int,
    quant_max: int,
) -> Any:
    """``input`` quantised to the integers ``[quant_min, quant_max]`` with one ``scale`` and
    ``zero_point`` (numbers or one-element tensors) and dequantised again, in ``input``'s dtype."""
    _check_range(quant_min, quant_max, "fake_quantize_per_tensor_affine")
    if input.dtype not in S.FLOAT_DTYPES:
        raise TypeError(
            f"fake_quantize_per_tensor_affine: expected a float tensor, not {input.dtype}"
        )
    if not isinstance(zero_point, TensorBase) and not quant_min <= int(zero_point) <= quant_max:
        # (PyTorch checks a number only: a tensor's would be a sync point here)
        raise RuntimeError("`zero_point` must be between `quant_min` and `quant_max`.")
    s = _float32(scale, input).reshape(())
    z = _float32(zero_point if isinstance(zero_point, TensorBase) else int(zero_point), input)
    z = z.reshape(())
    return _quantise(input, 1.0 / s, s, z, quant_min, quant_max)


def fake_quantize_per_channel_affine(
    input: Any,  # noqa: A002 - PyTorch's name
    scale: Any,
    zero_point: Any,
    axis: int,
    quant_min: int,
    quant_max: int,
) -> Any:
    """``input`` fake-quantised with one ``scale`` (float tensor) and ``zero_point`` (integer
    tensor) per index of dimension ``axis``."""
    name = "fake_quantize_per_channel_affine"
    _check_range(quant_min, quant_max, name)
    if input.dtype not in S.FLOAT_DTYPES:
        raise TypeError(f"{name}: expected a float tensor, not {input.dtype}")
    axis = S.normalize_axis(axis, input.ndim, name)
    n = input.shape[axis]
    if tuple(scale.shape) != (n,) or tuple(zero_point.shape) != (n,):
        raise ValueError(
            f"{name}: scale and zero_point must have {n} elements (dimension {axis} of "
            f"{tuple(input.shape)}), not {tuple(scale.shape)} and {tuple(zero_point.shape)}"
        )
    if zero_point.dtype in S.FLOAT_DTYPES:
        raise TypeError(f"{name}: zero_point must be an integer tensor, not {zero_point.dtype}")
    shape = [1] * input.ndim
    shape[axis] = n
    s = scale.detach().to("float32").reshape(shape)
    z = zero_point.detach().to("float32").reshape(shape)
    return _quantise(input, 1.0 / s, s, z, quant_min, quant_max)


__all__ = ["fake_quantize_per_channel_affine", "fake_quantize_per_tensor_affine"]
