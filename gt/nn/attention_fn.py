"""``scaled_dot_product_attention``: PyTorch's math reference, composed from matmuls, masks and
``softmax``. A boolean ``attn_mask`` marks what may be attended to (``True`` = keep), as in PyTorch.
"""

from __future__ import annotations

import math

from gt import factories as F
from gt.tensor import Tensor


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """``softmax(q @ k^T * scale + mask) @ v`` over the last two dimensions.

    Args:
        attn_mask: bool (``True`` where attending is allowed) or float (added to the scores),
            broadcast to ``[..., L, S]``.
        is_causal: mask the upper triangle (position i sees positions <= i).
        scale: defaults to ``1 / sqrt(E)``.
        enable_gqa: let ``key``/``value`` have fewer heads (dimension -3) than ``query``.
    """
    e = query.shape[-1]
    s = 1.0 / math.sqrt(e) if scale is None else scale
    if enable_gqa and key.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(rep, -3)
        value = value.repeat_interleave(rep, -3)
    scores = (query @ key.transpose(-2, -1)) * s
    ln, sn = query.shape[-2], key.shape[-2]
    if is_causal:
        future = F.ones(ln, sn, dtype="bool").triu(1)
        scores = scores.masked_fill(future, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == "bool":
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        keep = (F.rand(weights.shape, dtype=weights.dtype) >= dropout_p).to(weights.dtype)
        weights = weights * keep * (1.0 / (1.0 - dropout_p))
    return weights @ value
