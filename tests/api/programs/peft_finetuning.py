"""Parameter-efficient fine-tuning and model surgery as HF PEFT, timm and torchvision fine-tuning
scripts write them: LoRA layers injected by ``named_modules`` + ``get_submodule`` + ``setattr``
(``scaling = lora_alpha / r``, ``lora_B`` zero-initialised, merge and unmerge in place under
``torch.no_grad()``, several named adapters, ``merge_and_unload``, DoRA's magnitude vector), the
adapter state dict filtered on ``lora_`` and reloaded with ``strict=False``, BitFit, Houlsby
adapters, prompt and prefix tuning, IA3 scaling vectors, layer-wise lr decay and ULMFiT's
discriminative lr with gradual unfreezing, torchvision transfer learning with a new head and
frozen batch norms, weight tying between the embedding and the LM head, and a low-rank
``parametrize`` of a weight. Pretrained weights and adapter initialisations are NumPy arrays from
fixed seeds; dropout is ``p=0``."""

from __future__ import annotations

import io
import math
import re
from contextlib import contextmanager

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _count_parameters(model) -> tuple[int, int]:
    """PEFT's ``get_nb_trainable_parameters``: (trainable, all) by ``numel()``."""
    trainable_params, all_param = 0, 0
    for _, param in model.named_parameters():
        num_params = param.numel()
        all_param += num_params
        if param.requires_grad:
            trainable_params += num_params
    return trainable_params, all_param


def _trainable_report(model) -> str:
    """PEFT's ``print_trainable_parameters`` line."""
    trainable_params, all_param = _count_parameters(model)
    return (
        f"trainable params: {trainable_params:,d} || all params: {all_param:,d} || "
        f"trainable%: {100 * trainable_params / all_param:.4f}"
    )


def _tiny_decoder(torch, vocab=13, d=8, n_layers=2, heads=2):
    """A GPT-style decoder with ``q_proj``/``k_proj``/``v_proj``/``o_proj`` and an MLP per layer,
    the module names PEFT's ``target_modules`` refer to."""
    nn, F = torch.nn, torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.num_heads = heads
            self.q_proj = nn.Linear(d, d)
            self.k_proj = nn.Linear(d, d)
            self.v_proj = nn.Linear(d, d)
            self.o_proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, c = x.shape
            q = self.q_proj(x).view(b, t, self.num_heads, c // self.num_heads).transpose(1, 2)
            k = self.k_proj(x).view(b, t, self.num_heads, c // self.num_heads).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.num_heads, c // self.num_heads).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class DecoderLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.LayerNorm(d)
            self.self_attn = SelfAttention()
            self.post_attention_layernorm = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

        def forward(self, x):
            x = x + self.self_attn(self.input_layernorm(x))
            return x + self.mlp(self.post_attention_layernorm(x))

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, d)
            self.layers = nn.ModuleList([DecoderLayer() for _ in range(n_layers)])
            self.norm = nn.LayerNorm(d)
            self.lm_head = nn.Linear(d, vocab, bias=False)

        def forward(self, input_ids):
            h = self.embed_tokens(input_ids)
            for layer in self.layers:
                h = layer(h)
            return self.lm_head(self.norm(h))

    return TinyLM()


def _lora_linear_class(torch):
    """PEFT's ``lora.Linear`` reduced to one adapter: ``lora_A``/``lora_B`` as bias-free linears,
    ``lora_B`` zeros, ``scaling = lora_alpha / r``, merge/unmerge through ``.data``."""
    nn = torch.nn

    class LoraLinear(nn.Module):
        def __init__(self, base_layer, r=4, lora_alpha=8, lora_dropout=0.0):
            super().__init__()
            self.base_layer = base_layer
            self.r = r
            self.lora_alpha = lora_alpha
            self.scaling = lora_alpha / r
            self.lora_dropout = nn.Dropout(p=lora_dropout)
            self.lora_A = nn.Linear(base_layer.in_features, r, bias=False)
            self.lora_B = nn.Linear(r, base_layer.out_features, bias=False)
            nn.init.zeros_(self.lora_B.weight)
            self.merged = False

        def get_delta_weight(self):
            return (self.lora_B.weight @ self.lora_A.weight) * self.scaling

        def merge(self):
            if self.merged:
                return
            self.base_layer.weight.data += self.get_delta_weight()
            self.merged = True

        def unmerge(self):
            if not self.merged:
                return
            self.base_layer.weight.data -= self.get_delta_weight()
            self.merged = False

        def forward(self, x):
            result = self.base_layer(x)
            if self.merged:
                return result
            return result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling

    return LoraLinear


def _inject(model, target_modules, make):
    """PEFT's ``inject_adapter``: every module whose name ends with a target is replaced on its
    parent; returns the replaced names."""
    replaced = []
    for name, module in list(model.named_modules()):
        if not any(name == t or name.endswith("." + t) for t in target_modules):
            continue
        parent_name, _, child_name = name.rpartition(".")
        parent = model.get_submodule(parent_name)
        setattr(parent, child_name, make(module))
        replaced.append(name)
    return replaced


def _init_lora_A(torch, model, seed, scale=0.3):
    """Fixed values for every ``lora_A`` (PEFT draws them with kaiming_uniform_)."""
    with torch.no_grad():
        names = [n for n, _ in model.named_parameters() if "lora_A" in n]
        for i, n in enumerate(names):
            p = model.get_parameter(n)
            p.copy_(torch.tensor(arr(seed + i, *p.shape, scale=scale)))


@program
def lora_injected_by_named_modules_trained_merged_and_unmerged(torch):
    """``target_modules=["q_proj", "v_proj"]`` replaced by LoRA layers found with
    ``named_modules`` and set on their parent from ``get_submodule``; everything but ``lora_``
    frozen; the trainable-parameter report; a few AdamW steps of causal LM loss; then every
    adapter merged into its base weight in place (logits unchanged), and unmerged again (the base
    weight restored)."""
    F = torch.nn.functional
    model = set_weights(torch, _tiny_decoder(torch), seed=1)
    before = _trainable_report(model)
    LoraLinear = _lora_linear_class(torch)
    replaced = _inject(model, ["q_proj", "v_proj"], lambda m: LoraLinear(m, r=2, lora_alpha=4))
    _init_lora_A(torch, model, seed=10)
    for n, p in model.named_parameters():
        if "lora_" not in n:
            p.requires_grad = False
    report = _trainable_report(model)
    w0 = model.layers[0].self_attn.q_proj.base_layer.weight.detach().clone()
    input_ids = torch.tensor(ints(2, 13, 3, 6))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    losses = []
    model.train()
    for _ in range(4):
        logits = model(input_ids)
        shift_logits = logits[:, :-1, :].contiguous()
        shift_labels = input_ids[:, 1:].contiguous()
        loss = F.cross_entropy(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    frozen_grads_none = all(p.grad is None for p in model.parameters() if not p.requires_grad)
    model.eval()
    with torch.no_grad():
        unmerged_logits = model(input_ids)
        for module in model.modules():
            if isinstance(module, LoraLinear):
                module.merge()
        merged_logits = model(input_ids)
        merged_q = model.layers[0].self_attn.q_proj.base_layer.weight.clone()
        for module in model.modules():
            if isinstance(module, LoraLinear):
                module.unmerge()
        restored = model.layers[0].self_attn.q_proj.base_layer.weight
    return {"before": before, "report": report, "replaced": replaced, "losses": losses,
            "frozen_grads_none": frozen_grads_none, "unmerged_logits": unmerged_logits,
            "merged_logits": merged_logits,
            "merge_matches": torch.allclose(merged_logits, unmerged_logits, atol=1e-5),
            "merged_q": merged_q, "delta_q": merged_q - w0,
            "restored_ok": torch.allclose(restored, w0, atol=1e-6),
            "lora_params": {n: p for n, p in model.named_parameters() if p.requires_grad},
            "module_types": [type(m).__name__ for m in model.layers[1].self_attn.children()]}  # fmt: skip


@program
def lora_adapter_state_dict_filtered_saved_and_reloaded_strict_false(torch):
    """PEFT's ``get_peft_model_state_dict`` (the ``lora_`` keys, plus biases for
    ``bias="lora_only"``-style configs), saved with ``torch.save`` to a buffer, loaded into a fresh
    base model with fresh adapters by ``load_state_dict(strict=False)`` (every base key reported
    missing), a checkpoint with the ``base_model.model.`` prefix (every key unexpected) fixed by
    stripping it, then ``merge_and_unload``: each LoRA layer replaced by its merged base linear so
    the state dict loads strictly into the plain model."""
    F = torch.nn.functional
    LoraLinear = _lora_linear_class(torch)

    def build():
        model = set_weights(torch, _tiny_decoder(torch, n_layers=1), seed=3)
        _inject(model, ["q_proj", "k_proj", "v_proj", "o_proj"],
                lambda m: LoraLinear(m, r=2, lora_alpha=2))  # fmt: skip
        model.requires_grad_(False)
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.requires_grad_(True)
        return model

    model = build()
    _init_lora_A(torch, model, seed=20, scale=0.2)
    ids = torch.tensor(ints(4, 13, 2, 5))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5, momentum=0.9)
    for _ in range(3):
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, 13), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()

    def get_peft_model_state_dict(model):
        state_dict = model.state_dict()
        return {k: state_dict[k] for k in state_dict if "lora_" in k}

    adapter = get_peft_model_state_dict(model)
    buffer = io.BytesIO()
    torch.save(adapter, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    fresh = build()
    result = fresh.load_state_dict(loaded, strict=False)
    same = torch.allclose(fresh(ids), model(ids), atol=1e-6)
    prefixed = {f"base_model.model.{k}": v for k, v in loaded.items()}
    fresh2 = build()
    bad = fresh2.load_state_dict(prefixed, strict=False)
    fixed = {k.removeprefix("base_model.model."): v for k, v in prefixed.items()}
    good = fresh2.load_state_dict(fixed, strict=False)
    lora_missing = [k for k in good.missing_keys if "lora_" in k]

    # merge_and_unload: replace every LoRA layer by its base layer with the delta merged in
    with torch.no_grad():
        for name, module in list(fresh2.named_modules()):
            if isinstance(module, LoraLinear):
                module.merge()
                parent_name, _, child = name.rpartition(".")
                setattr(fresh2.get_submodule(parent_name), child, module.base_layer)
    plain = set_weights(torch, _tiny_decoder(torch, n_layers=1), seed=99)
    strict_result = plain.load_state_dict(fresh2.state_dict())
    return {"adapter_keys": sorted(adapter), "n_adapter": sum(v.numel() for v in adapter.values()),
            "missing": sorted(result.missing_keys), "unexpected": result.unexpected_keys,
            "same_outputs": same, "bad_unexpected": len(bad.unexpected_keys),
            "bad_missing": len(bad.missing_keys), "good_unexpected": good.unexpected_keys,
            "lora_missing": lora_missing, "strict_result": str(strict_result),
            "unloaded_keys": list(fresh2.state_dict().keys()),
            "plain_logits": plain(ids), "trained_logits": model(ids).detach(),
            "lora_B": loaded["layers.0.self_attn.o_proj.lora_B.weight"]}  # fmt: skip


@program
def bitfit_bias_only_fine_tuning_by_name_pattern(torch):
    """BitFit: every parameter frozen with ``requires_grad_(False)`` except those whose name ends
    in ``bias`` (and a new classifier head); AdamW with no weight decay on biases; the frozen
    weights are bit-for-bit unchanged, their ``.grad`` stays ``None``."""
    nn, F = torch.nn, torch.nn.functional
    model = nn.Sequential()
    model.add_module("encoder", nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.Tanh(),
                                               nn.Linear(12, 12), nn.LayerNorm(12), nn.Tanh()))  # fmt: skip
    model.add_module("classifier", nn.Linear(12, 3))
    set_weights(torch, model, seed=30)
    pattern = re.compile(r"(bias$)|(^classifier\.)")
    for name, param in model.named_parameters():
        param.requires_grad_(bool(pattern.search(name)))
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    frozen_before = {
        n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad
    }
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and n.endswith("bias")]
    decay = [p for n, p in model.named_parameters() if p.requires_grad and not n.endswith("bias")]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}], lr=5e-2)  # fmt: skip
    x, y = torch.tensor(arr(31, 16, 6)), torch.tensor(ints(32, 3, 16))
    losses, accs = [], []
    for _ in range(5):
        optimizer.zero_grad()
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        accs.append((logits.argmax(dim=-1) == y).float().mean().item())
    unchanged = [
        torch.equal(frozen_before[n], p) for n, p in model.named_parameters() if n in frozen_before
    ]
    trainable_params, all_param = _count_parameters(model)
    return {"trainable": trainable, "losses": losses, "accs": accs, "unchanged": unchanged,
            "grad_is_none": [p.grad is None for p in model.parameters()],
            "counts": [trainable_params, all_param], "biases": {n: p for n, p in model.named_parameters() if n.endswith("bias")},
            "group_sizes": [len(g["params"]) for g in optimizer.param_groups]}  # fmt: skip


@program
def houlsby_bottleneck_adapters_after_attention_and_ffn(torch):
    """Houlsby adapters: a bottleneck (down-projection, GELU, near-zero up-projection) with a
    residual connection, inserted after a frozen block's attention output and FFN by wrapping the
    submodules in ``nn.Sequential(original, Adapter(...))``; only adapters and layer norms train
    (as in the paper); Adam steps, the adapters' parameter count and their zero-init identity."""
    nn, F = torch.nn, torch.nn.functional
    d = 8

    class Adapter(nn.Module):
        def __init__(self, dim, bottleneck=3):
            super().__init__()
            self.down_proj = nn.Linear(dim, bottleneck)
            self.act = nn.GELU()
            self.up_proj = nn.Linear(bottleneck, dim)
            nn.init.zeros_(self.up_proj.weight)
            nn.init.zeros_(self.up_proj.bias)

        def forward(self, hidden_states):
            return hidden_states + self.up_proj(self.act(self.down_proj(hidden_states)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(d, 2, dropout=0.0, batch_first=True)
            self.attn_out = nn.Linear(d, d)
            self.ln1 = nn.LayerNorm(d)
            self.ffn = nn.Sequential(nn.Linear(d, 16), nn.ReLU(), nn.Linear(16, d))
            self.ln2 = nn.LayerNorm(d)

        def forward(self, x, key_padding_mask=None):
            a, _ = self.attn(x, x, x, key_padding_mask=key_padding_mask, need_weights=False)
            x = self.ln1(x + self.attn_out(a))
            return self.ln2(x + self.ffn(x))

    blocks = nn.ModuleList([Block(), Block()])
    head = nn.Linear(d, 2)
    set_weights(torch, blocks, seed=40)
    set_weights(torch, head, seed=41)
    x = torch.tensor(arr(42, 3, 5, d))
    mask = torch.tensor(np.array([[0, 0, 0, 0, 0], [0, 0, 0, 1, 1], [0, 0, 0, 0, 1]], dtype=bool))

    def forward(x):
        h = x
        for blk in blocks:
            h = blk(h, key_padding_mask=mask)
        keep = (~mask).unsqueeze(-1).float()
        return head((h * keep).sum(1) / keep.sum(1))

    with torch.no_grad():
        out_before = forward(x)
    for i, blk in enumerate(blocks):
        for name in ("attn_out", "ffn"):
            original = blk.get_submodule(name)
            adapter = Adapter(d)
            with torch.no_grad():
                adapter.down_proj.weight.copy_(torch.tensor(arr(43 + i, 3, d, scale=0.4)))
                adapter.down_proj.bias.zero_()
            setattr(blk, name, nn.Sequential(original, adapter))
    with torch.no_grad():
        identity_at_init = torch.allclose(forward(x), out_before, atol=1e-6)
    for n, p in blocks.named_parameters():
        p.requires_grad = ".1.down_proj" in n or ".1.up_proj" in n or ".ln" in n
    head.requires_grad_(True)
    trainable = [n for n, p in blocks.named_parameters() if p.requires_grad]
    adapter_numel = sum(
        p.numel() for n, p in blocks.named_parameters() if "_proj" in n and ".1." in n
    )
    params_to_train = [p for p in blocks.parameters() if p.requires_grad] + list(head.parameters())
    opt = torch.optim.Adam(params_to_train, lr=1e-2)
    y = torch.tensor(np.array([0, 1, 1]))
    losses = []
    for _ in range(4):
        opt.zero_grad()
        loss = F.cross_entropy(forward(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"identity_at_init": identity_at_init, "trainable": trainable, "adapter_numel": adapter_numel,
            "losses": losses, "out": forward(x),
            "adapter0": params(blocks[0].ffn[1]), "ln": params(blocks[1].ln2),
            "attn_grad_none": blocks[0].attn.in_proj_weight.grad is None,
            "structure": [type(m).__name__ for m in blocks[0].children()]}  # fmt: skip


@program
def prompt_tuning_soft_prompt_concatenated_to_input_embeddings(torch):
    """Prompt tuning: ``num_virtual_tokens`` learned embeddings (initialised from the frozen
    vocabulary's rows, PEFT's ``TEXT`` init) expanded over the batch and concatenated in front of
    the word embeddings, the attention mask extended with ones, a frozen ``TransformerEncoder``
    (dropout 0) and a frozen classifier; only the prompt embedding trains."""
    nn, F = torch.nn, torch.nn.functional
    vocab, d, n_virtual = 11, 8, 3

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, d, padding_idx=0)
            layer = nn.TransformerEncoderLayer(
                d, 2, dim_feedforward=16, dropout=0.0, batch_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
            self.score = nn.Linear(d, 2)

        def forward(self, inputs_embeds, attention_mask):
            h = self.encoder(inputs_embeds, src_key_padding_mask=attention_mask == 0)
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            return self.score((h * m).sum(1) / m.sum(1))

    model = set_weights(torch, Classifier(), seed=50)
    for param in model.parameters():
        param.requires_grad = False
    prompt_encoder = nn.Embedding(n_virtual, d)
    init_token_ids = torch.tensor([3, 7, 5])
    prompt_encoder.weight = nn.Parameter(model.word_embeddings(init_token_ids).detach().clone())
    input_ids = torch.tensor(np.array([[4, 2, 9, 0, 0], [1, 5, 6, 8, 2], [7, 3, 0, 0, 0]]))
    attention_mask = (input_ids != 0).long()
    labels = torch.tensor(np.array([1, 0, 1]))
    batch_size = input_ids.shape[0]

    def forward():
        inputs_embeds = model.word_embeddings(input_ids)
        prompt_tokens = torch.arange(n_virtual).unsqueeze(0).expand(batch_size, -1)
        prompts = prompt_encoder(prompt_tokens).to(inputs_embeds.dtype)
        inputs_embeds = torch.cat((prompts, inputs_embeds), dim=1)
        prefix_attention_mask = torch.ones(batch_size, n_virtual, dtype=attention_mask.dtype)
        mask = torch.cat((prefix_attention_mask, attention_mask), dim=1)
        return model(inputs_embeds, mask), mask

    optimizer = torch.optim.AdamW(prompt_encoder.parameters(), lr=5e-2, weight_decay=0.0)
    losses = []
    for _ in range(4):
        logits, mask = forward()
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    logits, mask = forward()
    return {"mask": mask, "losses": losses, "logits": logits, "prompt": prompt_encoder.weight,
            "n_trainable": sum(p.numel() for p in prompt_encoder.parameters() if p.requires_grad),
            "frozen_all": not any(p.requires_grad for p in model.parameters()),
            "emb_grad_none": model.word_embeddings.weight.grad is None}  # fmt: skip


@program
def prefix_tuning_reparameterized_past_key_values(torch):
    """Prefix tuning (P-tuning v2 style): a prefix embedding passed through a two-layer MLP
    (the reparameterisation) and viewed as ``past_key_values`` of shape ``(2 * layers, batch,
    heads, prefix, head_dim)``; every frozen attention layer concatenates the prefix keys and
    values in front of its own, with the padding mask extended by ones."""
    nn, F = torch.nn, torch.nn.functional
    d, heads, n_layers, prefix_len = 8, 2, 2, 2
    head_dim = d // heads

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)

        def forward(self, x, past_key_value, attn_mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(x).split(d, dim=-1)
            q, k, v = (z.view(b, t, heads, head_dim).transpose(1, 2) for z in (q, k, v))
            past_k, past_v = past_key_value
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
            return x + self.proj(y.transpose(1, 2).reshape(b, t, d))

    layers = set_weights(torch, nn.ModuleList([Attn() for _ in range(n_layers)]), seed=60)
    head = set_weights(torch, nn.Linear(d, 1), seed=61)
    layers.requires_grad_(False)
    head.requires_grad_(False)

    class PrefixEncoder(nn.Module):
        def __init__(self, hidden=6):
            super().__init__()
            self.embedding = nn.Embedding(prefix_len, d)
            self.transform = nn.Sequential(nn.Linear(d, hidden), nn.Tanh(),
                                           nn.Linear(hidden, n_layers * 2 * d))  # fmt: skip

        def forward(self, prefix):
            return self.transform(self.embedding(prefix))

    prefix_encoder = set_weights(torch, PrefixEncoder(), seed=62)
    x = torch.tensor(arr(63, 2, 4, d))
    pad = torch.tensor(np.array([[True, True, True, True], [True, True, True, False]]))
    target = torch.tensor(arr(64, 2, 1))

    def get_prompt(batch_size):
        prefix_tokens = torch.arange(prefix_len).long().unsqueeze(0).expand(batch_size, -1)
        past_key_values = prefix_encoder(prefix_tokens)
        past_key_values = past_key_values.view(
            batch_size, prefix_len, n_layers * 2, heads, head_dim
        )
        return past_key_values.permute([2, 0, 3, 1, 4]).split(2)

    def forward():
        b = x.shape[0]
        past = get_prompt(b)
        keep = torch.cat([torch.ones(b, prefix_len, dtype=torch.bool), pad], dim=1)
        attn_mask = keep[:, None, None, :]
        h = x
        for layer, kv in zip(layers, past):
            h = layer(h, kv, attn_mask)
        return head(h[:, 0]), past

    opt = torch.optim.Adam(prefix_encoder.parameters(), lr=1e-2)
    losses = []
    for _ in range(4):
        out, past = forward()
        loss = F.mse_loss(out, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        out, past = forward()
    return {"losses": losses, "out": out, "past_shapes": [list(p.shape) for p in past],
            "past0": past[0], "encoder": params(prefix_encoder),
            "frozen_grads": [p.grad is None for p in layers.parameters()]}  # fmt: skip


@program
def ia3_learned_scaling_vectors_merged_and_unmerged(torch):
    """IA3: ones-initialised vectors rescale the keys and values (``base(x) * ia3_l``) and the
    feed-forward input (``base(x * ia3_l)``); only they train; merging multiplies the weight rows
    (keys/values) or columns (feed-forward) in place, and unmerging divides them back."""
    nn, F = torch.nn, torch.nn.functional

    class IA3Linear(nn.Module):
        def __init__(self, base_layer, is_feedforward):
            super().__init__()
            self.base_layer = base_layer
            self.is_feedforward = is_feedforward
            n = base_layer.in_features if is_feedforward else base_layer.out_features
            self.ia3_l = nn.Parameter(torch.ones(n))
            self.merged = False

        def merge(self):
            with torch.no_grad():
                if self.is_feedforward:
                    self.base_layer.weight.data = self.base_layer.weight.data * self.ia3_l.data
                else:
                    self.base_layer.weight.data *= self.ia3_l.data.view(-1, 1)
                    self.base_layer.bias.data = self.base_layer.bias.data * self.ia3_l.data
            self.merged = True

        def unmerge(self):
            with torch.no_grad():
                if self.is_feedforward:
                    self.base_layer.weight.data = self.base_layer.weight.data / (
                        self.ia3_l.data + 1e-8
                    )
                else:
                    self.base_layer.weight.data.div_(self.ia3_l.data.view(-1, 1) + 1e-8)
                    self.base_layer.bias.data = self.base_layer.bias.data / (self.ia3_l.data + 1e-8)
            self.merged = False

        def forward(self, x):
            if self.merged:
                return self.base_layer(x)
            if self.is_feedforward:
                return self.base_layer(x * self.ia3_l)
            return self.base_layer(x) * self.ia3_l

    model = set_weights(torch, _tiny_decoder(torch, n_layers=1), seed=70)
    w_k0 = model.layers[0].self_attn.k_proj.weight.detach().clone()
    targets = {"k_proj": False, "v_proj": False, "mlp.2": True}
    for name, module in list(model.named_modules()):
        for key, ff in targets.items():
            if name.endswith(key) and isinstance(module, nn.Linear):
                parent, _, child = name.rpartition(".")
                setattr(model.get_submodule(parent), child, IA3Linear(module, ff))
    for n, p in model.named_parameters():
        p.requires_grad = "ia3_l" in n
    ids = torch.tensor(ints(71, 13, 2, 6))
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=5e-2)
    losses = []
    for _ in range(4):
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    ia3 = [m for m in model.modules() if isinstance(m, IA3Linear)]
    with torch.no_grad():
        ref = model(ids)
        for m in ia3:
            m.merge()
        merged = model(ids)
        w_k_merged = model.layers[0].self_attn.k_proj.base_layer.weight.clone()
        for m in ia3:
            m.unmerge()
        back = model(ids)
    return {"losses": losses, "vectors": {n: p for n, p in model.named_parameters() if "ia3_l" in n},
            "ref": ref, "merged": merged, "back": back, "w_k_merged": w_k_merged,
            "w_k_restored": torch.allclose(model.layers[0].self_attn.k_proj.base_layer.weight, w_k0, atol=1e-5),
            "report": _trainable_report(model)}  # fmt: skip


@program
def layer_wise_lr_decay_param_groups_beit_style(torch):
    """BEiT/timm's layer-wise lr decay: ``get_layer_id`` from the parameter name (embeddings 0,
    ``blocks.i`` i + 1, head last), ``lr_scale = decay ** (num_layers + 1 - layer_id)``, no weight
    decay for 1-d parameters and biases, groups keyed ``"layer_%d_%s"``; a warmup + cosine
    schedule written into each group as ``lr * lr_scale`` every step."""
    nn, F = torch.nn, torch.nn.functional
    d, depth = 6, 3

    class ViTish(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch_embed = nn.Linear(4, d)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
            self.pos_embed = nn.Parameter(torch.zeros(1, 5, d))
            self.blocks = nn.ModuleList(
                nn.Sequential(nn.LayerNorm(d), nn.Linear(d, d), nn.GELU()) for _ in range(depth)
            )
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, 3)

        def forward(self, x):
            x = self.patch_embed(x)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for blk in self.blocks:
                x = x + blk(x)
            return self.head(self.norm(x)[:, 0])

    model = set_weights(torch, ViTish(), seed=80)
    num_layers = depth + 1
    layer_decay, weight_decay, base_lr = 0.75, 0.05, 1e-2

    def get_layer_id(name):
        if name in ("cls_token", "pos_embed") or name.startswith("patch_embed"):
            return 0
        if name.startswith("blocks"):
            return int(name.split(".")[1]) + 1
        return num_layers

    param_group_names, param_groups = {}, {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.ndim == 1 or name.endswith(".bias") or name in ("cls_token", "pos_embed"):
            group_name, this_decay = "no_decay", 0.0
        else:
            group_name, this_decay = "decay", weight_decay
        layer_id = get_layer_id(name)
        group_name = "layer_%d_%s" % (layer_id, group_name)  # noqa: UP031
        if group_name not in param_group_names:
            scale = layer_decay ** (num_layers - layer_id)
            param_group_names[group_name] = {
                "lr_scale": scale,
                "weight_decay": this_decay,
                "params": [],
            }
            param_groups[group_name] = {"lr_scale": scale, "weight_decay": this_decay, "params": []}
        param_group_names[group_name]["params"].append(name)
        param_groups[group_name]["params"].append(p)
    optimizer = torch.optim.AdamW(list(param_groups.values()), lr=base_lr, betas=(0.9, 0.999))
    total, warmup = 6, 2

    def lr_at(it):
        if it < warmup:
            return base_lr * (it + 1) / warmup
        return base_lr * 0.5 * (1.0 + math.cos(math.pi * (it - warmup) / (total - warmup)))

    x, y = torch.tensor(arr(81, 8, 4, 4)), torch.tensor(ints(82, 3, 8))
    losses, lr_log = [], []
    for it in range(total):
        for param_group in optimizer.param_groups:
            param_group["lr"] = lr_at(it) * param_group["lr_scale"]
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        lr_log.append([g["lr"] for g in optimizer.param_groups])
    return {"group_names": list(param_group_names), "members": {k: v["params"] for k, v in param_group_names.items()},
            "scales": [g["lr_scale"] for g in optimizer.param_groups], "lr_log": lr_log, "losses": losses,
            "final": params(model), "wd": [g["weight_decay"] for g in optimizer.param_groups]}  # fmt: skip


@program
def ulmfit_discriminative_lr_and_gradual_unfreezing(torch):
    """ULMFiT: layer groups with ``lr / 2.6 ** i`` counted from the top, the model frozen and then
    unfrozen one more group per epoch from the head down (``requires_grad_`` on each group), one
    optimiser over all groups from the start (frozen parameters have no grad and are skipped), and
    a slanted triangular schedule via ``LambdaLR``."""
    nn, F = torch.nn, torch.nn.functional
    emb = nn.Embedding(10, 6)
    rnn = nn.GRU(6, 6, batch_first=True)
    body = nn.Sequential(nn.Linear(6, 6), nn.ReLU())
    head = nn.Linear(6, 2)
    model = nn.ModuleDict({"emb": emb, "rnn": rnn, "body": body, "head": head})
    set_weights(torch, model, seed=90)
    layer_groups = [emb, rnn, body, head]
    base_lr = 0.05
    optimizer = torch.optim.SGD(
        [{"params": g.parameters(), "lr": base_lr / (2.6 ** (len(layer_groups) - 1 - i))}
         for i, g in enumerate(layer_groups)], momentum=0.9)  # fmt: skip
    total_steps, cut_frac, ratio = 8, 0.25, 32
    cut = math.floor(total_steps * cut_frac)

    def stlr(t):
        p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / cut_frac - 1))
        return (1 + p * (ratio - 1)) / ratio

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=stlr)
    tokens, labels = torch.tensor(ints(91, 10, 4, 5)), torch.tensor(ints(92, 2, 4))

    def forward(tok):
        out, h_n = rnn(emb(tok))
        return head(body(out.max(dim=1).values + h_n[-1]))

    for p in model.parameters():
        p.requires_grad_(False)
    log = []
    for epoch in range(4):
        for g in layer_groups[len(layer_groups) - 1 - epoch :]:
            g.requires_grad_(True)
        n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        for _step in range(2):
            optimizer.zero_grad()
            loss = F.cross_entropy(forward(tokens), labels)
            loss.backward()
            optimizer.step()
            scheduler.step()
            log.append(loss.item())
        log.append(n_trainable)
    return {"log": log, "lrs": scheduler.get_last_lr(), "final": params(model),
            "group_lrs": [g["initial_lr"] for g in optimizer.param_groups],
            "state_sizes": len(optimizer.state)}  # fmt: skip


@program
def torchvision_transfer_learning_new_head_frozen_batchnorm(torch):
    """torchvision fine-tuning: ``param.requires_grad = False`` on the whole backbone, ``model.fc``
    replaced by a new ``nn.Linear(num_ftrs, num_classes)``, an optimiser over
    ``filter(lambda p: p.requires_grad, ...)``; then every ``BatchNorm2d`` swapped for a
    ``FrozenBatchNorm2d`` (buffers copied from the state dict, ``scale = w * (rv + eps).rsqrt()``)
    by walking ``named_modules`` and ``setattr`` on the parent, as detection fine-tuning does."""
    nn, F = torch.nn, torch.nn.functional

    class FrozenBatchNorm2d(nn.Module):
        def __init__(self, num_features, eps=1e-5):
            super().__init__()
            self.eps = eps
            self.register_buffer("weight", torch.ones(num_features))
            self.register_buffer("bias", torch.zeros(num_features))
            self.register_buffer("running_mean", torch.zeros(num_features))
            self.register_buffer("running_var", torch.ones(num_features))

        def forward(self, x):
            w = self.weight.reshape(1, -1, 1, 1)
            b = self.bias.reshape(1, -1, 1, 1)
            rv = self.running_var.reshape(1, -1, 1, 1)
            rm = self.running_mean.reshape(1, -1, 1, 1)
            scale = w * (rv + self.eps).rsqrt()
            bias = b - rm * scale
            return x * scale + bias

    class SmallResNet(nn.Module):
        def __init__(self, num_classes=5):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(4)
            self.layer1 = nn.Sequential(
                nn.Conv2d(4, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU()
            )
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(4, num_classes)

        def forward(self, x):
            x = F.relu(self.bn1(self.conv1(x)))
            x = x + self.layer1(x)
            return self.fc(torch.flatten(self.avgpool(x), 1))

    model = set_weights(torch, SmallResNet(), seed=100)
    images = torch.tensor(arr(101, 6, 3, 5, 5))
    model.train()
    with torch.no_grad():
        model(images)  # "pretraining" statistics
    for param in model.parameters():
        param.requires_grad = False
    num_ftrs = model.fc.in_features
    model.fc = nn.Linear(num_ftrs, 3)
    set_weights(torch, model.fc, seed=102)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(
        filter(lambda p: p.requires_grad, model.parameters()), lr=0.1, momentum=0.9
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.1)
    labels = torch.tensor(ints(103, 3, 6))
    losses = []
    for _ in range(3):
        model.train()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        scheduler.step()
        losses.append(loss.item())
    running_after_train = model.bn1.running_mean.clone()
    model.eval()
    with torch.no_grad():
        eval_out = model(images)
    swapped = []
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.BatchNorm2d):
            frozen = FrozenBatchNorm2d(module.num_features, module.eps)
            frozen.load_state_dict(
                {k: v for k, v in module.state_dict().items() if k != "num_batches_tracked"}
            )
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            setattr(parent, child, frozen)
            swapped.append(name)
    model.train()
    with torch.no_grad():
        frozen_out = model(images)
    return {"trainable": trainable, "losses": losses, "running_mean": running_after_train,
            "eval_out": eval_out, "frozen_out": frozen_out, "swapped": swapped,
            "lr": scheduler.get_last_lr(), "fc": params(model.fc),
            "buffers": sorted(n for n, _ in model.named_buffers()),
            "layer1_running_var": model.layer1[1].running_var}  # fmt: skip


@program
def weight_tying_embedding_and_lm_head_then_resize_vocab(torch):
    """GPT-2's tied weights: ``lm_head.weight = embed.weight`` (one parameter in ``parameters()``,
    two keys in the state dict, gradients from both uses accumulated); the vocabulary resized as
    ``resize_token_embeddings`` does (new rows set to the mean of the old ones) and the head
    re-tied; the tie survives ``load_state_dict`` of the saved weights."""
    nn, F = torch.nn, torch.nn.functional
    vocab, d = 9, 6

    class TinyGPT(nn.Module):
        def __init__(self, vocab_size):
            super().__init__()
            self.wte = nn.Embedding(vocab_size, d)
            self.ln_f = nn.LayerNorm(d)
            self.mix = nn.Linear(d, d)
            self.lm_head = nn.Linear(d, vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight

        def forward(self, idx):
            h = self.wte(idx)
            h = h + torch.tanh(self.mix(h)).cumsum(1) / torch.arange(1, idx.shape[1] + 1).view(
                1, -1, 1
            )
            return self.lm_head(self.ln_f(h))

    model = set_weights(torch, TinyGPT(vocab), seed=110)
    tied = model.lm_head.weight is model.wte.weight
    n_unique = sum(p.numel() for p in model.parameters())
    n_all = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    sd_keys = list(model.state_dict().keys())
    idx = torch.tensor(ints(111, vocab, 2, 5))
    logits = model(idx)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), idx[:, 1:].reshape(-1))
    loss.backward()
    tied_grad = model.wte.weight.grad.clone()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    opt.step()
    opt.zero_grad()
    for _ in range(2):
        loss2 = F.cross_entropy(model(idx)[:, :-1].reshape(-1, vocab), idx[:, 1:].reshape(-1))
        loss2.backward()
        opt.step()
        opt.zero_grad()

    # resize_token_embeddings(new_num_tokens) with mean-initialised new rows
    new_vocab = vocab + 2
    old = model.wte
    new_emb = nn.Embedding(new_vocab, d)
    with torch.no_grad():
        new_emb.weight[:vocab] = old.weight.data
        new_emb.weight[vocab:] = old.weight.data.mean(dim=0, keepdim=True)
    model.wte = new_emb
    model.lm_head = nn.Linear(d, new_vocab, bias=False)
    model.lm_head.weight = model.wte.weight
    still_tied = model.lm_head.weight.data_ptr() == model.wte.weight.data_ptr()
    idx2 = torch.tensor(ints(112, new_vocab, 2, 5))
    with torch.no_grad():
        resized_logits = model(idx2)
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    reloaded = TinyGPT(new_vocab)
    reloaded.load_state_dict(torch.load(buffer, weights_only=True))
    with torch.no_grad():
        reloaded.wte.weight[0, 0] = 5.0
    return {"tied": tied, "n_unique": n_unique, "n_all": n_all, "sd_keys": sd_keys, "loss": loss,
            "tied_grad": tied_grad, "loss2": loss2, "still_tied": still_tied,
            "resized_logits": resized_logits, "new_rows": model.wte.weight[vocab:],
            "reloaded_head_follows": reloaded.lm_head.weight[0, 0],
            "reloaded_logits": reloaded(idx2).detach()[:, :, 1:]}  # fmt: skip


@program
def low_rank_parametrization_with_svd_right_inverse(torch):
    """``torch.nn.utils.parametrize`` with a low-rank factorisation: ``forward(U, V) = U @ V``
    and a ``right_inverse`` that splits the pretrained weight by truncated SVD (so assigning to
    ``layer.weight`` factorises it); trained through ``P.cached()``, state-dict keys of the two
    originals, then ``remove_parametrizations`` keeps the low-rank weight."""
    nn, F = torch.nn, torch.nn.functional
    P = nn.utils.parametrize
    rank = 2

    class LowRank(nn.Module):
        def forward(self, U, V):
            return U @ V

        def right_inverse(self, W):
            U, S, Vh = torch.linalg.svd(W, full_matrices=False)
            s = S[:rank].sqrt()
            return U[:, :rank] * s, s.unsqueeze(1) * Vh[:rank]

    model = set_weights(torch, nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2)), seed=120)
    W = model[0].weight.detach().clone()
    P.register_parametrization(model[0], "weight", LowRank())
    truncated = model[0].weight.detach().clone()
    U_, S_, Vh_ = torch.linalg.svd(W)
    best = (U_[:, :rank] * S_[:rank]) @ Vh_[:rank]
    originals = [n for n, _ in model.named_parameters()]
    x, y = torch.tensor(arr(121, 12, 6)), torch.tensor(arr(122, 12, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    losses = []
    for _ in range(4):
        opt.zero_grad()
        with P.cached():
            loss = F.mse_loss(model(x), y) + 1e-3 * model[0].weight.pow(2).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    trained = model[0].weight.detach().clone()
    rank_after = int(torch.linalg.matrix_rank(trained))
    with torch.no_grad():
        model[0].weight = W  # assigning re-factorises through right_inverse
    reassigned = model[0].weight.detach().clone()
    sd_keys = list(model.state_dict().keys())
    P.remove_parametrizations(model[0], "weight", leave_parametrized=True)
    return {"truncated": truncated, "best": best, "err": (W - truncated).norm(),
            "originals": originals, "losses": losses, "trained": trained, "rank_after": rank_after,
            "reassigned_ok": torch.allclose(reassigned, truncated, atol=1e-5), "sd_keys": sd_keys,
            "after_remove": [n for n, _ in model.named_parameters()],
            "is_parametrized": P.is_parametrized(model[0]), "out": model(x).detach()}  # fmt: skip


@program
def multiple_named_lora_adapters_set_adapter_disable_and_dora(torch):
    """PEFT's multi-adapter layout: ``lora_A``/``lora_B`` as ``nn.ModuleDict`` keyed by adapter
    name and ``scaling`` a dict, ``set_adapter`` choosing which one is active (and trainable), a
    ``disable_adapter`` context giving the base model's output, and a DoRA adapter whose
    magnitude vector is the weight's row norms: ``m * (W + s B A) / ||W + s B A||``."""
    nn, F = torch.nn, torch.nn.functional

    class MultiLoraLinear(nn.Module):
        def __init__(self, base_layer):
            super().__init__()
            self.base_layer = base_layer
            self.lora_A, self.lora_B = nn.ModuleDict(), nn.ModuleDict()
            self.lora_magnitude_vector = nn.ParameterDict()
            self.scaling, self.use_dora = {}, {}
            self.active_adapter = None
            self.disable_adapters = False

        def update_layer(self, adapter_name, r, lora_alpha, seed, use_dora=False):
            self.lora_A[adapter_name] = nn.Linear(self.base_layer.in_features, r, bias=False)
            self.lora_B[adapter_name] = nn.Linear(r, self.base_layer.out_features, bias=False)
            with torch.no_grad():
                self.lora_A[adapter_name].weight.copy_(
                    torch.tensor(arr(seed, r, self.base_layer.in_features, scale=0.3))
                )
            nn.init.zeros_(self.lora_B[adapter_name].weight)
            self.scaling[adapter_name] = lora_alpha / r
            self.use_dora[adapter_name] = use_dora
            if use_dora:
                weight_norm = torch.linalg.norm(self.base_layer.weight.detach(), dim=1)
                self.lora_magnitude_vector[adapter_name] = nn.Parameter(
                    weight_norm, requires_grad=True
                )

        def forward(self, x):
            result = self.base_layer(x)
            if self.disable_adapters or self.active_adapter is None:
                return result
            name = self.active_adapter
            lora_A, lora_B, scaling = self.lora_A[name], self.lora_B[name], self.scaling[name]
            if not self.use_dora[name]:
                return result + lora_B(lora_A(x)) * scaling
            weight = self.base_layer.weight + scaling * (lora_B.weight @ lora_A.weight)
            weight_norm = torch.linalg.norm(weight, dim=1).detach()  # DoRA detaches the norm
            mag_norm_scale = (self.lora_magnitude_vector[name] / weight_norm).view(1, -1)
            base = F.linear(x, self.base_layer.weight)
            lora = lora_B(lora_A(x)) * scaling
            return (mag_norm_scale - 1) * base + mag_norm_scale * lora + result

    model = set_weights(torch, nn.Sequential(nn.Linear(5, 6), nn.SiLU(), nn.Linear(6, 3)), seed=130)
    for i in (0, 2):
        layer = MultiLoraLinear(model[i])
        layer.update_layer("default", r=2, lora_alpha=4, seed=131 + i)
        layer.update_layer("dora", r=2, lora_alpha=2, seed=141 + i, use_dora=True)
        model[i] = layer
    lora_layers = [m for m in model.modules() if isinstance(m, MultiLoraLinear)]

    def set_adapter(name):
        for m in lora_layers:
            m.active_adapter = name
        for n, p in model.named_parameters():
            p.requires_grad = f".{name}." in n or n.endswith(f".{name}")

    @contextmanager
    def disable_adapter():
        for m in lora_layers:
            m.disable_adapters = True
        try:
            yield
        finally:
            for m in lora_layers:
                m.disable_adapters = False

    x, y = torch.tensor(arr(132, 10, 5)), torch.tensor(arr(133, 10, 3))
    results = {}
    for name in ("default", "dora"):
        set_adapter(name)
        trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=3e-2)
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        results[name] = {"trainable": trainable, "losses": losses, "out": model(x).detach(),
                         "count": _count_parameters(model)[0]}  # fmt: skip
    with disable_adapter():
        base_out = model(x).detach()
    set_adapter("default")
    default_again = model(x).detach()
    return {**results, "base_out": base_out, "default_again": default_again,
            "default_kept": torch.allclose(default_again, results["default"]["out"]),
            "magnitude": dict(model[0].lora_magnitude_vector.items()),
            "grads": grads(model), "keys": list(model.state_dict().keys())}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # the base model runs in float16 (11-bit mantissa): its float32
# sums rounded to half precision may land one ulp apart where the summation order differs
def lora_for_embedding_and_conv2d_with_float16_base_and_float32_adapters(torch):
    """PEFT's other LoRA layers: ``lora.Embedding`` (``lora_embedding_A``/``B`` parameters,
    ``F.embedding(x, lora_embedding_A.T, padding_idx)``) and ``lora.Conv2d`` (``lora_A`` a conv with
    the base kernel, ``lora_B`` a 1x1 conv, merged through ``F.conv2d`` of the permuted kernels),
    on a base model cast to float16 while the adapters stay float32 (QLoRA-style): inputs cast to
    the adapter's dtype and the result cast back to the base dtype."""
    nn, F = torch.nn, torch.nn.functional

    class LoraEmbedding(nn.Module):
        def __init__(self, base_layer, r, lora_alpha, seed):
            super().__init__()
            self.base_layer = base_layer
            self.scaling = lora_alpha / r
            self.lora_embedding_A = nn.Parameter(torch.zeros(r, base_layer.num_embeddings))
            self.lora_embedding_B = nn.Parameter(
                torch.tensor(arr(seed, base_layer.embedding_dim, r, scale=0.3))
            )
            nn.init.zeros_(self.lora_embedding_A)  # PEFT: A zeros, B normal for embeddings

        def get_delta_weight(self):
            return (self.lora_embedding_B @ self.lora_embedding_A).T * self.scaling

        def forward(self, x):
            result = self.base_layer(x)
            torch_result_dtype = result.dtype
            after_A = F.embedding(
                x, self.lora_embedding_A.T, padding_idx=self.base_layer.padding_idx
            )
            result = result + (after_A @ self.lora_embedding_B.T) * self.scaling
            return result.to(torch_result_dtype)

    class LoraConv2d(nn.Module):
        def __init__(self, base_layer, r, lora_alpha, seed):
            super().__init__()
            self.base_layer = base_layer
            self.scaling = lora_alpha / r
            self.lora_A = nn.Conv2d(base_layer.in_channels, r, base_layer.kernel_size,
                                    base_layer.stride, base_layer.padding, bias=False)  # fmt: skip
            self.lora_B = nn.Conv2d(r, base_layer.out_channels, (1, 1), (1, 1), bias=False)
            with torch.no_grad():
                self.lora_A.weight.copy_(
                    torch.tensor(arr(seed, *self.lora_A.weight.shape, scale=0.2))
                )
            nn.init.zeros_(self.lora_B.weight)

        def get_delta_weight(self):
            weight_A, weight_B = self.lora_A.weight, self.lora_B.weight
            delta = F.conv2d(weight_A.permute(1, 0, 2, 3), weight_B).permute(1, 0, 2, 3)
            return delta * self.scaling

        def forward(self, x):
            result = self.base_layer(x)
            torch_result_dtype = result.dtype
            x = x.to(self.lora_A.weight.dtype)
            result = result + self.lora_B(self.lora_A(x)) * self.scaling
            return result.to(torch_result_dtype)

    class TinyNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(7, 4, padding_idx=0)
            self.conv = nn.Conv2d(4, 5, 3, padding=1)
            self.head = nn.Linear(5, 2)

        def forward(self, ids):
            h = self.tok(ids)  # (b, 9, 4) -> (b, 4, 3, 3)
            h = h.transpose(1, 2).reshape(ids.shape[0], 4, 3, 3)
            h = F.relu(self.conv(h)).mean(dim=(2, 3))
            return self.head(h.float())

    model = set_weights(torch, TinyNet(), seed=150)
    model.tok = LoraEmbedding(model.tok, r=2, lora_alpha=4, seed=151)
    model.conv = LoraConv2d(model.conv, r=2, lora_alpha=2, seed=152)
    for n, p in model.named_parameters():
        p.requires_grad = "lora_" in n
        if not p.requires_grad and not n.startswith("head"):
            p.data = p.data.to(torch.float16)
    dtypes = {n: str(p.dtype) for n, p in model.named_parameters()}
    ids = torch.tensor(np.array([[1, 2, 3, 0, 4, 5, 6, 1, 0], [6, 5, 4, 3, 2, 1, 0, 0, 0]]))
    y = torch.tensor(np.array([0, 1]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    losses = []
    for _ in range(3):
        opt.zero_grad()
        loss = F.cross_entropy(model(ids), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        emb_delta = model.tok.get_delta_weight()
        conv_delta = model.conv.get_delta_weight()
        out = model(ids)
    return {"dtypes": dtypes, "losses": losses, "out": out, "emb_delta": emb_delta,
            "conv_delta": conv_delta, "conv_delta_shape": list(conv_delta.shape),
            "pad_row_zero": bool((emb_delta[0] == 0).all()),
            "lora": {n: p for n, p in model.named_parameters() if p.requires_grad},
            "grad_dtypes": [str(p.grad.dtype) for p in model.parameters() if p.grad is not None]}  # fmt: skip


@program
def timm_checkpoint_filter_resample_pos_embed_and_adapt_input_conv(torch):
    """timm's pretrained loading for a new task: ``checkpoint_filter_fn`` resamples the absolute
    position embedding to a new grid with ``F.interpolate(mode="bicubic")`` (class token kept
    apart), ``adapt_input_conv`` sums the RGB patch kernel for a grayscale stem, the classifier
    keys are dropped for a new number of classes and loaded with ``strict=False``; then
    ``reset_classifier`` and a fine-tuning step on the new head and norm only."""
    nn, F = torch.nn, torch.nn.functional
    d = 6

    class ViT(nn.Module):
        def __init__(self, img_size=8, patch=4, in_chans=3, num_classes=4):
            super().__init__()
            self.grid = img_size // patch
            self.patch_embed = nn.Conv2d(in_chans, d, patch, stride=patch)
            self.cls_token = nn.Parameter(torch.zeros(1, 1, d))
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + self.grid**2, d))
            self.norm = nn.LayerNorm(d)
            self.head = nn.Linear(d, num_classes) if num_classes > 0 else nn.Identity()

        def reset_classifier(self, num_classes):
            self.head = nn.Linear(d, num_classes) if num_classes > 0 else nn.Identity()

        def forward(self, x):
            x = self.patch_embed(x).flatten(2).transpose(1, 2)
            x = torch.cat((self.cls_token.expand(x.shape[0], -1, -1), x), dim=1) + self.pos_embed
            return self.head(self.norm(x).mean(dim=1))

    pretrained = set_weights(torch, ViT(), seed=160, scale=0.5)
    state_dict = pretrained.state_dict()

    def resample_abs_pos_embed(posemb, new_size, num_prefix_tokens=1):
        posemb_prefix, posemb = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
        old_size = int(math.sqrt(posemb.shape[1]))
        posemb = posemb.reshape(1, old_size, old_size, -1).permute(0, 3, 1, 2)
        posemb = F.interpolate(posemb, size=new_size, mode="bicubic", align_corners=False)
        posemb = posemb.permute(0, 2, 3, 1).reshape(1, -1, posemb.shape[1])
        return torch.cat([posemb_prefix, posemb], dim=1)

    def adapt_input_conv(in_chans, conv_weight):
        conv_type = conv_weight.dtype
        conv_weight = conv_weight.float()
        if in_chans == 1:
            conv_weight = conv_weight.sum(dim=1, keepdim=True)
        elif in_chans != 3:
            repeat = int(math.ceil(in_chans / 3))
            conv_weight = conv_weight.repeat(1, repeat, 1, 1)[:, :in_chans, :, :]
            conv_weight *= 3 / float(in_chans)
        return conv_weight.to(conv_type)

    def checkpoint_filter_fn(state_dict, model):
        out_dict = {}
        for k, v in state_dict.items():
            if k == "pos_embed" and v.shape != model.pos_embed.shape:
                v = resample_abs_pos_embed(v, (model.grid, model.grid))
            elif k == "patch_embed.weight" and v.shape[1] != model.patch_embed.weight.shape[1]:
                v = adapt_input_conv(model.patch_embed.weight.shape[1], v)
            elif k.startswith("head.") and v.shape[0] != model.head.weight.shape[0]:
                continue
            out_dict[k] = v
        return out_dict

    model = ViT(img_size=12, in_chans=1, num_classes=3)
    filtered = checkpoint_filter_fn(state_dict, model)
    incompatible = model.load_state_dict(filtered, strict=False)
    model.reset_classifier(2)
    set_weights(torch, model.head, seed=161)
    chans5 = adapt_input_conv(5, state_dict["patch_embed.weight"])
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith(("head", "norm")))
    x = torch.tensor(arr(162, 3, 1, 12, 12))
    y = torch.tensor(np.array([1, 0, 1]))
    opt = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.3)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"missing": incompatible.missing_keys, "unexpected": incompatible.unexpected_keys,
            "pos_embed": model.pos_embed, "patch_w": model.patch_embed.weight, "chans5": chans5,
            "losses": losses, "out": model(x), "n_trainable": _count_parameters(model)[0]}  # fmt: skip


@program
def meta_device_init_assign_load_and_input_require_grads_with_checkpointing(torch):
    """Loading a big model as HF does: built under ``with torch.device("meta")`` (no memory, no
    init), ``load_state_dict(state_dict, assign=True)`` makes the checkpoint's tensors the
    parameters; then PEFT's ``prepare_model_for_kbit_training`` steps: everything frozen, the
    layer norms in float32, ``enable_input_require_grads`` (a forward hook making the frozen
    embedding's output require grad) so that reentrant ``torch.utils.checkpoint`` over each block
    still backpropagates into the LoRA factors."""
    nn, F = torch.nn, torch.nn.functional
    checkpoint = torch.utils.checkpoint.checkpoint
    d, vocab = 6, 11

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc = nn.Linear(d, d)

        def forward(self, x):
            return x + torch.tanh(self.fc(self.ln(x)))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d)
            self.blocks = nn.ModuleList([Block() for _ in range(2)])
            self.out = nn.Linear(d, vocab)
            self.gradient_checkpointing = False

        def forward(self, ids):
            h = self.embed(ids)
            for blk in self.blocks:
                if self.gradient_checkpointing and self.training:
                    h = checkpoint(blk, h, use_reentrant=True)
                else:
                    h = blk(h)
            return self.out(h)

    source = set_weights(torch, Model(), seed=170)
    state_dict = {k: v.clone() for k, v in source.state_dict().items()}
    with torch.device("meta"):
        model = Model()
        default_device = str(torch.get_default_device())
    model.load_state_dict(state_dict, assign=True)
    assigned = model.embed.weight.data_ptr() == state_dict["embed.weight"].data_ptr()
    for param in model.parameters():
        param.requires_grad = False
    for name, param in model.named_parameters():
        if param.ndim == 1 and "ln" in name:
            param.data = param.data.to(torch.float32)

    def make_inputs_require_grad(module, input, output):
        output.requires_grad_(True)

    hook = model.embed.register_forward_hook(make_inputs_require_grad)
    model.gradient_checkpointing = True

    class LoraLinear(nn.Module):
        def __init__(self, base_layer, seed):
            super().__init__()
            self.base_layer = base_layer
            self.lora_A = nn.Parameter(torch.tensor(arr(seed, 2, d, scale=0.3)))
            self.lora_B = nn.Parameter(torch.zeros(d, 2))

        def forward(self, x):
            return self.base_layer(x) + (x @ self.lora_A.T @ self.lora_B.T) * 2.0

    for i, blk in enumerate(model.blocks):
        blk.fc = LoraLinear(blk.fc, seed=171 + i)
    ids = torch.tensor(ints(172, vocab, 2, 5))
    opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=2e-2)
    losses = []
    model.train()
    for _ in range(3):
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    hook.remove()
    model.eval()
    with torch.no_grad():
        eval_logits = model(ids)
    return {"default_device": default_device, "assigned": assigned, "losses": losses, "eval_logits": eval_logits,
            "grads": {n: p.grad for n, p in model.named_parameters() if p.requires_grad},
            "frozen_no_grad": all(p.grad is None for p in model.parameters() if not p.requires_grad)}  # fmt: skip
