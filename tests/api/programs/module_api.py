"""The nn.Module API as libraries and training frameworks use it: state-dict hooks and key
renaming (transformers, fairseq), timm's helpers, accelerate's hooks, Lightning's optimizer
toggling, ensembles with ``torch.func``, dtype round trips, train/eval flags and parametrizations."""

from __future__ import annotations

import copy
import functools
import io
import re
from collections import OrderedDict

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _join(names) -> str:
    """Key names as one string (an empty list would leave no result at all)."""
    return ",".join(names)


@program
def legacy_checkpoint_key_renaming_load_hooks(torch):
    """Loading an old checkpoint as transformers and fairseq do: a private load pre-hook renames a
    LayerNorm's ``gamma``/``beta``, a public one on the root strips DDP's ``module.``, a post-hook
    forgives the tied head, and an old BatchNorm entry has no ``num_batches_tracked``."""
    nn = torch.nn

    class LegacyLayerNorm(nn.LayerNorm):
        def __init__(self, d):
            super().__init__(d)
            self._register_load_state_dict_pre_hook(self._rename_gamma_beta)

        def _rename_gamma_beta(self, state_dict, prefix, local_metadata, strict, missing_keys,
                               unexpected_keys, error_msgs):  # fmt: skip
            for old, new in (("gamma", "weight"), ("beta", "bias")):
                if prefix + old in state_dict:
                    state_dict[prefix + new] = state_dict.pop(prefix + old)

    seen_prefixes = []

    def strip_ddp(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errs):
        seen_prefixes.append(prefix)
        nn.modules.utils.consume_prefix_in_state_dict_if_present(state_dict, "module.")

    def forgive_tied(module, incompatible_keys):
        for key in module._keys_to_ignore_on_load_missing:
            if key in incompatible_keys.missing_keys:
                incompatible_keys.missing_keys.remove(key)

    class Tagger(nn.Module):
        _keys_to_ignore_on_load_missing = ("lm_head.weight",)

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(7, 6)
            self.norm = LegacyLayerNorm(6)
            self.bn = nn.BatchNorm1d(6)
            self.lm_head = nn.Linear(6, 7, bias=False)
            self.lm_head.weight = self.emb.weight
            self.register_load_state_dict_pre_hook(strip_ddp)
            self.register_load_state_dict_post_hook(forgive_tied)

        def forward(self, ids):
            h = self.norm(self.emb(ids))
            h = self.bn(h.transpose(1, 2)).transpose(1, 2)
            return self.lm_head(h)

    ids = torch.tensor(ints(1, 7, 3, 5))
    old = set_weights(torch, Tagger(), seed=2)
    old(ids)  # one training-mode batch: running statistics
    old_sd = old.state_dict()
    legacy = {}
    for k, v in old_sd.items():
        if k in ("lm_head.weight", "bn.num_batches_tracked"):
            continue
        k = k.replace("norm.weight", "norm.gamma").replace("norm.bias", "norm.beta")
        legacy["module." + k] = v.clone()
    legacy_keys = list(legacy)

    new = Tagger()
    with torch.no_grad():
        new.bn.num_batches_tracked.fill_(5)
    result = new.load_state_dict(legacy)
    new.eval()
    old.eval()
    loose = Tagger().load_state_dict(
        {**legacy, "module.pooler.weight": torch.zeros(2)}, strict=False
    )
    bad = dict(legacy)
    bad["module.emb.weight"] = torch.zeros(5, 6)
    try:
        Tagger().load_state_dict(bad)
        message = "no error"
    except RuntimeError as e:
        message = str(e)
    return {
        "missing": _join(result.missing_keys), "unexpected": _join(result.unexpected_keys),
        "printed_result": str(result), "printed_loose": str(loose), "legacy_keys_untouched": list(legacy) == legacy_keys, "seen_prefixes": seen_prefixes,
        "same_output": torch.allclose(new(ids), old(ids)), "out": new(ids),
        "num_batches_tracked": new.bn.num_batches_tracked, "running_var": new.bn.running_var,
        "tied": new.lm_head.weight is new.emb.weight, "loose_missing": _join(loose.missing_keys),
        "loose_unexpected": _join(loose.unexpected_keys), "message": message,
    }  # fmt: skip


@program
def state_dict_save_hooks_extra_state_versions_bytesio(torch):
    """What a checkpoint holds beyond tensors: ``_metadata`` versions, ``get_extra_state``, save
    hooks that drop a teacher's weights and export under an old name, a fairseq-style
    ``_load_from_state_dict`` upgrade, and ``torch.load(weights_only=True)`` from a BytesIO."""
    nn = torch.nn

    class Normalizer(nn.Module):
        _version = 3

        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("cache", torch.zeros(4), persistent=False)
            self.count, self.tag = 0, "fresh"

        def get_extra_state(self):
            return {"count": self.count, "tag": self.tag}

        def set_extra_state(self, state):
            self.count, self.tag = state["count"], state["tag"]

        def _load_from_state_dict(self, state_dict, prefix, local_metadata, *args):
            if local_metadata.get("version", 1) < 3:  # version 2 kept the projection flat
                for name in ("weight", "bias"):
                    if prefix + name in state_dict:
                        state_dict[prefix + "proj." + name] = state_dict.pop(prefix + name)
            super()._load_from_state_dict(state_dict, prefix, local_metadata, *args)

        def forward(self, x):
            self.count += 1
            return self.proj(x)

    class Student(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = Normalizer()
            self.body = nn.Linear(4, 2)
            self.teacher = nn.Linear(4, 2)
            self.teacher.requires_grad_(False)
            self._register_state_dict_hook(drop_teacher)
            self.body.register_state_dict_pre_hook(count_pre)
            self.body.register_state_dict_post_hook(export_old_name)

        def forward(self, x):
            return self.body(self.norm(x))

    pre_calls = []

    def drop_teacher(module, state_dict, prefix, local_metadata):
        for k in [k for k in state_dict if k.startswith(prefix + "teacher.")]:
            del state_dict[k]

    def count_pre(module, prefix, keep_vars):
        pre_calls.append((prefix, keep_vars))

    def export_old_name(module, state_dict, prefix, local_metadata):
        state_dict[prefix + "kernel"] = state_dict.pop(prefix + "weight")

    model = set_weights(torch, Student(), seed=10)
    x = torch.tensor(arr(11, 5, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    model.norm.tag = "trained"
    sd = model.state_dict()
    versions = {k or "<root>": v.get("version") for k, v in sd._metadata.items()}
    kept = model.state_dict(keep_vars=True)
    buf = io.BytesIO()
    torch.save(sd, buf)
    size_positive = buf.tell() > 0
    buf.seek(0)
    loaded = torch.load(buf, weights_only=True, map_location="cpu")

    fresh = Student()
    loaded["body.weight"] = loaded.pop("body.kernel")
    result = fresh.load_state_dict(loaded, strict=False)

    v2 = OrderedDict((k.replace("norm.proj.", "norm."), v) for k, v in loaded.items())
    v2._metadata = {k: dict(v) for k, v in loaded._metadata.items()}
    v2._metadata["norm"]["version"] = 2
    older = Student()
    older_result = older.load_state_dict(v2, strict=False)
    return {
        "keys": list(sd), "versions": versions, "extra": sd["norm._extra_state"]["tag"],
        "extra_count": sd["norm._extra_state"]["count"], "kept_grad": [v.requires_grad for v in kept.values() if hasattr(v, "requires_grad")],
        "plain_grad": [v.requires_grad for v in sd.values() if hasattr(v, "requires_grad")],
        "pre_calls": [f"{p}|{k}" for p, k in pre_calls], "size_positive": size_positive,
        "loaded_has_metadata": hasattr(loaded, "_metadata"), "missing": _join(result.missing_keys),
        "unexpected": _join(result.unexpected_keys), "fresh_tag": fresh.norm.tag, "fresh_count": fresh.norm.count,
        "fresh_out": fresh(x), "model_out": model(x), "older_missing": _join(older_result.missing_keys),
        "older_unexpected": _join(older_result.unexpected_keys), "older_proj": older.norm.proj.weight,
        "v2_keys": list(v2),
    }  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def timm_named_apply_reset_classifier_layer_decay(torch):
    """timm's helpers written out: ``named_apply`` for init by name, a ``checkpoint_filter_fn`` that
    resamples the position embedding and drops the head, ``reset_classifier``, layer-wise lr
    decay param groups from parameter names, and a printed model with ``extra_repr``."""
    nn, F = torch.nn, torch.nn.functional

    class PatchEmbed(nn.Module):
        def __init__(self, patch, dim):
            super().__init__()
            self.patch_size, self.embed_dim = patch, dim
            self.proj = nn.Conv2d(1, dim, patch, stride=patch)
            self.flatten = nn.Flatten(2)

        def forward(self, x):
            return self.flatten(self.proj(x)).transpose(1, 2)

        def extra_repr(self):
            return f"patch_size={self.patch_size}, embed_dim={self.embed_dim}"

    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(OrderedDict(fc1=nn.Linear(dim, 2 * dim), act=nn.GELU(),
                                                 fc2=nn.Linear(2 * dim, dim)))  # fmt: skip

        def forward(self, x):
            x = x + self.mlp(self.norm(x))
            return x + 0.5 * x.mean(1, keepdim=True)  # (the tokens mix, as attention would)

    class TinyViT(nn.Module):
        def __init__(self, img=8, patch=4, dim=6, depth=2, num_classes=3):
            super().__init__()
            self.num_classes, self.depth, self.dim = num_classes, depth, dim
            self.patch_embed = PatchEmbed(patch, dim)
            n = (img // patch) ** 2
            self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
            self.pos_embed = nn.Parameter(torch.zeros(1, n + 1, dim))
            self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
            self.norm = nn.LayerNorm(dim)
            self.head = nn.Linear(dim, num_classes) if num_classes > 0 else nn.Identity()

        def no_weight_decay(self):
            return {"pos_embed", "cls_token"}

        def reset_classifier(self, num_classes):
            self.num_classes = num_classes
            self.head = nn.Linear(self.dim, num_classes) if num_classes > 0 else nn.Identity()

        def forward_features(self, x):
            x = self.patch_embed(x)
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
            for blk in self.blocks:
                x = blk(x)
            return self.norm(x)

        def forward(self, x):
            return self.head(self.forward_features(x)[:, 0])

    def named_apply(fn, module, name="", depth_first=True, include_root=False):
        if not depth_first and include_root:
            fn(module=module, name=name)
        for child_name, child in module.named_children():
            child_name = f"{name}.{child_name}" if name else child_name
            named_apply(fn, child, child_name, depth_first, include_root=True)
        if depth_first and include_root:
            fn(module=module, name=name)
        return module

    order = []

    def init_weights(module, name, head_bias=0.0, depth=2):
        order.append(name)
        if isinstance(module, nn.Linear):
            if name.startswith("head"):
                nn.init.zeros_(module.weight)
                nn.init.constant_(module.bias, head_bias)
            elif name.endswith("fc2"):
                with torch.no_grad():
                    module.weight.mul_(1 / (2 * depth) ** 0.5)
        elif isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

    pretrained = set_weights(torch, TinyViT(img=4, num_classes=5), seed=20)
    model = set_weights(torch, TinyViT(), seed=21)
    named_apply(functools.partial(init_weights, head_bias=-0.5), model)

    def checkpoint_filter_fn(state_dict, model):
        out = {}
        for k, v in state_dict.items():
            if k == "pos_embed" and v.shape != model.pos_embed.shape:
                cls, grid = v[:, :1], v[:, 1:]
                g0, g1 = int(grid.shape[1] ** 0.5), int((model.pos_embed.shape[1] - 1) ** 0.5)
                grid = grid.reshape(1, g0, g0, -1).permute(0, 3, 1, 2)
                grid = F.interpolate(grid, size=(g1, g1), mode="bilinear", align_corners=False)
                v = torch.cat([cls, grid.permute(0, 2, 3, 1).reshape(1, g1 * g1, -1)], dim=1)
            if k.startswith("head.") and v.shape[0] != model.num_classes:
                continue
            out[k] = v
        return out

    incompatible = model.load_state_dict(
        checkpoint_filter_fn(pretrained.state_dict(), model), strict=False
    )

    def layer_id(name, num_layers):
        if name in ("cls_token", "pos_embed") or name.startswith("patch_embed"):
            return 0
        m = re.match(r"blocks\.(\d+)\.", name)
        return int(m.group(1)) + 1 if m else num_layers + 1

    groups = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        no_decay = p.ndim <= 1 or name.endswith(".bias") or name in model.no_weight_decay()
        lid = layer_id(name, model.depth)
        key = f"layer_{lid}_{'no_decay' if no_decay else 'decay'}"
        g = groups.setdefault(key, {"params": [], "names": [], "lr_scale": 0.5 ** (model.depth + 1 - lid),
                                    "weight_decay": 0.0 if no_decay else 0.05})  # fmt: skip
        g["params"].append(p)
        g["names"].append(name)
    opt = torch.optim.AdamW(
        [
            {"params": g["params"], "lr": 0.01 * g["lr_scale"], "weight_decay": g["weight_decay"]}
            for g in groups.values()
        ]  # fmt: skip
    )
    x, y = torch.tensor(arr(22, 4, 1, 8, 8)), torch.tensor(ints(23, 3, 4))
    losses = []
    for _ in range(3):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    printed = str(model)
    model.reset_classifier(0)
    features = model(x)
    model.reset_classifier(4)
    set_weights(torch, model.head, seed=24)
    return {
        "order": order, "missing": _join(incompatible.missing_keys), "unexpected": _join(incompatible.unexpected_keys),
        "pos_embed_shape": list(model.pos_embed.shape), "group_names": list(groups),
        "group_members": [g["names"] for g in groups.values()], "lrs": [g["lr"] for g in opt.param_groups],
        "losses": losses, "features": features, "printed": printed, "new_head": str(model.head),
        "params": params(model),
    }  # fmt: skip


@program
def named_parameters_prefix_recurse_and_tied_duplicates(torch):
    """Introspection as libraries do it: ``prefix=``, ``recurse=False``, ``remove_duplicate=False``
    with a tied head and a module registered twice, transformers' ``num_parameters``, registering
    and deleting at run time, and the errors of ``get_submodule``/``get_parameter``."""
    nn = torch.nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(9, 4)
            self.act = nn.GELU()
            self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
            self.scale = nn.Parameter(torch.ones(4))
            self.register_buffer("pos", torch.arange(4.0))
            self.register_buffer("mask", torch.ones(4), persistent=False)
            self.act_again = self.act
            self.out = nn.Linear(4, 9, bias=False)
            self.out.weight = self.embed.weight
            self.register_parameter("unused", None)

        def forward(self, ids):
            h = self.embed(ids) * self.scale + self.pos * self.mask
            for layer in self.layers:
                h = self.act_again(layer(h))
            return self.out(h)

    def num_parameters(model, only_trainable=False, exclude_embeddings=False):
        skip = set()
        if exclude_embeddings:
            skip = {f"{n}.weight" for n, m in model.named_modules() if isinstance(m, nn.Embedding)}
        return sum(p.numel() for n, p in model.named_parameters()
                   if n not in skip and (p.requires_grad or not only_trainable))  # fmt: skip

    model = set_weights(torch, Encoder(), seed=30)
    out = {
        "params": [n for n, _ in model.named_parameters()],
        "params_all": [n for n, _ in model.named_parameters(remove_duplicate=False)],
        "params_local": [n for n, _ in model.named_parameters(prefix="model", recurse=False)],
        "n_local": len(list(model.parameters(recurse=False))),
        "buffers": [n for n, _ in model.named_buffers(prefix="enc")],
        "buffers_local": [n for n, _ in model.named_buffers(recurse=False)],
        "modules": [n for n, _ in model.named_modules(prefix="enc")],
        "modules_all": [n for n, _ in model.named_modules(remove_duplicate=False)],
        "children": [n for n, _ in model.named_children()],
        "n_children": len(list(model.children())),
        "sd_keys": list(model.state_dict(prefix="enc.")),
        "sd_vars": [type(v).__name__ for v in model.state_dict(keep_vars=True).values()],
        "num_params": num_parameters(model),
        "num_params_no_emb": num_parameters(model, exclude_embeddings=True),
    }  # fmt: skip
    model.embed.requires_grad_(False)
    out["num_trainable"] = num_parameters(model, only_trainable=True)
    model.add_module("extra", nn.Tanh())
    model.register_module("gate", nn.Sigmoid())
    out["after_add"] = [n for n, _ in model.named_children()]
    del model.extra
    model.gate = None
    out["after_delete"] = [n for n, _ in model.named_children()]
    out["gate_in_modules"] = "gate" in dict(model.named_modules())
    out["printed"] = str(model)
    errors = []
    for call in (lambda: model.get_submodule("layers.5"), lambda: model.get_parameter("pos"),
                 lambda: model.get_parameter("layers.0.nothing"), lambda: model.get_buffer("scale")):  # fmt: skip
        try:
            call()
            errors.append("no error")
        except AttributeError as e:
            errors.append(str(e))
    out["errors"] = errors
    try:
        model.scale = torch.zeros(4)
        out["assign_error"] = "no error"
    except TypeError:
        out["assign_error"] = "TypeError"
    ids = torch.tensor(ints(31, 9, 2, 3))
    loss = model(ids).logsumexp(-1).mean()
    loss.backward()
    out["grads"] = grads(model)
    out["get_parameter"] = model.get_parameter("layers.1.bias")
    return out


@program
def parameter_list_dict_and_container_mutations(torch):
    """``ParameterList``/``ParameterDict`` (plain tensors made parameters, append, extend, update,
    pop, setdefault), ``ModuleDict``/``ModuleList``/``Sequential`` edited in place and sliced,
    one training step through all of them, and their printed forms."""
    nn = torch.nn

    class MultiTask(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = nn.ParameterList([nn.Parameter(torch.tensor(arr(40, 4, 3) * 0.4))])
            self.experts.append(torch.tensor(arr(41, 4, 3) * 0.4))  # a plain tensor is wrapped
            self.experts.extend(
                [nn.Parameter(torch.tensor(arr(42 + i, 4, 3) * 0.4)) for i in range(2)]
            )
            self.scales = nn.ParameterDict({"cls": nn.Parameter(torch.ones(3))})
            self.scales.update({"reg": torch.full((3,), 0.5)})
            self.scales.setdefault("aux", nn.Parameter(torch.full((3,), 2.0)))
            self.scales.setdefault("cls", nn.Parameter(torch.zeros(3)))  # already there: kept
            self.heads = nn.ModuleDict({"cls": nn.Linear(3, 3), "reg": nn.Linear(3, 1)})
            self.heads.update([("aux", nn.Linear(3, 2)), ("tmp", nn.Identity())])
            self.heads.pop("tmp")
            self.trunk = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
            self.trunk.append(nn.Linear(4, 4))
            self.trunk.insert(1, nn.LayerNorm(4))
            self.trunk.extend([nn.Tanh(), nn.Dropout(0.0)])
            self.trunk.pop(-1)

        def forward(self, x):
            h = self.trunk(x)
            mix = torch.stack([h @ w for w in self.experts], 0).softmax(0).mul(
                torch.stack([h @ w for w in self.experts], 0)).sum(0)  # fmt: skip
            return {
                k: head(mix * self.scales[k]) for k, head in self.heads.items() if k in self.scales
            }

    model = set_weights(torch, MultiTask(), seed=45)
    x = torch.tensor(arr(46, 5, 4))
    outs = model(x)
    loss = sum(o.pow(2).mean() for o in outs.values())
    loss.backward()
    torch.optim.SGD(model.parameters(), lr=0.1).step()

    layers = nn.ModuleList([nn.Linear(2, 2), nn.ReLU()])
    layers.insert(1, nn.Tanh())
    layers += [nn.Sigmoid()]
    joined = layers + nn.ModuleList([nn.ELU()])
    del layers[0]
    seq = model.trunk
    return {
        "expert_types": [type(p).__name__ for p in model.experts],
        "expert_grad": [p.grad for p in model.experts], "n_experts": len(model.experts),
        "last_expert": model.experts[-1], "scale_keys": list(model.scales.keys()),
        "scale_in": ["aux" in model.scales, "zzz" in model.scales], "cls_scale": model.scales["cls"],
        "get_default": model.scales.get("zzz", "none"), "head_keys": list(model.heads),
        "head_items": [f"{k}:{type(v).__name__}" for k, v in model.heads.items()],
        "outs": outs, "sd_keys": list(model.state_dict()), "trunk": str(seq),
        "trunk_slice": str(seq[1:3]), "trunk_slice_keys": list(seq[1:3]._modules),
        "trunk_last": type(seq[-1]).__name__, "layers": str(layers), "joined": str(joined),
        "layers_slice": type(layers[:2]).__name__, "experts_repr": str(model.experts),
        "scales_repr": str(model.scales), "params": params(model),
    }  # fmt: skip


@program
def accelerate_style_forward_hooks_kwargs_always_call(torch):
    """What accelerate and transformers do around ``forward``: a pre-hook that fills in keyword
    arguments, a forward hook that sees kwargs and rewrites a dict output, ``prepend`` ordering, an
    ``always_call`` hook when forward raises, global module hooks, and ``forward`` replaced by a
    wrapper on the instance and restored."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(4, 4)

        def forward(self, hidden, mask=None, *, temperature=1.0):
            h = self.proj(hidden) / temperature
            if mask is not None:
                h = h * mask.unsqueeze(-1)
            return {"hidden": h, "norm": h.pow(2).sum(-1)}

    block = set_weights(torch, Block(), seed=50)
    x = torch.tensor(arr(51, 2, 3, 4))
    calls = []

    def fill_mask(module, args, kwargs):
        calls.append(f"pre:{sorted(kwargs)}")
        if kwargs.get("mask") is None:
            kwargs["mask"] = torch.ones(args[0].shape[:-1])
        kwargs.setdefault("temperature", 2.0)
        return args, kwargs

    def halve_input(module, args):
        calls.append("halve")
        return args[0] * 0.5  # a lone value: the first argument

    def rewrite(module, args, kwargs, output):
        calls.append(f"post:{kwargs['temperature']}")
        return {**output, "hidden": output["hidden"] + 1.0}

    def first(module, args, output):
        calls.append("first")

    handles = [block.register_forward_pre_hook(fill_mask, with_kwargs=True),
               block.register_forward_pre_hook(halve_input),
               block.register_forward_hook(rewrite, with_kwargs=True),
               block.register_forward_hook(first, prepend=True)]  # fmt: skip
    hooked = block(x)
    masked = block(x, torch.tensor(np.array([[1, 0, 1], [0, 1, 1]], np.float32)), temperature=0.5)
    order = list(calls)
    for h in handles:
        h.remove()
    plain = block(x)

    failures = []
    block.proj.register_forward_hook(
        lambda m, a, o: failures.append(f"always:{o is None}"), always_call=True
    )
    block.proj.register_forward_hook(lambda m, a, o: failures.append("regular"))
    try:
        block(torch.zeros(2, 5))
        err = "no error"
    except RuntimeError:
        err = "RuntimeError"

    module_calls = []
    g_pre = nn.modules.module.register_module_forward_pre_hook(
        lambda m, a: module_calls.append(f"pre:{type(m).__name__}"))  # fmt: skip
    g_post = nn.modules.module.register_module_forward_hook(
        lambda m, a, o: module_calls.append(f"post:{type(m).__name__}"))  # fmt: skip
    block(x)
    g_pre.remove()
    g_post.remove()
    failures_before = len(failures)
    block.proj._forward_hooks.clear()

    def add_hook_to_module(module, scale):
        old_forward = module.forward
        module._old_forward = old_forward

        def new_forward(module, *args, **kwargs):
            args = tuple(a * scale for a in args)
            return old_forward(*args, **kwargs)

        module.forward = functools.update_wrapper(
            functools.partial(new_forward, module), old_forward
        )
        return module

    add_hook_to_module(block, 3.0)
    wrapped = block(x)
    wrapped_name = block.forward.__name__
    block.forward = block._old_forward
    del block._old_forward
    restored = block(x)
    return {
        "hooked": hooked, "masked": masked, "order": order, "plain": plain, "failures": failures,
        "failures_before": failures_before, "err": err, "module_calls": module_calls,
        "wrapped": wrapped, "wrapped_name": wrapped_name, "restored": restored,
        "forward_in_dict": "forward" in vars(block),
    }  # fmt: skip


@program
def full_backward_hooks_gradient_surgery_and_flow(torch):
    """Backward hooks as training tools use them: a pre-hook that scales the gradient flowing into
    a layer, a hook on a two-input module that clips its input gradients, gradient-flow norms per
    layer, a global hook counting modules, and the changed parameter gradients."""
    nn = torch.nn

    class Gate(nn.Module):
        def forward(self, a, b):
            return a * torch.sigmoid(b)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fa = nn.Linear(3, 4)
            self.fb = nn.Linear(3, 4)
            self.gate = Gate()
            self.mid = nn.Sequential(nn.Tanh(), nn.Linear(4, 4), nn.Tanh())
            self.out = nn.Linear(4, 2)

        def forward(self, x):
            return self.out(self.mid(self.gate(self.fa(x), self.fb(x))))

    def run(with_hooks):
        model = set_weights(torch, Net(), seed=60)
        flow, gate_seen, handles = {}, {}, []
        if with_hooks:
            handles.append(model.out.register_full_backward_pre_hook(
                lambda m, gout: (gout[0] * 0.5,)))  # fmt: skip

            def clip(m, gin, gout):
                gate_seen["in"] = [g.norm() for g in gin]
                gate_seen["out"] = gout[0].norm()
                return tuple(g.clamp(-0.05, 0.05) for g in gin)

            handles.append(model.gate.register_full_backward_hook(clip))
            for name, m in model.named_modules():
                if isinstance(m, nn.Linear):
                    handles.append(m.register_full_backward_hook(
                        functools.partial(lambda n, mod, gin, gout: flow.__setitem__(n, gout[0].norm()), name)))  # fmt: skip
            first_input = []
            handles.append(model.fa.register_full_backward_hook(
                lambda m, gin, gout: first_input.append(gin[0] is None)))  # fmt: skip
            counts = {}
            g = nn.modules.module.register_module_full_backward_hook(
                lambda m, gin, gout: counts.__setitem__(type(m).__name__, counts.get(type(m).__name__, 0) + 1))  # fmt: skip
        x = torch.tensor(arr(61, 6, 3))
        y = torch.tensor(arr(62, 6, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        losses = []
        for _ in range(2):
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            losses.append(loss.item())
            opt.step()
        out = {"losses": losses, "grads": grads(model)}
        if with_hooks:
            g.remove()
            out.update(flow=flow, gate_in=gate_seen["in"], gate_out=gate_seen["out"],
                       first_input_none=first_input, counts=dict(sorted(counts.items())))  # fmt: skip
            for h in handles:
                h.remove()
        return out

    return {"hooked": run(True), "plain": run(False)}


@program
def deepcopy_ensemble_diverge_then_stack_module_state_vmap(torch):
    """Model ensembling as in the ``torch.func`` tutorial: members deep-copied from one model and
    trained apart (the original untouched), then their states stacked with
    ``stack_module_state`` and all members run at once by ``vmap`` over ``functional_call``, on
    one batch and on a batch per member, with gradients to the stacked parameters."""
    nn = torch.nn
    functional_call, stack_module_state, vmap = (
        torch.func.functional_call,
        torch.func.stack_module_state,
        torch.func.vmap,
    )

    base = set_weights(torch, nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU(),
                                            nn.Dropout(0.0), nn.Linear(6, 2)), seed=70)  # fmt: skip
    base_before = {k: v.clone() for k, v in base.state_dict().items()}
    members = [copy.deepcopy(base) for _ in range(3)]
    data = [(torch.tensor(arr(71 + i, 8, 3)), torch.tensor(arr(75 + i, 8, 2))) for i in range(3)]
    for i, (m, (xi, yi)) in enumerate(zip(members, data)):
        with torch.no_grad():
            for j, p in enumerate(m.parameters()):
                p.add_(torch.tensor(arr(80 + 10 * i + j, *p.shape)) * 0.05)
        opt = torch.optim.SGD(m.parameters(), lr=0.05 * (i + 1), momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            nn.functional.mse_loss(m(xi), yi).backward()
            opt.step()
        m.eval()
    untouched = all(torch.equal(base_before[k], v) for k, v in base.state_dict().items())
    distinct = members[0][0].weight is not members[1][0].weight

    stacked_params, stacked_buffers = stack_module_state(members)
    skeleton = copy.deepcopy(members[0])

    def fmodel(p, b, x):
        return functional_call(skeleton, (p, b), (x,))

    x = torch.tensor(arr(90, 5, 3))
    same_batch = vmap(fmodel, in_dims=(0, 0, None))(stacked_params, stacked_buffers, x)
    loop = torch.stack([m(x) for m in members])
    xs = torch.tensor(arr(91, 3, 5, 3))
    per_member = vmap(fmodel)(stacked_params, stacked_buffers, xs)
    per_member.pow(2).mean().backward()
    return {
        "untouched": untouched, "distinct": distinct, "param_keys": list(stacked_params),
        "buffer_keys": list(stacked_buffers),
        "shapes": {k: list(v.shape) for k, v in stacked_params.items()},
        "leaf_requires_grad": [v.requires_grad and v.is_leaf for v in stacked_params.values()],
        "same_batch": same_batch, "loop": loop, "per_member": per_member,
        "stacked_grads": {k: v.grad for k, v in stacked_params.items()},
        "member_running_mean": [m[1].running_mean for m in members],
    }  # fmt: skip


@program
def module_dtype_round_trips_keep_parameter_identity(torch):
    """``Module.to(dtype=...)``, ``.double()``, ``.half()``, ``.float()``, ``.type()`` and
    ``.to(tensor)``: floating parameters, buffers and gradients convert, integer buffers stay, the
    Parameter objects stay the same (an optimizer made earlier still holds them), and a float64
    model trains in float64."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 5), nn.BatchNorm1d(5), nn.ReLU(),
                                             nn.Linear(5, 2)), seed=100)  # fmt: skip
    x, y = torch.tensor(arr(101, 6, 3)), torch.tensor(arr(102, 6, 2))
    nn.functional.mse_loss(model(x), y).backward()
    ids = [id(p) for p in model.parameters()]
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    same_object = model.to(dtype=torch.float64) is model
    out = {
        "same_object": same_object,
        "dtypes": [str(t.dtype) for t in model.state_dict().values()],
        "grad_dtypes": [str(p.grad.dtype) for p in model.parameters()],
        "same_ids": [id(p) for p in model.parameters()] == ids,
        "opt_holds": all(p is q for p, q in zip(opt.param_groups[0]["params"], model.parameters())),
    }
    x64, y64 = x.double(), y.double()
    losses = []
    for _ in range(3):
        loss = nn.functional.mse_loss(model(x64), y64)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
    out["losses64"] = losses
    out["weight64"] = model[0].weight
    out["running_var64"] = model[1].running_var
    out["exp_avg_dtype"] = str(opt.state[model[0].weight]["exp_avg"].dtype)
    model.float()
    out["weight32"] = model[0].weight
    model.half()
    out["weight16"] = model[0].weight
    out["half_dtypes"] = [str(t.dtype) for t in model.state_dict().values()]
    model.float()
    out["round_trip"] = model[0].weight
    model.type(torch.float64)
    out["type_dtype"] = str(model[3].bias.dtype)
    model.to(torch.zeros(1, dtype=torch.float32))
    out["to_tensor_dtype"] = str(model[3].bias.dtype)
    model.double().eval()
    out["eval64"] = model(x64)
    out["count_dtype"] = str(model[1].num_batches_tracked.dtype)
    out["final_ids"] = [id(p) for p in model.parameters()] == ids
    return out


@program
def train_eval_propagation_overridden_train_frozen_batchnorm(torch):
    """``train()``/``eval()`` reach every submodule through its own ``train`` (a backbone that keeps
    its BatchNorm frozen, as detectron2 and mmdet do), a head switched alone, Dropout(p=0) the same
    in both modes, and BatchNorm with ``momentum=None`` (a cumulative average) and without
    running statistics."""
    nn = torch.nn

    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv1d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm1d(4)
            self.drop = nn.Dropout(0.0)

        def train(self, mode=True):
            super().train(mode)
            self.bn.eval()  # norm_eval: the pretrained statistics are kept
            return self

        def forward(self, x):
            return self.drop(torch.relu(self.bn(self.conv(x))))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.bn_cumulative = nn.BatchNorm1d(4, momentum=None)
            self.bn_batch = nn.BatchNorm1d(4, track_running_stats=False)
            self.head = nn.Sequential(nn.Dropout(p=0.0), nn.Linear(4, 2))

        def forward(self, x):
            h = self.bn_batch(self.bn_cumulative(self.backbone(x)))
            return self.head(h.mean(-1))

    model = set_weights(torch, Net(), seed=110)
    with torch.no_grad():
        model.backbone.bn.running_mean.copy_(torch.tensor(arr(111, 4) * 0.1))
        model.backbone.bn.running_var.fill_(1.5)
    flags = {}
    model.train()
    flags["train"] = [f"{n}:{m.training}" for n, m in model.named_modules()]
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for i in range(3):
        x, y = torch.tensor(arr(112 + i, 4, 2, 5)), torch.tensor(ints(115 + i, 2, 4))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    xe = torch.tensor(arr(120, 3, 2, 5))
    train_out = model(xe)
    model.eval()
    flags["eval"] = [m.training for m in model.modules()]
    eval_out = model(xe)
    model.train(False)
    model.head.train()
    flags["head_only"] = [m.training for m in model.modules()]
    head_train = model(xe)
    drop = nn.Dropout(p=0.0)
    z = torch.tensor(arr(121, 3, 4))
    return {
        "flags": flags, "losses": losses, "train_out": train_out, "eval_out": eval_out,
        "head_train": head_train, "frozen_mean": model.backbone.bn.running_mean,
        "frozen_count": model.backbone.bn.num_batches_tracked,
        "cumulative_mean": model.bn_cumulative.running_mean,
        "cumulative_var": model.bn_cumulative.running_var,
        "cumulative_count": model.bn_cumulative.num_batches_tracked,
        "no_stats": [model.bn_batch.running_mean is None, model.bn_batch.num_batches_tracked is None],
        "dropout_same": [torch.equal(drop.train()(z), z), torch.equal(drop.eval()(z), z)],
        "eval_returns_self": model.eval() is model, "params": params(model),
    }  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def parametrize_two_originals_cached_calls_deepcopy_and_merge(torch):
    """A DoRA-style weight split into magnitude and direction (``right_inverse`` returning two
    tensors: ``original0``/``original1``), calls counted under ``cached()``, a deep copy trained
    apart, a state dict loaded into a fresh parametrized model, an orthogonal layer's state dict
    (its ``base`` buffer included), the printed model, and the merge by
    ``remove_parametrizations``."""
    nn, P = torch.nn, torch.nn.utils.parametrize
    counter = {"n": 0}

    class MagnitudeDirection(nn.Module):
        def forward(self, magnitude, direction):
            counter["n"] += 1
            return magnitude * direction / direction.norm(dim=1, keepdim=True)

        def right_inverse(self, weight):
            return weight.norm(dim=1, keepdim=True), weight

    def make(seed):
        model = set_weights(
            torch, nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3)), seed=seed
        )
        P.register_parametrization(model[0], "weight", MagnitudeDirection())
        return model

    model = make(130)
    w_initial = model[0].weight.detach().clone()
    originals = [n for n, _ in model.named_parameters()]
    x, y = torch.tensor(arr(131, 6, 4)), torch.tensor(arr(132, 6, 3))
    twin = copy.deepcopy(model)
    counter["n"] = 0
    with P.cached():
        for _ in range(3):
            _ = model[0].weight
        cached_out = model(x)
    cached_calls = counter["n"]
    counter["n"] = 0
    model(x)
    model(x)
    uncached_calls = counter["n"]

    for m, lr in ((model, 0.1), (twin, 0.3)):
        opt = torch.optim.SGD(m.parameters(), lr=lr)
        for _ in range(2):
            opt.zero_grad()
            nn.functional.mse_loss(m(x), y).backward()
            opt.step()
    sd = model.state_dict()
    fresh = make(133)
    result = fresh.load_state_dict(sd)

    orth = set_weights(torch, nn.Linear(4, 4, bias=False), seed=134)
    nn.utils.parametrizations.orthogonal(orth)
    orth_fresh = set_weights(torch, nn.Linear(4, 4, bias=False), seed=135)
    nn.utils.parametrizations.orthogonal(orth_fresh)
    buf = io.BytesIO()
    torch.save(orth.state_dict(), buf)
    buf.seek(0)
    orth_fresh.load_state_dict(torch.load(buf))

    printed = str(model)
    twin_out, twin_magnitude = twin(x), twin[0].parametrizations.weight.original0
    twin_type = type(twin[0]).__name__
    merged_weight = model[0].weight.detach().clone()
    P.remove_parametrizations(model[0], "weight", leave_parametrized=True)
    return {
        "w_initial": w_initial, "originals": originals, "cached_calls": cached_calls,
        "uncached_calls": uncached_calls, "cached_out": cached_out, "sd_keys": list(sd),
        "missing": _join(result.missing_keys), "fresh_out": fresh(x), "model_out": model(x),
        "twin_out": twin_out, "twin_type": twin_type, "twin_magnitude": twin_magnitude,
        "orth_keys": list(orth.state_dict()), "orth_same": torch.allclose(orth.weight, orth_fresh.weight),
        "printed": printed, "merged_type": type(model[0]).__name__, "merged": model[0].weight,
        "merged_matches": torch.allclose(merged_weight, model[0].weight),
        "merged_params": [n for n, _ in model.named_parameters()],
    }  # fmt: skip


@program
def lightning_toggle_optimizer_no_decay_groups_zero_grad_modes(torch):
    """A GAN step the Lightning way: ``toggle_optimizer`` freezes the parameters of the other
    optimizer by setting ``requires_grad`` (remembered in a dict keyed by parameter) and
    ``untoggle_optimizer`` restores them; AdamW groups without weight decay for biases and norms;
    ``zero_grad(set_to_none=False)`` keeps zero tensors where ``True`` leaves ``None``."""
    nn = torch.nn
    G = set_weights(
        torch, nn.Sequential(nn.Linear(2, 6), nn.LayerNorm(6), nn.ReLU(), nn.Linear(6, 3)), seed=140
    )
    D = set_weights(
        torch, nn.Sequential(nn.Linear(3, 6), nn.LeakyReLU(0.2), nn.Linear(6, 1)), seed=141
    )

    def param_groups_weight_decay(model, weight_decay):
        decay, no_decay = [], []
        for name, p in model.named_parameters():
            if not p.requires_grad:
                continue
            (no_decay if p.ndim <= 1 or name.endswith(".bias") else decay).append(p)
        return [
            {"params": no_decay, "weight_decay": 0.0},
            {"params": decay, "weight_decay": weight_decay},
        ]

    opt_g = torch.optim.AdamW(param_groups_weight_decay(G, 0.1), lr=0.01, betas=(0.5, 0.9))
    opt_d = torch.optim.AdamW(param_groups_weight_decay(D, 0.1), lr=0.02, betas=(0.5, 0.9))
    optimizers = [opt_g, opt_d]
    saved = {}

    def toggle_optimizer(opt):
        for other in optimizers:
            for group in other.param_groups:
                for p in group["params"]:
                    saved[p] = p.requires_grad
                    p.requires_grad = False
        for group in opt.param_groups:
            for p in group["params"]:
                p.requires_grad = saved[p]

    def untoggle_optimizer():
        for other in optimizers:
            for group in other.param_groups:
                for p in group["params"]:
                    if p in saved:
                        p.requires_grad = saved[p]
        saved.clear()

    real = torch.tensor(arr(142, 8, 3))
    bce = nn.functional.binary_cross_entropy_with_logits
    log = {"g_loss": [], "d_loss": [], "d_frozen_during_g": [], "g_grad_none_after_d": [],
           "zeros_kept": [], "none_after": []}  # fmt: skip
    for step in range(3):
        z = torch.tensor(arr(150 + step, 8, 2))
        toggle_optimizer(opt_g)
        log["d_frozen_during_g"].append(all(not p.requires_grad for p in D.parameters()))
        g_loss = bce(D(G(z)), torch.ones(8, 1))
        g_loss.backward()
        opt_g.step()
        opt_g.zero_grad(set_to_none=False)
        log["zeros_kept"].append(
            all(p.grad is not None and not p.grad.any() for p in G.parameters())
        )
        untoggle_optimizer()
        toggle_optimizer(opt_d)
        fake = G(z).detach()
        d_loss = bce(D(real), torch.ones(8, 1)) + bce(D(fake), torch.zeros(8, 1))
        d_loss.backward()
        opt_d.step()
        log["g_grad_none_after_d"].append(
            all(p.grad is None or not p.grad.any() for p in G.parameters())
        )
        opt_d.zero_grad()
        log["none_after"].append(all(p.grad is None for p in D.parameters()))
        untoggle_optimizer()
        log["g_loss"].append(g_loss.item())
        log["d_loss"].append(d_loss.item())
    G.zero_grad(set_to_none=True)
    return {
        **log, "restored": [p.requires_grad for p in [*G.parameters(), *D.parameters()]],
        "group_sizes": [len(g["params"]) for g in opt_g.param_groups + opt_d.param_groups],
        "g_grads_none": [p.grad is None for p in G.parameters()], "G": params(G), "D": params(D),
    }  # fmt: skip
