"""``nn.MultiheadAttention``, with PyTorch's arguments, masks and parameter layout
(``in_proj_weight`` holding q, k and v stacked, an ``out_proj`` Linear), so state dicts move
between the two libraries unchanged. Composed from matmuls, masks and ``softmax`` as PyTorch's
reference path is; a boolean mask marks what is *masked out* here, as in PyTorch.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Iterator
from typing import Any

from gt import factories as F
from gt.nn import init
from gt.nn.attention_fn import (
    _canonical_mask,
    _none_or_dtype,
    multi_head_attention_forward,
    scaled_dot_product_attention,
)
from gt.nn.layers import Linear
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names


class NonDynamicallyQuantizableLinear(Linear):
    """``MultiheadAttention.out_proj``: a :class:`gt.nn.Linear` (so ``isinstance(m, nn.Linear)``
    initialisation and weight-decay loops reach it), named as in PyTorch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True,
                 device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__(in_features, out_features, bias, dtype=dtype)


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
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias, dtype=dtype)
        if add_bias_kv:
            self.bias_k = Parameter(F.zeros(1, 1, embed_dim, dtype=dtype))
            self.bias_v = Parameter(F.zeros(1, 1, embed_dim, dtype=dtype))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
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
        for extra in (self.bias_k, self.bias_v):
            if extra is not None:
                init.xavier_normal_(extra)

    def forward(self, query: Tensor, key: Tensor, value: Tensor,
                key_padding_mask: Tensor | None = None, need_weights: bool = True,
                attn_mask: Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False) -> tuple[Tensor, Tensor | None]:  # fmt: skip
        """Attend from ``query`` to ``key``/``value``; returns ``(output, weights or None)``.

        ``key_padding_mask`` ``[N, S]`` and ``attn_mask`` ``[L, S]`` / ``[N*heads, L, S]``: bool
        (``True`` = not attended) or float (added to the scores). Unlike PyTorch, ``is_causal``
        without ``attn_mask`` makes the causal mask. The computation is
        :func:`gt.nn.functional.multi_head_attention_forward`.
        """
        # (checked here first, as PyTorch does: a mismatched pair is warned about once)
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                           _none_or_dtype(attn_mask), "attn_mask", query.dtype)  # fmt: skip
        batched = query.ndim == 3
        if self.batch_first and batched:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if attn_mask is None and is_causal:
            attn_mask = F.ones(query.shape[0], key.shape[0], dtype="bool").triu(1)
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)  # fmt: skip
        separate = not self._qkv_same_embed_dim
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight,
            self.in_proj_bias, self.bias_k, self.bias_v, self.add_zero_attn, self.dropout,
            self.out_proj.weight, self.out_proj.bias, training=self.training,
            key_padding_mask=key_padding_mask, need_weights=need_weights, attn_mask=attn_mask,
            use_separate_proj_weight=separate, q_proj_weight=self.q_proj_weight,
            k_proj_weight=self.k_proj_weight, v_proj_weight=self.v_proj_weight,
            average_attn_weights=average_attn_weights, is_causal=is_causal,
        )  # fmt: skip
        if self.batch_first and batched:
            out = out.transpose(0, 1)
        return out, weights

    def extra_repr(self) -> str:
        return ""


class SDPBackend(enum.IntEnum):
    """PyTorch's ``torch.nn.attention.SDPBackend``: the kernels ``scaled_dot_product_attention``
    may pick from. GT has one, the composed (``MATH``) path."""

    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


@contextlib.contextmanager
def sdpa_kernel(backends: Any, set_priority: bool = False) -> Iterator[None]:
    """PyTorch's context manager (or decorator) that limits the SDPA kernels to ``backends``.
    GT's attention is always the composed path, whose results every backend approximates; the
    choice is checked and accepted."""
    chosen = list(backends) if isinstance(backends, (list, tuple, set)) else [backends]
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise ValueError(f"sdpa_kernel: expected SDPBackend values, got {b!r}")
    yield


__all__ = [
    "MultiheadAttention",
    "SDPBackend",
    "sdpa_kernel",
    "NonDynamicallyQuantizableLinear",
    "multi_head_attention_forward",
    "scaled_dot_product_attention",
]
