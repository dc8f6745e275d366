"""``nn.MultiheadAttention``, with PyTorch's arguments, masks and parameter layout
(``in_proj_weight`` holding q, k and v stacked, an ``out_proj`` Linear), so state dicts move
between the two libraries unchanged. Composed from matmuls, masks and ``softmax`` as PyTorch's
reference path is; a boolean mask marks what is *masked out* here, as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import functional as fn
from gt.nn import init
from gt.nn.attention_fn import scaled_dot_product_attention
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names


class NonDynamicallyQuantizableLinear(Module):
    """``MultiheadAttention.out_proj``: a Linear (named as in PyTorch, so ``repr`` matches)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype: Any = None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = fn.kaiming_bound(in_features)
        with no_grad():
            self.weight = Parameter(
                F.rand(out_features, in_features, dtype=dtype) * (2 * bound) - bound
            )
            if bias:
                self.bias = Parameter(F.rand(out_features, dtype=dtype) * (2 * bound) - bound)
            else:
                self.register_parameter("bias", None)

    def forward(self, x: Tensor) -> Tensor:
        return fn.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )


class MultiheadAttention(Module):
    """Multi-head attention, as ``torch.nn.MultiheadAttention`` (same parameters and masks).

    Args:
        embed_dim: model width (``num_heads`` divides it).
        num_heads: number of heads.
        dropout: dropout on the attention weights while training.
        bias: biases on the input and output projections.
        batch_first: inputs are ``[N, L, E]`` (default ``[L, N, E]``).
        kdim, vdim: widths of keys and values (default ``embed_dim``).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim: int | None = None,
                 vdim: int | None = None, batch_first: bool = False, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__()
        if embed_dim % num_heads:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv / add_zero_attn")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.batch_first, self.head_dim = batch_first, embed_dim // num_heads
        self.kdim, self.vdim = kdim or embed_dim, vdim or embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(F.zeros(3 * embed_dim, embed_dim, dtype=dtype))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = Parameter(F.zeros(embed_dim, embed_dim, dtype=dtype))
            self.k_proj_weight = Parameter(F.zeros(embed_dim, self.kdim, dtype=dtype))
            self.v_proj_weight = Parameter(F.zeros(embed_dim, self.vdim, dtype=dtype))
        if bias:
            self.in_proj_bias = Parameter(F.zeros(3 * embed_dim, dtype=dtype))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, dtype)
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            for w in (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight):
                init.xavier_uniform_(w)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)

    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        e = self.embed_dim
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            return w[:e], w[e : 2 * e], w[2 * e :]
        return self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights or None)``.

        ``key_padding_mask`` ``[N, S]`` and ``attn_mask`` ``[L, S]`` / ``[N*heads, L, S]``: bool
        (``True`` = not attended) or float (added to the scores).
        """
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        ln, n, e = query.shape
        sn = key.shape[0]
        h, hd = self.num_heads, self.head_dim
        wq, wk, wv = self._projections()
        b = self.in_proj_bias
        bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e : 2 * e], b[2 * e :])
        q = fn.linear(query, wq, bq).reshape(ln, n * h, hd).transpose(0, 1)
        k = fn.linear(key, wk, bk).reshape(sn, n * h, hd).transpose(0, 1)
        v = fn.linear(value, wv, bv).reshape(sn, n * h, hd).transpose(0, 1)
        scores = (q * (1.0 / math.sqrt(hd))) @ k.transpose(-2, -1)  # [N*h, L, S]
        mask = self._mask(attn_mask, key_padding_mask, is_causal, n, ln, sn, scores.dtype)
        if mask is not None:
            scores = scores + mask
        weights = scores.softmax(-1)
        if self.dropout > 0.0 and self.training:
            weights = fn.dropout(weights, self.dropout, True)
        out = (weights @ v).transpose(0, 1).reshape(ln, n, e)
        out = self.out_proj(out)
        if self.batch_first and not unbatched:
            out = out.transpose(0, 1)
        if unbatched:
            out = out.squeeze(1)
        if not need_weights:
            return out, None
        w = weights.reshape(n, h, ln, sn)
        w = w.mean(1) if average_attn_weights else w
        return out, (w.squeeze(0) if unbatched else w)

    def _mask(self, attn_mask: Tensor | None, key_padding_mask: Tensor | None, is_causal: bool,
              n: int, ln: int, sn: int, dtype: str) -> Tensor | None:  # fmt: skip
        """One additive float mask ``[N*h or 1, L, S]`` from the masks given (``-inf`` = hidden)."""
        total = None
        if attn_mask is None and is_causal:
            attn_mask = F.ones(ln, sn, dtype="bool").triu(1)
        if attn_mask is not None:
            m = _additive(attn_mask, dtype)
            total = m.reshape(1, ln, sn) if m.ndim == 2 else m
        if key_padding_mask is not None:
            kp = _additive(key_padding_mask, dtype).reshape(n, 1, 1, sn)
            kp = kp.expand(n, self.num_heads, 1, sn).reshape(n * self.num_heads, 1, sn)
            total = kp if total is None else total + kp
        return total

    def extra_repr(self) -> str:
        return ""


def _additive(mask: Tensor, dtype: str) -> Tensor:
    if mask.dtype == "bool":
        return mask.new_zeros(mask.shape, dtype=dtype).masked_fill(mask, -math.inf)
    return mask.to(dtype)


__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear", "scaled_dot_product_attention"]
