"""``x + alpha * other`` as one ``add_scaled`` primitive: when it applies, and the ``alpha`` it
sends (shared by the out-of-place ops of :mod:`gt.ops.arith` and the in-place ones of
:mod:`gt.ops.inplace`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from gt.ops.base import TensorBase


def scaled_add(x: Any, other: Any, alpha: Any) -> bool:
    """Whether ``x + alpha * other`` is one ``add_scaled`` primitive: two tensors of one float
    dtype on one connection, a real ``alpha`` other than 1. In float32 and float64 it rounds as
    ``other * alpha`` and then the sum do, bit for bit, in one instruction and (on a large
    in-place update) one pass through the cache instead of two through memory; in float16 and
    bfloat16 it rounds once, as PyTorch's half kernels compute in float32."""
    return (
        type(alpha) in (int, float)
        and alpha != 1
        and isinstance(other, TensorBase)
        and isinstance(x, TensorBase)
        and other._conn is x._conn
        and x.dtype == other.dtype
        and x.dtype in _FUSED_ALPHA
    )


_FUSED_ALPHA = frozenset(("float32", "float64", "float16", "bfloat16"))


def wire_alpha(x: Any, alpha: Any) -> float:
    """``alpha`` as an ``add_scaled`` of ``x`` sends it: for float16 and bfloat16 tensors the
    nearest value of that dtype, as PyTorch's half kernels take ``alpha`` (then compute in float32
    and round once; the worker's bfloat16 kernels see float32 arrays, so it is rounded here)."""
    a = float(alpha)
    if x.dtype == "float16":
        return float(np.float16(a))
    if x.dtype == "bfloat16":  # round-to-nearest-even of float32's upper half (finite alphas)
        bits = int(np.float32(a).view(np.uint32))
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return float(np.uint32(bits).view(np.float32))
    return a
