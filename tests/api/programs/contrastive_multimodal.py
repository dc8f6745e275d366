"""Contrastive and multimodal learning as open_clip, HF CLIP, BLIP/ALBEF, SigLIP, CoOp, CoCa,
Flamingo and the retrieval benchmarks write it: a ViT image tower with a patch-embedding
convolution and class token next to a causal text transformer pooled at the EOS token, SigLIP's
pairwise sigmoid loss with a learnable bias (and its chunked "negatives only" terms), open_clip's
``ClipLoss`` over emulated ranks with gradient accumulation, ALBEF's image-text matching with hard
negatives drawn from the similarity softmax and its momentum-distilled soft targets over feature
queues, CoOp's learnable prompt context and CoCoOp's meta-net, zero-shot classifiers from prompt
ensembles followed by WiSE-FT weight interpolation, Tip-Adapter's cache model, VSE++'s hardest
negative hinge, CoCa's attentional pooler with a captioning loss, Flamingo's perceiver resampler and
tanh-gated cross attention, and retrieval recall@k, mean and median rank. Every random draw (the
hard-negative sampling included) comes from NumPy with a fixed seed."""

from __future__ import annotations

import copy
import math
from collections import OrderedDict

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights

_WORDS = ("a photo of the dog cat car bird plane ship small big blurry good bad picture "
          "rendering sketch").split()  # fmt: skip
_VOCAB = {w: i + 1 for i, w in enumerate(_WORDS)}  # 0 is padding
_SOT, _EOT = len(_VOCAB) + 1, len(_VOCAB) + 2  # as in CLIP's BPE, end-of-text has the largest id
_VOCAB_SIZE = len(_VOCAB) + 3


def _tokenize(texts, context_length=8):
    """``clip.tokenize`` over a toy word vocabulary: ``[sot] + tokens + [eot]`` padded with zeros,
    truncated with the last token replaced by ``eot``."""
    result = np.zeros((len(texts), context_length), dtype=np.int64)
    for i, text in enumerate(texts):
        tokens = [_SOT] + [_VOCAB[w] for w in text.lower().split()] + [_EOT]
        if len(tokens) > context_length:
            tokens = tokens[:context_length]
            tokens[-1] = _EOT
        result[i, : len(tokens)] = tokens
    return result


def _set_children(torch, model, seed):
    """``set_weights`` on every child module (the model's own scalars keep their init)."""
    for i, child in enumerate(model.children()):
        set_weights(torch, child, seed=seed + i)
    return model


def _text_encoder(torch, context_length=8, width=8, embed_dim=6, heads=2):
    """A CLIP text transformer (pre-norm, causal, pooled at the EOT token by ``argmax``) that can
    also encode prompt embeddings, as CoOp's ``TextEncoder`` does."""
    nn = torch.nn

    class TextEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(_VOCAB_SIZE, width)
            self.positional_embedding = nn.Parameter(torch.empty(context_length, width))
            layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width,
                                               dropout=0.0, activation="gelu", batch_first=True,
                                               norm_first=True)  # fmt: skip
            self.transformer = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.ln_final = nn.LayerNorm(width)
            self.text_projection = nn.Parameter(torch.empty(width, embed_dim))
            mask = nn.Transformer.generate_square_subsequent_mask(context_length)
            self.register_buffer("attn_mask", mask, persistent=False)

        def encode_prompts(self, prompts, tokenized_prompts):
            x = prompts + self.positional_embedding
            x = self.transformer(x, mask=self.attn_mask, is_causal=True)
            x = self.ln_final(x)
            eot = tokenized_prompts.argmax(dim=-1)
            return x[torch.arange(x.shape[0]), eot] @ self.text_projection

        def forward(self, text):
            return self.encode_prompts(self.token_embedding(text), text)

    enc = set_weights(torch, TextEncoder(), seed=7)
    with torch.no_grad():
        enc.positional_embedding.copy_(torch.tensor(arr(8, context_length, width, scale=0.1)))
    return enc


@program(rtol=5e-4, atol=5e-5)
def mm_vit_patch_embed_class_token_hf_clip_loss(torch):
    """open_clip's ``VisionTransformer``: a stride-``patch`` ``Conv2d`` patch embedding, the class
    token prepended with ``class_embedding + zeros(...)``, ``ln_pre``/``ln_post`` around a
    pre-norm encoder and ``x[:, 0] @ proj``; a text tower pooled at the EOS token found by
    ``(input_ids == eos_token_id).int().argmax(-1)`` with a key padding mask; HF CLIP's
    ``clip_loss`` on ``logits_per_text`` with ``logit_scale.exp()``, trained by AdamW."""
    nn, F = torch.nn, torch.nn.functional
    width, patch, image_size, embed_dim, ctx = 8, 4, 8, 6, 8

    class VisionTransformer(nn.Module):
        def __init__(self, image_size=image_size):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, kernel_size=patch, stride=patch, bias=False)
            scale = width**-0.5
            grid = image_size // patch
            self.grid_size = (grid, grid)
            self.class_embedding = nn.Parameter(scale * torch.ones(width))
            self.positional_embedding = nn.Parameter(scale * torch.ones(grid * grid + 1, width))
            self.ln_pre = nn.LayerNorm(width)
            layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)  # fmt: skip
            self.transformer = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.ln_post = nn.LayerNorm(width)
            self.proj = nn.Parameter(scale * torch.ones(width, embed_dim))

        def forward(self, x):
            x = self.conv1(x)  # shape = [*, width, grid, grid]
            x = x.reshape(x.shape[0], x.shape[1], -1)  # shape = [*, width, grid ** 2]
            x = x.permute(0, 2, 1)  # shape = [*, grid ** 2, width]
            cls = self.class_embedding.to(x.dtype) + torch.zeros(x.shape[0], 1, x.shape[-1],
                                                                 dtype=x.dtype, device=x.device)  # fmt: skip
            x = torch.cat([cls, x], dim=1)  # shape = [*, grid ** 2 + 1, width]
            x = x + self.positional_embedding.to(x.dtype)
            x = self.ln_pre(x)
            x = self.transformer(x)
            x = self.ln_post(x[:, 0, :])
            return x @ self.proj

    class TextTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding = nn.Embedding(_VOCAB_SIZE, width)
            self.position_embedding = nn.Embedding(ctx, width)
            self.register_buffer("position_ids", torch.arange(ctx).expand((1, -1)),
                                 persistent=False)  # fmt: skip
            layer = nn.TransformerEncoderLayer(width, 2, 2 * width, dropout=0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)  # fmt: skip
            self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.final_layer_norm = nn.LayerNorm(width)
            self.text_projection = nn.Linear(width, embed_dim, bias=False)

        def forward(self, input_ids, attention_mask):
            seq_length = input_ids.shape[-1]
            position_ids = self.position_ids[:, :seq_length]
            x = self.token_embedding(input_ids) + self.position_embedding(position_ids)
            causal = torch.ones(seq_length, seq_length, dtype=torch.bool).triu(1)
            x = self.encoder(x, mask=causal, src_key_padding_mask=attention_mask == 0)
            x = self.final_layer_norm(x)
            eos = (input_ids == _EOT).int().argmax(dim=-1)
            pooled = x[torch.arange(x.shape[0], device=x.device), eos]
            return self.text_projection(pooled)

    def resize_pos_embed(state_dict, model, interpolation="bicubic", antialias=True):
        # open_clip: rescale the grid of a checkpoint's positional embedding to a new image size
        old_pos_embed = state_dict.get("positional_embedding", None)
        grid_size = model.grid_size
        extra_tokens = 1  # FIXME detect different token configs (ie no class token, or more)
        new_seq_len = grid_size[0] * grid_size[1] + extra_tokens
        if new_seq_len == old_pos_embed.shape[0]:
            return
        pos_emb_tok, pos_emb_img = old_pos_embed[:extra_tokens], old_pos_embed[extra_tokens:]
        old_grid_size = (int(math.sqrt(len(pos_emb_img))),) * 2
        pos_emb_img = pos_emb_img.reshape(1, old_grid_size[0], old_grid_size[1], -1)
        pos_emb_img = pos_emb_img.permute(0, 3, 1, 2)
        pos_emb_img = F.interpolate(pos_emb_img, size=grid_size, mode=interpolation,
                                    antialias=antialias, align_corners=False)  # fmt: skip
        pos_emb_img = pos_emb_img.permute(0, 2, 3, 1).reshape(1, grid_size[0] * grid_size[1], -1)[0]
        state_dict["positional_embedding"] = torch.cat([pos_emb_tok, pos_emb_img], dim=0)

    def contrastive_loss(logits):
        return F.cross_entropy(logits, torch.arange(len(logits), device=logits.device))

    def clip_loss(similarity):
        caption_loss = contrastive_loss(similarity)
        image_loss = contrastive_loss(similarity.t())
        return (caption_loss + image_loss) / 2.0

    vision, text_model = VisionTransformer(), TextTransformer()
    set_weights(torch, vision, seed=11)
    set_weights(torch, text_model, seed=12)
    logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))
    params_all = list(vision.parameters()) + list(text_model.parameters()) + [logit_scale]
    optimizer = torch.optim.AdamW(params_all, lr=4e-3, weight_decay=0.05, betas=(0.9, 0.98),
                                  eps=1e-6)  # fmt: skip
    pixel_values = torch.tensor(arr(13, 5, 3, image_size, image_size))
    captions = ["a photo of a dog", "a sketch of the big cat", "a car", "a blurry bird",
                "a good picture of a small ship"]  # fmt: skip
    input_ids = torch.tensor(_tokenize(captions, ctx))
    attention_mask = (input_ids != 0).long()
    losses, accs = [], []
    for _ in range(3):
        image_embeds = vision(pixel_values)
        text_embeds = text_model(input_ids, attention_mask)
        image_embeds = image_embeds / image_embeds.norm(p=2, dim=-1, keepdim=True)
        text_embeds = text_embeds / text_embeds.norm(p=2, dim=-1, keepdim=True)
        logits_per_text = torch.matmul(text_embeds, image_embeds.t()) * logit_scale.exp()
        logits_per_image = logits_per_text.t()
        loss = clip_loss(logits_per_text)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accs.append((logits_per_image.argmax(-1) == torch.arange(5)).float().mean().item())
    state_dict = vision.state_dict()
    bigger = VisionTransformer(image_size=12)
    resize_pos_embed(state_dict, bigger)
    bigger.load_state_dict(state_dict)
    with torch.no_grad():
        image_features = F.normalize(bigger(torch.tensor(arr(14, 2, 3, 12, 12))), dim=-1)
        text_features = F.normalize(text_model(input_ids, attention_mask), dim=-1)
        text_probs = (100.0 * image_features @ text_features.T).softmax(dim=-1)
    printed = f"Label probs: {text_probs}"
    return {"printed": printed, "resized_pos_embed": bigger.positional_embedding,
            "losses": losses, "accs": accs, "logits_per_image": logits_per_image,
            "probs": logits_per_image.softmax(dim=1), "logit_scale": logit_scale,
            "vision_grads": grads(vision), "text_params": params(text_model),
            "eos": (input_ids == _EOT).int().argmax(dim=-1)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_siglip_sigmoid_loss_bias_chunked_negatives(torch):
    """SigLIP: ``logit_scale`` initialised to ``log(10)`` and ``logit_bias`` to ``-10``, labels
    ``2 * eye - 1``, ``-F.logsigmoid(labels * logits).sum() / n``; open_clip's ``SigLipLoss``
    ground truth with ``negative_only`` for the text chunks of other "ranks", checked against the
    full-batch loss; Adam for a few steps and sigmoid match probabilities."""
    nn, F = torch.nn, torch.nn.functional

    class SigLIP(nn.Module):
        def __init__(self, img_dim=10, txt_dim=7, embed_dim=5):
            super().__init__()
            self.image_proj = nn.Sequential(nn.Linear(img_dim, 12), nn.GELU(approximate="tanh"),
                                            nn.Linear(12, embed_dim))  # fmt: skip
            self.text_proj = nn.Sequential(nn.LayerNorm(txt_dim), nn.Linear(txt_dim, embed_dim))
            self.logit_scale = nn.Parameter(torch.ones([]) * math.log(10))
            self.logit_bias = nn.Parameter(torch.ones([]) * -10)

        def forward(self, image, text):
            return (F.normalize(self.image_proj(image), dim=-1),
                    F.normalize(self.text_proj(text), dim=-1))  # fmt: skip

    class SigLipLoss(nn.Module):
        def get_ground_truth(self, device, dtype, num_logits, negative_only=False):
            labels = -torch.ones((num_logits, num_logits), device=device, dtype=dtype)
            if not negative_only:
                labels = 2 * torch.eye(num_logits, device=device, dtype=dtype) + labels
            return labels

        def get_logits(self, image_features, text_features, logit_scale, logit_bias=None):
            logits = logit_scale * image_features @ text_features.T
            if logit_bias is not None:
                logits += logit_bias
            return logits

        def _loss(self, image_features, text_features, logit_scale, logit_bias=None,
                  negative_only=False):  # fmt: skip
            logits = self.get_logits(image_features, text_features, logit_scale, logit_bias)
            labels = self.get_ground_truth(image_features.device, image_features.dtype,
                                           image_features.shape[0], negative_only)  # fmt: skip
            return -F.logsigmoid(labels * logits).sum() / image_features.shape[0]

        def forward(self, image_features, text_features, logit_scale, logit_bias):
            return self._loss(image_features, text_features, logit_scale, logit_bias)

    model = _set_children(torch, SigLIP(), seed=21)
    loss_fn = SigLipLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    n, world_size = 6, 3
    base = arr(22, n, 4)
    images = torch.tensor(np.concatenate([base, arr(23, n, 6)], 1) + arr(24, n, 10, scale=0.2))
    texts = torch.tensor(np.concatenate([base[:, :3], arr(25, n, 4)], 1))
    losses, chunked, biases, scales = [], [], [], []
    for _ in range(4):
        img, txt = model(images, texts)
        scale = model.logit_scale.exp()
        loss = loss_fn(img, txt, scale, model.logit_bias)
        # each rank: its own block with positives, then every other rank's texts as negatives
        with torch.no_grad():
            local = n // world_size
            per_rank = []
            for rank in range(world_size):
                rows = slice(rank * local, (rank + 1) * local)
                rank_loss = loss_fn._loss(img[rows], txt[rows], scale, model.logit_bias)
                for other in range(world_size):
                    if other != rank:
                        cols = slice(other * local, (other + 1) * local)
                        rank_loss = rank_loss + loss_fn._loss(img[rows], txt[cols], scale,
                                                              model.logit_bias, negative_only=True)  # fmt: skip
                per_rank.append(rank_loss)
            chunked.append(torch.stack(per_rank).mean().item() / world_size)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        biases.append(model.logit_bias.item())
        scales.append(model.logit_scale.item())
    with torch.no_grad():
        img, txt = model(images, texts)
        logits = loss_fn.get_logits(img, txt, model.logit_scale.exp(), model.logit_bias)
        probs = torch.sigmoid(logits)
    return {"losses": losses, "chunked_over_world": chunked, "biases": biases, "scales": scales,
            "probs": probs, "matches": (probs > 0.5).sum(dim=1), "grads": grads(model)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_open_clip_local_loss_gather_with_grad_accumulation(torch):
    """open_clip's ``ClipLoss`` over emulated ranks: features "gathered" by concatenating the
    ranks' chunks, with ``gather_with_grad`` (the chunks keep their graphs) or without it (the
    other ranks' chunks detached and the local one put back in place); ``local_loss`` logits
    against all features with labels ``arange(n) + n * rank`` cached per rank; every rank's loss
    divided by the world size and back-propagated into the same ``.grad`` (what DDP's average
    amounts to), compared with the single-process loss's gradient."""
    nn, F = torch.nn, torch.nn.functional

    class ClipLoss(nn.Module):
        def __init__(self, local_loss=False, gather_with_grad=False, rank=0, world_size=1):
            super().__init__()
            self.local_loss, self.gather_with_grad = local_loss, gather_with_grad
            self.rank, self.world_size = rank, world_size
            self.prev_num_logits = 0
            self.labels = {}

        def get_ground_truth(self, device, num_logits):
            if self.prev_num_logits != num_logits or device not in self.labels:
                labels = torch.arange(num_logits, device=device, dtype=torch.long)
                if self.world_size > 1 and self.local_loss:
                    labels = labels + num_logits * self.rank
                self.labels[device] = labels
                self.prev_num_logits = num_logits
            return self.labels[device]

        def gather_features(self, chunks_img, chunks_txt):
            if self.gather_with_grad:
                return torch.cat(chunks_img, dim=0), torch.cat(chunks_txt, dim=0)
            gathered_img = [c.detach() for c in chunks_img]
            gathered_txt = [c.detach() for c in chunks_txt]
            gathered_img[self.rank] = chunks_img[self.rank]
            gathered_txt[self.rank] = chunks_txt[self.rank]
            return torch.cat(gathered_img, dim=0), torch.cat(gathered_txt, dim=0)

        def forward(self, chunks_img, chunks_txt, logit_scale):
            image_features, text_features = chunks_img[self.rank], chunks_txt[self.rank]
            if self.world_size > 1:
                all_image_features, all_text_features = self.gather_features(chunks_img,
                                                                             chunks_txt)  # fmt: skip
                if self.local_loss:
                    logits_per_image = logit_scale * image_features @ all_text_features.T
                    logits_per_text = logit_scale * text_features @ all_image_features.T
                else:
                    logits_per_image = logit_scale * all_image_features @ all_text_features.T
                    logits_per_text = logits_per_image.T
            else:
                logits_per_image = logit_scale * image_features @ text_features.T
                logits_per_text = logit_scale * text_features @ image_features.T
            labels = self.get_ground_truth(image_features.device, logits_per_image.shape[0])
            return (F.cross_entropy(logits_per_image, labels) +
                    F.cross_entropy(logits_per_text, labels)) / 2  # fmt: skip

    class Towers(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual = nn.Linear(9, 5)
            self.text = nn.Sequential(nn.Embedding(_VOCAB_SIZE, 6), nn.Flatten(), nn.Linear(18, 5))
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        def forward(self, image, text):
            return (F.normalize(self.visual(image), dim=-1),
                    F.normalize(self.text(text), dim=-1), self.logit_scale.exp())  # fmt: skip

    world_size = 3
    images = torch.tensor(arr(31, 6, 9))
    text = torch.tensor(ints(32, _VOCAB_SIZE, 6, 3))
    results = {}
    for name, gather_with_grad in (("with_grad", True), ("without_grad", False)):
        model = _set_children(torch, Towers(), seed=33)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
        criteria = [ClipLoss(local_loss=True, gather_with_grad=gather_with_grad, rank=r,
                             world_size=world_size) for r in range(world_size)]  # fmt: skip
        losses = []
        for _ in range(3):
            optimizer.zero_grad()
            total = 0.0
            for rank in range(world_size):
                img, txt, scale = model(images, text)
                chunks_img, chunks_txt = img.chunk(world_size), txt.chunk(world_size)
                loss = criteria[rank](list(chunks_img), list(chunks_txt), scale)
                (loss / world_size).backward()
                total += loss.item() / world_size
            optimizer.step()
            losses.append(total)
        results[name] = {"losses": losses, "grads": grads(model),
                         "labels": list(criteria[2].labels.values())}  # fmt: skip
    model = _set_children(torch, Towers(), seed=33)
    img, txt, scale = model(images, text)
    single = ClipLoss()([img], [txt], scale)
    single.backward()
    results["single_process"] = {"loss": single, "grads": grads(model)}
    return results


@program(rtol=5e-4, atol=5e-5)
def mm_albef_itm_hard_negatives_from_similarity_softmax(torch):
    """ALBEF/BLIP image-text matching: ITC with a learnable temperature clamped in place to
    ``[0.001, 0.5]``, hard negatives drawn per row from ``softmax(sim) + 1e-4`` with the diagonal
    zeroed by ``fill_diagonal_`` (``torch.multinomial`` replaced by inverse-CDF sampling with
    ``searchsorted`` on NumPy uniforms), a cross-attention fusion layer with a text padding mask,
    the 2-way ITM head on ``[CLS]`` over positives and both kinds of negatives."""
    nn, F = torch.nn, torch.nn.functional
    width, embed_dim, bs, n_patches, ctx = 8, 6, 5, 4, 6

    class Fusion(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.cross_attn = nn.MultiheadAttention(width, 2, batch_first=True)
            self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.ffn = nn.Sequential(nn.Linear(width, 16), nn.GELU(), nn.Linear(16, width))
            self.norm3 = nn.LayerNorm(width)

        def forward(self, text_embeds, text_mask, image_embeds):
            pad = text_mask == 0
            x = self.norm1(text_embeds + self.self_attn(text_embeds, text_embeds, text_embeds,
                                                        key_padding_mask=pad)[0])  # fmt: skip
            x = self.norm2(x + self.cross_attn(x, image_embeds, image_embeds)[0])
            return self.norm3(x + self.ffn(x))

    class ALBEF(nn.Module):
        def __init__(self):
            super().__init__()
            self.visual_encoder = nn.Sequential(nn.Linear(12, width), nn.GELU(),
                                                nn.LayerNorm(width))  # fmt: skip
            self.word_embeddings = nn.Embedding(_VOCAB_SIZE, width)
            self.text_encoder = nn.TransformerEncoderLayer(width, 2, 16, dropout=0.0,
                                                           batch_first=True)  # fmt: skip
            self.fusion = Fusion()
            self.vision_proj = nn.Linear(width, embed_dim)
            self.text_proj = nn.Linear(width, embed_dim)
            self.temp = nn.Parameter(torch.ones([]) * 0.07)
            self.itm_head = nn.Linear(width, 2)

        def forward(self, image, text_ids, text_mask, u_img, u_txt):
            with torch.no_grad():
                self.temp.clamp_(0.001, 0.5)
            image_embeds = self.visual_encoder(image)
            image_feat = F.normalize(self.vision_proj(image_embeds[:, 0, :]), dim=-1)
            text_embeds = self.text_encoder(self.word_embeddings(text_ids),
                                            src_key_padding_mask=text_mask == 0)  # fmt: skip
            text_feat = F.normalize(self.text_proj(text_embeds[:, 0, :]), dim=-1)
            sim_i2t = image_feat @ text_feat.t() / self.temp
            sim_t2i = text_feat @ image_feat.t() / self.temp
            targets = torch.arange(bs)
            loss_ita = (F.cross_entropy(sim_i2t, targets) + F.cross_entropy(sim_t2i, targets)) / 2

            output_pos = self.fusion(text_embeds, text_mask, image_embeds)
            with torch.no_grad():
                weights_i2t = F.softmax(sim_i2t[:, :bs], dim=1) + 1e-4
                weights_i2t.fill_diagonal_(0)
                weights_t2i = F.softmax(sim_t2i[:, :bs], dim=1) + 1e-4
                weights_t2i.fill_diagonal_(0)

            def sample(weights, u):  # torch.multinomial(weights, 1) with given uniforms
                cdf = weights.cumsum(dim=1)
                cdf = cdf / cdf[:, -1:]
                return torch.searchsorted(cdf, u.unsqueeze(1)).squeeze(1).clamp(max=bs - 1)

            # select a negative image for each text
            neg_img_idx = sample(weights_t2i, u_img)
            image_embeds_neg = []
            for b in range(bs):
                image_embeds_neg.append(image_embeds[neg_img_idx[b].item()])
            image_embeds_neg = torch.stack(image_embeds_neg, dim=0)
            # select a negative text for each image
            neg_txt_idx = sample(weights_i2t, u_txt)
            text_embeds_neg, text_atts_neg = [], []
            for b in range(bs):
                neg_idx = int(neg_txt_idx[b])
                text_embeds_neg.append(text_embeds[neg_idx])
                text_atts_neg.append(text_mask[neg_idx])
            text_embeds_neg = torch.stack(text_embeds_neg, dim=0)
            text_atts_neg = torch.stack(text_atts_neg, dim=0)

            text_embeds_all = torch.cat([text_embeds, text_embeds_neg], dim=0)
            text_atts_all = torch.cat([text_mask, text_atts_neg], dim=0)
            image_embeds_all = torch.cat([image_embeds_neg, image_embeds], dim=0)
            output_neg = self.fusion(text_embeds_all, text_atts_all, image_embeds_all)
            vl_embeddings = torch.cat([output_pos[:, 0, :], output_neg[:, 0, :]], dim=0)
            vl_output = self.itm_head(vl_embeddings)
            itm_labels = torch.cat([torch.ones(bs, dtype=torch.long),
                                    torch.zeros(2 * bs, dtype=torch.long)], dim=0)  # fmt: skip
            loss_itm = F.cross_entropy(vl_output, itm_labels)
            return loss_ita, loss_itm, vl_output, neg_img_idx, neg_txt_idx, weights_i2t

    model = _set_children(torch, ALBEF(), seed=41)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.02)
    image = torch.tensor(arr(42, bs, n_patches, 12))
    captions = ["a dog", "the big cat", "a photo of a car", "a bird", "a ship of the good"]
    text_ids = torch.tensor(_tokenize(captions, ctx))
    text_mask = (text_ids > 0).long()
    rng = np.random.default_rng(43)
    losses, negs = [], []
    for _ in range(3):
        u = rng.random((2, bs)).astype(np.float32)
        loss_ita, loss_itm, vl_output, neg_img, neg_txt, w = model(
            image, text_ids, text_mask, torch.tensor(u[0]), torch.tensor(u[1])
        )
        loss = loss_ita + loss_itm
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append([loss_ita.item(), loss_itm.item()])
        negs.append([neg_img.tolist(), neg_txt.tolist()])
    itm_scores = F.softmax(vl_output, dim=1)[:, 1]
    return {"losses": losses, "negatives": negs, "weights_i2t": w, "itm_scores": itm_scores,
            "temp": model.temp, "itm_head_grad": model.itm_head.weight.grad,
            "fusion_grads": grads(model.fusion)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_albef_momentum_distillation_queues_idx_targets(torch):
    """ALBEF/BLIP retrieval fine-tuning: momentum encoders made by ``deepcopy`` and updated with
    ``param_m.data = param_m.data * m + param.data * (1 - m)``, image/text/idx queues filled at a
    pointer, soft targets ``alpha * softmax(sim_m) + (1 - alpha) * sim_targets`` with positives
    from ``torch.eq(idx, idx_all)`` (the same image twice in a batch), ``alpha`` ramped over the
    first epoch, and the loss ``-sum(log_softmax(sim) * targets, 1).mean()``."""
    nn, F = torch.nn, torch.nn.functional
    embed_dim, queue_size, bs = 5, 8, 4

    class Retrieval(nn.Module):
        def __init__(self, momentum=0.9):
            super().__init__()
            self.visual_encoder = nn.Sequential(nn.Linear(10, 12), nn.ReLU())
            self.vision_proj = nn.Linear(12, embed_dim)
            self.text_encoder = nn.EmbeddingBag(_VOCAB_SIZE, 12, mode="mean")
            self.text_proj = nn.Linear(12, embed_dim)
            set_weights(torch, self, seed=51)
            self.temp = nn.Parameter(0.07 * torch.ones([]))
            self.momentum = momentum
            self.visual_encoder_m = copy.deepcopy(self.visual_encoder)
            self.vision_proj_m = copy.deepcopy(self.vision_proj)
            self.text_encoder_m = copy.deepcopy(self.text_encoder)
            self.text_proj_m = copy.deepcopy(self.text_proj)
            self.model_pairs = [[self.visual_encoder, self.visual_encoder_m],
                                [self.vision_proj, self.vision_proj_m],
                                [self.text_encoder, self.text_encoder_m],
                                [self.text_proj, self.text_proj_m]]  # fmt: skip
            self.copy_params()
            self.register_buffer("image_queue", torch.tensor(arr(52, embed_dim, queue_size)))
            self.register_buffer("text_queue", torch.tensor(arr(53, embed_dim, queue_size)))
            self.register_buffer("idx_queue", torch.full((1, queue_size), -100))
            self.register_buffer("ptr_queue", torch.zeros(1, dtype=torch.long))
            self.image_queue = nn.functional.normalize(self.image_queue, dim=0)
            self.text_queue = nn.functional.normalize(self.text_queue, dim=0)

        @torch.no_grad()
        def copy_params(self):
            for model_pair in self.model_pairs:
                for param, param_m in zip(model_pair[0].parameters(), model_pair[1].parameters()):
                    param_m.data.copy_(param.data)  # initialize
                    param_m.requires_grad = False  # not update by gradient

        @torch.no_grad()
        def _momentum_update(self):
            for model_pair in self.model_pairs:
                for param, param_m in zip(model_pair[0].parameters(), model_pair[1].parameters()):
                    param_m.data = param_m.data * self.momentum + param.data * (1.0 - self.momentum)

        @torch.no_grad()
        def _dequeue_and_enqueue(self, image_feat, text_feat, idxs):
            batch_size = image_feat.shape[0]
            ptr = int(self.ptr_queue)
            assert self.image_queue.shape[1] % batch_size == 0  # for simplicity
            self.image_queue[:, ptr : ptr + batch_size] = image_feat.T
            self.text_queue[:, ptr : ptr + batch_size] = text_feat.T
            self.idx_queue[:, ptr : ptr + batch_size] = idxs.T
            ptr = (ptr + batch_size) % self.image_queue.shape[1]  # move pointer
            self.ptr_queue[0] = ptr

        def forward(self, image, text, alpha, idx):
            with torch.no_grad():
                self.temp.clamp_(0.001, 0.5)
            image_feat = F.normalize(self.vision_proj(self.visual_encoder(image)), dim=-1)
            text_feat = F.normalize(self.text_proj(self.text_encoder(text)), dim=-1)
            idx = idx.view(-1, 1)
            idx_all = torch.cat([idx.t(), self.idx_queue.clone().detach()], dim=1)
            pos_idx = torch.eq(idx, idx_all).float()
            sim_targets = pos_idx / pos_idx.sum(1, keepdim=True)
            with torch.no_grad():
                self._momentum_update()
                image_feat_m = F.normalize(self.vision_proj_m(self.visual_encoder_m(image)), dim=-1)
                image_feat_m_all = torch.cat([image_feat_m.t(), self.image_queue.clone().detach()],
                                             dim=1)  # fmt: skip
                text_feat_m = F.normalize(self.text_proj_m(self.text_encoder_m(text)), dim=-1)
                text_feat_m_all = torch.cat([text_feat_m.t(), self.text_queue.clone().detach()],
                                            dim=1)  # fmt: skip
                sim_i2t_m = image_feat_m @ text_feat_m_all / self.temp
                sim_t2i_m = text_feat_m @ image_feat_m_all / self.temp
                sim_i2t_targets = alpha * F.softmax(sim_i2t_m, dim=1) + (1 - alpha) * sim_targets
                sim_t2i_targets = alpha * F.softmax(sim_t2i_m, dim=1) + (1 - alpha) * sim_targets
            sim_i2t = image_feat @ text_feat_m_all / self.temp
            sim_t2i = text_feat @ image_feat_m_all / self.temp
            loss_i2t = -torch.sum(F.log_softmax(sim_i2t, dim=1) * sim_i2t_targets, dim=1).mean()
            loss_t2i = -torch.sum(F.log_softmax(sim_t2i, dim=1) * sim_t2i_targets, dim=1).mean()
            self._dequeue_and_enqueue(image_feat_m, text_feat_m, idx)
            return (loss_i2t + loss_t2i) / 2, sim_i2t_targets

    model = Retrieval()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=0.02,
                                  weight_decay=0.02)  # fmt: skip
    data_len = 3
    losses, alphas, ptrs = [], [], []
    for i in range(5):
        image = torch.tensor(arr(54 + i, bs, 10))
        text = torch.tensor(ints(60 + i, _VOCAB_SIZE, bs, 3))
        img_ids = ints(66 + i, 6, bs)
        img_ids[1] = img_ids[0]  # the same image with two captions
        image[1] = image[0]
        alpha = 0.4 * min(1, i / data_len) if i < data_len else 0.4
        loss, targets = model(image, text, alpha, torch.tensor(img_ids))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        alphas.append(alpha)
        ptrs.append(int(model.ptr_queue))
    return {"losses": losses, "alphas": alphas, "ptrs": ptrs, "targets": targets,
            "image_queue": model.image_queue, "idx_queue": model.idx_queue,
            "text_proj_m": model.text_proj_m.weight, "temp": model.temp,
            "params": {k: v for k, v in params(model).items() if v.requires_grad}}  # fmt: skip


def _prompt_learner_parts(torch, text_encoder, classnames, n_ctx, context_length=8):
    """CoOp's ``PromptLearner.__init__``: ``"X X X X {classname}."`` tokenized, embedded without
    gradients, and split into the SOS prefix and the class-name + EOS suffix buffers."""
    prompt_prefix = " ".join(["X"] * n_ctx)
    name_lens = [len(name.split()) for name in classnames]
    prompts = [prompt_prefix + " " + name for name in classnames]
    tokens = []
    for p in prompts:  # "X" placeholders are not in the toy vocabulary: tokenize by hand
        ids = [_SOT] + [0 if w == "X" else _VOCAB[w] for w in p.split()] + [_EOT]
        tokens.append(ids + [0] * (context_length - len(ids)))
    tokenized_prompts = torch.tensor(np.array(tokens, dtype=np.int64))
    with torch.no_grad():
        embedding = text_encoder.token_embedding(tokenized_prompts)
    return embedding, tokenized_prompts, name_lens


@program(rtol=5e-4, atol=5e-5)
def mm_coop_learnable_context_frozen_clip(torch):
    """CoOp: a ``PromptLearner`` whose ``ctx`` (``n_ctx x ctx_dim``, std 0.02) is the only trainable
    parameter, ``token_prefix``/``token_suffix`` buffers, prompts built by ``torch.cat`` with the
    context ``unsqueeze(0).expand(n_cls, -1, -1)`` at the "end" and per class at the "middle";
    the CLIP text encoder run on prompt embeddings, everything else frozen with
    ``requires_grad_(False)``, SGD with a constant warmup then cosine annealing."""
    nn, F = torch.nn, torch.nn.functional
    classnames = ["dog", "cat", "car", "bird", "plane"]
    n_ctx, ctx_dim = 3, 8

    class PromptLearner(nn.Module):
        def __init__(self, text_encoder, class_token_position):
            super().__init__()
            ctx_vectors = torch.tensor(arr(71, n_ctx, ctx_dim, scale=0.02))
            self.ctx = nn.Parameter(ctx_vectors)  # to be optimized
            embedding, tokenized, name_lens = _prompt_learner_parts(torch, text_encoder,
                                                                    classnames, n_ctx)  # fmt: skip
            self.register_buffer("token_prefix", embedding[:, :1, :])  # SOS
            self.register_buffer("token_suffix", embedding[:, 1 + n_ctx :, :])  # CLS, EOS
            self.n_cls, self.tokenized_prompts = len(classnames), tokenized
            self.name_lens, self.class_token_position = name_lens, class_token_position

        def forward(self):
            ctx = self.ctx
            if ctx.dim() == 2:
                ctx = ctx.unsqueeze(0).expand(self.n_cls, -1, -1)
            prefix, suffix = self.token_prefix, self.token_suffix
            if self.class_token_position == "end":
                return torch.cat([prefix, ctx, suffix], dim=1)
            half_n_ctx = n_ctx // 2
            prompts = []
            for i in range(self.n_cls):
                name_len = self.name_lens[i]
                prefix_i = prefix[i : i + 1, :, :]
                class_i = suffix[i : i + 1, :name_len, :]
                suffix_i = suffix[i : i + 1, name_len:, :]
                ctx_i_half1 = ctx[i : i + 1, :half_n_ctx, :]
                ctx_i_half2 = ctx[i : i + 1, half_n_ctx:, :]
                prompts.append(torch.cat([prefix_i, ctx_i_half1, class_i, ctx_i_half2, suffix_i],
                                         dim=1))  # fmt: skip
            return torch.cat(prompts, dim=0)

    class CustomCLIP(nn.Module):
        def __init__(self, class_token_position):
            super().__init__()
            self.text_encoder = _text_encoder(torch)
            self.prompt_learner = PromptLearner(self.text_encoder, class_token_position)
            self.tokenized_prompts = self.prompt_learner.tokenized_prompts
            self.image_encoder = set_weights(torch, nn.Linear(10, 6), seed=72)
            self.logit_scale = nn.Parameter(torch.tensor(math.log(100.0)))

        def forward(self, image):
            image_features = self.image_encoder(image)
            prompts = self.prompt_learner()
            text_features = self.text_encoder.encode_prompts(prompts, self.tokenized_prompts)
            image_features = image_features / image_features.norm(dim=-1, keepdim=True)
            text_features = text_features / text_features.norm(dim=-1, keepdim=True)
            logit_scale = self.logit_scale.exp()
            return logit_scale * image_features @ text_features.t()

    images = torch.tensor(arr(73, 8, 10))
    labels = torch.tensor(ints(74, 5, 8))
    out = {}
    for position in ("end", "middle"):
        model = CustomCLIP(position)
        for name, param in model.named_parameters():
            if "prompt_learner" not in name:
                param.requires_grad_(False)
        enabled = sorted(n for n, p in model.named_parameters() if p.requires_grad)
        optim = torch.optim.SGD(model.prompt_learner.parameters(), lr=2.0, momentum=0.9,
                                weight_decay=5e-4)  # fmt: skip
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(optim, T_max=4)
        losses, lrs = [], []
        for epoch in range(4):
            if epoch == 0:  # ConstantWarmupScheduler: a fixed small lr for the first epoch
                for group in optim.param_groups:
                    group["lr"] = 0.1
            output = model(images)
            loss = F.cross_entropy(output, labels)
            optim.zero_grad()
            loss.backward()
            optim.step()
            if epoch == 0:
                for group in optim.param_groups:
                    group["lr"] = group["initial_lr"]
            sched.step()
            losses.append(loss.item())
            lrs.append(optim.param_groups[0]["lr"])
        acc = (output.argmax(dim=1) == labels).float().mean() * 100
        out[position] = {"losses": losses, "lrs": lrs, "enabled": ", ".join(enabled),
                         "ctx": model.prompt_learner.ctx,
                         "ctx_grad": model.prompt_learner.ctx.grad,
                         "frozen_grad_none": [p.grad is None for n, p in model.named_parameters()
                                              if "prompt_learner" not in n],
                         "prompts": model.prompt_learner(), "acc": acc}  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def mm_cocoop_meta_net_instance_conditioned_prompts(torch):
    """CoCoOp: a ``meta_net`` (``OrderedDict`` of ``linear1``/``relu``/``linear2``) maps each
    image feature to a bias added to the shared context (``ctx.unsqueeze(0) + bias.unsqueeze(1)``),
    one prompt set per image stacked with ``torch.stack``, the text encoder run per image inside a
    loop over ``zip(prompts, image_features)``, the loss returned in training mode and logits in
    eval mode."""
    nn, F = torch.nn, torch.nn.functional
    classnames = ["dog", "cat", "ship", "plane"]
    n_ctx, ctx_dim, vis_dim = 2, 8, 6

    class PromptLearner(nn.Module):
        def __init__(self, text_encoder):
            super().__init__()
            self.ctx = nn.Parameter(torch.tensor(arr(81, n_ctx, ctx_dim, scale=0.02)))
            self.meta_net = nn.Sequential(OrderedDict([
                ("linear1", nn.Linear(vis_dim, vis_dim // 2)),
                ("relu", nn.ReLU(inplace=True)),
                ("linear2", nn.Linear(vis_dim // 2, ctx_dim)),
            ]))  # fmt: skip
            set_weights(torch, self.meta_net, seed=82)
            embedding, tokenized, _ = _prompt_learner_parts(torch, text_encoder, classnames, n_ctx)
            self.register_buffer("token_prefix", embedding[:, :1, :])
            self.register_buffer("token_suffix", embedding[:, 1 + n_ctx :, :])
            self.n_cls, self.tokenized_prompts = len(classnames), tokenized

        def construct_prompts(self, ctx, prefix, suffix, label=None):
            if label is not None:
                prefix, suffix = prefix[label], suffix[label]
            return torch.cat([prefix, ctx, suffix], dim=1)

        def forward(self, im_features):
            prefix, suffix = self.token_prefix, self.token_suffix
            ctx = self.ctx  # (n_ctx, ctx_dim)
            bias = self.meta_net(im_features)  # (batch, ctx_dim)
            bias = bias.unsqueeze(1)  # (batch, 1, ctx_dim)
            ctx = ctx.unsqueeze(0)  # (1, n_ctx, ctx_dim)
            ctx_shifted = ctx + bias  # (batch, n_ctx, ctx_dim)
            prompts = []
            for ctx_shifted_i in ctx_shifted:
                ctx_i = ctx_shifted_i.unsqueeze(0).expand(self.n_cls, -1, -1)
                prompts.append(self.construct_prompts(ctx_i, prefix, suffix))
            return torch.stack(prompts)

    class CustomCLIP(nn.Module):
        def __init__(self):
            super().__init__()
            self.text_encoder = _text_encoder(torch)
            self.prompt_learner = PromptLearner(self.text_encoder)
            self.tokenized_prompts = self.prompt_learner.tokenized_prompts
            self.image_encoder = set_weights(torch, nn.Linear(10, vis_dim), seed=83)
            self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

        def forward(self, image, label=None):
            logit_scale = self.logit_scale.exp()
            image_features = self.image_encoder(image)
            image_features = image_features / image_features.norm(dim=-1, keepdim=True)
            prompts = self.prompt_learner(image_features)
            logits = []
            for pts_i, imf_i in zip(prompts, image_features):
                text_features = self.text_encoder.encode_prompts(pts_i, self.tokenized_prompts)
                text_features = text_features / text_features.norm(dim=-1, keepdim=True)
                l_i = logit_scale * imf_i @ text_features.t()
                logits.append(l_i)
            logits = torch.stack(logits)
            if self.prompt_learner.training:
                return F.cross_entropy(logits, label)
            return logits

    model = CustomCLIP()
    name_to_update = "prompt_learner"
    for name, param in model.named_parameters():
        if name_to_update not in name:
            param.requires_grad_(False)
    optim = torch.optim.SGD(model.prompt_learner.parameters(), lr=0.5, momentum=0.9)
    images = torch.tensor(arr(84, 6, 10))
    labels = torch.tensor(ints(85, 4, 6))
    losses = []
    for _ in range(3):
        loss = model(images, labels)
        optim.zero_grad()
        loss.backward()
        optim.step()
        losses.append(loss.item())
    meta_grads = grads(model.prompt_learner.meta_net)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor(arr(86, 3, 10)))
    return {"losses": losses, "ctx": model.prompt_learner.ctx, "meta_grads": meta_grads,
            "logits": logits, "pred": logits.argmax(dim=-1),
            "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_zero_shot_prompt_ensemble_then_wise_ft(torch):
    """CLIP's zero-shot recipe: ``zeroshot_classifier`` averaging the normalized embeddings of many
    templates per class and renormalizing, stacked with ``dim=1``; the notebook's ``accuracy``
    (top-1/top-3 via ``topk(...)[1].t()``); then WiSE-FT: a head initialised from the zero-shot
    weights times the logit scale, fine-tuning, and ``(1 - alpha) * theta_0 + alpha * theta_1``
    over the state dicts loaded back for several alphas."""
    nn, F = torch.nn, torch.nn.functional
    classnames = ["dog", "cat", "car", "bird", "plane", "ship"]
    templates = ["a photo of a {}.", "a blurry photo of the {}.", "a sketch of a {}.",
                 "a rendering of a big {}.", "a good picture of the small {}."]  # fmt: skip
    text_encoder = _text_encoder(torch)

    class ImageClassifier(nn.Module):
        def __init__(self, image_encoder, classification_head):
            super().__init__()
            self.image_encoder = image_encoder
            self.classification_head = classification_head

        def forward(self, inputs):
            features = self.image_encoder(inputs)
            features = features / features.norm(dim=-1, keepdim=True)
            return self.classification_head(features)

    def zeroshot_classifier(classnames, templates):
        with torch.no_grad():
            zeroshot_weights = []
            for classname in classnames:
                texts = [template.format(classname).rstrip(".") for template in templates]
                texts = torch.tensor(_tokenize(texts))
                class_embeddings = text_encoder(texts)
                class_embeddings /= class_embeddings.norm(dim=-1, keepdim=True)
                class_embedding = class_embeddings.mean(dim=0)
                class_embedding /= class_embedding.norm()
                zeroshot_weights.append(class_embedding)
            zeroshot_weights = torch.stack(zeroshot_weights, dim=1)
        return zeroshot_weights

    def accuracy(output, target, topk=(1,)):
        pred = output.topk(max(topk), 1, True, True)[1].t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        return [float(correct[:k].reshape(-1).float().sum(0, keepdim=True).cpu().numpy()[0])
                for k in topk]  # fmt: skip

    zeroshot_weights = zeroshot_classifier(classnames, templates)
    image_encoder = set_weights(torch, nn.Sequential(nn.Linear(10, 12), nn.GELU(),
                                                     nn.Linear(12, 6)), seed=91)  # fmt: skip
    logit_scale = 100.0
    head = nn.Linear(6, len(classnames))
    head.weight.data = zeroshot_weights.T * logit_scale
    head.bias.data = torch.zeros_like(head.bias)
    model = ImageClassifier(image_encoder, head)
    images, target = torch.tensor(arr(92, 12, 10)), torch.tensor(ints(93, 6, 12))
    with torch.no_grad():
        image_features = F.normalize(image_encoder(images), dim=-1)
        logits = 100.0 * image_features @ zeroshot_weights
    zs_top1, zs_top3 = accuracy(logits, target, topk=(1, 3))
    theta_0 = {k: v.clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    losses = []
    for _ in range(4):
        loss = F.cross_entropy(model(images), target, label_smoothing=0.1)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    theta_1 = {k: v.clone() for k, v in model.state_dict().items()}
    assert set(theta_0.keys()) == set(theta_1.keys())
    wise = {}
    for alpha in (0.0, 0.5, 1.0):
        theta = {key: (1 - alpha) * theta_0[key] + alpha * theta_1[key] for key in theta_0.keys()}
        model.load_state_dict(theta)
        with torch.no_grad():
            out = model(images)
        wise[f"alpha_{alpha}"] = {"acc": accuracy(out, target, topk=(1, 3)),
                                  "nll": F.cross_entropy(out, target).item()}  # fmt: skip
    return {"zeroshot_weights": zeroshot_weights, "zs_logits": logits, "zs_acc": [zs_top1, zs_top3],
            "losses": losses, "wise": wise, "head": model.classification_head.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_retrieval_recall_at_k_mean_median_rank(torch):
    """Image-text retrieval with several captions per image: a projection head pair trained a few
    steps with a multi-positive contrastive loss, then BLIP's ``itm_eval`` ranks written with
    ``torch.argsort``/``torch.where`` (best rank over an image's captions), CLIP_benchmark's
    vectorised ``recall_at_k`` from ``topk`` and ``one_hot``, and mean / median rank."""
    nn, F = torch.nn, torch.nn.functional
    n_img, caps_per_img = 6, 2
    n_txt = n_img * caps_per_img
    img2txt = [[i * caps_per_img + c for c in range(caps_per_img)] for i in range(n_img)]
    txt2img = torch.tensor([i for i in range(n_img) for _ in range(caps_per_img)])
    base = arr(101, n_img, 6)
    img_in = torch.tensor(base + arr(102, n_img, 6, scale=0.8))
    txt_in = torch.tensor(np.repeat(base, caps_per_img, 0)[:, ::-1].copy()
                          + arr(103, n_txt, 6, scale=0.8))  # fmt: skip
    img_proj = set_weights(torch, nn.Linear(6, 4), seed=104)
    txt_proj = set_weights(torch, nn.Linear(6, 4), seed=105)
    optimizer = torch.optim.Adam(list(img_proj.parameters()) + list(txt_proj.parameters()), lr=0.05)
    pos = (txt2img.view(1, -1) == torch.arange(n_img).view(-1, 1)).float()  # n_img x n_txt
    losses = []
    for _ in range(5):
        img = F.normalize(img_proj(img_in), dim=-1)
        txt = F.normalize(txt_proj(txt_in), dim=-1)
        logits = img @ txt.t() / 0.1
        loss_i2t = -(F.log_softmax(logits, dim=1) * pos / pos.sum(1, keepdim=True)).sum(1).mean()
        loss_t2i = F.cross_entropy(logits.t(), txt2img)
        loss = (loss_i2t + loss_t2i) / 2
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    @torch.no_grad()
    def itm_eval(scores_i2t, scores_t2i, txt2img, img2txt):
        # Images->Text
        ranks = torch.zeros(scores_i2t.shape[0])
        for index, score in enumerate(scores_i2t):
            inds = torch.argsort(score, descending=True)
            rank = 1e20
            for i in img2txt[index]:
                tmp = torch.where(inds == i)[0][0]
                if tmp < rank:
                    rank = tmp
            ranks[index] = rank
        tr1 = 100.0 * (ranks < 1).sum() / len(ranks)
        tr5 = 100.0 * (ranks < 5).sum() / len(ranks)
        tr10 = 100.0 * (ranks < 10).sum() / len(ranks)
        i2t_ranks = ranks
        # Text->Images
        ranks = torch.zeros(scores_t2i.shape[0])
        for index, score in enumerate(scores_t2i):
            inds = torch.argsort(score, descending=True)
            ranks[index] = torch.where(inds == txt2img[index])[0][0]
        ir1 = 100.0 * (ranks < 1).sum() / len(ranks)
        ir5 = 100.0 * (ranks < 5).sum() / len(ranks)
        tr_mean, ir_mean = (tr1 + tr5 + tr10) / 3, (ir1 + ir5) / 2
        return {"txt_r1": tr1, "txt_r5": tr5, "txt_r10": tr10, "txt_r_mean": tr_mean,
                "img_r1": ir1, "img_r5": ir5, "img_r_mean": ir_mean,
                "r_mean": (tr_mean + ir_mean) / 2, "i2t_ranks": i2t_ranks,
                "t2i_ranks": ranks, "i2t_mean_rank": i2t_ranks.mean() + 1,
                "t2i_median_rank": torch.median(ranks) + 1,
                "t2i_median_rank_np": float(np.floor(np.median(ranks.numpy()))) + 1}  # fmt: skip

    def recall_at_k(scores, positive_pairs, k):
        nb_texts, nb_images = scores.shape
        topk_indices = torch.topk(scores, k, dim=1)[1]
        nb_positive = positive_pairs.sum(dim=1)
        topk_indices_onehot = torch.nn.functional.one_hot(topk_indices, num_classes=nb_images)
        positive_pairs_reshaped = positive_pairs.view(nb_texts, 1, nb_images)
        nb_true_positive = topk_indices_onehot * positive_pairs_reshaped
        return nb_true_positive.sum(dim=(1, 2)) / nb_positive

    with torch.no_grad():
        img = F.normalize(img_proj(img_in), dim=-1)
        txt = F.normalize(txt_proj(txt_in), dim=-1)
        scores = img @ txt.t()
    metrics = itm_eval(scores, scores.t(), txt2img, img2txt)
    positive_pairs = torch.zeros_like(scores.t(), dtype=torch.bool)
    positive_pairs[torch.arange(len(scores.t())), txt2img] = True
    bench = {}
    for k in (1, 2, 5):
        bench[f"image_retrieval_recall@{k}"] = (
            (recall_at_k(scores.t(), positive_pairs, k) > 0).float().mean().item()
        )
        bench[f"text_retrieval_recall@{k}"] = (
            (recall_at_k(scores, positive_pairs.T, k) > 0).float().mean().item()
        )
    return {"losses": losses, "metrics": metrics, "benchmark": bench, "scores": scores}


@program(rtol=5e-4, atol=5e-5)
def mm_vsepp_max_violation_gru_text_encoder(torch):
    """VSE++: ``EncoderImagePrecomp`` (``fc`` then ``l2norm``), a GRU caption encoder over a
    length-sorted batch with ``pack_padded_sequence`` and the last state picked by ``gather``,
    the ``ContrastiveLoss`` with margin, diagonal ``expand_as``, ``masked_fill_`` on the identity
    and sum-of-hinges switched to max violation (hardest negatives) after warm-up; Adam with
    ``clip_grad_norm_``."""
    nn = torch.nn
    pack_padded_sequence = nn.utils.rnn.pack_padded_sequence
    pad_packed_sequence = nn.utils.rnn.pad_packed_sequence

    def l2norm(X):
        norm = torch.pow(X, 2).sum(dim=1, keepdim=True).sqrt()
        return torch.div(X, norm)

    class EncoderImagePrecomp(nn.Module):
        def __init__(self, img_dim, embed_size):
            super().__init__()
            self.fc = nn.Linear(img_dim, embed_size)
            r = np.sqrt(6.0) / np.sqrt(self.fc.in_features + self.fc.out_features)
            with torch.no_grad():
                self.fc.weight.copy_(torch.tensor(
                    np.random.default_rng(111).uniform(-r, r, (embed_size, img_dim)).astype(np.float32)))  # fmt: skip
            self.fc.bias.data.fill_(0)

        def forward(self, images):
            return l2norm(self.fc(images))

    class EncoderText(nn.Module):
        def __init__(self, vocab_size, word_dim, embed_size):
            super().__init__()
            self.embed_size = embed_size
            self.embed = nn.Embedding(vocab_size, word_dim)
            self.rnn = nn.GRU(word_dim, embed_size, 1, batch_first=True)
            set_weights(torch, self, seed=112)

        def forward(self, x, lengths):
            x = self.embed(x)
            packed = pack_padded_sequence(x, lengths, batch_first=True)
            out, _ = self.rnn(packed)
            padded = pad_packed_sequence(out, batch_first=True)
            I = torch.LongTensor(lengths).view(-1, 1, 1)  # noqa: E741
            I = I.expand(x.size(0), 1, self.embed_size) - 1  # noqa: E741
            out = torch.gather(padded[0], 1, I).squeeze(1)
            return l2norm(out)

    class ContrastiveLoss(nn.Module):
        def __init__(self, margin=0.0, max_violation=False):
            super().__init__()
            self.margin = margin
            self.max_violation = max_violation

        def forward(self, im, s):
            scores = im.mm(s.t())
            diagonal = scores.diag().view(im.size(0), 1)
            d1 = diagonal.expand_as(scores)
            d2 = diagonal.t().expand_as(scores)
            cost_s = (self.margin + scores - d1).clamp(min=0)  # caption retrieval
            cost_im = (self.margin + scores - d2).clamp(min=0)  # image retrieval
            mask = torch.eye(scores.size(0)) > 0.5
            cost_s = cost_s.masked_fill_(mask, 0)
            cost_im = cost_im.masked_fill_(mask, 0)
            if self.max_violation:
                cost_s = cost_s.max(1)[0]
                cost_im = cost_im.max(0)[0]
            return cost_s.sum() + cost_im.sum()

    img_enc, txt_enc = EncoderImagePrecomp(12, 6), EncoderText(_VOCAB_SIZE, 5, 6)
    params_all = list(txt_enc.parameters()) + list(img_enc.fc.parameters())
    optimizer = torch.optim.Adam(params_all, lr=0.01)
    criterion = ContrastiveLoss(margin=0.2)
    losses, norms, hardest = [], [], []
    for step in range(4):
        if step == 2:
            criterion.max_violation = True
        images = arr(113 + step, 5, 12)
        lengths = (ints(120 + step, 4, 5) + 2).tolist()
        captions = ints(125 + step, _VOCAB_SIZE - 1, 5, max(lengths)) + 1
        order = sorted(range(5), key=lambda i: lengths[i], reverse=True)  # collate_fn's sort
        images, captions = images[order], captions[order]
        lengths = [lengths[i] for i in order]
        for i, length in enumerate(lengths):
            captions[i, length:] = 0
        img_emb = img_enc(torch.tensor(images))
        cap_emb = txt_enc(torch.tensor(captions), lengths)
        loss = criterion(img_emb, cap_emb)
        optimizer.zero_grad()
        loss.backward()
        norms.append(float(nn.utils.clip_grad_norm_(params_all, 2.0)))
        optimizer.step()
        losses.append(loss.item())
        with torch.no_grad():
            scores = img_emb @ cap_emb.t()
            scores.fill_diagonal_(-1)
            hardest.append(scores.argmax(dim=1).tolist())
    return {"losses": losses, "norms": norms, "hardest": hardest, "cap_emb": cap_emb,
            "grads": grads(txt_enc), "fc": img_enc.fc.weight}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_tip_adapter_cache_model_hparam_search_finetune(torch):
    """Tip-Adapter: few-shot cache keys (normalized training features, ``[dim, n_cls * shots]``) and
    one-hot cache values, ``((-1) * (beta - beta * affinity)).exp() @ cache_values`` added to the
    zero-shot logits, a grid search over ``beta``/``alpha``; then Tip-Adapter-F: an
    ``nn.Linear`` adapter whose weight is the cache keys, trained with AdamW and cosine annealing."""
    nn, F = torch.nn, torch.nn.functional
    n_cls, shots, dim = 4, 3, 6
    common = arr(130, dim, scale=5.0)  # CLIP features share a large common direction
    protos = common + arr(131, n_cls, dim, scale=1.0)
    train_labels = np.repeat(np.arange(n_cls), shots)
    train_feats = protos[train_labels] + arr(132, n_cls * shots, dim, scale=0.8)
    test_labels = ints(133, n_cls, 10)
    test_feats = protos[test_labels] + arr(134, 10, dim, scale=0.8)
    clip_weights = F.normalize(torch.tensor(protos + arr(135, n_cls, dim, scale=1.0)), dim=-1).t()

    def cls_acc(output, target, topk=1):
        pred = output.topk(topk, 1, True, True)[1].t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        acc = float(correct[:topk].reshape(-1).float().sum(0, keepdim=True).cpu().numpy()[0])
        return 100 * acc / target.shape[0]

    with torch.no_grad():
        cache_keys = F.normalize(torch.tensor(train_feats), dim=-1)
        cache_keys = cache_keys.permute(1, 0)
        cache_values = F.one_hot(torch.tensor(train_labels)).float()
        test_features = torch.tensor(test_feats)
        test_features /= test_features.norm(dim=-1, keepdim=True)
        target = torch.tensor(test_labels)
        clip_logits = 100.0 * test_features @ clip_weights
        zs_acc = cls_acc(clip_logits, target)
        affinity = test_features @ cache_keys
        best_acc, best_beta, best_alpha, grid = 0, 0, 0, []
        for beta in (1.0, 5.0, 20.0):
            for alpha in (1.0, 5.0, 20.0):
                cache_logits = ((-1) * (beta - beta * affinity)).exp() @ cache_values
                tip_logits = clip_logits + cache_logits * alpha
                acc = cls_acc(tip_logits, target)
                grid.append(acc)
                if acc > best_acc:
                    best_acc, best_beta, best_alpha = acc, beta, alpha
    adapter = nn.Linear(cache_keys.shape[0], cache_keys.shape[1], bias=False)
    adapter.weight = nn.Parameter(cache_keys.t())
    optimizer = torch.optim.AdamW(adapter.parameters(), lr=0.01, eps=1e-4)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 4 * 2)
    train_features = F.normalize(torch.tensor(train_feats + arr(136, n_cls * shots, dim,
                                                                scale=0.3)), dim=-1)  # fmt: skip
    train_target = torch.tensor(train_labels)
    train_clip_logits = 100.0 * train_features @ clip_weights
    losses = []
    for _ in range(4):
        for batch in (slice(0, 6), slice(6, 12)):
            affinity = adapter(train_features[batch])
            cache_logits = ((-1) * (best_beta - best_beta * affinity)).exp() @ cache_values
            tip_logits = train_clip_logits[batch] + cache_logits * best_alpha
            loss = F.cross_entropy(tip_logits, train_target[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
    adapter.eval()
    with torch.no_grad():
        affinity = adapter(test_features)
        cache_logits = ((-1) * (best_beta - best_beta * affinity)).exp() @ cache_values
        tip_logits = clip_logits + cache_logits * best_alpha
    return {"zs_acc": zs_acc, "grid": grid, "best": [best_acc, best_beta, best_alpha],
            "losses": losses, "adapter": adapter.weight, "tip_logits": tip_logits,
            "acc_f": cls_acc(tip_logits, target), "lr": scheduler.get_last_lr()}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_coca_attentional_pooler_caption_plus_contrastive(torch):
    """CoCa: patch tokens from ``unfold``, an ``AttentionalPooler`` (learned queries through
    ``nn.MultiheadAttention`` with ``kdim``/``vdim``) whose first query is the contrastive
    embedding and the rest feed the decoder, a causal text tower with a ``cls_emb`` appended at
    the end, an ``nn.TransformerDecoder`` cross-attending to the image tokens, and ``CoCaLoss``:
    the CLIP loss plus a captioning cross-entropy with ``ignore_index=pad_id`` on
    ``logits.permute(0, 2, 1)``."""
    nn, F = torch.nn, torch.nn.functional
    width, img_width, ctx, n_queries, patch, pad_id = 8, 12, 7, 3, 3, 0

    class AttentionalPooler(nn.Module):
        def __init__(self, d_model, context_dim, n_head=2, n_queries=n_queries):
            super().__init__()
            self.query = nn.Parameter(torch.empty(n_queries, d_model))
            self.attn = nn.MultiheadAttention(d_model, n_head, kdim=context_dim, vdim=context_dim,
                                              batch_first=True)  # fmt: skip
            self.ln_q = nn.LayerNorm(d_model)
            self.ln_k = nn.LayerNorm(context_dim)

        def forward(self, x):
            N = x.shape[0]
            x = self.ln_k(x)
            q = self.ln_q(self.query)
            return self.attn(q.unsqueeze(0).expand(N, -1, -1), x, x, need_weights=False)[0]

    class CoCa(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Linear(3 * patch * patch, img_width)
            self.pos_embed = nn.Parameter(torch.empty(4, img_width))
            self.attn_pool = AttentionalPooler(width, img_width)
            self.ln_post = nn.LayerNorm(width)
            self.token_embedding = nn.Embedding(_VOCAB_SIZE, width)
            self.positional_embedding = nn.Parameter(torch.empty(ctx + 1, width))
            self.cls_emb = nn.Parameter(torch.empty(width))
            layer = nn.TransformerEncoderLayer(width, 2, 16, dropout=0.0, batch_first=True,
                                               norm_first=True)  # fmt: skip
            self.text_transformer = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
            self.ln_final = nn.LayerNorm(width)
            dec = nn.TransformerDecoderLayer(width, 2, 16, dropout=0.0, batch_first=True,
                                             norm_first=True)  # fmt: skip
            self.decoder = nn.TransformerDecoder(dec, 1)
            self.lm_head = nn.Linear(width, _VOCAB_SIZE)
            self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))

        def encode_image(self, images):
            p = images.unfold(2, patch, patch).unfold(3, patch, patch)  # B C gh gw p p
            p = p.permute(0, 2, 3, 1, 4, 5).flatten(3).flatten(1, 2)  # B (gh gw) (C p p)
            x = self.patch_embed(p) + self.pos_embed
            pooled = self.ln_post(self.attn_pool(x))
            return pooled[:, 0], pooled[:, 1:]

        def encode_text(self, text):
            seq_len = text.shape[1] + 1
            x = self.token_embedding(text)
            x = torch.cat([x, self.cls_emb.view(1, 1, -1).expand(x.shape[0], -1, -1)], dim=1)
            x = x + self.positional_embedding[:seq_len]
            causal = torch.empty(seq_len, seq_len).fill_(float("-inf")).triu_(1)
            x = self.text_transformer(x, mask=causal)
            pooled, tokens = x[:, -1], x[:, :-1]
            return self.ln_final(pooled), tokens

        def forward(self, image, text):
            image_latent, image_embs = self.encode_image(image)
            text_latent, token_embs = self.encode_text(text[:, :-1])
            tgt_mask = nn.Transformer.generate_square_subsequent_mask(token_embs.shape[1])
            dec = self.decoder(token_embs, image_embs, tgt_mask=tgt_mask, tgt_is_causal=True)
            return (F.normalize(image_latent, dim=-1), F.normalize(text_latent, dim=-1),
                    self.lm_head(dec), text[:, 1:], self.logit_scale.exp())  # fmt: skip

    class CoCaLoss(nn.Module):
        def __init__(self, caption_loss_weight=2.0, clip_loss_weight=1.0):
            super().__init__()
            self.clip_loss_weight, self.caption_loss_weight = clip_loss_weight, caption_loss_weight
            self.caption_loss = nn.CrossEntropyLoss(ignore_index=pad_id)

        def forward(self, image_features, text_features, logits, labels, logit_scale):
            logits_per_image = logit_scale * image_features @ text_features.T
            gt = torch.arange(logits_per_image.shape[0])
            clip_loss = (F.cross_entropy(logits_per_image, gt) +
                         F.cross_entropy(logits_per_image.T, gt)) / 2  # fmt: skip
            caption_loss = self.caption_loss(logits.permute(0, 2, 1), labels)
            return clip_loss * self.clip_loss_weight, caption_loss * self.caption_loss_weight

    model = _set_children(torch, CoCa(), seed=141)
    with torch.no_grad():
        model.pos_embed.copy_(torch.tensor(arr(160, 4, img_width, scale=0.1)))
        model.positional_embedding.copy_(torch.tensor(arr(161, ctx + 1, width, scale=0.1)))
        model.cls_emb.copy_(torch.tensor(arr(162, width, scale=0.1)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.1)
    images = torch.tensor(arr(142, 4, 3, 6, 6))
    captions = ["a photo of a dog", "a cat", "the big ship", "a sketch of a plane"]
    text = torch.tensor(_tokenize(captions, ctx + 1))
    loss_fn = CoCaLoss()
    losses = []
    for _ in range(3):
        img, txt, logits, labels, scale = model(images, text)
        clip_l, cap_l = loss_fn(img, txt, logits, labels, scale)
        optimizer.zero_grad()
        (clip_l + cap_l).backward()
        optimizer.step()
        losses.append([clip_l.item(), cap_l.item()])
    return {"losses": losses, "logits": logits, "greedy": logits.argmax(-1),
            "query_grad": model.attn_pool.query.grad, "cls_emb_grad": model.cls_emb.grad,
            "decoder_grads": grads(model.decoder)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def mm_flamingo_perceiver_resampler_gated_xattn(torch):
    """Flamingo: a ``PerceiverResampler`` (latents attending to ``cat((media, latents))``, the
    max-subtracted softmax with ``amax(...).detach()``), ``MaskedCrossAttention`` where each text
    token only sees the latest image before it (``media_locations.cumsum``, ``text_time[..., None]
    == media_time``) and tokens before any image get zero attention, tanh gates initialised to
    zero, a frozen language model and a loss ignoring the media tokens with ``-100``."""
    nn, F = torch.nn, torch.nn.functional
    dim, vis_dim, heads, dim_head, n_latents = 8, 6, 2, 4, 3
    media_token = 3

    class PerceiverAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = dim_head**-0.5
            self.norm_media, self.norm_latents = nn.LayerNorm(vis_dim), nn.LayerNorm(vis_dim)
            self.to_q = nn.Linear(vis_dim, heads * dim_head, bias=False)
            self.to_kv = nn.Linear(vis_dim, heads * dim_head * 2, bias=False)
            self.to_out = nn.Linear(heads * dim_head, vis_dim, bias=False)

        def forward(self, x, latents):
            x, latents = self.norm_media(x), self.norm_latents(latents)
            b, t, n, _ = x.shape
            q = self.to_q(latents)
            kv_input = torch.cat((x, latents), dim=-2)
            k, v = self.to_kv(kv_input).chunk(2, dim=-1)

            def split(z):  # "b t n (h d) -> b h t n d"
                return z.view(*z.shape[:-1], heads, dim_head).permute(0, 3, 1, 2, 4)

            q, k, v = split(q) * self.scale, split(k), split(v)
            sim = torch.einsum("... i d, ... j d  -> ... i j", q, k)
            sim = sim - sim.amax(dim=-1, keepdim=True).detach()
            attn = sim.softmax(dim=-1)
            out = torch.einsum("... i j, ... j d -> ... i d", attn, v)
            out = out.permute(0, 2, 3, 1, 4).reshape(b, t, -1, heads * dim_head)
            return self.to_out(out)

    class PerceiverResampler(nn.Module):
        def __init__(self):
            super().__init__()
            self.latents = nn.Parameter(torch.empty(n_latents, vis_dim))
            self.attn = PerceiverAttention()
            self.ff = nn.Sequential(nn.LayerNorm(vis_dim), nn.Linear(vis_dim, 12, bias=False),
                                    nn.GELU(), nn.Linear(12, vis_dim, bias=False))  # fmt: skip
            self.norm = nn.LayerNorm(vis_dim)

        def forward(self, x):  # x: b T v d
            b, T = x.shape[:2]
            latents = self.latents.view(1, 1, n_latents, vis_dim).repeat(b, T, 1, 1)
            latents = self.attn(x, latents) + latents
            latents = self.ff(latents) + latents
            return self.norm(latents)

    class GatedCrossAttentionBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.to_q = nn.Linear(dim, heads * dim_head, bias=False)
            self.to_kv = nn.Linear(vis_dim, heads * dim_head * 2, bias=False)
            self.to_out = nn.Linear(heads * dim_head, dim, bias=False)
            self.attn_gate = nn.Parameter(torch.tensor([0.0]))
            self.ff = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 16, bias=False), nn.GELU(),
                                    nn.Linear(16, dim, bias=False))  # fmt: skip
            self.ff_gate = nn.Parameter(torch.tensor([0.0]))

        def attend(self, x, media, media_locations):
            b, T_img, n = media.shape[:3]
            x = self.norm(x)
            q = self.to_q(x).view(b, -1, heads, dim_head).transpose(1, 2) * dim_head**-0.5
            media = media.reshape(b, T_img * n, vis_dim)
            k, v = self.to_kv(media).chunk(2, dim=-1)
            k = k.view(b, -1, heads, dim_head).transpose(1, 2)
            v = v.view(b, -1, heads, dim_head).transpose(1, 2)
            sim = torch.einsum("... i d, ... j d -> ... i j", q, k)
            text_time = media_locations.cumsum(dim=-1)  # at each boolean of True, increment
            media_time = torch.arange(T_img) + 1
            # only attend to the immediately preceding image
            text_to_media_mask = text_time[:, None, :, None] == media_time.repeat_interleave(n)
            sim = sim.masked_fill(~text_to_media_mask, -torch.finfo(sim.dtype).max)
            sim = sim - sim.amax(dim=-1, keepdim=True).detach()
            attn = sim.softmax(dim=-1)
            text_without_media_mask = text_time == 0
            attn = attn.masked_fill(text_without_media_mask[:, None, :, None], 0.0)
            out = torch.einsum("... i j, ... j d -> ... i d", attn, v)
            return self.to_out(out.transpose(1, 2).reshape(b, -1, heads * dim_head))

        def forward(self, x, media, media_locations):
            x = self.attend(x, media, media_locations) * self.attn_gate.tanh() + x
            return self.ff(x) * self.ff_gate.tanh() + x

    class Flamingo(nn.Module):
        def __init__(self):
            super().__init__()
            self.perceiver = PerceiverResampler()
            self.embed = nn.Embedding(_VOCAB_SIZE, dim)
            self.xattn = GatedCrossAttentionBlock()
            self.lm_block = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.Tanh())
            self.lm_head = nn.Linear(dim, _VOCAB_SIZE)

        def forward(self, vision_x, lang_x):
            media = self.perceiver(vision_x)
            x = self.embed(lang_x)
            x = self.xattn(x, media, lang_x == media_token)
            x = x + self.lm_block(x)
            return self.lm_head(x)

    model = set_weights(torch, Flamingo(), seed=151)
    with torch.no_grad():
        model.xattn.attn_gate.zero_()
        model.xattn.ff_gate.zero_()
    for module in (model.embed, model.lm_block, model.lm_head):
        module.requires_grad_(False)  # the language model stays frozen
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=0.05, weight_decay=0.1)
    vision_x = torch.tensor(arr(152, 2, 2, 4, vis_dim))  # b, T_img, patches, dim
    tokens = ints(153, _VOCAB_SIZE - 4, 2, 9) + 4
    tokens[0, [1, 5]] = media_token
    tokens[1, [3, 6]] = media_token
    lang_x = torch.tensor(tokens)
    labels = lang_x.clone()
    labels[labels == media_token] = -100
    labels[:, 0] = -100
    losses, gates = [], []
    for _ in range(3):
        logits = model(vision_x, lang_x)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, _VOCAB_SIZE), labels[:, 1:].reshape(-1),
                               ignore_index=-100)  # fmt: skip
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        gates.append([model.xattn.attn_gate.item(), model.xattn.ff_gate.item()])
    return {"losses": losses, "gates": gates, "logits": logits,
            "n_trainable": sum(p.numel() for p in trainable),
            "perceiver_grads": grads(model.perceiver),
            "xattn_grads": grads(model.xattn)}  # fmt: skip
