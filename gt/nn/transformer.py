"""``TransformerEncoderLayer``/``TransformerEncoder`` and the decoder pair, as PyTorch's (same
submodule names and order, so state dicts and ``repr`` match): post-norm by default,
``norm_first=True`` for pre-norm."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from gt.amp import is_autocast_enabled
from gt.grad_mode import is_grad_enabled
from gt.nn import functional as fn
from gt.nn.attention import MultiheadAttention
from gt.nn.attention_fn import _canonical_mask, _none_or_dtype
from gt.nn.containers import ModuleList
from gt.nn.layers import Dropout, LayerNorm, Linear
from gt.nn.module import Module
from gt.tensor import Tensor


def _activation(activation: str | Callable[[Tensor], Tensor]) -> Callable[[Tensor], Tensor]:
    if callable(activation):
        return activation
    if activation == "relu":
        return fn.relu
    if activation == "gelu":
        return fn.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


_get_activation_fn = _activation  # (PyTorch's name, which custom encoder layers import)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and LayerNorm."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Any = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first,
                                            dtype=dtype)  # fmt: skip
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)
        # (what PyTorch's encoder checks before its nested-tensor path: see TransformerEncoder)
        self.activation_relu_or_gelu = activation in ("relu", "gelu", fn.relu, fn.gelu)

    def forward(self, src: Tensor, src_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool = False) -> Tensor:  # fmt: skip
        src_key_padding_mask = _canonical_mask(src_key_padding_mask, "src_key_padding_mask",
                                               _none_or_dtype(src_mask), "src_mask", src.dtype)  # fmt: skip
        src_mask = _canonical_mask(src_mask, "src_mask", None, "", src.dtype, check_other=False)
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x: Tensor, mask: Tensor | None, pad: Tensor | None,
                  is_causal: bool) -> Tensor:  # fmt: skip
        out = self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=pad, need_weights=False,
                             is_causal=is_causal)[0]  # fmt: skip
        return self.dropout1(out)

    def _ff_block(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over the encoder's output, and a feed-forward block."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation: Any = "relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first,
                                            dtype=dtype)  # fmt: skip
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout, bias,
                                                 batch_first=batch_first, dtype=dtype)  # fmt: skip
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.dropout3 = Dropout(dropout)
        self.activation = _activation(activation)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool = False,
                memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        x = tgt
        if self.norm_first:
            x = x + self._sa(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha(self.norm2(x), memory, memory_mask, memory_key_padding_mask,
                              memory_is_causal)  # fmt: skip
            x = x + self._ff(self.norm3(x))
        else:
            x = self.norm1(x + self._sa(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha(x, memory, memory_mask, memory_key_padding_mask,
                                         memory_is_causal))  # fmt: skip
            x = self.norm3(x + self._ff(x))
        return x

    def _sa(self, x: Tensor, mask: Any, pad: Any, causal: bool) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=pad,
                                            need_weights=False, is_causal=causal)[0])  # fmt: skip

    def _mha(self, x: Tensor, mem: Tensor, mask: Any, pad: Any, causal: bool) -> Tensor:
        return self.dropout2(self.multihead_attn(x, mem, mem, attn_mask=mask, key_padding_mask=pad,
                                                 need_weights=False, is_causal=causal)[0])  # fmt: skip

    def _ff(self, x: Tensor) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of an encoder layer, then an optional norm.

    Where PyTorch would take its nested-tensor path (evaluation without gradients, a boolean
    ``src_key_padding_mask`` padding each sequence at its end, a batch-first post-norm layer with
    ReLU or GELU and an even number of heads), the padded positions come out as zeros before the
    final norm, as PyTorch's do; elsewhere they hold what the layers computed there.
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None, enable_nested_tensor: bool = True,
                 mask_check: bool = True):  # fmt: skip
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm
        self.mask_check = mask_check
        attn = encoder_layer.self_attn
        self.use_nested_tensor = bool(
            enable_nested_tensor
            and isinstance(encoder_layer, TransformerEncoderLayer)
            and not encoder_layer.norm_first
            and attn.batch_first
            and attn._qkv_same_embed_dim
            and attn.in_proj_bias is not None
            and encoder_layer.activation_relu_or_gelu
            and encoder_layer.norm1.eps == encoder_layer.norm2.eps
            and attn.num_heads % 2 == 0
        )

    def forward(self, src: Tensor, mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None, is_causal: bool | None = None) -> Tensor:  # fmt: skip
        # (the layers get float masks; the nested-tensor check below reads the ones given)
        pad = _canonical_mask(src_key_padding_mask, "src_key_padding_mask", _none_or_dtype(mask),
                              "mask", src.dtype)  # fmt: skip
        float_mask = _canonical_mask(mask, "mask", None, "", src.dtype, check_other=False)
        out = src
        for layer in self.layers:
            out = layer(out, src_mask=float_mask, src_key_padding_mask=pad,
                        is_causal=bool(is_causal))  # fmt: skip
        if self._zeroes_padding(src, mask, src_key_padding_mask):
            out = out.masked_fill(src_key_padding_mask.unsqueeze(-1), 0.0)
        return self.norm(out) if self.norm is not None else out

    def _zeroes_padding(self, src: Tensor, mask: Any, pad: Any) -> bool:
        """Whether PyTorch's encoder would run nested tensors (and so zero the padding)."""
        if not self.use_nested_tensor or self.layers[0].training or src.ndim != 3:
            return False
        if pad is None or pad.dtype != "bool" or mask is not None or is_autocast_enabled("cpu"):
            return False
        if is_grad_enabled() and (src.requires_grad
                                  or any(p.requires_grad for p in self.parameters())):  # fmt: skip
            return False
        if self.mask_check:  # padding only at the ends of the sequences (a sync point, as there)
            keep = ~pad._host()
            if (keep[:, 1:] & ~keep[:, :-1]).any():
                return False
        return True


class TransformerDecoder(Module):
    """``num_layers`` copies of a decoder layer, then an optional norm."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None):  # fmt: skip
        super().__init__()
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, tgt_is_causal: bool | None = None,
                memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        out = tgt
        for layer in self.layers:
            out = layer(out, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                        memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)  # fmt: skip
        return self.norm(out) if self.norm is not None else out


class Transformer(Module):
    """An encoder-decoder transformer with PyTorch's defaults and submodule names (``encoder``,
    ``decoder``, each a stack ending in a ``LayerNorm``); every matrix is initialized with
    ``xavier_uniform_``, as PyTorch does."""

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation: Any = "relu", custom_encoder: Module | None = None,
                 custom_decoder: Module | None = None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device: Any = None, dtype: Any = None):  # fmt: skip
        super().__init__()
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)  # fmt: skip
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.encoder = TransformerEncoder(layer, num_encoder_layers, norm)
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout, activation,
                                            layer_norm_eps, batch_first, norm_first, bias,
                                            dtype=dtype)  # fmt: skip
            norm = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
            self.decoder = TransformerDecoder(layer, num_decoder_layers, norm)
        self._reset_parameters()
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first

    def _reset_parameters(self) -> None:
        from gt.nn.init import xavier_uniform_

        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask: Tensor | None = None,
                tgt_mask: Tensor | None = None, memory_mask: Tensor | None = None,
                src_key_padding_mask: Tensor | None = None,
                tgt_key_padding_mask: Tensor | None = None,
                memory_key_padding_mask: Tensor | None = None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:  # fmt: skip
        """Encode ``src``, then decode ``tgt`` against the encoding (PyTorch's shape checks)."""
        is_batched = src.ndim == 3
        if not self.batch_first and src.shape[1] != tgt.shape[1] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if self.batch_first and src.shape[0] != tgt.shape[0] and is_batched:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)  # fmt: skip
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)  # fmt: skip

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """A float mask with ``-inf`` above the diagonal and 0 elsewhere (causal attention)."""
        from gt import factories as F

        return F.full((sz, sz), float("-inf"), dtype=dtype).triu(1)
