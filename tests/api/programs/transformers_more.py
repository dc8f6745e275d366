"""Transformer training as popular repositories write it: GPT blocks, encoder/decoder layers, ViT, masked LM, LoRA, RMSNorm/SwiGLU, KV caches."""

from __future__ import annotations

import inspect
import math
from collections import OrderedDict

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def nanogpt_tied_weights_accumulation_cosine_warmup(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, T, H = 11, 16, 8, 4

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn, self.c_proj, self.n_head = nn.Linear(C, 3 * C), nn.Linear(C, C), H

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True
            )
            return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = (
                nn.LayerNorm(C, bias=False),
                CausalSelfAttention(),
                nn.LayerNorm(C, bias=False),
            )
            self.mlp = nn.Sequential(
                nn.Linear(C, 4 * C),
                nn.GELU(approximate="tanh"),
                nn.Linear(4 * C, C),
                nn.Dropout(0.0),
            )

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(V, C), wpe=nn.Embedding(T, C), drop=nn.Dropout(0.0),
                                                  h=nn.ModuleList([Block() for _ in range(2)]), ln_f=nn.LayerNorm(C, bias=False)))  # fmt: skip
            self.lm_head = nn.Linear(C, V, bias=False)
            self.transformer.wte.weight = self.lm_head.weight  # weight tying

        def forward(self, idx, targets=None):
            pos = torch.arange(0, idx.size(1), dtype=torch.long, device=idx.device)
            x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            if targets is None:
                return self.lm_head(x[:, [-1], :]), None
            logits = self.lm_head(x)
            return logits, F.cross_entropy(
                logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1
            )

    model = set_weights(torch, GPT(), seed=101)
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
    optim_groups = [
        {"params": decay, "weight_decay": 0.1},
        {"params": nodecay, "weight_decay": 0.0},
    ]
    opt = torch.optim.AdamW(optim_groups, lr=3e-3, betas=(0.9, 0.95))
    warmup, max_iters = 2, 5

    def lr_lambda(it):
        if it < warmup:
            return (it + 1) / (warmup + 1)
        decay_ratio = min((it - warmup) / (max_iters - warmup), 1.0)
        return 0.1 + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * 0.9

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)
    data = ints(102, V, 8, T + 1)
    data[1, 5:] = -1  # a padded target row, ignored by the loss
    losses, norms, lrs, accum = [], [], [], 2
    for _ in range(4):
        for micro in range(accum):
            chunk = torch.from_numpy(data[micro * 4 : (micro + 1) * 4])
            x, y = chunk[:, :-1].clamp(min=0), chunk[:, 1:].contiguous()
            _, loss = model(x, y)
            (loss / accum).backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        lrs.append(sched.get_last_lr())
    use_fused = "fused" in inspect.signature(torch.optim.AdamW).parameters
    n_non_embedding = (
        sum(p.numel() for p in model.parameters()) - model.transformer.wpe.weight.numel()
    )
    model.transformer.wpe.weight = nn.Parameter(model.transformer.wpe.weight[:6])  # crop_block_size
    model.eval()
    with torch.no_grad():
        last, none = model(x[:, :5])
        logits = last[:, -1, :] / 0.8  # temperature, then top-k filtering as in generate()
        v, _ = torch.topk(logits, min(3, logits.size(-1)))
        logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
    return {"losses": losses, "norms": norms, "lrs": lrs, "last_logits": last, "no_loss": none is None,
            "tied": model.lm_head.weight is model.transformer.wte.weight, "params": params(model),
            "n_params": sum(p.numel() for p in model.parameters()), "n_decay": len(decay), "probs": probs,
            "use_fused": use_fused, "n_non_embedding": n_non_embedding, "wpe_shape": list(model.transformer.wpe.weight.shape)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def kv_cache_greedy_decoding_matches_full_forward(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, H = 13, 12, 3

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C, bias=False), nn.Linear(C, C, bias=False)
            self.mlp = nn.Sequential(nn.Linear(C, 2 * C), nn.GELU(), nn.Linear(2 * C, C))

        def forward(self, x, cache=None):
            B, T, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            q, k, v = (t.reshape(B, T, H, C // H).permute(0, 2, 1, 3) for t in (q, k, v))
            if cache is not None:
                k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None)
            x = x + self.proj(y.permute(0, 2, 1, 3).reshape(B, T, C))
            return x + self.mlp(self.ln2(x)), (k, v)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(16, C)
            self.blocks, self.ln_f = nn.ModuleList(Block() for _ in range(2)), nn.LayerNorm(C)

        def forward(self, idx, past=None):
            start = 0 if past is None else past[0][0].size(2)
            x = self.tok(idx) + self.pos(torch.arange(start, start + idx.size(1)))
            present = []
            for i, block in enumerate(self.blocks):
                x, kv = block(x, None if past is None else past[i])
                present.append(kv)
            return F.linear(self.ln_f(x), self.tok.weight), present

    model = set_weights(torch, LM(), seed=111).eval()
    prompt = torch.tensor(ints(112, V, 2, 3))

    @torch.no_grad()
    def generate_full(idx, n):
        for _ in range(n):
            logits, _ = model(idx)
            idx = torch.cat((idx, logits[:, -1, :].argmax(dim=-1, keepdim=True)), dim=1)
        return idx, model(idx)[0]

    with torch.inference_mode():
        logits, past = model(prompt)
        idx, steps = prompt, []
        for _ in range(5):
            nxt = logits[:, -1].argmax(-1).unsqueeze(-1)
            idx = torch.cat([idx, nxt], dim=1)
            logits, past = model(nxt, past)
            steps.append(logits[:, -1])
    full_idx, full_logits = generate_full(prompt, 5)
    return {"cached_idx": idx, "full_idx": full_idx, "same_tokens": torch.equal(idx, full_idx),
            "cached_logits": torch.stack(steps, 1), "full_logits": full_logits[:, 3:],
            "close": torch.allclose(torch.stack(steps, 1), full_logits[:, 3:], atol=1e-5),
            "cache_shape": list(past[0][0].shape), "grad_free": not logits.requires_grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def encoder_classifier_key_padding_and_causal_masks(torch):
    nn, F = torch.nn, torch.nn.functional
    V, D, PAD, T = 20, 16, 0, 7
    tokens = ints(121, V - 1, 4, T) + 1
    for i, n in enumerate([7, 4, 6, 2]):
        tokens[i, n:] = PAD
    src = torch.tensor(tokens)

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(V, D, padding_idx=PAD)
            layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=32, dropout=0.0, activation=F.gelu,
                                               batch_first=True, norm_first=True)  # fmt: skip
            self.encoder = nn.TransformerEncoder(
                layer, num_layers=2, norm=nn.LayerNorm(D), enable_nested_tensor=False
            )
            self.fc = nn.Linear(D, 3)

        def forward(self, src, causal=False):
            pad_mask = src == PAD
            mask = nn.Transformer.generate_square_subsequent_mask(src.size(1)) if causal else None
            h = self.encoder(
                self.emb(src) * math.sqrt(D),
                mask=mask,
                src_key_padding_mask=pad_mask,
                is_causal=causal,
            )
            keep = (~pad_mask).unsqueeze(-1).float()
            pooled = (h * keep).sum(dim=1) / keep.sum(dim=1).clamp(min=1.0)
            return self.fc(pooled), h

    model = set_weights(torch, Classifier(), seed=122)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3, amsgrad=True)
    labels = torch.tensor([0, 2, 1, 2])
    losses = []
    for step in range(4):
        logits, h = model(src, causal=step % 2 == 1)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    causal_mask = nn.Transformer.generate_square_subsequent_mask(4)
    model.eval()
    with torch.no_grad():
        eval_logits, _ = model(src)
    return {"losses": losses, "logits": logits, "hidden": h, "eval_logits": eval_logits, "grads": grads(model), "causal_mask": causal_mask,
            "pad_row_grad_zero": bool((model.emb.weight.grad[PAD] == 0).all())}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def seq2seq_nn_transformer_teacher_forcing_and_greedy(torch):
    nn, F = torch.nn, torch.nn.functional
    V, D, PAD, BOS, EOS = 12, 16, 0, 1, 2

    class Seq2Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.src_emb, self.tgt_emb = nn.Embedding(V, D), nn.Embedding(V, D)
            self.pos = nn.Parameter(torch.zeros(1, 16, D))
            self.transformer = nn.Transformer(d_model=D, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                                              dim_feedforward=24, dropout=0.0, batch_first=True, norm_first=True)  # fmt: skip
            self.generator = nn.Linear(D, V)

        def embed(self, emb, x):
            return emb(x) * math.sqrt(D) + self.pos[:, : x.size(1)]

        def forward(self, src, tgt):
            tgt_mask = self.transformer.generate_square_subsequent_mask(tgt.size(1))
            out = self.transformer(self.embed(self.src_emb, src), self.embed(self.tgt_emb, tgt), tgt_mask=tgt_mask,
                                   src_key_padding_mask=src.eq(PAD), tgt_key_padding_mask=tgt.eq(PAD),
                                   memory_key_padding_mask=src.eq(PAD), tgt_is_causal=True)  # fmt: skip
            return self.generator(out)

    model = set_weights(torch, Seq2Seq(), seed=131)
    src = np.concatenate([ints(132, V - 3, 3, 5) + 3, np.zeros((3, 1), np.int64)], 1)
    src[2, 3:] = PAD
    tgt = np.concatenate([np.full((3, 1), BOS), src[:, ::-1][:, 1:], np.full((3, 1), EOS)], 1)
    src, tgt = torch.tensor(src), torch.tensor(np.ascontiguousarray(tgt))
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    opt = torch.optim.Adam(model.parameters(), lr=5e-3, betas=(0.9, 0.98), eps=1e-9)
    losses = []
    for _ in range(4):
        logits = model(src, tgt_in)
        loss = F.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1), ignore_index=PAD
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.eval()
    with torch.no_grad():
        memory = model.transformer.encoder(
            model.embed(model.src_emb, src), src_key_padding_mask=src == PAD
        )
        ys = torch.full((src.size(0), 1), BOS, dtype=torch.long)
        for _ in range(5):
            mask = nn.Transformer.generate_square_subsequent_mask(ys.size(1))
            out = model.transformer.decoder(model.embed(model.tgt_emb, ys), memory, tgt_mask=mask,
                                            memory_key_padding_mask=src == PAD)  # fmt: skip
            prob = model.generator(out[:, -1])
            ys = torch.cat([ys, prob.argmax(dim=1, keepdim=True)], dim=1)
    return {"losses": losses, "memory": memory, "last_prob": prob, "ys": ys, "grads": grads(model)}


@program(rtol=5e-4, atol=5e-5)
def vit_patch_embedding_cls_token_training(torch):
    nn = torch.nn
    img, patch, D, n_classes = 8, 4, 16, 5
    n_patches = (img // patch) ** 2

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Conv2d(3, D, kernel_size=patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, D))
            self.pos_embed = nn.Parameter(torch.zeros(1, n_patches + 1, D))
            nn.init.trunc_normal_(self.pos_embed, std=0.02)  # overwritten by set_weights below
            self.blocks = nn.Sequential(*[nn.TransformerEncoderLayer(D, 4, 2 * D, dropout=0.0, activation="gelu",
                                                                     batch_first=True, norm_first=True) for _ in range(2)])  # fmt: skip
            self.norm, self.head = nn.LayerNorm(D, eps=1e-6), nn.Linear(D, n_classes)

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)  # B, N, D
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
            return self.head(self.norm(self.blocks(x))[:, 0])

    model = set_weights(torch, ViT(), seed=141)
    images = torch.tensor(arr(142, 6, 3, img, img))
    labels = torch.tensor(ints(143, n_classes, 6))
    # the same patch embedding by hand: unfold into patches, then one matmul
    B = images.shape[0]
    patches = images.unfold(2, patch, patch).unfold(3, patch, patch)  # B, 3, 2, 2, p, p
    patches = patches.permute(0, 2, 3, 1, 4, 5).reshape(B, n_patches, -1)
    w = model.patch_embed.weight.reshape(D, -1)
    by_hand = patches @ w.t() + model.patch_embed.bias
    conv = model.patch_embed(images).flatten(2).transpose(1, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.05)
    warm = torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=2)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=3, eta_min=1e-5)
    sched = torch.optim.lr_scheduler.SequentialLR(opt, schedulers=[warm, cos], milestones=[2])
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    losses, lrs = [], []
    for _ in range(5):
        loss = criterion(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
        sched.step()
        losses.append(loss.detach())
        lrs.append(opt.param_groups[0]["lr"])
    acc = (model(images).argmax(1) == labels).float().mean()
    with (
        torch.no_grad()
    ):  # fine-tune at 16x16: resample the position grid, as timm's resample_abs_pos_embed
        cls_pos, grid = model.pos_embed[:, :1], model.pos_embed[:, 1:]
        gs = int(math.sqrt(grid.shape[1]))
        grid = grid.reshape(1, gs, gs, D).permute(0, 3, 1, 2)
        grid = nn.functional.interpolate(grid, size=(4, 4), mode="bicubic", align_corners=False)
        model.pos_embed = nn.Parameter(
            torch.cat([cls_pos, grid.permute(0, 2, 3, 1).flatten(1, 2)], dim=1)
        )
        big = model(torch.tensor(arr(144, 2, 3, 16, 16)))
    return {"patch_match": torch.allclose(by_hand, conv, atol=1e-5), "by_hand": by_hand, "losses": torch.stack(losses),
            "lrs": lrs, "cls_grad": model.cls_token.grad, "pos_grad": model.pos_embed.grad, "acc": acc,
            "resized_pos": model.pos_embed, "big_logits": big}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bert_masked_lm_ignore_index_label_smoothing(torch):
    nn, F = torch.nn, torch.nn.functional
    V, D, B, T = 24, 16, 3, 8
    PAD, CLS, SEP, MASK = 0, 1, 2, 3
    ids = ints(151, V - 4, B, T) + 4
    ids[:, 0], ids[:, -1] = CLS, SEP
    ids[2, 5], ids[2, 6:] = SEP, PAD
    input_ids = torch.tensor(ids)
    labels = input_ids.clone()
    special = (input_ids == PAD) | (input_ids == CLS) | (input_ids == SEP)
    probability_matrix = torch.full(labels.shape, 0.3)
    probability_matrix.masked_fill_(special, value=0.0)
    masked_indices = torch.tensor(np.random.default_rng(152).random((B, T))) < probability_matrix
    labels[~masked_indices] = -100
    u = torch.tensor(np.random.default_rng(153).random((B, T)))
    indices_replaced = (u < 0.8) & masked_indices
    input_ids[indices_replaced] = MASK
    indices_random = (u >= 0.9) & masked_indices
    random_words = torch.tensor(ints(154, V, B, T))
    input_ids[indices_random] = random_words[indices_random]
    token_type_ids = (torch.arange(T) >= T // 2).long().expand(B, T)

    class BertMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.word, self.position, self.token_type = (
                nn.Embedding(V, D, padding_idx=PAD),
                nn.Embedding(T, D),
                nn.Embedding(2, D),
            )
            self.emb_ln = nn.LayerNorm(D, eps=1e-12)
            self.layer = nn.TransformerEncoderLayer(
                D, 2, 32, dropout=0.0, activation="gelu", batch_first=True
            )
            self.transform = nn.Sequential(nn.Linear(D, D), nn.GELU(), nn.LayerNorm(D, eps=1e-12))
            self.bias = nn.Parameter(torch.zeros(V))

        def forward(self, input_ids, token_type_ids):
            pos = torch.arange(input_ids.size(1)).unsqueeze(0)
            h = self.emb_ln(
                self.word(input_ids) + self.position(pos) + self.token_type(token_type_ids)
            )
            h = self.layer(h, src_key_padding_mask=input_ids.eq(PAD))
            return (
                self.transform(h) @ self.word.weight.T + self.bias
            )  # decoder tied to the word embeddings

    model = set_weights(torch, BertMLM(), seed=155)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / 2, max(0.0, (4 - s) / 2))
    )
    loss_fct = nn.CrossEntropyLoss(label_smoothing=0.1)  # ignore_index defaults to -100
    losses = []
    for _ in range(3):
        opt.zero_grad()
        logits = model(input_ids, token_type_ids)
        loss = loss_fct(logits.view(-1, V), labels.view(-1))
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
    sel = labels != -100
    summed = F.cross_entropy(
        logits.view(-1, V), labels.view(-1), reduction="sum", label_smoothing=0.1
    )
    return {"input_ids": input_ids, "labels": labels, "n_masked": int(sel.sum()), "losses": losses,
            "sum_over_masked": summed / sel.sum(), "plain_ce": F.cross_entropy(logits.transpose(1, 2), labels),
            "masked_acc": (logits.argmax(-1)[sel] == labels[sel]).float().mean(), "grads": grads(model)}  # fmt: skip


@program
def lora_adapters_on_frozen_linear_layers(torch):
    nn, F = torch.nn, torch.nn.functional

    class LoRALinear(nn.Module):
        def __init__(self, base, r=2, alpha=4):
            super().__init__()
            self.base = base
            self.base.requires_grad_(False)
            self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
            self.lora_B = nn.Parameter(torch.zeros(base.out_features, r))
            nn.init.zeros_(self.lora_B)
            self.scaling = alpha / r

        def forward(self, x):
            return self.base(x) + (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

    model = nn.Sequential(OrderedDict(fc1=nn.Linear(6, 8), act=nn.GELU(), fc2=nn.Linear(8, 3)))
    set_weights(torch, model, seed=161)
    for name, module in list(model.named_children()):
        if isinstance(module, nn.Linear):
            setattr(model, name, LoRALinear(module))
    with torch.no_grad():
        lora_a = [p for n, p in model.named_parameters() if n.endswith("lora_A")]
        for i, p in enumerate(lora_a):
            p.copy_(torch.tensor(arr(162 + i, *p.shape, scale=0.3)))
    frozen_before = {
        n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad
    }
    trainable = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(
        filter(lambda p: p.requires_grad, model.parameters()), lr=1e-2, weight_decay=0.0
    )
    x, y = torch.tensor(arr(164, 10, 6)), torch.tensor(arr(165, 10, 3))
    losses = []
    for _ in range(4):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    unchanged = all(
        torch.equal(frozen_before[n], p) for n, p in model.named_parameters() if not p.requires_grad
    )
    out = model(x)
    with torch.no_grad():  # merge the adapters into the base weights for inference
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.base.weight.add_(m.lora_B @ m.lora_A, alpha=m.scaling)
    merged = nn.Sequential(model.fc1.base, model.act, model.fc2.base)

    class LoRAParametrization(nn.Module):  # minLoRA: the adapter as a parametrization of the weight
        def __init__(self, fan_in, fan_out, rank=2, alpha=2):
            super().__init__()
            self.lora_A = nn.Parameter(torch.tensor(arr(166, rank, fan_in, scale=0.2)))
            self.lora_B = nn.Parameter(torch.tensor(arr(167, fan_out, rank, scale=0.2)))
            self.scaling = alpha / rank

        def forward(self, W):
            return W + torch.matmul(self.lora_B, self.lora_A).view(W.shape) * self.scaling

    P = nn.utils.parametrize
    layer = set_weights(torch, nn.Linear(6, 4), seed=168)
    P.register_parametrization(layer, "weight", LoRAParametrization(6, 4))
    layer.parametrizations.weight.original.requires_grad_(False)
    opt2 = torch.optim.SGD([p for p in layer.parameters() if p.requires_grad], lr=0.1)
    for _ in range(2):
        opt2.zero_grad()
        layer(x).pow(2).mean().backward()
        opt2.step()
    names = [n for n, p in layer.named_parameters() if p.requires_grad]
    P.remove_parametrizations(layer, "weight", leave_parametrized=True)
    return {"param_lora_names": names, "param_lora_weight": layer.weight, "still_parametrized": P.is_parametrized(layer),
            "losses": losses, "frozen_unchanged": unchanged, "base_grad_none": model.fc1.base.weight.grad is None,
            "n_trainable": sum(p.numel() for p in trainable), "n_total": sum(p.numel() for p in model.parameters()),
            "trainable_names": [n for n, p in model.named_parameters() if p.requires_grad],
            "out": out, "merged_out": merged(x), "lora_B": model.fc2.lora_B, "merged_requires_grad": merged(x).requires_grad}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def llama_gqa_block_rmsnorm_swiglu_rope_training(torch):
    nn, F = torch.nn, torch.nn.functional
    V, dim, n_heads, n_kv, B, T = 17, 16, 4, 2, 2, 6
    hd = dim // n_heads

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(d))

        def forward(self, x):
            return (
                x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
            ).type_as(x) * self.weight

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    inv_freq = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    emb = torch.cat(
        (torch.outer(torch.arange(T, dtype=torch.int64).float(), inv_freq),) * 2, dim=-1
    )
    cos, sin = emb.cos()[None, None], emb.sin()[None, None]

    def repeat_kv(x, n_rep):
        b, h, s, d = x.shape
        return x[:, :, None, :, :].expand(b, h, n_rep, s, d).reshape(b, h * n_rep, s, d)

    class Llama(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V, dim)
            self.q_proj, self.o_proj = (
                nn.Linear(dim, dim, bias=False),
                nn.Linear(dim, dim, bias=False),
            )
            self.k_proj, self.v_proj = (
                nn.Linear(dim, n_kv * hd, bias=False),
                nn.Linear(dim, n_kv * hd, bias=False),
            )
            self.gate_proj, self.up_proj = (
                nn.Linear(dim, 24, bias=False),
                nn.Linear(dim, 24, bias=False),
            )
            self.down_proj = nn.Linear(24, dim, bias=False)
            self.input_layernorm, self.post_attention_layernorm = (
                RMSNorm(dim),
                nn.RMSNorm(dim, eps=1e-6),
            )
            self.norm, self.lm_head = RMSNorm(dim), nn.Linear(dim, V, bias=False)

        def forward(self, ids, gqa=False):
            x = self.embed(ids)
            h = self.input_layernorm(x)
            q = self.q_proj(h).view(B, T, n_heads, hd).transpose(1, 2)
            k = self.k_proj(h).view(B, T, n_kv, hd).transpose(1, 2)
            v = self.v_proj(h).view(B, T, n_kv, hd).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            if gqa:
                att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                att = F.scaled_dot_product_attention(
                    q, repeat_kv(k, n_heads // n_kv), repeat_kv(v, n_heads // n_kv), is_causal=True
                )
            x = x + self.o_proj(att.transpose(1, 2).reshape(B, T, dim))
            h = self.post_attention_layernorm(x)
            x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
            return self.lm_head(self.norm(x))

    model = set_weights(torch, Llama(), seed=171)
    ids = torch.tensor(ints(172, V, B, T + 1))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    losses = []
    for _ in range(3):
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    h = torch.tensor(arr(173, B, T, dim))
    attention = torch.nn.attention
    with attention.sdpa_kernel(attention.SDPBackend.MATH):  # pin the backend for a comparison
        gqa_logits = model(ids[:, :-1], gqa=True)
    return {"losses": losses, "grads": grads(model), "logits": logits, "gqa_logits": gqa_logits,
            "rms_functional": F.rms_norm(h, (dim,), model.norm.weight, eps=1e-6), "rms_by_hand": model.norm(h)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def llama_reference_kv_cache_with_complex_rotary(torch):
    nn, F = torch.nn, torch.nn.functional
    V, dim, n_heads, max_seq, max_batch = 13, 8, 2, 12, 2
    hd = dim // n_heads

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        freqs = torch.outer(torch.arange(end, device=freqs.device, dtype=torch.float32), freqs)
        return torch.polar(torch.ones_like(freqs), freqs)

    def apply_rotary_emb(xq, xk, freqs_cis):
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
        freqs_cis = freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq), torch.view_as_real(
            xk_ * freqs_cis
        ).flatten(3).type_as(xk)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk, self.wv, self.wo = (nn.Linear(dim, dim, bias=False) for _ in range(4))
            self.cache_k = torch.zeros((max_batch, max_seq, n_heads, hd))
            self.cache_v = torch.zeros((max_batch, max_seq, n_heads, hd))

        def forward(self, x, start_pos, freqs_cis, mask):
            bsz, seqlen, _ = x.shape
            xq, xk, xv = (w(x).view(bsz, seqlen, n_heads, hd) for w in (self.wq, self.wk, self.wv))
            xq, xk = apply_rotary_emb(xq, xk, freqs_cis=freqs_cis)
            self.cache_k = self.cache_k.to(xq)
            self.cache_v = self.cache_v.to(xq)
            self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk
            self.cache_v[:bsz, start_pos : start_pos + seqlen] = xv
            keys, values = (
                self.cache_k[:bsz, : start_pos + seqlen],
                self.cache_v[:bsz, : start_pos + seqlen],
            )
            xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
            scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(hd)
            if mask is not None:
                scores = scores + mask
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            return self.wo(
                torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
            )

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_embeddings, self.attention_norm = (
                nn.Embedding(V, dim),
                nn.RMSNorm(dim, eps=1e-5),
            )
            self.attention, self.norm, self.output = (
                Attention(),
                nn.RMSNorm(dim, eps=1e-5),
                nn.Linear(dim, V, bias=False),
            )
            self.freqs_cis = precompute_freqs_cis(hd, max_seq * 2)

        @torch.inference_mode()
        def forward(self, tokens, start_pos):
            seqlen = tokens.shape[1]
            h = self.tok_embeddings(tokens)
            freqs_cis = self.freqs_cis[start_pos : start_pos + seqlen]
            mask = None
            if seqlen > 1:
                mask = torch.triu(torch.full((seqlen, seqlen), float("-inf")), diagonal=1)
                mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
            h = h + self.attention(self.attention_norm(h), start_pos, freqs_cis, mask)
            return self.output(self.norm(h)).float()

    model = set_weights(torch, Transformer(), seed=181)
    prompt = torch.tensor(ints(182, V, 2, 4))
    first = model(prompt[:, :2], 0)  # chunked prefill
    logits = model(prompt[:, 2:], 2)
    tokens, step_logits = prompt, []
    for cur_pos in range(4, 9):
        next_token = torch.argmax(logits[:, -1], dim=-1)
        tokens = torch.cat([tokens, next_token.reshape(-1, 1)], dim=1)
        logits = model(tokens[:, cur_pos : cur_pos + 1], cur_pos)
        step_logits.append(logits[:, -1])
    full = model(tokens, 0)
    return {"tokens": tokens, "first": first, "incremental": torch.stack(step_logits, 1), "full": full[:, 4:],
            "close": torch.allclose(torch.stack(step_logits, 1), full[:, 4:], atol=1e-5),
            "is_inference": full.is_inference(), "cache_k": model.attention.cache_k}  # fmt: skip


@program
def t5_relative_position_bias_buckets(torch):
    nn, F = torch.nn, torch.nn.functional

    def relative_position_bucket(
        relative_position, bidirectional=True, num_buckets=32, max_distance=128
    ):
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact)
            * (num_buckets - max_exact)
        ).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
        )
        return relative_buckets + torch.where(
            is_small, relative_position, relative_position_if_large
        )

    class T5Attention(nn.Module):
        def __init__(self, d=12, h=3, bidirectional=True):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(d, d, bias=False) for _ in range(4))
            self.relative_attention_bias, self.h, self.bidirectional = (
                nn.Embedding(8, h),
                h,
                bidirectional,
            )

        def compute_bias(self, query_length, key_length):
            context_position = torch.arange(query_length, dtype=torch.long)[:, None]
            memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
            buckets = relative_position_bucket(
                memory_position - context_position, self.bidirectional, 8, 20
            )
            return self.relative_attention_bias(buckets).permute([2, 0, 1]).unsqueeze(0), buckets

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = (
                p(x).view(B, T, self.h, -1).transpose(1, 2) for p in (self.q, self.k, self.v)
            )
            scores = torch.matmul(q, k.transpose(3, 2))  # T5 does not scale
            position_bias, buckets = self.compute_bias(T, T)
            if not self.bidirectional:
                causal = torch.ones(T, T, dtype=torch.bool).triu(1)
                position_bias = position_bias.masked_fill(causal, torch.finfo(scores.dtype).min)
            attn = F.softmax((scores + position_bias).float(), dim=-1).type_as(scores)
            return self.o(torch.matmul(attn, v).transpose(1, 2).reshape(B, T, D)), buckets

    enc, dec = T5Attention(), T5Attention(bidirectional=False)
    model = set_weights(torch, nn.ModuleList([enc, dec]), seed=191)
    x, target = torch.tensor(arr(192, 2, 12, 12)), torch.tensor(arr(193, 2, 12, 12))
    opt = torch.optim.Adafactor(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        h, enc_buckets = enc(x)
        out, dec_buckets = dec(h)
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"enc_buckets": enc_buckets, "dec_buckets": dec_buckets, "losses": losses, "out": out,
            "bias_weights": [enc.relative_attention_bias.weight, dec.relative_attention_bias.weight]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mixture_of_experts_top2_router_training(torch):
    nn, F = torch.nn, torch.nn.functional
    D, E, K = 8, 4, 2

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w2, self.w3 = (
                nn.Linear(D, 12, bias=False),
                nn.Linear(12, D, bias=False),
                nn.Linear(D, 12, bias=False),
            )

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class SparseMoeBlock(nn.Module):  # as Mixtral's
        def __init__(self):
            super().__init__()
            self.gate, self.experts = (
                nn.Linear(D, E, bias=False),
                nn.ModuleList([Expert() for _ in range(E)]),
            )

        def forward(self, hidden_states):
            batch_size, sequence_length, hidden_dim = hidden_states.shape
            hidden_states = hidden_states.view(-1, hidden_dim)
            router_logits = self.gate(hidden_states)
            routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
            routing_weights, selected_experts = torch.topk(routing_weights, K, dim=-1)
            routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
            final = torch.zeros(
                (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype
            )
            expert_mask = F.one_hot(selected_experts, num_classes=E).permute(2, 1, 0)
            for expert_idx in range(E):
                idx, top_x = torch.where(expert_mask[expert_idx])
                current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
                current = (
                    self.experts[expert_idx](current_state) * routing_weights[top_x, idx, None]
                )
                final.index_add_(0, top_x, current.to(hidden_states.dtype))
            return final.reshape(batch_size, sequence_length, hidden_dim), router_logits

    def load_balancing_loss(router_logits):
        gates = F.softmax(router_logits, dim=-1)
        _, sel = torch.topk(gates, K, dim=-1)
        tokens_per_expert = torch.mean(F.one_hot(sel, E).float(), dim=0)
        return E * torch.sum(tokens_per_expert * gates.mean(dim=0).unsqueeze(0))

    moe = set_weights(torch, SparseMoeBlock(), seed=201)
    x, y = torch.tensor(arr(202, 2, 5, D)), torch.tensor(arr(203, 2, 5, D))
    opt = torch.optim.SGD(moe.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        out, logits = moe(x)
        loss = F.mse_loss(out, y) + 0.01 * load_balancing_loss(logits)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():  # dense equivalent: scatter the top-k gates, gather every expert's output
        flat = x.view(-1, D)
        top_vals, top_idx = moe.gate(flat).topk(K, dim=-1)
        dense_gates = torch.zeros(flat.size(0), E).scatter(1, top_idx, F.softmax(top_vals, dim=-1))
        all_out = torch.stack([e(flat) for e in moe.experts], dim=1)  # N, E, D
        picked = torch.gather(all_out, 1, top_idx.unsqueeze(-1).expand(-1, -1, D))
        dense = torch.einsum("ne,ned->nd", dense_gates, all_out)
        sparse = (picked * dense_gates.gather(1, top_idx).unsqueeze(-1)).sum(1)
    return {"losses": losses, "out": out, "grads": grads(moe), "dense": dense, "sparse": sparse,
            "moe_out": moe(x)[0].view(-1, D), "top_idx": top_idx, "expert_load": torch.bincount(top_idx.flatten(), minlength=E)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def left_padded_batch_generation_with_attention_mask(torch):
    nn, F = torch.nn, torch.nn.functional
    V, C, H, PAD = 15, 12, 2, 0

    class TinyCausalLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe, self.ln = nn.Embedding(V, C), nn.Embedding(16, C), nn.LayerNorm(C)
            self.c_attn, self.c_proj, self.lm_head = (
                nn.Linear(C, 3 * C),
                nn.Linear(C, C),
                nn.Linear(C, V, bias=False),
            )

        def forward(self, input_ids, attention_mask, position_ids, past_key_values=None):
            B, T = input_ids.shape
            x = self.wte(input_ids) + self.wpe(position_ids)
            q, k, v = self.c_attn(self.ln(x)).split(C, dim=-1)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            if past_key_values is not None:
                k, v = (
                    torch.cat((past_key_values[0], k), dim=-2),
                    torch.cat((past_key_values[1], v), dim=-2),
                )
            S = k.size(-2)
            allowed = (
                torch.ones(T, S, dtype=torch.bool).tril(diagonal=S - T)[None, None]
                & attention_mask[:, None, None, :].bool()
            )
            bias = torch.zeros(B, 1, T, S).masked_fill(~allowed, torch.finfo(q.dtype).min)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
            return self.lm_head(x), (k, v)

    model = set_weights(torch, TinyCausalLM(), seed=211).eval()
    prompts = [[5, 3, 9, 4, 7], [8, 2], [11, 6, 1]]
    width = max(map(len, prompts))
    input_ids = torch.tensor([[PAD] * (width - len(p)) + p for p in prompts])
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    position_ids = attention_mask.long().cumsum(-1) - 1
    position_ids.masked_fill_(attention_mask == 0, 1)
    with torch.no_grad():
        logits, past = model(input_ids, attention_mask, position_ids)
        generated, firsts = input_ids, logits[:, -1]
        for _ in range(4):
            next_tokens = torch.argmax(logits[:, -1, :], dim=-1)
            generated = torch.cat([generated, next_tokens[:, None]], dim=-1)
            attention_mask = torch.cat(
                [attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1
            )
            position_ids = position_ids[:, -1:] + 1
            logits, past = model(next_tokens[:, None], attention_mask, position_ids, past)
        singles = []
        for p in prompts:  # each prompt alone, unpadded, no cache
            ids = torch.tensor([p])
            for _ in range(4):
                out, _ = model(ids, torch.ones_like(ids), torch.arange(ids.size(1))[None])
                ids = torch.cat([ids, out[:, -1].argmax(-1, keepdim=True)], dim=1)
            singles.append(ids[0, len(p) :])
    return {"generated": generated, "singles": singles, "first_logits": firsts, "last_logits": logits[:, -1],
            "same_as_unpadded": all(torch.equal(generated[i, width:], s) for i, s in enumerate(singles))}  # fmt: skip
