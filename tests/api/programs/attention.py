"""Attention: scaled dot-product attention with masks, MultiheadAttention, Transformer layers,
position encodings, llama-style blocks and einsum attention."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


@program
def sdpa_masks_and_grads(torch):
    F = torch.nn.functional
    q = torch.tensor(arr(1, 2, 3, 5, 4), requires_grad=True)
    k = torch.tensor(arr(2, 2, 3, 6, 4), requires_grad=True)
    v = torch.tensor(arr(3, 2, 3, 6, 4), requires_grad=True)
    bool_mask = torch.tensor(np.random.default_rng(4).random((5, 6)) > 0.3)
    bool_mask[:, 0] = True
    float_mask = torch.tensor(arr(5, 5, 6, scale=0.5))
    outs = {
        "plain": F.scaled_dot_product_attention(q, k, v),
        "bool_mask": F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask),
        "float_mask": F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask, scale=0.3),
    }
    sum(o.sum() * (i + 1) for i, o in enumerate(outs.values())).backward()
    return {**outs, "dq": q.grad, "dk": k.grad, "dv": v.grad}


@program
def causal_attention_by_hand_equals_sdpa(torch):
    q, k, v = (torch.tensor(arr(s, 2, 6, 8)) for s in (6, 7, 8))
    T = 6
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(8))
    att = att.masked_fill(torch.tril(torch.ones(T, T)).view(1, T, T) == 0, float("-inf"))
    by_hand = torch.softmax(att, dim=-1) @ v
    fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return {"by_hand": by_hand, "fused": fused, "close": torch.allclose(by_hand, fused, atol=1e-6)}


@program
def multihead_self_attention_batch_first(torch):
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    set_weights(torch, mha, seed=9)
    x = torch.tensor(arr(10, 3, 5, 8), requires_grad=True)
    pad = torch.tensor(np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]]))
    out, w = mha(x, x, x, key_padding_mask=pad)
    (out.sum() + w.pow(2).sum()).backward()
    out2, w2 = mha(x, x, x, need_weights=True, average_attn_weights=False)
    return {"out": out, "weights": w, "per_head": w2, "dx": x.grad, "grads": grads(mha)}


@program
def multihead_attention_seq_first_causal(torch):
    mha = torch.nn.MultiheadAttention(6, 3)
    set_weights(torch, mha, seed=11)
    x = torch.tensor(arr(12, 4, 2, 6))
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    out, w = mha(x, x, x, attn_mask=mask)
    float_mask = torch.zeros(4, 4).masked_fill(mask, float("-inf"))
    out_f, _ = mha(x, x, x, attn_mask=float_mask, need_weights=False)
    return {"out": out, "weights": w, "out_float_mask": out_f}


@program
def cross_attention_different_kv_dims(torch):
    mha = torch.nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True)
    set_weights(torch, mha, seed=13)
    q = torch.tensor(arr(14, 2, 4, 8))
    k = torch.tensor(arr(15, 2, 7, 5))
    v = torch.tensor(arr(16, 2, 7, 3))
    out, w = mha(q, k, v)
    out.sum().backward()
    return {"out": out, "w": w, "grads": grads(mha)}


@program(rtol=5e-4, atol=5e-5)
def transformer_encoder_layers(torch):
    out = {}
    for norm_first in (False, True):
        layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                                 dropout=0.0, batch_first=True,
                                                 norm_first=norm_first)  # fmt: skip
        set_weights(torch, layer, seed=17)
        x = torch.tensor(arr(18, 2, 5, 8))
        y = layer(x)
        y.pow(2).mean().backward()
        out[f"norm_first={norm_first}"] = {"y": y, "grads": grads(layer)}
    return out


@program(rtol=5e-4, atol=5e-5)
def transformer_encoder_training(torch):
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", batch_first=True)
    enc = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(8))
    head = nn.Linear(8, 3)
    model = nn.ModuleList([enc, head])
    set_weights(torch, model, seed=19)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.tensor(arr(20, 4, 6, 8))
    y = torch.tensor(np.array([0, 1, 2, 1]))
    mask = torch.triu(torch.full((6, 6), float("-inf")), diagonal=1)
    losses = []
    for _ in range(3):
        h = enc(x, mask=mask)
        loss = nn.functional.cross_entropy(head(h.mean(1)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "n_layers": len(enc.layers)}


@program(rtol=5e-4, atol=5e-5)
def transformer_decoder_layer(torch):
    layer = torch.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0)
    set_weights(torch, layer, seed=21)
    tgt = torch.tensor(arr(22, 5, 2, 8))
    mem = torch.tensor(arr(23, 7, 2, 8))
    causal = torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
    out = layer(tgt, mem, tgt_mask=causal)
    out.sum().backward()
    return {"out": out, "grads": grads(layer)}


@program
def sinusoidal_position_encoding(torch):
    d_model, max_len = 8, 10
    pe = torch.zeros(max_len, d_model)
    position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    x = torch.tensor(arr(24, 2, 6, 8))
    return {"pe": pe, "x_plus_pe": x + pe[: x.size(1)]}


@program
def rotary_embedding(torch):
    T, D = 6, 8
    inv_freq = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    t = torch.arange(T).type_as(inv_freq)
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    x = torch.tensor(arr(25, 2, T, D), requires_grad=True)
    x1, x2 = x[..., : D // 2], x[..., D // 2 :]
    rotated = torch.cat((-x2, x1), dim=-1)
    y = x * cos + rotated * sin
    y.pow(2).sum().backward()
    return {"y": y, "dx": x.grad}


@program
def llama_style_block(torch):
    nn = torch.nn

    class SwiGLU(nn.Module):
        def __init__(self, d, h):
            super().__init__()
            self.w1 = nn.Linear(d, h, bias=False)
            self.w2 = nn.Linear(h, d, bias=False)
            self.w3 = nn.Linear(d, h, bias=False)

        def forward(self, x):
            return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))

    norm = nn.RMSNorm(8, eps=1e-6)
    mlp = SwiGLU(8, 12)
    model = nn.ModuleDict({"norm": norm, "mlp": mlp})
    set_weights(torch, model, seed=26)
    x = torch.tensor(arr(27, 2, 4, 8), requires_grad=True)
    y = x + mlp(norm(x))
    y.sum().backward()
    default_eps = nn.RMSNorm(8)(x)
    return {"y": y, "dx": x.grad, "grads": grads(model), "default_eps": default_eps}


@program
def einsum_attention_heads(torch):
    B, H, T, D = 2, 2, 4, 3
    q = torch.tensor(arr(28, B, H, T, D), requires_grad=True)
    k = torch.tensor(arr(29, B, H, T, D), requires_grad=True)
    v = torch.tensor(arr(30, B, H, T, D), requires_grad=True)
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D)
    att = scores.softmax(-1)
    out = torch.einsum("bhqk,bhkd->bhqd", att, v)
    merged = torch.einsum("bhtd->bthd", out).reshape(B, T, H * D)
    merged.sum().backward()
    return {"merged": merged, "dq": q.grad, "dk": k.grad, "dv": v.grad}
