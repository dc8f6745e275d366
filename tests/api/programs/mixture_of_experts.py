"""Mixture-of-experts and conditional computation as fairseq, DeepSpeed-MoE, Mesh/HF Switch
Transformer, GShard, Mixtral and the papers after them write it: top-1 and top-2 softmax gating,
Switch's load-balancing loss and router z-loss, expert capacity with token dropping (``one_hot`` +
``cumsum`` positions), dispatch and combine through ``einsum`` masks, ``index_select`` /
``index_add_`` and ``scatter``, Shazeer's noisy top-k gating (with fixed NumPy noise), expert-choice
routing (top-k over tokens), Soft MoE, mixture-of-depths, a Mixtral sparse block inside a small
language model trained a few steps, expert-usage statistics with ``bincount``, early-exit heads with
confidence thresholds, and a hypernetwork that generates a layer's weights. Every random draw
(jitter, noise, token priorities) comes from NumPy."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _uniform(seed: int, *shape: int, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


@program
def moe_switch_top1_router_capacity_aux_and_z_loss(torch):
    """The Switch Transformer's sparse MLP as HF writes it: a router with multiplicative jitter on
    its input (fixed uniform noise), ``softmax(..., dtype=torch.float32)``, top-1 expert as a
    one-hot, capacity by ``cumsum`` of the one-hot over the sequence (overflowing tokens keep
    their hidden state), experts applied through boolean masks (``next_states[mask] =
    expert(hidden[mask])``), the output scaled by the top probability; trained with the
    load-balancing loss (``mean(tokens_per_expert * prob_per_expert) * E**2``) and the router
    z-loss (``logsumexp(logits)**2``)."""
    nn, F = torch.nn, torch.nn.functional
    d_model, d_ff, num_experts, capacity = 8, 16, 4, 3
    jitter = 0.01

    class SwitchTop1Router(nn.Module):
        def __init__(self):
            super().__init__()
            self.classifier = nn.Linear(d_model, num_experts, bias=False)

        def forward(self, hidden_states, jitter_noise):
            if self.training:
                hidden_states = hidden_states * jitter_noise
            router_logits = self.classifier(hidden_states)
            router_probs = F.softmax(router_logits, dim=-1, dtype=torch.float32)
            expert_index = torch.argmax(router_probs, dim=-1)
            expert_index = F.one_hot(expert_index, num_classes=num_experts)
            token_priority = torch.cumsum(expert_index, dim=-2)
            expert_capacity_mask = token_priority <= capacity
            expert_index = expert_index * expert_capacity_mask
            router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
            return expert_index, router_probs, router_logits

    class SwitchDenseActDense(nn.Module):
        def __init__(self):
            super().__init__()
            self.wi = nn.Linear(d_model, d_ff, bias=False)
            self.wo = nn.Linear(d_ff, d_model, bias=False)
            self.act = nn.ReLU()

        def forward(self, hidden_states):
            return self.wo(self.act(self.wi(hidden_states)))

    class SwitchSparseMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = SwitchTop1Router()
            self.experts = nn.ModuleDict(
                {f"expert_{i}": SwitchDenseActDense() for i in range(num_experts)}
            )

        def forward(self, hidden_states, jitter_noise):
            router_mask, router_probs, router_logits = self.router(hidden_states, jitter_noise)
            expert_index = torch.argmax(router_mask, dim=-1)
            next_states = hidden_states.clone()
            router_mask = router_mask.bool()
            batch_size, seq_len, num_experts_ = router_mask.shape
            idx_mask = router_mask.reshape(batch_size * seq_len, num_experts_).sum(dim=0)
            idx_mask = torch.nonzero(idx_mask, as_tuple=True)[0].tolist()
            for idx in idx_mask:
                next_states[router_mask[:, :, idx]] = getattr(self.experts, f"expert_{idx}")(
                    hidden_states[router_mask[:, :, idx]]
                )
            hidden_states = router_probs * next_states
            return hidden_states, (router_logits, expert_index, router_mask)

    def router_z_loss_func(router_logits):
        num_groups, tokens_per_group, _ = router_logits.shape
        log_z = torch.logsumexp(router_logits, dim=-1)
        z_loss = log_z**2
        return torch.sum(z_loss) / (num_groups * tokens_per_group)

    def load_balancing_loss_func(router_probs, expert_indices):
        num_experts_ = router_probs.shape[-1]
        if expert_indices.dtype != torch.int64:
            expert_indices = expert_indices.to(torch.int64)
        if len(expert_indices.shape) == 2:
            expert_indices = expert_indices.unsqueeze(2)
        expert_mask = F.one_hot(expert_indices, num_experts_)
        expert_mask = torch.max(expert_mask, axis=-2).values
        expert_mask = expert_mask.to(torch.float32)
        tokens_per_group_and_expert = torch.mean(expert_mask, axis=-2)
        router_prob_per_group_and_expert = torch.mean(router_probs, axis=-2)
        return torch.mean(tokens_per_group_and_expert * router_prob_per_group_and_expert) * (
            num_experts_**2
        )

    mlp = set_weights(torch, SwitchSparseMLP(), seed=11)
    x = torch.tensor(arr(12, 2, 10, d_model))
    target = torch.tensor(arr(13, 2, 10, d_model))
    opt = torch.optim.Adam(mlp.parameters(), lr=1e-2)
    losses, aux_losses, z_losses, kept = [], [], [], []
    for step in range(4):
        noise = torch.tensor(_uniform(20 + step, 2, 10, d_model, low=1 - jitter, high=1 + jitter))
        out, (router_logits, expert_index, router_mask) = mlp(x, noise)
        router_probs = F.softmax(router_logits, dim=-1)
        aux = load_balancing_loss_func(router_probs, expert_index)
        z = router_z_loss_func(router_logits)
        loss = F.mse_loss(out, target) + 0.01 * aux + 0.001 * z
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        aux_losses.append(aux.item())
        z_losses.append(z.item())
        kept.append(int(router_mask.sum()))
    mlp.eval()
    with torch.no_grad():
        eval_out, (eval_logits, eval_index, eval_mask) = mlp(x, None)
    return {"losses": losses, "aux": aux_losses, "z": z_losses, "kept_tokens": kept,
            "router_mask": router_mask, "expert_index": expert_index, "eval_out": eval_out,
            "eval_index": eval_index, "dropped": (~eval_mask.any(-1)).sum(),
            "params": params(mlp)}  # fmt: skip


@program
def moe_fairseq_top2gating_capacity_einsum_dispatch(torch):
    """fairseq's / GShard's ``top2gating``: ``one_hot`` built with ``scatter_``, the second expert
    by ``masked_fill(mask1.bool(), -inf)`` on logits plus fixed Gumbel noise, gates renormalised
    with ``clamp(min=finfo.eps)``, positions in each expert's buffer by ``cumsum(mask, 0) - 1``
    (the second choices queued after all first choices), tokens beyond capacity dropped with
    ``torch.lt``, combine weights by ``bmm`` of gates and one-hot locations; the MOELayer
    dispatches with ``einsum("sec,sm->ecm")``, runs each expert on its ``chunk`` of the buffer and
    combines with ``einsum("sec,ecm->sm")``; gradients flow into the gate and the experts."""
    nn, F = torch.nn, torch.nn.functional
    model_dim, num_experts, capacity_factor = 6, 4, 0.5

    def one_hot(indices, num_classes, unsqueeze_indices=False):
        if unsqueeze_indices:
            indices = indices.unsqueeze(-1)
        assert indices.shape[-1] == 1, "last dimension of indices must be have size 1"
        output = torch.zeros(indices.shape[:-1] + (num_classes,), device=indices.device,
                             dtype=indices.dtype)  # fmt: skip
        output.scatter_(len(output.shape) - 1, indices, 1)
        return output

    def top2gating(logits, gumbel):
        gates = F.softmax(logits, dim=1)
        num_tokens = gates.shape[0]
        num_experts_ = gates.shape[1]
        capacity = 2 * math.ceil(num_tokens / num_experts_ * capacity_factor)
        indices1_s = torch.argmax(gates, dim=1, keepdim=True)
        mask1 = one_hot(indices1_s, num_experts_)
        logits_w_noise = logits + gumbel
        logits_except1 = logits_w_noise.masked_fill(mask1.bool(), float("-inf"))
        indices2_s = torch.argmax(logits_except1, dim=1, keepdim=True)
        mask2 = one_hot(indices2_s, num_experts_)
        gates1_s = (gates * mask1).sum(dim=1)
        gates2_s = (gates * mask2).sum(dim=1)
        denom_s = gates1_s + gates2_s
        denom_s = torch.clamp(denom_s, min=torch.finfo(denom_s.dtype).eps)
        gates1_s /= denom_s
        gates2_s /= denom_s
        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations2 = torch.cumsum(mask2, dim=0) - 1
        locations2 += torch.sum(mask1, dim=0, keepdim=True)
        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.to(gates.dtype), dim=0)
        l_aux = torch.mean(me * ce) * num_experts_ * num_experts_
        metadata = {"expert1_hist": 100 * torch.histc(indices1_s.squeeze().float(),
                                                       bins=num_experts_, min=0,
                                                       max=num_experts_ - 1) / num_tokens}  # fmt: skip
        mask1 = mask1 * torch.lt(locations1, capacity)
        mask2 = mask2 * torch.lt(locations2, capacity)
        metadata["overflow_expert1"] = 100 * (num_tokens - mask1.sum()) / num_tokens
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        locations2_s = torch.sum(locations2 * mask2, dim=1)
        gates1 = gates1_s.unsqueeze(-1) * mask1.to(gates1_s.dtype)
        gates2 = gates2_s.unsqueeze(-1) * mask2.to(gates2_s.dtype)
        locations1_sc = one_hot(locations1_s, num_classes=capacity, unsqueeze_indices=True)
        locations2_sc = one_hot(locations2_s, num_classes=capacity, unsqueeze_indices=True)
        combine1_sec = torch.bmm(gates1.unsqueeze(-1), locations1_sc.to(gates1.dtype).unsqueeze(1))
        combine2_sec = torch.bmm(gates2.unsqueeze(-1), locations2_sc.to(gates2.dtype).unsqueeze(1))
        combine_weights = combine1_sec + combine2_sec
        dispatch_mask = combine_weights.bool()
        return l_aux, combine_weights, dispatch_mask, metadata

    class Top2Gate(nn.Module):
        def __init__(self):
            super().__init__()
            self.wg = nn.Linear(model_dim, num_experts, bias=False)

        def forward(self, x, gumbel):
            return top2gating(self.wg(x), gumbel)

    class MOELayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = Top2Gate()
            self.experts = nn.ModuleList(
                [
                    nn.Sequential(nn.Linear(model_dim, 10), nn.GELU(), nn.Linear(10, model_dim))
                    for _ in range(num_experts)
                ]  # fmt: skip
            )

        def forward(self, input, gumbel):
            d_model = input.shape[2]
            reshaped_input = input.reshape(-1, d_model)
            l_aux, combine_weights, dispatch_mask, self.metadata = self.gate(reshaped_input, gumbel)
            dispatched_input = torch.einsum("sec,sm->ecm", dispatch_mask.to(input.dtype),
                                            reshaped_input)  # fmt: skip
            chunks = dispatched_input.chunk(len(self.experts), dim=0)
            expert_outputs = []
            for chunk, expert in zip(chunks, self.experts):
                expert_outputs += [expert(chunk)]
            expert_output = torch.cat(expert_outputs, dim=0)
            combined_output = torch.einsum("sec,ecm->sm", combine_weights, expert_output)
            return combined_output.reshape(input.shape), l_aux, combine_weights, dispatch_mask

    layer = set_weights(torch, MOELayer(), seed=31)
    x = torch.tensor(arr(32, 2, 8, model_dim))
    u = _uniform(33, 16, num_experts, low=1e-6, high=1 - 1e-6)
    gumbel = torch.tensor(-np.log(-np.log(u)).astype(np.float32))
    out, l_aux, combine, dispatch = layer(x, gumbel)
    loss = out.pow(2).mean() + 0.01 * l_aux
    loss.backward()
    return {"out": out, "l_aux": l_aux, "combine": combine, "dispatch": dispatch,
            "dispatch_sum": dispatch.sum(dim=(0, 2)), "hist": layer.metadata["expert1_hist"],
            "overflow": layer.metadata["overflow_expert1"], "loss": loss,
            "grads": grads(layer)}  # fmt: skip


@program
def moe_sorted_dispatch_index_select_index_add(torch):
    """Dropless top-2 routing the way grouped-GEMM MoE kernels (MegaBlocks, Tutel) lay tokens out:
    the flattened expert assignments sorted stably, per-expert counts by ``bincount`` and offsets
    by ``cumsum``, token rows gathered with ``index_select`` and split by ``torch.split(counts)``,
    each expert's output weighted by its gate and accumulated with ``index_add_``; checked against
    the dense computation and trained a few steps with SGD and momentum."""
    nn, F = torch.nn, torch.nn.functional
    d, hidden, E, k = 6, 12, 4, 2

    class GroupedMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, E, bias=False)
            self.w_in = nn.Parameter(torch.empty(E, d, hidden))
            self.w_out = nn.Parameter(torch.empty(E, hidden, d))

        def forward(self, x):
            tokens = x.reshape(-1, d)
            probs = self.router(tokens).softmax(dim=-1)
            top_w, top_e = probs.topk(k, dim=-1)
            top_w = top_w / top_w.sum(dim=-1, keepdim=True)
            flat_e = top_e.flatten()
            sorted_e, order = torch.sort(flat_e, stable=True)
            token_ids = order // k
            counts = torch.bincount(flat_e, minlength=E)
            offsets = torch.cumsum(counts, 0) - counts
            gathered = tokens.index_select(0, token_ids)
            weights = top_w.flatten()[order]
            out = torch.zeros_like(tokens)
            for e, chunk in enumerate(torch.split(gathered, counts.tolist())):
                if chunk.shape[0] == 0:
                    continue
                h = F.silu(chunk @ self.w_in[e]) @ self.w_out[e]
                start = int(offsets[e])
                ids = token_ids[start : start + chunk.shape[0]]
                out.index_add_(0, ids, h * weights[start : start + chunk.shape[0], None])
            return out.view_as(x), probs, top_e, counts, sorted_e

    moe = set_weights(torch, GroupedMoE(), seed=41)
    x = torch.tensor(arr(42, 3, 6, d))
    y = torch.tensor(arr(43, 3, 6, d))
    opt = torch.optim.SGD(moe.parameters(), lr=0.2, momentum=0.9)
    losses, loads = [], []
    for _ in range(3):
        out, probs, top_e, counts, sorted_e = moe(x)
        loss = F.mse_loss(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        loads.append(counts)
    with torch.no_grad():
        out, probs, top_e, counts, sorted_e = moe(x)
        tokens = x.reshape(-1, d)
        dense_all = torch.stack(
            [F.silu(tokens @ moe.w_in[e]) @ moe.w_out[e] for e in range(E)], dim=1
        )
        top_w, top_i = probs.topk(k, dim=-1)
        gate = torch.zeros_like(probs).scatter_(1, top_i, top_w / top_w.sum(-1, keepdim=True))
        dense = (gate.unsqueeze(-1) * dense_all).sum(1)
    return {"losses": losses, "loads": loads, "out": out, "dense": dense.view_as(x),
            "sorted_e": sorted_e, "top_e": top_e, "params": params(moe)}  # fmt: skip


@program
def moe_expert_usage_bincount_scatter_and_bias_balancing(torch):
    """Expert-usage bookkeeping across batches: sigmoid affinities with a per-expert selection
    bias nudged after every batch by the sign of its load error (DeepSeek-V3's auxiliary-loss-free
    balancing), top-2 picked on ``scores + bias`` but weighted by the unbiased scores, usage by
    ``bincount(minlength=E)`` checked against ``one_hot(...).sum(0)`` and ``unique(return_counts)``,
    a ``histc`` of the gate values, the sparse gate matrix by ``scatter_``, the combine by
    ``scatter_add_`` over expanded token indices, and a printed usage table."""
    nn = torch.nn
    F = nn.functional
    d, E, k, n_tokens, gamma = 5, 6, 2, 16, 0.05
    centroids = torch.tensor(arr(51, E, d))
    experts = set_weights(torch, nn.ModuleList([nn.Linear(d, d) for _ in range(E)]), seed=52)
    bias = torch.zeros(E)
    total_usage = torch.zeros(E, dtype=torch.long)
    usage_history, bias_history, lines, outs = [], [], [], []
    for batch in range(4):
        x = torch.tensor(arr(60 + batch, n_tokens, d))
        scores = torch.sigmoid(x @ centroids.t())
        _, topk_idx = torch.topk(scores + bias, k, dim=-1)
        topk_w = scores.gather(1, topk_idx)
        topk_w = topk_w / topk_w.sum(dim=-1, keepdim=True)
        usage = torch.bincount(topk_idx.view(-1), minlength=E)
        assert torch.equal(usage, F.one_hot(topk_idx, E).sum(dim=(0, 1)))
        values, counts = torch.unique(topk_idx, return_counts=True)
        total_usage += usage
        gates = torch.zeros(n_tokens, E).scatter_(1, topk_idx, topk_w)
        with torch.no_grad():
            expert_out = torch.stack([experts[e](x) for e in range(E)], dim=1)  # (n, E, d)
            picked = expert_out[torch.arange(n_tokens).unsqueeze(1), topk_idx]  # (n, k, d)
            contrib = (picked * topk_w.unsqueeze(-1)).reshape(-1, d)
            token_idx = torch.arange(n_tokens).repeat_interleave(k)
            out = torch.zeros(n_tokens, d).scatter_add_(
                0, token_idx.unsqueeze(1).expand(-1, d), contrib
            )
            dense = torch.einsum("ne,ned->nd", gates, expert_out)
        outs.append(out - dense)
        load_error = usage.float().mean() - usage.float()
        bias += gamma * torch.sign(load_error)
        usage_history.append(usage)
        bias_history.append(bias.clone())
        lines.append(f"batch {batch}: experts {values.tolist()} counts {counts.tolist()}")
    frac = total_usage.float() / total_usage.sum()
    lines.append(f"last batch, first tokens: {torch.topk(scores[:2], k, dim=-1)}")
    for e in range(E):
        lines.append(f"expert {e}: {int(total_usage[e])} tokens ({frac[e].item():.1%})")
    return {"usage": usage_history, "bias": bias_history, "total_usage": total_usage,
            "frac": frac, "gates": gates, "out_minus_dense": outs, "out": out,
            "hist": torch.histc(topk_w, bins=5, min=0.0, max=1.0),
            "cv": frac.std() / frac.mean(), "table": "\n".join(lines)}  # fmt: skip


@program
def moe_noisy_topk_gating_sparse_dispatcher(torch):
    """Shazeer et al.'s sparsely-gated MoE as its popular re-implementation writes it: clean and
    noise logits, ``softplus`` noise scale, fixed standard-normal noise, ``topk(k + 1)`` so that
    ``_prob_in_top_k`` can compare against the threshold via ``Normal(0, 1).cdf`` on flattened
    ``gather``ed thresholds, sparse gates by ``zeros.scatter``, the importance and load losses by
    ``cv_squared``; the SparseDispatcher (``nonzero().sort(0)``, ``split``, ``gather`` of the
    nonzero gates, ``index_add`` combine); trained a few steps with Adam."""
    nn = torch.nn
    Normal = torch.distributions.normal.Normal
    input_size, output_size, hidden, num_experts, k = 6, 3, 8, 5, 2
    batch, noise_epsilon = 10, 1e-2

    class SparseDispatcher:
        def __init__(self, num_experts, gates):
            self._gates = gates
            self._num_experts = num_experts
            sorted_experts, index_sorted_experts = torch.nonzero(gates).sort(dim=0, stable=True)
            _, self._expert_index = sorted_experts.split(1, dim=1)
            self._batch_index = torch.nonzero(gates)[index_sorted_experts[:, 1], 0]
            self._part_sizes = (gates > 0).sum(0).tolist()
            gates_exp = gates[self._batch_index.flatten()]
            self._nonzero_gates = torch.gather(gates_exp, 1, self._expert_index)

        def dispatch(self, inp):
            inp_exp = inp[self._batch_index].squeeze(1)
            return torch.split(inp_exp, self._part_sizes, dim=0)

        def combine(self, expert_out, multiply_by_gates=True):
            stitched = torch.cat(expert_out, 0)
            if multiply_by_gates:
                stitched = stitched.mul(self._nonzero_gates)
            zeros = torch.zeros(self._gates.size(0), expert_out[-1].size(1),
                                device=stitched.device)  # fmt: skip
            return zeros.index_add(0, self._batch_index, stitched.float())

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(input_size, hidden)
            self.fc2 = nn.Linear(hidden, output_size)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList([MLP() for _ in range(num_experts)])
            self.w_gate = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)
            self.w_noise = nn.Parameter(torch.zeros(input_size, num_experts), requires_grad=True)
            self.softplus = nn.Softplus()
            self.softmax = nn.Softmax(1)
            self.register_buffer("mean", torch.tensor([0.0]))
            self.register_buffer("std", torch.tensor([1.0]))

        def cv_squared(self, x):
            eps = 1e-10
            if x.shape[0] == 1:
                return torch.tensor([0], device=x.device, dtype=x.dtype)
            return x.float().var() / (x.float().mean() ** 2 + eps)

        def _gates_to_load(self, gates):
            return (gates > 0).sum(0)

        def _prob_in_top_k(self, clean_values, noisy_values, noise_stddev, noisy_top_values):
            batch_ = clean_values.size(0)
            m = noisy_top_values.size(1)
            top_values_flat = noisy_top_values.flatten()
            threshold_positions_if_in = torch.arange(batch_, device=clean_values.device) * m + k
            threshold_if_in = torch.unsqueeze(
                torch.gather(top_values_flat, 0, threshold_positions_if_in), 1
            )
            is_in = torch.gt(noisy_values, threshold_if_in)
            threshold_positions_if_out = threshold_positions_if_in - 1
            threshold_if_out = torch.unsqueeze(
                torch.gather(top_values_flat, 0, threshold_positions_if_out), 1
            )
            normal = Normal(self.mean, self.std)
            prob_if_in = normal.cdf((clean_values - threshold_if_in) / noise_stddev)
            prob_if_out = normal.cdf((clean_values - threshold_if_out) / noise_stddev)
            return torch.where(is_in, prob_if_in, prob_if_out)

        def noisy_top_k_gating(self, x, noise, train):
            clean_logits = x @ self.w_gate
            if train:
                raw_noise_stddev = x @ self.w_noise
                noise_stddev = self.softplus(raw_noise_stddev) + noise_epsilon
                noisy_logits = clean_logits + (noise * noise_stddev)
                logits = noisy_logits
            else:
                logits = clean_logits
            logits = self.softmax(logits)
            top_logits, top_indices = logits.topk(min(k + 1, num_experts), dim=1)
            top_k_logits = top_logits[:, :k]
            top_k_indices = top_indices[:, :k]
            top_k_gates = top_k_logits / (top_k_logits.sum(1, keepdim=True) + 1e-6)
            zeros = torch.zeros_like(logits, requires_grad=True)
            gates = zeros.scatter(1, top_k_indices, top_k_gates)
            if train:
                load = self._prob_in_top_k(clean_logits, noisy_logits, noise_stddev,
                                           top_logits).sum(0)  # fmt: skip
            else:
                load = self._gates_to_load(gates)
            return gates, load

        def forward(self, x, noise, loss_coef=1e-2):
            gates, load = self.noisy_top_k_gating(x, noise, self.training)
            importance = gates.sum(0)
            loss = self.cv_squared(importance) + self.cv_squared(load)
            loss *= loss_coef
            dispatcher = SparseDispatcher(num_experts, gates)
            expert_inputs = dispatcher.dispatch(x)
            expert_outputs = [self.experts[i](expert_inputs[i]) for i in range(num_experts)]
            y = dispatcher.combine(expert_outputs)
            return y, loss, gates, load

    model = MoE()
    set_weights(torch, model, seed=71, scale=0.4)
    x = torch.tensor(arr(72, batch, input_size))
    target = torch.tensor(arr(73, batch, output_size))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    criterion = nn.MSELoss()
    losses, aux_losses, loads = [], [], []
    model.train()
    for step in range(4):
        noise = torch.tensor(arr(80 + step, batch, num_experts))
        y_hat, aux_loss, gates, load = model(x, noise)
        loss = criterion(y_hat, target) + aux_loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        aux_losses.append(aux_loss.item())
        loads.append(load.detach())
    model.eval()
    with torch.no_grad():
        y_eval, aux_eval, gates_eval, load_eval = model(x, None)
    return {"losses": losses, "aux": aux_losses, "loads": loads, "train_gates": gates,
            "y_eval": y_eval, "aux_eval": aux_eval, "gates_eval": gates_eval,
            "load_eval": load_eval, "w_gate": model.w_gate, "w_noise": model.w_noise,
            "expert0": params(model.experts[0])}  # fmt: skip


@program
def moe_expert_choice_routing_topk_over_tokens(torch):
    """Expert-choice routing (Zhou et al., 2022): token-to-expert affinities softmaxed over
    experts, each expert picking its ``capacity = n * c / E`` tokens with ``topk`` along the token
    axis of the transposed scores, one-hot permutations ``F.one_hot(index, n)`` gathering the
    expert inputs by ``einsum``, batched expert FFNs with per-expert weight tensors, the combine
    as a three-operand ``einsum`` weighted by the gating values; per-token coverage by
    ``bincount``; trained a few steps with SGD."""
    nn, F = torch.nn, torch.nn.functional
    b, n, d, h, E, c = 2, 8, 6, 10, 4, 2

    class ExpertChoiceMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.wg = nn.Parameter(torch.empty(d, E))
            self.w1 = nn.Parameter(torch.empty(E, d, h))
            self.w2 = nn.Parameter(torch.empty(E, h, d))

        def forward(self, x):
            capacity = n * c // E
            S = F.softmax(torch.einsum("bnd,de->bne", x, self.wg), dim=-1)
            G, index = torch.topk(S.transpose(1, 2), k=capacity, dim=-1)  # (b, E, capacity)
            P = F.one_hot(index, num_classes=n).to(x.dtype)  # (b, E, capacity, n)
            x_in = torch.einsum("bekn,bnd->bekd", P, x)
            x_e = F.gelu(torch.einsum("bekd,edh->bekh", x_in, self.w1))
            x_e = torch.einsum("bekh,ehd->bekd", x_e, self.w2)
            x_out = torch.einsum("bekn,bek,bekd->bnd", P, G, x_e)
            return x_out, index, S

    moe = set_weights(torch, ExpertChoiceMoE(), seed=91)
    x = torch.tensor(arr(92, b, n, d))
    target = torch.tensor(arr(93, b, n, d))
    opt = torch.optim.SGD(moe.parameters(), lr=0.3)
    losses, coverages = [], []
    for _ in range(4):
        out, index, S = moe(x)
        loss = F.mse_loss(out + x, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        coverage = torch.stack([torch.bincount(index[i].flatten(), minlength=n) for i in range(b)])
        coverages.append(coverage)
    dropped = (coverages[-1] == 0).sum(dim=-1)
    return {"losses": losses, "coverage": coverages, "dropped": dropped, "index": index, "S": S,
            "out": out, "params": params(moe)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # an attention block and eight experts: summation order
def moe_mixtral_sparse_block_in_tiny_lm_training(torch):
    """A tiny Mixtral-style language model: token embedding, one decoder layer (RMSNorm, rotary
    attention with ``scaled_dot_product_attention(is_causal=True)``, and the sparse MoE block with
    SwiGLU experts that visits only the experts hit, ``experts[expert_idx]`` indexed by a
    one-element tensor, tokens found with ``torch.where`` on the permuted one-hot mask and
    accumulated with ``index_add_``), tied LM head; trained with next-token cross-entropy plus
    the router's load-balancing loss over ``torch.cat``-ed layer logits, ``clip_grad_norm_`` and
    AdamW."""
    nn, F = torch.nn, torch.nn.functional
    vocab, hidden_size, n_heads, ffn, num_experts, top_k = 13, 16, 2, 20, 4, 2
    head_dim = hidden_size // n_heads

    class RMSNorm(nn.Module):
        def __init__(self, hidden_size, eps=1e-6):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(hidden_size))
            self.variance_epsilon = eps

        def forward(self, hidden_states):
            input_dtype = hidden_states.dtype
            hidden_states = hidden_states.to(torch.float32)
            variance = hidden_states.pow(2).mean(-1, keepdim=True)
            hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
            return self.weight * hidden_states.to(input_dtype)

    def rotate_half(x):
        x1 = x[..., : x.shape[-1] // 2]
        x2 = x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj = nn.Linear(hidden_size, hidden_size, bias=False)
            self.k_proj = nn.Linear(hidden_size, hidden_size, bias=False)
            self.v_proj = nn.Linear(hidden_size, hidden_size, bias=False)
            self.o_proj = nn.Linear(hidden_size, hidden_size, bias=False)
            inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
            self.register_buffer("inv_freq", inv_freq, persistent=False)

        def forward(self, hidden_states):
            bsz, q_len, _ = hidden_states.size()
            q = self.q_proj(hidden_states).view(bsz, q_len, n_heads, head_dim).transpose(1, 2)
            k = self.k_proj(hidden_states).view(bsz, q_len, n_heads, head_dim).transpose(1, 2)
            v = self.v_proj(hidden_states).view(bsz, q_len, n_heads, head_dim).transpose(1, 2)
            position_ids = torch.arange(q_len).float()
            freqs = torch.outer(position_ids, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos()[None, None], emb.sin()[None, None]
            q = (q * cos) + (rotate_half(q) * sin)
            k = (k * cos) + (rotate_half(k) * sin)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            attn = attn.transpose(1, 2).contiguous().reshape(bsz, q_len, hidden_size)
            return self.o_proj(attn)

    class BlockSparseTop2MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Linear(hidden_size, ffn, bias=False)
            self.w2 = nn.Linear(ffn, hidden_size, bias=False)
            self.w3 = nn.Linear(hidden_size, ffn, bias=False)
            self.act_fn = nn.SiLU()

        def forward(self, hidden_states):
            current_hidden_states = self.act_fn(self.w1(hidden_states)) * self.w3(hidden_states)
            return self.w2(current_hidden_states)

    class SparseMoeBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = nn.Linear(hidden_size, num_experts, bias=False)
            self.experts = nn.ModuleList([BlockSparseTop2MLP() for _ in range(num_experts)])

        def forward(self, hidden_states):
            batch_size, sequence_length, hidden_dim = hidden_states.shape
            hidden_states = hidden_states.view(-1, hidden_dim)
            router_logits = self.gate(hidden_states)
            routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
            routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
            routing_weights = routing_weights.to(hidden_states.dtype)
            final_hidden_states = torch.zeros(
                (batch_size * sequence_length, hidden_dim),
                dtype=hidden_states.dtype,
                device=hidden_states.device,
            )
            expert_mask = F.one_hot(selected_experts, num_classes=num_experts).permute(2, 1, 0)
            expert_hitted = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
            for expert_idx in expert_hitted:
                expert_layer = self.experts[expert_idx]
                idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
                current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
                current_hidden_states = (
                    expert_layer(current_state) * routing_weights[top_x, idx, None]
                )
                final_hidden_states.index_add_(
                    0, top_x, current_hidden_states.to(hidden_states.dtype)
                )
            final_hidden_states = final_hidden_states.reshape(
                batch_size, sequence_length, hidden_dim
            )
            return final_hidden_states, router_logits  # fmt: skip

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = RMSNorm(hidden_size)
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm(hidden_size)
            self.block_sparse_moe = SparseMoeBlock()

        def forward(self, hidden_states):
            residual = hidden_states
            hidden_states = self.self_attn(self.input_layernorm(hidden_states))
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states, router_logits = self.block_sparse_moe(hidden_states)
            return residual + hidden_states, router_logits

    class TinyMixtral(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, hidden_size)
            self.layers = nn.ModuleList([DecoderLayer() for _ in range(2)])
            self.norm = RMSNorm(hidden_size)
            self.lm_head = nn.Linear(hidden_size, vocab, bias=False)
            self.lm_head.weight = self.embed_tokens.weight

        def forward(self, input_ids):
            hidden_states = self.embed_tokens(input_ids)
            all_router_logits = ()
            for layer in self.layers:
                hidden_states, router_logits = layer(hidden_states)
                all_router_logits += (router_logits,)
            return self.lm_head(self.norm(hidden_states)), all_router_logits

    def load_balancing_loss_func(gate_logits, num_experts, top_k):
        concatenated_gate_logits = torch.cat(list(gate_logits), dim=0)
        routing_weights = F.softmax(concatenated_gate_logits, dim=-1)
        _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
        expert_mask = F.one_hot(selected_experts, num_experts)
        tokens_per_expert = torch.mean(expert_mask.float(), dim=0)
        router_prob_per_expert = torch.mean(routing_weights, dim=0)
        overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
        return overall_loss * num_experts

    model = set_weights(torch, TinyMixtral(), seed=101)
    input_ids = torch.tensor(ints(102, vocab, 2, 7))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    losses, aux_losses, norms = [], [], []
    for _ in range(3):
        logits, router_logits = model(input_ids)
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = input_ids[..., 1:].contiguous()
        loss = F.cross_entropy(shift_logits.view(-1, vocab), shift_labels.view(-1))
        aux_loss = load_balancing_loss_func(router_logits, num_experts, top_k)
        total = loss + 0.02 * aux_loss
        optimizer.zero_grad()
        total.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        optimizer.step()
        losses.append(loss.item())
        aux_losses.append(aux_loss.item())
    with torch.no_grad():
        logits, router_logits = model(input_ids)
        chosen = torch.stack([rl.topk(top_k, dim=-1).indices for rl in router_logits])
    return {"losses": losses, "aux": aux_losses, "norms": norms, "logits": logits,
            "chosen": chosen, "params": params(model)}  # fmt: skip


@program
def moe_deepspeed_top1_random_token_selection_bmm_experts(torch):
    """DeepSpeed-MoE's ``top1gating``: capacity ``ceil(S / E * capacity_factor)`` floored by
    ``min_capacity``, expert counts, ``l_aux = sum(me * ce) * E``, random token selection with a
    fixed uniform priority (``topk`` over tokens of ``mask1 * uniform`` and ``scatter_`` into a new
    mask), locations by ``cumsum``, the ``einsum("se,sc->sec")`` combine tensor; experts as stacked
    weights applied by ``torch.bmm`` on the ``(E, capacity, d)`` buffer, dropped tokens passing
    through the residual; trained with Adam."""
    nn, F = torch.nn, torch.nn.functional
    d, h, E, S = 6, 8, 4, 14
    capacity_factor, min_capacity = 1.0, 2

    def top1gating(logits, uniform):
        gates = F.softmax(logits, dim=1)
        num_tokens, num_experts = gates.shape
        capacity = max(math.ceil((num_tokens / num_experts) * capacity_factor), min_capacity)
        indices1_s = torch.argmax(gates, dim=1)
        mask1 = F.one_hot(indices1_s, num_classes=num_experts)
        exp_counts = torch.sum(mask1, dim=0).detach().to("cpu")
        me = torch.mean(gates, dim=0)
        ce = torch.mean(mask1.float(), dim=0)
        l_aux = torch.sum(me * ce) * num_experts
        mask1_rand = mask1 * uniform
        top_idx = torch.topk(mask1_rand, k=capacity, dim=0)[1]
        new_mask1 = mask1 * torch.zeros_like(mask1).scatter_(0, top_idx, 1)
        mask1 = new_mask1
        locations1 = torch.cumsum(mask1, dim=0) - 1
        locations1_s = torch.sum(locations1 * mask1, dim=1)
        mask1_float = mask1.float()
        gates = gates * mask1_float
        locations1_sc = F.one_hot(locations1_s, num_classes=capacity).float()
        combine_weights = torch.einsum("se,sc->sec", gates, locations1_sc)
        dispatch_mask = combine_weights.bool()
        return l_aux, combine_weights, dispatch_mask, exp_counts

    class GroupedExperts(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(torch.empty(E, d, h))
            self.b1 = nn.Parameter(torch.empty(E, h))
            self.w2 = nn.Parameter(torch.empty(E, h, d))

        def forward(self, dispatched):  # (E, C, d)
            hidden = torch.relu(torch.bmm(dispatched, self.w1) + self.b1.unsqueeze(1))
            return torch.bmm(hidden, self.w2)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.wg = nn.Linear(d, E, bias=False)
            self.experts = GroupedExperts()

        def forward(self, x, uniform):
            l_aux, combine, dispatch, counts = top1gating(self.wg(x).float(), uniform)
            dispatched = torch.einsum("sec,sm->ecm", dispatch.type_as(x), x)
            expert_output = self.experts(dispatched)
            out = torch.einsum("sec,ecm->sm", combine.type_as(x), expert_output)
            kept = dispatch.any(dim=-1).any(dim=-1)
            return x + out, l_aux, counts, kept

    moe = set_weights(torch, MoE(), seed=111)
    x = torch.tensor(arr(112, S, d))
    y = torch.tensor(arr(113, S, d))
    opt = torch.optim.Adam(moe.parameters(), lr=0.01)
    losses, counts_log, kept_log = [], [], []
    for step in range(4):
        uniform = torch.tensor(_uniform(120 + step, S, E))
        out, l_aux, counts, kept = moe(x, uniform)
        loss = F.smooth_l1_loss(out, y) + 0.01 * l_aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        counts_log.append(counts)
        kept_log.append(kept)
    return {"losses": losses, "counts": counts_log, "kept": kept_log, "out": out,
            "l_aux": l_aux, "params": params(moe)}  # fmt: skip


@program
def moe_soft_moe_slots_dispatch_combine(torch):
    """Soft MoE (Puigcerver et al.): L2-normalised tokens and slot parameters with a learned
    scale, logits ``einsum("bnd,dm->bnm")``, dispatch weights softmaxed over tokens and combine
    weights over slots, slot inputs as weighted token averages reshaped to ``(b, E, slots, d)``,
    per-expert MLPs by ``einsum`` with stacked weights, outputs recombined per token; a
    classifier head on the mean token trained with cross-entropy and Adam."""
    nn, F = torch.nn, torch.nn.functional
    b, n, d, E, slots, h, classes = 3, 6, 8, 3, 2, 12, 4

    class SoftMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.phi = nn.Parameter(torch.empty(d, E * slots))
            self.scale = nn.Parameter(torch.ones(1))
            self.w1 = nn.Parameter(torch.empty(E, d, h))
            self.w2 = nn.Parameter(torch.empty(E, h, d))

        def forward(self, x):
            logits = torch.einsum(
                "bnd,dm->bnm", F.normalize(x, dim=-1), self.scale * F.normalize(self.phi, dim=0)
            )
            dispatch_weights = logits.softmax(dim=1)
            combine_weights = logits.softmax(dim=-1)
            slot_inputs = torch.einsum("bnd,bnm->bmd", x, dispatch_weights)
            slot_inputs = slot_inputs.reshape(b, E, slots, d)
            hid = F.gelu(torch.einsum("besd,edh->besh", slot_inputs, self.w1), approximate="tanh")
            slot_outputs = torch.einsum("besh,ehd->besd", hid, self.w2).reshape(b, E * slots, d)
            return torch.einsum("bmd,bnm->bnd", slot_outputs, combine_weights), dispatch_weights

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(d)
            self.moe = SoftMoE()
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            y, dispatch = self.moe(self.norm(x))
            x = x + y
            return self.head(x.mean(dim=1)), dispatch

    model = set_weights(torch, Classifier(), seed=131)
    x = torch.tensor(arr(132, b, n, d))
    labels = torch.tensor(ints(133, classes, b))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(4):
        logits, dispatch = model(x)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "logits": logits, "dispatch": dispatch,
            "slot_mass": dispatch.sum(dim=1), "grads": grads(model),
            "scale": model.moe.scale}  # fmt: skip


@program
def moe_mixture_of_depths_topk_token_routing(torch):
    """Mixture-of-depths (Raposo et al., 2024): a linear router scores every token, the block
    processes only the top ``capacity`` tokens of each sequence (indices re-sorted to keep causal
    order), gathered with an expanded ``torch.gather``, its output scaled by the router weight and
    written back with ``scatter`` (``scatter_add`` in a second variant) while the skipped tokens
    pass through; an auxiliary BCE loss teaches the router to predict its own top-k; trained a few
    steps with SGD."""
    nn, F = torch.nn, torch.nn.functional
    b, t, d, capacity = 2, 10, 8, 4

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d))

        def forward(self, x):
            return self.mlp(self.ln(x))

    class MoDBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(d, 1, bias=False)
            self.block = Block()

        def forward(self, x, use_add=False):
            weights = self.router(x).squeeze(-1)  # (b, t)
            top_w, top_idx = torch.topk(weights, capacity, dim=1, sorted=False)
            top_idx, order = torch.sort(top_idx, dim=1)
            top_w = torch.gather(top_w, 1, order)
            index = top_idx.unsqueeze(-1).expand(-1, -1, d)
            selected = torch.gather(x, 1, index)
            processed = self.block(selected) * top_w.unsqueeze(-1)
            if use_add:
                out = x.scatter_add(1, index, processed)
            else:
                out = torch.scatter(x, 1, index, selected + processed)
            router_targets = torch.zeros_like(weights).scatter(1, top_idx, 1.0)
            aux = F.binary_cross_entropy_with_logits(weights, router_targets)
            return out, aux, top_idx

    model = set_weights(torch, MoDBlock(), seed=141)
    x = torch.tensor(arr(142, b, t, d))
    y = torch.tensor(arr(143, b, t, d))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    losses, picks = [], []
    for step in range(4):
        out, aux, top_idx = model(x, use_add=step % 2 == 1)
        loss = F.mse_loss(out, y) + 0.1 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        picks.append(top_idx)
    with torch.no_grad():
        out_set, _, _ = model(x)
        out_add, _, _ = model(x, use_add=True)
    return {"losses": losses, "picks": picks, "out_set": out_set, "out_add": out_add,
            "same": torch.allclose(out_set, out_add, atol=1e-6), "params": params(model)}  # fmt: skip


@program
def moe_early_exit_heads_confidence_thresholds(torch):
    """A multi-exit network (BranchyNet / DeeBERT): a classifier head after every block trained
    with a weighted sum of the exits' cross-entropies; at inference each sample leaves at the
    first exit whose max softmax probability passes a threshold (or whose entropy falls below one),
    found with ``argmax`` over the stacked boolean criteria with the last exit as fallback, its
    prediction gathered; a batch-wise loop that stops once every sample has exited, filling
    predictions through boolean masks; exit histograms by ``bincount`` and the average depth."""
    nn, F = torch.nn, torch.nn.functional
    d, classes, n_blocks, batch = 8, 3, 3, 12

    class MultiExitNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(
                [nn.Sequential(nn.Linear(d, d), nn.Tanh()) for _ in range(n_blocks)]
            )
            self.exits = nn.ModuleList([nn.Linear(d, classes) for _ in range(n_blocks)])

        def forward(self, x):
            logits = []
            for block, exit_head in zip(self.blocks, self.exits):
                x = x + block(x)
                logits.append(exit_head(x))
            return logits

    net = set_weights(torch, MultiExitNet(), seed=151, scale=0.6)
    x = torch.tensor(arr(152, batch, d))
    labels = torch.tensor(ints(153, classes, batch))
    exit_weights = [0.3, 0.3, 1.0]
    opt = torch.optim.Adam(net.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        outs = net(x)
        loss = sum(w * F.cross_entropy(o, labels) for w, o in zip(exit_weights, outs))
        loss = loss / sum(exit_weights)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())

    net.eval()
    with torch.no_grad():
        probs = torch.stack([F.softmax(o, dim=-1) for o in net(x)])  # (exits, batch, classes)
        confidence = probs.max(dim=-1).values
        entropy = -(probs * torch.log(probs.clamp_min(1e-12))).sum(-1)
        results = {}
        for name, passes in (("conf", confidence > 0.6), ("entropy", entropy < 0.8)):
            passes[-1] = True  # the last exit always answers
            exit_at = passes.int().argmax(dim=0)
            preds = probs.argmax(-1).gather(0, exit_at.unsqueeze(0)).squeeze(0)
            results[name] = {"exit_at": exit_at, "preds": preds,
                             "hist": torch.bincount(exit_at, minlength=n_blocks),
                             "avg_depth": (exit_at + 1).float().mean(),
                             "acc": (preds == labels).float().mean()}  # fmt: skip
        # the batched inference loop: run blocks until every sample has left
        h = x
        done = torch.zeros(batch, dtype=torch.bool)
        final_pred = torch.full((batch,), -1, dtype=torch.long)
        layers_run = 0
        for i, (block, exit_head) in enumerate(zip(net.blocks, net.exits)):
            h = h + block(h)
            layers_run += 1
            p = F.softmax(exit_head(h), dim=-1)
            conf, pred = p.max(dim=-1)
            leave = (conf > 0.6) & ~done if i < n_blocks - 1 else ~done
            final_pred[leave] = pred[leave]
            done |= leave
            if bool(done.all()):
                break
    return {"losses": losses, "confidence": confidence, "entropy": entropy,
            "results": results, "exit0_log": str(probs[0, :3].max(dim=-1)), "final_pred": final_pred, "layers_run": layers_run,
            "loop_matches": torch.equal(final_pred, results["conf"]["preds"])}  # fmt: skip


@program
def moe_hypernetwork_generates_conv_and_linear_weights(torch):
    """Hypernetworks (Ha et al., 2016): a two-layer static hypernetwork maps learned layer
    embeddings ``z`` to convolution kernels (``matmul`` + bias, ``view(in, z_dim)``, second
    ``matmul``, ``view(out, in, f, f)``), a kernel assembled from a grid of embedded blocks with
    ``torch.cat``, used through ``F.conv2d``; a task-conditioned hypernetwork emitting the weight
    and bias of a target linear layer per task and applying them per sample with ``torch.bmm``;
    both trained jointly with Adam; only the hypernetworks and embeddings are parameters."""
    nn, F = torch.nn, torch.nn.functional
    z_dim, f_size, in_size, out_size = 4, 3, 2, 2
    classes, n_tasks, feat = 3, 2, 5

    class HyperNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = nn.Parameter(
                torch.fmod(torch.tensor(arr(161, z_dim, out_size * f_size * f_size)), 2)
            )
            self.b1 = nn.Parameter(
                torch.fmod(torch.tensor(arr(162, out_size * f_size * f_size)), 2)
            )
            self.w2 = nn.Parameter(torch.fmod(torch.tensor(arr(163, z_dim, in_size * z_dim)), 2))
            self.b2 = nn.Parameter(torch.fmod(torch.tensor(arr(164, in_size * z_dim)), 2))

        def forward(self, z):
            h_in = torch.matmul(z, self.w2) + self.b2
            h_in = h_in.view(in_size, z_dim)
            h_final = torch.matmul(h_in, self.w1) + self.b1
            kernel = h_final.view(out_size, in_size, f_size, f_size)
            return kernel  # fmt: skip

    class Embedding(nn.Module):
        def __init__(self, z_num, seed):
            super().__init__()
            self.z_num = z_num
            g = np.random.default_rng(seed)
            self.z_list = nn.ParameterList(
                [
                    nn.Parameter(
                        torch.tensor(np.fmod(g.standard_normal(z_dim), 2).astype(np.float32))
                    )
                    for _ in range(z_num[0] * z_num[1])
                ]  # fmt: skip
            )

        def forward(self, hyper_net):
            ww = []
            h, k = self.z_num
            for i in range(h):
                w = []
                for j in range(k):
                    w.append(hyper_net(self.z_list[i * k + j]))
                ww.append(torch.cat(w, dim=1))
            return torch.cat(ww, dim=0)

    class TaskHyperNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.task_emb = nn.Embedding(n_tasks, 6)
            self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
            self.to_weight = nn.Linear(16, classes * feat)
            self.to_bias = nn.Linear(16, classes)

        def forward(self, task_ids):
            hdn = self.body(self.task_emb(task_ids))
            return self.to_weight(hdn).view(-1, classes, feat), self.to_bias(hdn)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.hope = HyperNetwork()
            self.zs = nn.ModuleList([Embedding([1, 1], 170), Embedding([2, 1], 171)])
            self.task_hnet = set_weights(torch, TaskHyperNet(), seed=172, scale=0.3)

        def forward(self, img, task_ids):
            w0 = self.zs[0](self.hope)  # (2, 2, 3, 3)
            w1 = self.zs[1](self.hope)  # (4, 2, 3, 3)
            x = F.relu(F.conv2d(img, w0, padding=1))
            x = F.conv2d(x, w1, stride=2)
            x = F.adaptive_avg_pool2d(torch.tanh(x), 1).flatten(1)[:, :feat]
            x = torch.cat([x, img.mean(dim=(1, 2, 3)).unsqueeze(1)], dim=1)
            weight, bias = self.task_hnet(task_ids)
            logits = torch.bmm(weight, x.unsqueeze(-1)).squeeze(-1) + bias
            return logits, w0, w1

    model = Model()
    img = torch.tensor(arr(173, 4, 2, 6, 6))
    task_ids = torch.tensor([0, 1, 0, 1])
    labels = torch.tensor(ints(174, classes, 4))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(4):
        logits, w0, w1 = model(img, task_ids)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    n_params = sum(p.numel() for p in model.parameters())
    return {"losses": losses, "logits": logits, "w0": w0, "w1": w1, "n_params": n_params,
            "hope": params(model.hope), "z": model.zs[1].z_list[1],
            "generated_linear": model.task_hnet(torch.tensor([0, 1]))[0]}  # fmt: skip


@program
def moe_hierarchical_gating_and_expert_parallel_buffers(torch):
    """Conditional computation with a two-level (hierarchical) gate, as in Shazeer's hierarchical
    MoE and DeepSpeed's expert-parallel layout: a group gate picks one of two expert groups per
    token (``argmax``), an inner top-1 gate picks the expert within the group through a
    group-masked ``masked_fill``, global expert ids ``group * E_g + local``, tokens packed into a
    fixed-size ``(E, capacity, d)`` send buffer by ``index_put_`` at ``(expert, position)`` with
    positions from ``one_hot(...).cumsum(0)``, the buffer split per rank with ``chunk`` (the
    all-to-all of one rank with itself), experts run, results read back with advanced indexing
    and weighted by the product of the two gate probabilities."""
    nn, F = torch.nn, torch.nn.functional
    d, groups, per_group, capacity, n_tok = 6, 2, 2, 3, 12
    E = groups * per_group

    class HierMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.group_gate = nn.Linear(d, groups)
            self.expert_gate = nn.Linear(d, E)
            self.experts = nn.ModuleList([nn.Linear(d, d) for _ in range(E)])

        def forward(self, x):
            g_probs = F.softmax(self.group_gate(x), dim=-1)
            g_val, g_idx = g_probs.max(dim=-1)
            inner_logits = self.expert_gate(x).view(-1, groups, per_group)
            group_mask = F.one_hot(g_idx, groups).bool().unsqueeze(-1).expand_as(inner_logits)
            inner_logits = inner_logits.masked_fill(~group_mask, float("-inf")).view(-1, E)
            e_probs = F.softmax(inner_logits, dim=-1)
            e_val, expert = e_probs.max(dim=-1)
            assert torch.equal(expert // per_group, g_idx)
            onehot = F.one_hot(expert, E)
            position = (onehot.cumsum(0) * onehot).sum(-1) - 1
            keep = position < capacity
            buffer = x.new_zeros(E, capacity, d)
            buffer = buffer.index_put((expert[keep], position[keep]), x[keep])
            outs = []
            for rank, shard in enumerate(buffer.chunk(groups, dim=0)):
                for j in range(per_group):
                    outs.append(self.experts[rank * per_group + j](shard[j]))
            expert_out = torch.stack(outs)  # (E, capacity, d)
            y = torch.zeros_like(x)
            y[keep] = expert_out[expert[keep], position[keep]] * (g_val * e_val)[keep, None]
            return x + y, expert, position, keep

    moe = set_weights(torch, HierMoE(), seed=181)
    x = torch.tensor(arr(182, n_tok, d))
    target = torch.tensor(arr(183, n_tok, d))
    opt = torch.optim.RMSprop(moe.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        out, expert, position, keep = moe(x)
        loss = (out - target).pow(2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "out": out, "expert": expert, "position": position, "keep": keep,
            "per_expert": torch.bincount(expert[keep], minlength=E), "grads": grads(moe),
            "params": params(moe)}  # fmt: skip


@program
def moe_megablocks_padded_bins_searchsorted_pad_sequence(torch):
    """The bookkeeping of block-sparse dropless MoE (MegaBlocks-style) and of padded expert
    batches: top-1 expert per token, ``histc`` token counts, ``argsort(stable=True)`` gather order,
    counts rounded up to the block size with floor division, padded and unpadded bin ends by
    ``cumsum``, each sorted row's expert found with ``searchsorted(right=True)`` and equal to
    ``repeat_interleave(arange(E), counts)``, ``unique_consecutive`` of the sorted ids, the
    per-expert gate mass by ``bincount(weights=...)`` and maximum by ``scatter_reduce("amax")``;
    then per-expert token lists padded into an ``(E, L, d)`` batch by ``pad_sequence`` with a
    length mask, the experts applied as one ``baddbmm``, and the valid rows scattered back with
    ``masked_select`` / ``index_copy``; gradients reach the experts and the router."""
    nn, F = torch.nn, torch.nn.functional
    pad_sequence = torch.nn.utils.rnn.pad_sequence
    n, d, E, block = 15, 4, 4, 4

    router = set_weights(torch, nn.Linear(d, E, bias=False), seed=191)
    w = nn.Parameter(torch.tensor(arr(192, E, d, d, scale=0.5)))
    b = nn.Parameter(torch.tensor(arr(193, E, 1, d, scale=0.1)))
    x = torch.tensor(arr(194, n, d))
    probs = F.softmax(router(x), dim=-1)
    gate, top_expert = probs.max(dim=-1)
    tokens_per_expert = torch.histc(top_expert.float(), bins=E, min=0, max=E - 1)
    counts = tokens_per_expert.long()
    indices = torch.argsort(top_expert, stable=True)
    padded_tokens_per_expert = (tokens_per_expert + block - 1) // block * block
    bins = torch.cumsum(tokens_per_expert, 0)
    padded_bins = torch.cumsum(padded_tokens_per_expert, 0)
    row_expert = torch.searchsorted(bins, torch.arange(n).float(), right=True)
    bin_ids = torch.repeat_interleave(torch.arange(E), counts)
    uniq, uniq_counts = torch.unique_consecutive(top_expert[indices], return_counts=True)
    gate_mass = torch.bincount(top_expert, weights=gate.detach(), minlength=E)
    gate_max = torch.zeros(E).scatter_reduce(0, top_expert, gate.detach(), reduce="amax",
                                             include_self=False)  # fmt: skip

    groups = [x[top_expert == e] for e in range(E)]
    lengths = torch.tensor([g.shape[0] for g in groups])
    padded = pad_sequence(groups, batch_first=True)  # (E, L, d)
    mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
    out_padded = torch.baddbmm(b, padded, w)  # (E, L, d)
    valid = out_padded.masked_select(mask.unsqueeze(-1)).view(-1, d)  # rows in expert order
    y = torch.zeros(n, d).index_copy(0, indices, valid * gate[indices, None])
    loss = y.square().sum()
    loss.backward()
    return {"counts": tokens_per_expert, "indices": indices, "padded": padded_tokens_per_expert,
            "bins": bins, "padded_bins": padded_bins, "row_expert": row_expert,
            "bin_ids": bin_ids, "rows_agree": torch.equal(row_expert, bin_ids), "uniq": uniq,
            "uniq_counts": uniq_counts, "gate_mass": gate_mass, "gate_max": gate_max,
            "mask": mask, "padded_batch": padded, "y": y, "loss": loss, "w_grad": w.grad,
            "b_grad": b.grad, "router_grad": router.weight.grad}  # fmt: skip
