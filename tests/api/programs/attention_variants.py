"""Attention variants as their reference implementations write them: DeBERTa log buckets, BLOOM's
ALiBi with baddbmm, Longformer's sliding chunks, Reformer's LSH sort/undo, Performer's FAVOR+,
Linformer, Perceiver, flash attention's block-wise online softmax, chunked memory-efficient
attention, SDPA with enable_gqa, GShard/Switch routers, differential and sigmoid attention."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


@program(rtol=5e-4, atol=5e-5)
def deberta_disentangled_attention_log_bucket_positions(torch):
    nn, F = torch.nn, torch.nn.functional
    B, T, D, H, bucket_size, max_position = 2, 11, 12, 3, 8, 32

    def make_log_bucket_position(relative_pos, bucket_size, max_position):
        sign = torch.sign(relative_pos)
        mid = bucket_size // 2
        abs_pos = torch.where(
            (relative_pos < mid) & (relative_pos > -mid),
            torch.tensor(mid - 1).type_as(relative_pos),
            torch.abs(relative_pos),
        )
        log_pos = (
            torch.ceil(
                torch.log(abs_pos / mid)
                / torch.log(torch.tensor((max_position - 1) / mid))
                * (mid - 1)
            )
            + mid
        )
        return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)

    def build_relative_position(query_size, key_size):
        q_ids, k_ids = torch.arange(0, query_size), torch.arange(0, key_size)
        rel_pos_ids = q_ids[:, None] - k_ids[None, :]
        rel_pos_ids = make_log_bucket_position(rel_pos_ids, bucket_size, max_position)
        return rel_pos_ids.to(torch.long)[:query_size, :].unsqueeze(0)

    class DisentangledSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_proj, self.key_proj, self.value_proj = (nn.Linear(D, D) for _ in range(3))
            self.rel_embeddings = nn.Embedding(2 * bucket_size, D)
            self.norm = nn.LayerNorm(D, eps=1e-7)

        def transpose_for_scores(self, x):
            x = x.view(x.size()[:-1] + (H, -1))
            return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

        def forward(self, hidden, mask):
            q = self.transpose_for_scores(self.query_proj(hidden))
            k = self.transpose_for_scores(self.key_proj(hidden))
            v = self.transpose_for_scores(self.value_proj(hidden))
            scale_factor = 3
            scale = torch.sqrt(torch.tensor(q.size(-1), dtype=torch.float) * scale_factor)
            attention_scores = torch.bmm(q, k.transpose(-1, -2) / scale.to(dtype=q.dtype))
            relative_pos = build_relative_position(T, T)
            att_span = bucket_size
            rel = self.norm(self.rel_embeddings.weight)[0 : att_span * 2, :].unsqueeze(0)
            pos_key = self.transpose_for_scores(self.key_proj(rel)).repeat(B, 1, 1)
            pos_query = self.transpose_for_scores(self.query_proj(rel)).repeat(B, 1, 1)
            c2p_att = torch.bmm(q, pos_key.transpose(-1, -2))
            c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
            c2p_att = torch.gather(
                c2p_att, dim=-1, index=c2p_pos.squeeze(0).expand([q.size(0), q.size(1), T])
            )
            p2c_pos = torch.clamp(-relative_pos + att_span, 0, att_span * 2 - 1)
            p2c_att = torch.bmm(k, pos_query.transpose(-1, -2))
            p2c_att = torch.gather(
                p2c_att, dim=-1, index=p2c_pos.squeeze(0).expand([q.size(0), T, T])
            ).transpose(-1, -2)
            attention_scores = attention_scores + (c2p_att + p2c_att) / scale.to(q.dtype)
            attention_scores = attention_scores.view(B, H, T, T)
            rmask = ~(mask.to(torch.bool))
            attention_scores = attention_scores.masked_fill(rmask, torch.finfo(q.dtype).min)
            probs = F.softmax(attention_scores, dim=-1)
            ctx = torch.bmm(probs.view(-1, T, T), v).view(B, H, T, -1).permute(0, 2, 1, 3)
            return ctx.contiguous().view(B, T, D), probs, relative_pos

    attn = set_weights(torch, DisentangledSelfAttention(), seed=9101)
    x = torch.tensor(arr(9102, B, T, D), requires_grad=True)
    pad = torch.tensor(np.array([[1] * T, [1] * 8 + [0] * 3]))
    mask = (pad.unsqueeze(1).unsqueeze(2) * pad.unsqueeze(1).unsqueeze(-1)).to(torch.uint8)
    out, probs, rel = attn(x, mask)
    (out.pow(2).sum() + probs[:, :, :, 0].sum()).backward()
    return {"out": out, "probs": probs, "relative_pos": rel, "dx": x.grad, "grads": grads(attn),
            "buckets_far": make_log_bucket_position(torch.tensor([-40, -9, -4, 0, 3, 5, 17, 31, 100]), 8, 32)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bloom_alibi_from_padding_cumsum_and_baddbmm(torch):
    nn, F = torch.nn, torch.nn.functional
    B, T, H, D = 2, 7, 6, 24
    hd = D // H

    def build_alibi_tensor(attention_mask, num_heads, dtype):
        batch_size, seq_length = attention_mask.shape
        closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
        base = torch.tensor(
            2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float32
        )
        powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
        slopes = torch.pow(base, powers)
        if closest_power_of_2 != num_heads:
            extra_base = torch.tensor(
                2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), dtype=torch.float32
            )
            num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
            extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
            slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
        arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
        alibi = slopes[..., None] * arange_tensor
        return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)

    class BloomAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.query_key_value, self.dense = nn.Linear(D, 3 * D), nn.Linear(D, D)
            self.inv_norm_factor, self.beta = 1.0 / math.sqrt(hd), 1.0

        def forward(self, hidden_states, alibi, causal_mask):
            fused_qkv = self.query_key_value(hidden_states).view(B, T, H, 3, hd)
            q, k, v = fused_qkv[..., 0, :], fused_qkv[..., 1, :], fused_qkv[..., 2, :]
            q = q.transpose(1, 2).reshape(B * H, T, hd)
            k = k.permute(0, 2, 3, 1).reshape(B * H, hd, T)
            v = v.transpose(1, 2).reshape(B * H, T, hd)
            matmul_result = alibi.baddbmm(
                batch1=q, batch2=k, beta=self.beta, alpha=self.inv_norm_factor
            )
            scores = matmul_result.view(B, H, T, T)
            weights = torch.masked_fill(scores, causal_mask, torch.finfo(scores.dtype).min)
            probs = F.softmax(weights, dim=-1, dtype=torch.float32).to(q.dtype)
            ctx = torch.bmm(probs.view(B * H, T, T), v)
            ctx = ctx.view(B, H, T, hd).permute(0, 2, 1, 3).reshape(B, T, D)
            return self.dense(ctx), probs

    attention_mask = torch.tensor(np.array([[1] * T, [0, 0] + [1] * (T - 2)]))
    alibi = build_alibi_tensor(attention_mask, H, torch.float32)
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)[None, None]
    causal_mask = causal | (attention_mask[:, None, None, :] == 0)
    attn = set_weights(torch, BloomAttention(), seed=9111)
    x = torch.tensor(arr(9112, B, T, D), requires_grad=True)
    out, probs = attn(x, alibi, causal_mask)
    out[1, 2:].pow(2).mean().backward()
    return {"alibi": alibi, "slopes_12": build_alibi_tensor(torch.ones(1, 3), 12, torch.float32)[:, 0, -1],
            "out": out[:, 2:], "probs": probs[:, :, 2:], "dx": x.grad, "grads": grads(attn)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def longformer_sliding_chunks_as_strided_diagonal_padding(torch):
    F = torch.nn.functional
    B, T, H, d, w = 2, 16, 2, 4, 2  # one-sided window w, T a multiple of 2w

    def _chunk(hidden_states, window_overlap):
        hidden_states = hidden_states.view(
            hidden_states.size(0),
            torch.div(hidden_states.size(1), (window_overlap * 2), rounding_mode="trunc"),
            window_overlap * 2,
            hidden_states.size(2),
        )
        chunk_size = list(hidden_states.size())
        chunk_size[1] = chunk_size[1] * 2 - 1
        chunk_stride = list(hidden_states.stride())
        chunk_stride[1] = chunk_stride[1] // 2
        return hidden_states.as_strided(size=chunk_size, stride=chunk_stride)

    def _pad_and_transpose_last_two_dims(hidden_states_padded, padding):
        hidden_states_padded = F.pad(hidden_states_padded, padding)
        return hidden_states_padded.view(
            *hidden_states_padded.size()[:-2],
            hidden_states_padded.size(-1),
            hidden_states_padded.size(-2),
        )

    def _pad_and_diagonalize(chunked_hidden_states):
        total_num_heads, num_chunks, window_overlap, hidden_dim = chunked_hidden_states.size()
        chunked_hidden_states = F.pad(chunked_hidden_states, (0, window_overlap + 1))
        chunked_hidden_states = chunked_hidden_states.view(total_num_heads, num_chunks, -1)
        chunked_hidden_states = chunked_hidden_states[:, :, :-window_overlap]
        chunked_hidden_states = chunked_hidden_states.view(
            total_num_heads, num_chunks, window_overlap, window_overlap + hidden_dim
        )
        return chunked_hidden_states[:, :, :, :-1]

    def _mask_invalid_locations(input_tensor, affected_seq_len):
        beginning_mask_2d = input_tensor.new_ones(affected_seq_len, affected_seq_len + 1)
        beginning_mask = beginning_mask_2d.tril().flip(dims=[0])[None, :, None, :]
        ending_mask = beginning_mask.flip(dims=(1, 3))
        beginning_input = input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1]
        beginning_mask = beginning_mask.expand(beginning_input.size())
        input_tensor[:, :affected_seq_len, :, : affected_seq_len + 1] = torch.full_like(
            beginning_input, -float("inf")
        ).where(beginning_mask.bool(), beginning_input)
        ending_input = input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1) :]
        ending_mask = ending_mask.expand(ending_input.size())
        input_tensor[:, -affected_seq_len:, :, -(affected_seq_len + 1) :] = torch.full_like(
            ending_input, -float("inf")
        ).where(ending_mask.bool(), ending_input)

    def sliding_chunks_query_key_matmul(query, key, window_overlap):
        batch_size, seq_len, num_heads, head_dim = query.size()
        chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
        query = query.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        key = key.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        query, key = _chunk(query, window_overlap), _chunk(key, window_overlap)
        chunked = torch.einsum("bcxd,bcyd->bcxy", (query, key))
        chunked = _pad_and_transpose_last_two_dims(chunked, padding=(0, 0, 0, 1))
        diag = chunked.new_zeros(
            (batch_size * num_heads, chunks_count + 1, window_overlap, window_overlap * 2 + 1)
        )
        diag[:, :-1, :, window_overlap:] = chunked[:, :, :window_overlap, : window_overlap + 1]
        diag[:, -1, :, window_overlap:] = chunked[:, -1, window_overlap:, : window_overlap + 1]
        diag[:, 1:, :, :window_overlap] = chunked[
            :, :, -(window_overlap + 1) : -1, window_overlap + 1 :
        ]
        diag[:, 0, 1:window_overlap, 1:window_overlap] = chunked[
            :, 0, : window_overlap - 1, 1 - window_overlap :
        ]
        diag = diag.view(batch_size, num_heads, seq_len, 2 * window_overlap + 1).transpose(2, 1)
        _mask_invalid_locations(diag, window_overlap)
        return diag

    def sliding_chunks_matmul_attn_probs_value(attn_probs, value, window_overlap):
        batch_size, seq_len, num_heads, head_dim = value.size()
        chunks_count = torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1
        chunked_attn_probs = attn_probs.transpose(1, 2).reshape(
            batch_size * num_heads,
            torch.div(seq_len, window_overlap, rounding_mode="trunc"),
            window_overlap,
            2 * window_overlap + 1,
        )
        value = value.transpose(1, 2).reshape(batch_size * num_heads, seq_len, head_dim)
        padded_value = F.pad(value, (0, 0, window_overlap, window_overlap), value=-1)
        size = (batch_size * num_heads, chunks_count + 1, 3 * window_overlap, head_dim)
        st = padded_value.stride()
        chunked_value = padded_value.as_strided(
            size=size, stride=(st[0], window_overlap * st[1], st[1], st[2])
        )
        chunked_attn_probs = _pad_and_diagonalize(chunked_attn_probs)
        context = torch.einsum("bcwd,bcdh->bcwh", (chunked_attn_probs, chunked_value))
        return context.view(batch_size, num_heads, seq_len, head_dim).transpose(1, 2)

    q = torch.tensor(arr(9121, B, T, H, d), requires_grad=True)
    k = torch.tensor(arr(9122, B, T, H, d), requires_grad=True)
    v = torch.tensor(arr(9123, B, T, H, d), requires_grad=True)
    scores = sliding_chunks_query_key_matmul(q / math.sqrt(d), k, w)  # B, T, H, 2w+1
    probs = F.softmax(scores, dim=-1, dtype=torch.float32)
    out = sliding_chunks_matmul_attn_probs_value(probs, v, w)
    out.pow(2).sum().backward()
    # the same band with unfold on padded keys, and with a dense banded mask
    kp = F.pad(k.detach().transpose(1, 2), (0, 0, w, w), value=0.0)  # B, H, T+2w, d
    k_win = kp.unfold(2, 2 * w + 1, 1)  # B, H, T, d, 2w+1
    band_scores = torch.einsum("bhtd,bhtdw->bthw", q.detach().transpose(1, 2) / math.sqrt(d), k_win)
    i = torch.arange(T)
    rel = i[None, :] - i[:, None]
    dense = torch.einsum("bthd,bshd->bhts", q.detach(), k.detach()) / math.sqrt(d)
    dense = dense.masked_fill(rel.abs() > w, float("-inf"))
    dense_out = torch.einsum("bhts,bshd->bthd", dense.softmax(-1), v.detach())
    finite = torch.isfinite(scores.detach())
    return {"scores": scores.detach().masked_fill(~finite, 0.0), "finite": finite, "out": out,
            "dq": q.grad, "dk": k.grad, "dv": v.grad, "dense_out": dense_out,
            "band_scores": band_scores.masked_fill(~finite, 0.0),
            "matches_dense": torch.allclose(out, dense_out, atol=1e-5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def reformer_lsh_buckets_argsort_gather_and_scatter_undo(torch):
    B, H, T, d, n_buckets, n_hashes, chunk = 2, 2, 16, 4, 4, 2, 4
    rotations = torch.tensor(arr(9131, H, d, n_hashes, n_buckets // 2))

    def hash_vectors(vectors):
        rotated = torch.einsum("bmtd,mdhr->bmhtr", vectors, rotations)
        rotated = torch.cat([rotated, -rotated], dim=-1)
        buckets = torch.argmax(rotated, dim=-1)
        offsets = (torch.arange(n_hashes) * n_buckets).view(1, 1, -1, 1)
        return (buckets + offsets).flatten(start_dim=2)

    def sorted_bucket_idx_and_undo(buckets):
        with torch.no_grad():
            orig_indices = torch.arange(n_hashes * T).repeat(B, H, 1)
            scaled_buckets = T * buckets + (orig_indices % T)
            sorted_bucket_idx = torch.argsort(scaled_buckets, dim=-1)
            indices = (
                torch.arange(sorted_bucket_idx.shape[-1])
                .view(1, 1, -1)
                .expand(sorted_bucket_idx.shape)
            )
            undo_sorted_bucket_idx = torch.empty_like(sorted_bucket_idx)
            undo_sorted_bucket_idx.scatter_(-1, sorted_bucket_idx, indices)
        return sorted_bucket_idx, undo_sorted_bucket_idx

    def gather_by_expansion(vectors, idxs):
        expanded_idxs = idxs.unsqueeze(-1).expand(-1, -1, -1, vectors.shape[-1])
        return torch.gather(vectors.repeat(1, 1, n_hashes, 1), 2, expanded_idxs)

    def look_adjacent(vectors):
        prev = torch.cat([vectors[:, :, -1:, ...], vectors[:, :, :-1, ...]], dim=2)
        return torch.cat([prev, vectors], dim=3)

    def lsh_attention(qk, v):
        buckets = hash_vectors(qk)
        sorted_idx, undo_idx = sorted_bucket_idx_and_undo(buckets)
        sq, sv = gather_by_expansion(qk, sorted_idx), gather_by_expansion(v, sorted_idx)
        sk = sq / torch.sqrt(torch.mean(sq**2, -1, keepdim=True) + 1e-6) * d**-0.5
        n_chunks = n_hashes * T // chunk
        sq, sk, sv = (t.reshape(B, H, n_chunks, chunk, d) for t in (sq, sk, sv))
        q_idx = (sorted_idx % T).view(B, H, n_chunks, chunk)
        k_idx = look_adjacent(q_idx)
        sk, sv = look_adjacent(sk), look_adjacent(sv)
        dots = torch.matmul(sq, sk.transpose(-1, -2))
        self_mask = q_idx.unsqueeze(-1) == k_idx.unsqueeze(-2)
        dots = torch.where(self_mask, torch.tensor(-1e5, dtype=dots.dtype), dots)
        logits = torch.logsumexp(dots, dim=-1, keepdim=True)
        probs = torch.exp(dots - logits)
        out = torch.matmul(probs, sv).flatten(2, 3)
        logits = logits.flatten(2, 3).squeeze(-1)
        out = gather_by_expansion(out, undo_idx)[:, :, : n_hashes * T]
        logits = torch.gather(logits, 2, undo_idx)
        out = out.view(B, H, n_hashes, T, d)
        logits = logits.view(B, H, n_hashes, T, 1)
        probs_vectors = torch.exp(logits - torch.logsumexp(logits, dim=2, keepdim=True))
        return torch.sum(out * probs_vectors, dim=2), buckets, sorted_idx, undo_idx

    qk = torch.tensor(arr(9132, B, H, T, d), requires_grad=True)
    v = torch.tensor(arr(9133, B, H, T, d), requires_grad=True)
    out, buckets, sorted_idx, undo_idx = lsh_attention(qk, v)
    (out * torch.tensor(arr(9134, B, H, T, d))).sum().backward()
    roundtrip = torch.gather(torch.gather(buckets, -1, sorted_idx), -1, undo_idx)
    return {"out": out, "buckets": buckets, "sorted_idx": sorted_idx, "undo_idx": undo_idx,
            "roundtrip_ok": torch.equal(roundtrip, buckets), "dqk": qk.grad, "dv": v.grad,
            "undo_is_argsort": torch.equal(undo_idx, sorted_idx.argsort(-1))}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def performer_favor_plus_orthogonal_features_causal_prefix_sums(torch):
    B, H, T, d, m = 2, 2, 12, 8, 16
    g = np.random.default_rng(9141)
    blocks = [np.linalg.qr(g.standard_normal((d, d)))[0].T for _ in range(m // d)]
    multiplier = np.linalg.norm(g.standard_normal((m, d)), axis=1)
    projection_matrix = torch.tensor(
        (multiplier[:, None] * np.concatenate(blocks)).astype(np.float32)
    )

    def softmax_kernel(data, projection_matrix, is_query, eps=1e-4):
        b, h, *_ = data.shape
        data_normalizer = data.shape[-1] ** -0.25
        ratio = projection_matrix.shape[0] ** -0.5
        projection = projection_matrix.expand(b, h, -1, -1).type_as(data)
        data_dash = torch.einsum("...id,...jd->...ij", (data_normalizer * data), projection)
        diag_data = torch.sum(data**2, dim=-1)
        diag_data = ((diag_data / 2.0) * (data_normalizer**2)).unsqueeze(dim=-1)
        if is_query:
            stab = torch.amax(data_dash, dim=-1, keepdim=True).detach()
        else:
            stab = torch.amax(data_dash, dim=(-1, -2), keepdim=True).detach()
        return (ratio * (torch.exp(data_dash - diag_data - stab) + eps)).type_as(data)

    def linear_attention(q, k, v):
        k_cumsum = k.sum(dim=-2)
        D_inv = 1.0 / torch.einsum("...nd,...d->...n", q, k_cumsum.type_as(q))
        context = torch.einsum("...nd,...ne->...de", k, v)
        return torch.einsum("...de,...nd,...n->...ne", context, q, D_inv)

    def causal_linear_attention_noncuda(q, k, v, chunk_size=4, eps=1e-6):
        last_k_cumsum, last_context_cumsum, outs = 0, 0, []
        for q, k, v in zip(*map(lambda t: t.chunk(chunk_size, dim=-2), (q, k, v))):  # noqa: B020
            k_cumsum = last_k_cumsum + k.cumsum(dim=-2)
            D_inv = 1.0 / torch.einsum("...nd,...nd->...n", q, k_cumsum.type_as(q) + eps)
            context = torch.einsum("...nd,...ne->...nde", k, v)
            context_cumsum = last_context_cumsum + context.cumsum(dim=-3)
            outs.append(torch.einsum("...nde,...nd,...n->...ne", context_cumsum, q, D_inv))
            last_k_cumsum, last_context_cumsum = k_cumsum[:, :, -1:], context_cumsum[:, :, -1:]
        return torch.cat(outs, dim=-2)

    q = torch.tensor(arr(9142, B, H, T, d, scale=0.5), requires_grad=True)
    k = torch.tensor(arr(9143, B, H, T, d, scale=0.5), requires_grad=True)
    v = torch.tensor(arr(9144, B, H, T, d), requires_grad=True)
    qf = softmax_kernel(q, projection_matrix, is_query=True)
    kf = softmax_kernel(k, projection_matrix, is_query=False)
    out = linear_attention(qf, kf, v)
    out_causal = causal_linear_attention_noncuda(qf, kf, v)
    (out.pow(2).sum() + out_causal.sum()).backward()
    exact = torch.softmax(q.detach() @ k.detach().transpose(-1, -2) / math.sqrt(d), -1) @ v.detach()
    return {"features_q": qf, "features_k": kf, "out": out, "out_causal": out_causal,
            "dq": q.grad, "dk": k.grad, "dv": v.grad, "err_vs_exact": (out - exact).abs().mean(),
            "causal_first_row_is_v0": torch.allclose(out_causal[:, :, 0], v[:, :, 0], atol=1e-5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def linformer_sequence_projections_training(torch):
    nn, F = torch.nn, torch.nn.functional
    B, N, D, H, K = 2, 10, 16, 4, 4
    dh = D // H

    def init_(tensor):
        dim = tensor.shape[-1]
        std = 1 / math.sqrt(dim)
        with torch.no_grad():
            tensor.copy_(
                torch.tensor(
                    np.random.default_rng(9151).uniform(-std, std, tensor.shape).astype(np.float32)
                )
            )
        return tensor

    class LinformerSelfAttention(nn.Module):
        def __init__(self, one_kv_head=True, share_kv=False):
            super().__init__()
            self.to_q = nn.Linear(D, D, bias=False)
            kv_dim = dh if one_kv_head else D
            self.to_k = nn.Linear(D, kv_dim, bias=False)
            self.proj_k = nn.Parameter(init_(torch.zeros(N, K)))
            self.share_kv = share_kv
            if not share_kv:
                self.to_v = nn.Linear(D, kv_dim, bias=False)
                self.proj_v = nn.Parameter(init_(torch.zeros(N, K)))
            self.to_out = nn.Linear(D, D)

        def forward(self, x):
            b, n, _ = x.shape
            queries = self.to_q(x)
            keys = self.to_k(x)
            values = self.to_v(x) if not self.share_kv else keys
            kv_projs = (self.proj_k, self.proj_v if not self.share_kv else self.proj_k)

            def proj_seq_len(args):
                return torch.einsum("bnd,nk->bkd", *args)

            keys, values = map(proj_seq_len, zip((keys, values), kv_projs))
            queries = queries.reshape(b, n, H, -1).transpose(1, 2)

            def merge_key_values(t):
                return t.reshape(b, K, -1, dh).transpose(1, 2).expand(-1, H, -1, -1)

            keys, values = map(merge_key_values, (keys, values))
            dots = torch.einsum("bhnd,bhkd->bhnk", queries, keys) * (dh**-0.5)
            attn = dots.softmax(dim=-1)
            out = torch.einsum("bhnk,bhkd->bhnd", attn, values)
            return self.to_out(out.transpose(1, 2).reshape(b, n, -1))

    out = {}
    for one_kv_head, share_kv in ((True, False), (False, True)):
        model = LinformerSelfAttention(one_kv_head, share_kv)
        for lin in (m for m in model.modules() if isinstance(m, nn.Linear)):
            set_weights(torch, lin, seed=9152)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
        x, y = torch.tensor(arr(9153, B, N, D)), torch.tensor(arr(9154, B, N, D))
        losses = []
        for _ in range(3):
            loss = F.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[f"one_kv={one_kv_head},share={share_kv}"] = {"losses": losses, "grads": grads(model),
                                                         "y": model(x)}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def perceiver_latent_cross_attention_geglu_masked_context(torch):
    nn, F = torch.nn, torch.nn.functional
    B, N, C, L, D, H, dh = 2, 9, 6, 4, 8, 2, 4

    class GEGLU(nn.Module):
        def forward(self, x):
            x, gates = x.chunk(2, dim=-1)
            return x * F.gelu(gates)

    class PreNorm(nn.Module):
        def __init__(self, dim, fn, context_dim=None):
            super().__init__()
            self.fn, self.norm = fn, nn.LayerNorm(dim)
            self.norm_context = nn.LayerNorm(context_dim) if context_dim is not None else None

        def forward(self, x, **kwargs):
            x = self.norm(x)
            if self.norm_context is not None:
                kwargs.update(context=self.norm_context(kwargs["context"]))
            return self.fn(x, **kwargs)

    class Attention(nn.Module):
        def __init__(self, query_dim, context_dim=None):
            super().__init__()
            context_dim = context_dim or query_dim
            self.scale = dh**-0.5
            self.to_q = nn.Linear(query_dim, H * dh, bias=False)
            self.to_kv = nn.Linear(context_dim, H * dh * 2, bias=False)
            self.to_out = nn.Linear(H * dh, query_dim)

        def forward(self, x, context=None, mask=None):
            context = x if context is None else context
            q = self.to_q(x)
            k, v = self.to_kv(context).chunk(2, dim=-1)

            def split(t):  # 'b n (h d) -> (b h) n d'
                b, n, _ = t.shape
                return t.reshape(b, n, H, dh).permute(0, 2, 1, 3).reshape(b * H, n, dh)

            q, k, v = map(split, (q, k, v))
            sim = torch.einsum("b i d, b j d -> b i j", q, k) * self.scale
            if mask is not None:
                max_neg_value = -torch.finfo(sim.dtype).max
                mask = mask.reshape(mask.shape[0], -1).repeat_interleave(H, dim=0)[:, None, :]
                sim.masked_fill_(~mask, max_neg_value)
            attn = sim.softmax(dim=-1)
            out = torch.einsum("b i j, b j d -> b i d", attn, v)
            out = out.reshape(-1, H, out.shape[1], dh).permute(0, 2, 1, 3).flatten(2)
            return self.to_out(out)

    class PerceiverIO(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.zeros(L, D))
            self.cross_attn = PreNorm(D, Attention(D, C), context_dim=C)
            self.cross_ff = PreNorm(
                D, nn.Sequential(nn.Linear(D, D * 4 * 2), GEGLU(), nn.Linear(D * 4, D))
            )
            self.self_attn = PreNorm(D, Attention(D))
            self.head = nn.Linear(D, 3)

        def forward(self, data, mask):
            x = self.latents.unsqueeze(0).expand(data.shape[0], -1, -1)
            x = self.cross_attn(x, context=data, mask=mask) + x
            x = self.cross_ff(x) + x
            x = self.self_attn(x) + x
            return self.head(x.mean(dim=-2))

    model = set_weights(torch, PerceiverIO(), seed=9161)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.tensor(arr(9162, B, N, C))
    mask = torch.tensor(np.array([[True] * N, [True] * 6 + [False] * 3]))
    y = torch.tensor(np.array([2, 0]))
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(data, mask), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    # masked context positions do not matter
    data2 = data.clone()
    data2[1, 6:] = 100.0
    same = torch.allclose(model(data, mask), model(data2, mask), atol=1e-5)
    return {"losses": losses, "grads": grads(model), "latents": model.latents, "masked_ignored": same,
            "logits": model(data, mask)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def flash_attention_reference_online_softmax_and_manual_backward(torch):
    B, H, N, d, Br, Bc = 1, 2, 10, 4, 4, 3
    scale = 1.0 / math.sqrt(d)

    def flash_forward(q, k, v, causal):
        outs, lses = [], []
        for i in range(0, N, Br):
            qi = q[:, :, i : i + Br] * scale
            rows = torch.arange(i, min(i + Br, N))
            m = torch.full((B, H, qi.shape[2], 1), float("-inf"))
            l = torch.zeros(B, H, qi.shape[2], 1)  # noqa: E741
            acc = torch.zeros(B, H, qi.shape[2], d)
            for j in range(0, N, Bc):
                if causal and j > rows[-1].item():
                    break
                s = qi @ k[:, :, j : j + Bc].transpose(-1, -2)
                if causal:
                    cols = torch.arange(j, min(j + Bc, N))
                    s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
                p = torch.exp(s - m_new)
                alpha = torch.exp(m - m_new)
                l = alpha * l + p.sum(dim=-1, keepdim=True)  # noqa: E741
                acc = alpha * acc + p @ v[:, :, j : j + Bc]
                m = m_new
            outs.append(acc / l)
            lses.append((m + torch.log(l)).squeeze(-1))
        return torch.cat(outs, dim=2), torch.cat(lses, dim=2)

    def flash_backward(q, k, v, o, lse, do, causal):
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        D = (do * o).sum(dim=-1, keepdim=True)
        for j in range(0, N, Bc):
            kj, vj = k[:, :, j : j + Bc], v[:, :, j : j + Bc]
            for i in range(0, N, Br):
                s = (q[:, :, i : i + Br] @ kj.transpose(-1, -2)) * scale
                if causal:
                    rows, cols = torch.arange(i, min(i + Br, N)), torch.arange(j, min(j + Bc, N))
                    s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
                p = torch.exp(s - lse[:, :, i : i + Br, None])
                dv[:, :, j : j + Bc] += p.transpose(-1, -2) @ do[:, :, i : i + Br]
                dp = do[:, :, i : i + Br] @ vj.transpose(-1, -2)
                ds = p * (dp - D[:, :, i : i + Br])
                dq[:, :, i : i + Br] += (ds @ kj) * scale
                dk[:, :, j : j + Bc] += (ds.transpose(-1, -2) @ q[:, :, i : i + Br]) * scale
        return dq, dk, dv

    res = {}
    for causal in (False, True):
        q, k, v = (torch.tensor(arr(9171 + s, B, H, N, d), requires_grad=True) for s in range(3))
        do = torch.tensor(arr(9175, B, H, N, d))
        o, lse = flash_forward(q, k, v, causal)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        s = (q @ k.transpose(-1, -2)) * scale
        if causal:
            s = s.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
        lse_ref = torch.logsumexp(s, dim=-1)
        (o * do).sum().backward()
        auto = (q.grad, k.grad, v.grad)
        with torch.no_grad():
            manual = flash_backward(q, k, v, o, lse, do, causal)
        res[f"causal={causal}"] = {"o": o, "lse": lse, "o_matches": torch.allclose(o, ref, atol=1e-5),
                                   "lse_matches": torch.allclose(lse, lse_ref, atol=1e-5),
                                   "autograd": auto, "manual": manual,
                                   "manual_matches": all(torch.allclose(a, b, atol=1e-4) for a, b in zip(auto, manual))}  # fmt: skip
    return res


@program(rtol=5e-4, atol=5e-5)
def memory_efficient_chunked_attention_logsumexp_merge_checkpointed(torch):
    from_checkpoint = torch.utils.checkpoint.checkpoint
    B, T, H, d, kv_chunk = 2, 9, 2, 4, 4

    def summarize_chunk(query, key, value):
        attn_weights = torch.einsum("bqhd,bkhd->bqhk", query, key)
        max_score = torch.amax(attn_weights, dim=-1, keepdim=True).detach()
        exp_weights = torch.exp(attn_weights - max_score)
        exp_values = torch.einsum("bvhf,bqhv->bqhf", value, exp_weights)
        return exp_values, exp_weights.sum(dim=-1), max_score.squeeze(-1)

    def query_chunk_attention(query, key, value):  # Rabe & Staats
        query = query / math.sqrt(d)
        chunks = []
        for start in range(0, key.shape[1], kv_chunk):
            kc, vc = key[:, start : start + kv_chunk], value[:, start : start + kv_chunk]
            chunks.append(from_checkpoint(summarize_chunk, query, kc, vc, use_reentrant=False))
        chunk_values, chunk_weights, chunk_max = map(torch.stack, zip(*chunks))
        global_max = torch.amax(chunk_max, dim=0, keepdim=True)
        max_diffs = torch.exp(chunk_max - global_max)
        chunk_values = chunk_values * torch.unsqueeze(max_diffs, -1)
        chunk_weights = chunk_weights * max_diffs
        all_values, all_weights = (
            chunk_values.sum(dim=0),
            torch.unsqueeze(chunk_weights, -1).sum(dim=0),
        )
        return all_values / all_weights

    def lse_merge_attention(query, key, value):  # xformers-style: (out, lse) per key split
        outs, lses = [], []
        for kc, vc in zip(key.split(kv_chunk, dim=1), value.split(kv_chunk, dim=1)):
            s = torch.einsum("bqhd,bkhd->bhqk", query, kc) / math.sqrt(d)
            lse = torch.logsumexp(s, dim=-1)
            outs.append(torch.einsum("bhqk,bkhd->bqhd", torch.exp(s - lse[..., None]), vc))
            lses.append(lse)
        lse_all = torch.logsumexp(torch.stack(lses), dim=0)
        w = (
            torch.exp(torch.stack(lses) - lse_all).permute(0, 1, 3, 2).unsqueeze(-1)
        )  # S, b, q, h, 1
        return (torch.stack(outs) * w).sum(dim=0), lse_all

    q, k, v = (torch.tensor(arr(9181 + s, B, T, H, d), requires_grad=True) for s in range(3))
    o1 = query_chunk_attention(q, k, v)
    o1.pow(2).sum().backward()
    g1 = (q.grad.clone(), k.grad.clone(), v.grad.clone())
    for t in (q, k, v):
        t.grad = None
    o2, lse = lse_merge_attention(q, k, v)
    o2.pow(2).sum().backward()
    g2 = (q.grad, k.grad, v.grad)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    ).transpose(1, 2)
    return {"o_chunked": o1, "o_lse": o2, "lse": lse, "grads_chunked": g1, "grads_lse": g2,
            "matches_sdpa": torch.allclose(o1, ref, atol=1e-5) and torch.allclose(o2, ref, atol=1e-5)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def sdpa_enable_gqa_mqa_scale_and_mask_kinds(torch):
    F = torch.nn.functional
    B, Hq, Hkv, T, S, d = 2, 6, 2, 5, 7, 4
    q = torch.tensor(arr(9191, B, Hq, T, d), requires_grad=True)
    k = torch.tensor(arr(9192, B, Hkv, S, d), requires_grad=True)
    v = torch.tensor(arr(9193, B, Hkv, S, d), requires_grad=True)
    bool_mask = torch.tensor(np.random.default_rng(9194).random((B, 1, T, S)) > 0.4)
    bool_mask[..., 0] = True
    float_mask = torch.tensor(arr(9195, T, S, scale=0.5))
    outs = {
        "gqa": F.scaled_dot_product_attention(q, k, v, enable_gqa=True),
        "gqa_scale": F.scaled_dot_product_attention(q, k, v, scale=0.7, enable_gqa=True),
        "gqa_bool": F.scaled_dot_product_attention(q, k, v, attn_mask=bool_mask, enable_gqa=True),
        "gqa_float": F.scaled_dot_product_attention(q, k, v, attn_mask=float_mask, scale=0.4, enable_gqa=True),
        "gqa_causal_rect": F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True),
    }  # fmt: skip
    sum((o * (i + 1)).sum() for i, o in enumerate(outs.values())).backward()
    n_rep = Hq // Hkv
    k_ri, v_ri = k.detach().repeat_interleave(n_rep, dim=1), v.detach().repeat_interleave(n_rep, 1)
    k_ex = k.detach()[:, :, None].expand(B, Hkv, n_rep, S, d).reshape(B, Hq, S, d)
    causal = torch.ones(T, S, dtype=torch.bool).tril(diagonal=0)
    by_hand = (q.detach() @ k_ri.transpose(-2, -1) / math.sqrt(d)).masked_fill(
        ~causal, float("-inf")
    )
    by_hand = by_hand.softmax(-1) @ v_ri
    # multi-query: one kv head, expanded (a view) rather than copied
    k1, v1 = k.detach()[:, :1], v.detach()[:, :1]
    mqa = F.scaled_dot_product_attention(q.detach(), k1.expand(B, Hq, S, d), v1.expand(B, Hq, S, d),
                                         attn_mask=bool_mask)  # fmt: skip
    mqa_gqa = F.scaled_dot_product_attention(
        q.detach(), k1, v1, attn_mask=bool_mask, enable_gqa=True
    )
    return {**outs, "dq": q.grad, "dk": k.grad, "dv": v.grad, "by_hand_causal": by_hand,
            "expand_equals_interleave": torch.equal(k_ex, k_ri), "mqa": mqa,
            "mqa_same": torch.allclose(mqa, mqa_gqa, atol=1e-6)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def gshard_top2_switch_top1_routers_capacity_aux_and_z_losses(torch):
    nn, F = torch.nn, torch.nn.functional
    S, M, E, Hd, capacity_factor = 12, 6, 4, 8, 1.0

    def top2gating(logits):
        gates = F.softmax(logits, dim=1)
        num_tokens, num_experts = gates.shape
        capacity = 2 * math.ceil(num_tokens / num_experts * capacity_factor) // 2
        indices1_s = torch.argmax(gates, dim=1)
        mask1 = F.one_hot(indices1_s, num_classes=num_experts)
        logits_except1 = logits.masked_fill(mask1.bool(), float("-inf"))
        indices2_s = torch.argmax(logits_except1, dim=1)
        mask2 = F.one_hot(indices2_s, num_classes=num_experts)
        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations2 = torch.cumsum(mask2, dim=0) - 1
        locations2 += torch.sum(mask1, dim=0, keepdim=True)
        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.to(gates.dtype), dim=0)
        l_aux = torch.mean(me * ce) * num_experts * num_experts
        mask1 = mask1 * torch.lt(locations1, capacity)
        mask2 = mask2 * torch.lt(locations2, capacity)
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        locations2_s = torch.sum(locations2 * mask2, dim=1)
        mask1_float, mask2_float = mask1.to(gates.dtype), mask2.to(gates.dtype)
        gates1_s = torch.einsum("se,se->s", gates, mask1_float)
        gates2_s = torch.einsum("se,se->s", gates, mask2_float)
        denom_s = torch.clamp(gates1_s + gates2_s, min=torch.finfo(gates1_s.dtype).eps)
        gates1_s, gates2_s = gates1_s / denom_s, gates2_s / denom_s
        gates1 = torch.einsum("s,se->se", gates1_s, mask1_float)
        gates2 = torch.einsum("s,se->se", gates2_s, mask2_float)
        locations1_sc = F.one_hot(locations1_s, num_classes=capacity).to(gates.dtype)
        locations2_sc = F.one_hot(locations2_s, num_classes=capacity).to(gates.dtype)
        combine_weights = torch.einsum("se,sc->sec", gates1, locations1_sc) + torch.einsum(
            "se,sc->sec", gates2, locations2_sc
        )
        return l_aux, combine_weights, combine_weights.bool(), (mask1, mask2)

    def router_z_loss(router_logits):
        num_groups, tokens_per_group, _ = router_logits.shape
        log_z = torch.logsumexp(router_logits, dim=-1)
        return torch.sum(log_z**2) / (num_groups * tokens_per_group)

    def switch_route(router_logits, expert_capacity):  # SwitchTransformersTop1Router
        router_probs = F.softmax(router_logits, dim=-1, dtype=torch.float32)
        expert_index = torch.argmax(router_probs, dim=-1)
        expert_index = F.one_hot(expert_index, num_classes=E)
        token_priority = torch.cumsum(expert_index, dim=-2)
        expert_index = expert_index * (token_priority <= expert_capacity)
        return expert_index, torch.max(router_probs, dim=-1).values.unsqueeze(-1)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.wg = nn.Linear(M, E, bias=False)
            self.w1, self.w2 = (
                nn.Parameter(torch.zeros(E, M, Hd)),
                nn.Parameter(torch.zeros(E, Hd, M)),
            )
            self.experts = nn.ModuleList(nn.Sequential(nn.Linear(M, Hd), nn.ReLU(), nn.Linear(Hd, M)) for _ in range(E))  # fmt: skip

        def gshard(self, x):
            l_aux, combine, dispatch, masks = top2gating(self.wg(x))
            dispatched = torch.einsum("sec,sm->ecm", dispatch.to(x.dtype), x)
            h = torch.relu(torch.einsum("ecm,emh->ech", dispatched, self.w1))
            expert_out = torch.einsum("ech,ehm->ecm", h, self.w2)
            return torch.einsum("sec,ecm->sm", combine, expert_out), l_aux, combine, masks

        def switch(self, x):  # groups of tokens, boolean-index dispatch
            logits = self.wg(x)
            router_mask, router_probs = switch_route(logits, expert_capacity=2)
            next_states = x.clone()
            for idx, expert in enumerate(self.experts):
                token_indices = router_mask[:, :, idx].bool()
                next_states[token_indices] = expert(x[token_indices]).to(next_states.dtype)
            return router_probs * next_states, router_z_loss(logits), router_mask

    moe = set_weights(torch, MoE(), seed=9201)
    x = torch.tensor(arr(9202, S, M))
    y = torch.tensor(arr(9203, S, M))
    out, l_aux, combine, (mask1, mask2) = moe.gshard(x)
    xs = x.view(3, 4, M)
    out_s, z_loss, router_mask = moe.switch(xs)
    loss = F.mse_loss(out, y) + 0.01 * l_aux + F.mse_loss(out_s.view(S, M), y) + 1e-3 * z_loss
    loss.backward()
    # Switch's expert-slot layout with scatter: token -> (expert, position) slot
    with torch.no_grad():
        top1 = moe.wg(x).argmax(-1)
        pos = (torch.cumsum(F.one_hot(top1, E), dim=0) - 1).gather(1, top1[:, None]).squeeze(1)
        slot = (top1 * S + pos).clamp(max=E * S - 1)
        slots = torch.zeros(E * S, M).scatter(0, slot[:, None].expand(-1, M), x)
        tokens_per_expert = torch.zeros(E, dtype=torch.long).scatter_add(
            0, top1, torch.ones(S, dtype=torch.long)
        )
    return {"out": out, "l_aux": l_aux, "combine": combine, "mask1": mask1, "mask2": mask2,
            "out_switch": out_s, "z_loss": z_loss, "router_mask": router_mask, "loss": loss,
            "grads": grads(moe), "slots": slots, "tokens_per_expert": tokens_per_expert}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def differential_attention_lambda_reparam_and_sigmoid_attention(torch):
    nn, F = torch.nn, torch.nn.functional
    B, T, D, H, depth = 2, 6, 16, 2, 3
    hd = D // H // 2

    def lambda_init_fn(depth):
        return 0.8 - 0.6 * math.exp(-0.3 * depth)

    class MultiheadDiffAttn(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj, self.v_proj, self.out_proj = (
                nn.Linear(D, D, bias=False) for _ in range(4)
            )
            self.scaling = hd**-0.5
            self.lambda_init = lambda_init_fn(depth)
            self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
                nn.Parameter(torch.zeros(hd, dtype=torch.float32)) for _ in range(4))  # fmt: skip
            self.subln = nn.RMSNorm(2 * hd, eps=1e-5, elementwise_affine=True)

        def forward(self, x):
            bsz, tgt_len, _ = x.size()
            q = self.q_proj(x).view(bsz, tgt_len, 2 * H, hd).transpose(1, 2)
            k = self.k_proj(x).view(bsz, tgt_len, 2 * H, hd).transpose(1, 2)
            v = self.v_proj(x).view(bsz, tgt_len, H, 2 * hd).transpose(1, 2)
            q *= self.scaling
            attn_weights = torch.matmul(q, k.transpose(-1, -2))
            attn_mask = torch.triu(
                torch.zeros([tgt_len, tgt_len]).float().fill_(float("-inf")).type_as(attn_weights),
                1,
            )
            attn_weights = torch.nan_to_num(attn_weights)
            attn_weights += attn_mask
            attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(
                attn_weights
            )
            lambda_1 = torch.exp(
                torch.sum(self.lambda_q1 * self.lambda_k1, dim=-1).float()
            ).type_as(q)
            lambda_2 = torch.exp(
                torch.sum(self.lambda_q2 * self.lambda_k2, dim=-1).float()
            ).type_as(q)
            lambda_full = lambda_1 - lambda_2 + self.lambda_init
            attn_weights = attn_weights.view(bsz, H, 2, tgt_len, tgt_len)
            attn_weights = attn_weights[:, :, 0] - lambda_full * attn_weights[:, :, 1]
            attn = self.subln(torch.matmul(attn_weights, v))
            attn = attn * (1 - self.lambda_init)
            attn = attn.transpose(1, 2).reshape(bsz, tgt_len, H * 2 * hd)
            return self.out_proj(attn), attn_weights, lambda_full

    def sigmoid_attention(q, k, v, causal):  # Apple's SigmoidAttn: b = -log(n)
        n = k.shape[-2]
        logits = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5 - math.log(n)
        if causal:
            logits = logits.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
        return torch.sigmoid(logits) @ v

    attn = set_weights(torch, MultiheadDiffAttn(), seed=9211)
    x = torch.tensor(arr(9212, B, T, D), requires_grad=True)
    out, weights, lam = attn(x)
    out.pow(2).mean().backward()
    q, k, v = (torch.tensor(arr(9213 + s, B, 2, T, 4), requires_grad=True) for s in range(3))
    sig = sigmoid_attention(q, k, v, causal=False)
    sig_causal = sigmoid_attention(q, k, v, causal=True)
    (sig.sum() + sig_causal.pow(2).sum()).backward()
    return {"out": out, "diff_weights": weights, "lambda_full": lam, "lambda_init": attn.lambda_init,
            "dx": x.grad, "grads": grads(attn), "sig": sig, "sig_causal": sig_causal,
            "dq": q.grad, "dk": k.grad, "dv": v.grad,
            "row_sums": weights.sum(-1)}  # fmt: skip
