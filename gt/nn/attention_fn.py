"""``scaled_dot_product_attention`` and ``multi_head_attention_forward``: PyTorch's math
reference, composed from matmuls, masks and ``softmax``. In ``scaled_dot_product_attention`` a
boolean ``attn_mask`` marks what may be attended to (``True`` = keep); in
``multi_head_attention_forward`` what is masked out (``True`` = hidden), both as in PyTorch. This
module imports no other ``gt.nn`` module, so that ``gt.nn.functional`` and ``gt.nn.attention`` can
both import it.
"""

from __future__ import annotations

import math
import warnings

from gt import factories as F
from gt.grad_graph import label
from gt.ops.autocast import autocast_op
from gt.ops.base import in_float32
from gt.ops.shaping import cat
from gt.tensor import Tensor


@autocast_op("scaled_dot_product_attention")
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
    # (half precision: computed in float32 and rounded once, as PyTorch's CPU kernels do)
    return in_float32(_attention, query, key, value, attn_mask, dropout_p, is_causal, scale,
                      enable_gqa)  # fmt: skip


def _attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None,
               dropout_p: float, is_causal: bool, scale: float | None, enable_gqa: bool) -> Tensor:  # fmt: skip
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
    if attn_mask is not None and scores.numel():
        if attn_mask.dtype == "bool":
            scores = scores.masked_fill(attn_mask.logical_not(), -math.inf)
        else:
            scores = scores + attn_mask
        # PyTorch's safe softmax: a query that may attend to nothing gets zeros, not NaN (and so
        # does its gradient): one softmax instruction that says so, where finding those rows and
        # masking them before and after took four passes over the scores
        ax = scores.ndim - 1
        weights = label(scores._apply("softmax", [scores], {"axis": ax, "safe": True}),
                        "SoftmaxBackward0")  # fmt: skip
    else:
        weights = scores.softmax(-1)
    if dropout_p > 0.0:
        keep = (F.rand(weights.shape, dtype=weights.dtype) >= dropout_p).to(weights.dtype)
        weights = weights * keep * (1.0 / (1.0 - dropout_p))
    return weights @ value


# ------------------------------------------------------------------ multi-head attention
@autocast_op("linear")
def _linear(x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    out = x @ w.T
    return out + b if b is not None else out


def _in_dtype(mask: Tensor | None, dtype: str) -> Tensor | None:
    """A float mask (see :func:`_canonical_mask`) in the scores' dtype, to add to them."""
    return None if mask is None else mask.to(dtype)


def _none_or_dtype(input: Tensor | None) -> str | None:
    """A mask's dtype, or None (PyTorch's helper of the same name)."""
    if input is None:
        return None
    if isinstance(input, Tensor):
        return input.dtype
    raise RuntimeError("input to _none_or_dtype() must be None or torch.Tensor")


def _canonical_mask(mask: Tensor | None, mask_name: str, other_type: str | None,
                    other_name: str, target_type: str, check_other: bool = True) -> Tensor | None:  # fmt: skip
    """PyTorch's ``F._canonical_mask``: a boolean ``mask`` as a float one of ``target_type``
    (``True``: ``-inf``), a float one as it is. Where its dtype is not ``other_type`` (the other
    mask's), PyTorch's deprecation warning; the attention modules and the transformer layers call it
    first, so a pair of masks is warned about once, by the outermost module, under its names."""
    if mask is None:
        return None
    if mask.dtype != "bool" and not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(
            f"Support for mismatched {mask_name} and {other_name} is deprecated. Use same type "
            "for both instead.",
            stacklevel=2,
        )
    if mask.dtype == "bool":
        return mask.new_zeros(mask.shape, dtype=target_type).masked_fill(mask, -math.inf)
    return mask


def _pad_last(t: Tensor | None) -> Tensor | None:
    """``t`` with a zero column appended (``F.pad(t, (0, 1))``)."""
    if t is None:
        return None
    return cat([t, t.new_zeros(tuple(t.shape[:-1]) + (1,))], -1)


def _mha_shape_check(query: Tensor, key: Tensor, value: Tensor, key_padding_mask: Tensor | None,
                     attn_mask: Tensor | None, num_heads: int) -> bool:  # fmt: skip
    """Whether the inputs are batched (3-d ``query``), with PyTorch's checks and messages."""
    if query.ndim == 3:
        if key.ndim != 3 or value.ndim != 3:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key` and `value` to be 3-D but found "
                f"{key.ndim}-D and {value.ndim}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.ndim != 2:
            raise AssertionError(
                "For batched (3-D) `query`, expected `key_padding_mask` to be `None` or 2-D but "
                f"found {key_padding_mask.ndim}-D tensor instead"
            )
        if attn_mask is not None and attn_mask.ndim not in (2, 3):
            raise AssertionError(
                "For batched (3-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D but "
                f"found {attn_mask.ndim}-D tensor instead"
            )
        return True
    if query.ndim == 2:
        if key.ndim != 2 or value.ndim != 2:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key` and `value` to be 2-D but found "
                f"{key.ndim}-D and {value.ndim}-D tensors respectively"
            )
        if key_padding_mask is not None and key_padding_mask.ndim != 1:
            raise AssertionError(
                "For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D but "
                f"found {key_padding_mask.ndim}-D tensor instead"
            )
        if attn_mask is not None:
            if attn_mask.ndim not in (2, 3):
                raise AssertionError(
                    "For unbatched (2-D) `query`, expected `attn_mask` to be `None`, 2-D or 3-D "
                    f"but found {attn_mask.ndim}-D tensor instead"
                )
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.ndim == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(
                    f"Expected `attn_mask` shape to be {expected} but got {tuple(attn_mask.shape)}"
                )
        return False
    raise AssertionError(
        f"query should be unbatched 2D or batched 3D tensor but received {query.ndim}-D query tensor"
    )


def multi_head_attention_forward(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    embed_dim_to_check: int,
    num_heads: int,
    in_proj_weight: Tensor | None,
    in_proj_bias: Tensor | None,
    bias_k: Tensor | None,
    bias_v: Tensor | None,
    add_zero_attn: bool,
    dropout_p: float,
    out_proj_weight: Tensor,
    out_proj_bias: Tensor | None,
    training: bool = True,
    key_padding_mask: Tensor | None = None,
    need_weights: bool = True,
    attn_mask: Tensor | None = None,
    use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None,
    k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None,
    static_k: Tensor | None = None,
    static_v: Tensor | None = None,
    average_attn_weights: bool = True,
    is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:
    """``nn.MultiheadAttention``'s computation as a function, with PyTorch's arguments.

    Inputs are sequence first: ``query`` ``[L, N, E]`` (or ``[L, E]``), ``key``/``value``
    ``[S, N, E_k]``/``[S, N, E_v]``. Masks: ``key_padding_mask`` ``[N, S]``, ``attn_mask`` ``[L,
    S]`` or ``[N*num_heads, L, S]``, bool (``True`` = not attended) or float (added to the scores);
    ``is_causal`` is a hint that needs ``attn_mask``. ``bias_k``/``bias_v`` ``[1, 1, E]`` append one
    key/value position, ``add_zero_attn`` one of zeros; ``static_k``/``static_v`` ``[N*num_heads,
    S, E/num_heads]`` replace the projected keys/values.

    Returns:
        ``(output [L, N, E], weights)``: weights ``[N, L, S]`` averaged over the heads (``[N,
        num_heads, L, S]`` without ``average_attn_weights``), or ``None`` without ``need_weights``.
    """
    batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    dtype = query.dtype
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", dtype)  # fmt: skip
    attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", dtype, check_other=False)
    if is_causal and attn_mask is None:
        raise RuntimeError(
            "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
            "method `generate_square_subsequent_mask` to create this mask."
        )
    key_padding_mask, attn_mask = _in_dtype(key_padding_mask, dtype), _in_dtype(attn_mask, dtype)
    if embed_dim != embed_dim_to_check:
        raise AssertionError(
            f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}"
        )
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(
                f"key's sequence and batch dims {tuple(key.shape[:2])} do not match value's "
                f"{tuple(value.shape[:2])}"
            )
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but a projection weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if tuple(key.shape) != tuple(value.shape):
            raise AssertionError(
                f"key shape {tuple(key.shape)} does not match value shape {tuple(value.shape)}"
            )
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        e = embed_dim
        wq, wk, wv = in_proj_weight[:e], in_proj_weight[e : 2 * e], in_proj_weight[2 * e :]
    e = embed_dim
    b = in_proj_bias
    bq, bk, bv = (None, None, None) if b is None else (b[:e], b[e : 2 * e], b[2 * e :])
    q, k, v = _linear(query, wq, bq), _linear(key, wk, bk), _linear(value, wv, bv)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 2D attn_mask is {list(attn_mask.shape)}, but should be "
                    f"{(tgt_len, src_len)}."
                )
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(
                    f"The shape of the 3D attn_mask is {list(attn_mask.shape)}, but should be "
                    f"{(bsz * num_heads, tgt_len, src_len)}."
                )
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    if (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must be given together")
    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = cat([k, bias_k.repeat(1, bsz, 1)], 0)
        v = cat([v, bias_v.repeat(1, bsz, 1)], 0)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    bh = bsz * num_heads
    q = q.reshape(tgt_len, bh, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bh, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bh, head_dim).transpose(0, 1) if static_v is None else static_v
    for name, t in (("static_k", static_k), ("static_v", static_v)):
        if t is not None and (t.shape[0] != bh or t.shape[2] != head_dim):
            raise AssertionError(
                f"expecting {name} of shape [{bh}, *, {head_dim}], got {list(t.shape)}"
            )
    if add_zero_attn:
        k = cat([k, k.new_zeros((bh, 1, head_dim))], 1)
        v = cat([v, v.new_zeros((bh, 1, head_dim))], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(
                f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                f"{tuple(key_padding_mask.shape)}"
            )
        kp = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kp = kp.reshape(bh, 1, src_len)
        attn_mask = kp if attn_mask is None else attn_mask + kp
    if not training:
        dropout_p = 0.0
    q_scaled = q * math.sqrt(1.0 / head_dim)
    if attn_mask is not None:  # PyTorch's baddbmm: under autocast the mask is cast with q and k
        scores = attn_mask.baddbmm(q_scaled, k.transpose(-2, -1))  # [N*h, L, S]
    else:
        scores = q_scaled @ k.transpose(-2, -1)
    blocked = None
    if not need_weights and attn_mask is not None:
        # PyTorch then computes through scaled_dot_product_attention, whose rows that may attend
        # to nothing give 0. Their scores are replaced before the softmax: the softmax of all
        # -inf is NaN, and its backward would carry that NaN into every gradient.
        blocked = (scores == -math.inf).all(-1, keepdim=True)
        scores = scores.masked_fill(blocked, 0.0)
    weights = scores.softmax(-1)
    if blocked is not None:
        weights = weights.masked_fill(blocked, 0.0)
    if dropout_p > 0.0:
        keep = (F.rand(weights.shape, dtype=weights.dtype) >= dropout_p).to(weights.dtype)
        weights = weights * keep * (1.0 / (1.0 - dropout_p))
    out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = _linear(out, out_proj_weight, out_proj_bias).reshape(
        tgt_len, bsz, out_proj_weight.shape[0]
    )
    if not batched:
        out = out.squeeze(1)
    if not need_weights:
        return out, None
    w = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        w = w.mean(1)
    return out, (w.squeeze(0) if not batched else w)
