"""Interpretability and mechanistic analysis as Captum, TransformerLens and pytorch-grad-cam write
them: saliency and input x gradient, integrated gradients with Riemann sums over interpolated
inputs, SmoothGrad and VarGrad with NumPy noise, Grad-CAM and Grad-CAM++ through forward and full
backward hooks, activation patching of a tiny transformer's residual stream with hooks that replace
outputs, the logit lens and direct logit attribution, attention-pattern head scores, linear probes
on frozen activations, occlusion with sliding windows and ``unfold``/``fold``, DeepLIFT's rescale
rule, and TCAV's concept activation vectors. Weights, inputs and noise come from NumPy."""

# TransformerLens's spelling: ``l`` for a layer index.
# ruff: noqa: E741

from __future__ import annotations

import math
from functools import partial

import numpy as np

from programs import program
from programs.common import arr, ints, set_weights


def _uniform(seed: int, *shape: int) -> np.ndarray:
    return np.random.default_rng(seed).random(shape).astype(np.float32)


def _mlp(torch, seed: int, d_in: int = 8, hidden: int = 12, classes: int = 4):
    nn = torch.nn
    model = nn.Sequential(
        nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, classes),
    )  # fmt: skip
    return set_weights(torch, model, seed=seed).eval()


def _cnn(torch, seed: int, classes: int = 3):
    """A small VGG-like net: ``features`` (the Grad-CAM target is its last ReLU) and a
    global-average-pooled ``classifier``."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(
                nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(),
                nn.Conv2d(4, 6, 3, stride=2, padding=1), nn.ReLU(),
            )  # fmt: skip
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.classifier = nn.Linear(6, classes)

        def forward(self, x):
            x = self.features(x)
            return self.classifier(torch.flatten(self.pool(x), 1))

    return set_weights(torch, Net(), seed=seed, scale=0.5).eval()


def _tiny_transformer(torch, seed: int, d_vocab: int = 10, n_layers: int = 2):
    """A TransformerLens-style attention-only-plus-MLP model: ``HookPoint`` identities named
    ``blocks.{l}.hook_resid_pre`` ..., einsum attention with ``W_Q[h, d, e]``, a LayerNorm whose
    scale is hooked (``hook_scale``) and an unembedding ``W_U``."""
    nn, F = torch.nn, torch.nn.functional
    d_model, n_heads, d_head, d_mlp, n_ctx = 16, 2, 8, 32, 8

    class HookPoint(nn.Module):
        def forward(self, x):
            return x

    class LayerNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(d_model))
            self.b = nn.Parameter(torch.zeros(d_model))
            self.hook_scale = HookPoint()
            self.hook_normalized = HookPoint()

        def forward(self, x):
            x = x - x.mean(-1, keepdim=True)
            scale = self.hook_scale((x.pow(2).mean(-1, keepdim=True) + 1e-5).sqrt())
            return self.hook_normalized(x / scale) * self.w + self.b

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_Q = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_K = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_V = nn.Parameter(torch.empty(n_heads, d_model, d_head))
            self.W_O = nn.Parameter(torch.empty(n_heads, d_head, d_model))
            self.b_O = nn.Parameter(torch.zeros(d_model))
            self.register_buffer("IGNORE", torch.tensor(-1e5, dtype=torch.float32))
            self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()
            self.hook_attn_scores, self.hook_pattern, self.hook_z = (
                HookPoint(), HookPoint(), HookPoint(),
            )  # fmt: skip

        def forward(self, x):
            q = self.hook_q(torch.einsum("bpd,hde->bphe", x, self.W_Q))
            k = self.hook_k(torch.einsum("bpd,hde->bphe", x, self.W_K))
            v = self.hook_v(torch.einsum("bpd,hde->bphe", x, self.W_V))
            scores = torch.einsum("bqhe,bkhe->bhqk", q, k) / math.sqrt(d_head)
            T = x.shape[1]
            mask = torch.triu(torch.ones(T, T, device=x.device), diagonal=1).bool()
            scores = self.hook_attn_scores(scores.masked_fill(mask, self.IGNORE))
            pattern = self.hook_pattern(scores.softmax(dim=-1))
            z = self.hook_z(torch.einsum("bhqk,bkhe->bqhe", pattern, v))
            return torch.einsum("bqhe,hem->bqm", z, self.W_O) + self.b_O

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_in = nn.Parameter(torch.empty(d_model, d_mlp))
            self.b_in = nn.Parameter(torch.zeros(d_mlp))
            self.W_out = nn.Parameter(torch.empty(d_mlp, d_model))
            self.b_out = nn.Parameter(torch.zeros(d_model))
            self.hook_post = HookPoint()

        def forward(self, x):
            post = self.hook_post(F.gelu(x @ self.W_in + self.b_in, approximate="tanh"))
            return post @ self.W_out + self.b_out

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn, self.ln2, self.mlp = LayerNorm(), Attention(), LayerNorm(), MLP()
            self.hook_resid_pre, self.hook_attn_out = HookPoint(), HookPoint()
            self.hook_resid_mid, self.hook_mlp_out = HookPoint(), HookPoint()
            self.hook_resid_post = HookPoint()

        def forward(self, resid_pre):
            resid_pre = self.hook_resid_pre(resid_pre)
            attn_out = self.hook_attn_out(self.attn(self.ln1(resid_pre)))
            resid_mid = self.hook_resid_mid(resid_pre + attn_out)
            mlp_out = self.hook_mlp_out(self.mlp(self.ln2(resid_mid)))
            return self.hook_resid_post(resid_mid + mlp_out)

    class HookedTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_E = nn.Parameter(torch.empty(d_vocab, d_model))
            self.W_pos = nn.Parameter(torch.empty(n_ctx, d_model))
            self.hook_embed, self.hook_pos_embed = HookPoint(), HookPoint()
            self.blocks = nn.ModuleList([Block() for _ in range(n_layers)])
            self.ln_final = LayerNorm()
            self.W_U = nn.Parameter(torch.empty(d_model, d_vocab))
            self.b_U = nn.Parameter(torch.zeros(d_vocab))

        def forward(self, tokens):
            embed = self.hook_embed(self.W_E[tokens])
            pos = self.hook_pos_embed(self.W_pos[: tokens.shape[1]]).unsqueeze(0)
            residual = embed + pos
            for block in self.blocks:
                residual = block(residual)
            return self.ln_final(residual) @ self.W_U + self.b_U

        def hook_points(self):
            return {n: m for n, m in self.named_modules() if isinstance(m, HookPoint)}

        def run_with_cache(self, tokens):
            cache, handles = {}, []

            def save(name, module, inputs, output):
                cache[name] = output.detach()

            for name, hp in self.hook_points().items():
                handles.append(hp.register_forward_hook(partial(save, name)))
            try:
                logits = self(tokens)
            finally:
                for h in handles:
                    h.remove()
            return logits, cache

    model = HookedTransformer()
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith((".w", ".b")):
                p.copy_(torch.tensor((1.0 * name.endswith(".w")) + g.normal(0, 0.1, tuple(p.shape)).astype(np.float32)))  # fmt: skip
            else:
                p.copy_(torch.tensor(g.normal(0, 0.35, tuple(p.shape)).astype(np.float32)))
    return model.eval()


@program
def interp_saliency_and_input_x_gradient(torch):
    """Captum's ``Saliency`` (``abs`` of the gradient of the target logit, picked with
    ``gather``), ``InputXGradient``, the image saliency map as the max over channels, and the
    same gradients through ``x.grad`` after ``backward`` on ``output[range(n), target]``."""
    model = _mlp(torch, seed=1)
    x = torch.tensor(arr(2, 6, 8))
    target = torch.tensor(ints(3, 4, 6))

    inputs = x.clone().requires_grad_()
    outputs = model(inputs)
    selected = torch.gather(outputs, 1, target.unsqueeze(1))
    (grad,) = torch.autograd.grad(torch.unbind(selected.squeeze(1)), inputs)
    saliency = torch.abs(grad)
    ixg = inputs.detach() * grad

    x2 = x.clone()
    x2.requires_grad = True
    out = model(x2)
    out[torch.arange(out.shape[0]), target].sum().backward()
    same = torch.allclose(x2.grad, grad)

    conv = _cnn(torch, seed=4)
    img = torch.tensor(_uniform(5, 2, 1, 6, 6)).requires_grad_(True)
    scores = conv(img)
    top = scores.argmax(dim=1)
    scores.gather(1, top.view(-1, 1)).squeeze().sum().backward()
    smap, _ = torch.max(img.grad.data.abs(), dim=1)
    smap_norm = (smap - smap.amin(dim=(1, 2), keepdim=True)) / (
        smap.amax(dim=(1, 2), keepdim=True) - smap.amin(dim=(1, 2), keepdim=True) + 1e-8
    )
    rank = torch.argsort(saliency.sum(0), descending=True)
    return {"saliency": saliency, "input_x_gradient": ixg, "same": same, "top": top,
            "smap": smap, "smap_norm": smap_norm, "feature_rank": rank,
            "ixg_total": ixg.sum(dim=1), "grad_norm": grad.norm(dim=1)}  # fmt: skip


@program
def interp_integrated_gradients_riemann_rules(torch):
    """Captum's ``IntegratedGradients``: the ``alphas`` and ``step_sizes`` of the
    riemann_left / right / middle / trapezoid rules, ``scaled_features = baseline + alpha *
    (input - baseline)`` stacked into one batch with ``torch.cat``, gradients of the target
    reshaped to ``(n_steps, batch, ...)``, weighted and summed, times ``input - baseline``; the
    convergence delta (attributions sum minus ``f(x) - f(baseline)``) shrinks with more steps."""
    model = _mlp(torch, seed=6)
    x = torch.tensor(arr(7, 3, 8))
    baseline = torch.zeros_like(x)
    target = torch.tensor([0, 2, 3])

    def approximation(method, n):
        if method == "riemann_trapezoid":
            step_sizes = [1 / (n - 1)] * n
            step_sizes[0], step_sizes[-1] = step_sizes[0] / 2, step_sizes[-1] / 2
            return step_sizes, torch.linspace(0, 1, n).tolist()
        step_sizes = [1 / n] * n
        if method == "riemann_left":
            return step_sizes, torch.linspace(0, 1 - 1 / n, n).tolist()
        if method == "riemann_right":
            return step_sizes, torch.linspace(1 / n, 1, n).tolist()
        return step_sizes, torch.linspace(1 / (2 * n), 1 - 1 / (2 * n), n).tolist()

    def integrated_gradients(inputs, baselines, target, n_steps, method):
        step_sizes, alphas = approximation(method, n_steps)
        scaled_features = torch.cat(
            [baselines + alpha * (inputs - baselines) for alpha in alphas], dim=0
        ).requires_grad_()
        expanded_target = target.repeat(n_steps)
        out = model(scaled_features)
        target_out = out.gather(1, expanded_target[:, None]).sum()
        grads = torch.autograd.grad(target_out, scaled_features)[0]
        scaled_grads = grads.contiguous().view(n_steps, -1) * torch.tensor(step_sizes).float().view(
            n_steps, 1
        )
        total_grads = scaled_grads.reshape((n_steps,) + inputs.shape).sum(dim=0)
        return total_grads * (inputs - baselines)

    def delta(attr):
        with torch.no_grad():
            f_x = model(x).gather(1, target[:, None]).squeeze(1)
            f_b = model(baseline).gather(1, target[:, None]).squeeze(1)
        return attr.sum(dim=1) - (f_x - f_b)

    results = {}
    for method in ["riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid"]:
        attr = integrated_gradients(x, baseline, target, 8, method)
        results[method] = {"attr": attr, "delta": delta(attr)}
    fine = integrated_gradients(x, baseline, target, 32, "riemann_trapezoid")
    alphas = torch.linspace(0, 1, 9).view(-1, 1, 1)
    path = baseline.unsqueeze(0) + alphas * (x - baseline).unsqueeze(0)
    path.requires_grad_(True)
    logits = model(path.view(-1, 8)).view(9, 3, -1)
    picked = logits[:, torch.arange(3), target]
    (g,) = torch.autograd.grad(picked.sum(), path)
    avg = (g[:-1] + g[1:]).mean(dim=0) / 2
    return {**results, "fine_attr": fine, "fine_delta": delta(fine).abs().max(),
            "path_attr": avg * (x - baseline), "path_logits": picked.detach()}  # fmt: skip


@program
def interp_smoothgrad_and_vargrad_noise_tunnel(torch):
    """Captum's ``NoiseTunnel``: each input repeated ``nt_samples`` times with
    ``repeat_interleave``, Gaussian noise (NumPy here) scaled by ``stdevs * (max - min)`` per
    example, gradients of the target averaged (SmoothGrad), their squares averaged
    (``smoothgrad_sq``) and their variance (VarGrad), and the noise-free gradient for
    comparison."""
    model = _mlp(torch, seed=8)
    x = torch.tensor(arr(9, 4, 8))
    target = torch.tensor(ints(10, 4, 4))
    nt_samples, stdevs = 6, 0.15
    noise = torch.from_numpy(arr(11, 4 * nt_samples, 8))

    span = (x.max(dim=1, keepdim=True).values - x.min(dim=1, keepdim=True).values).detach()
    sigma = stdevs * span
    expanded = x.repeat_interleave(nt_samples, dim=0)
    noisy = expanded + noise * sigma.repeat_interleave(nt_samples, dim=0)
    noisy.requires_grad_()
    out = model(noisy)
    t = target.repeat_interleave(nt_samples)
    grads = torch.autograd.grad(out[torch.arange(len(t)), t].sum(), noisy)[0]
    grads = grads.view(x.shape[0], nt_samples, *x.shape[1:])
    smoothgrad = grads.mean(dim=1)
    smoothgrad_sq = (grads**2).mean(dim=1)
    vargrad = smoothgrad_sq - smoothgrad**2
    vargrad_torch = torch.var(grads, dim=1, unbiased=False)

    plain = x.clone().requires_grad_()
    model(plain).gather(1, target.view(-1, 1)).sum().backward()
    cos = torch.nn.functional.cosine_similarity(smoothgrad, plain.grad, dim=1)
    return {"smoothgrad": smoothgrad, "smoothgrad_sq": smoothgrad_sq, "vargrad": vargrad,
            "vargrad_torch": vargrad_torch, "sigma": sigma.squeeze(1), "cos_to_plain": cos,
            "noisy_logits_mean": out.detach().view(4, nt_samples, -1).mean(1)}  # fmt: skip


@program
def interp_gradcam_and_gradcam_pp_with_hooks(torch):
    """pytorch-grad-cam's recipe: ``ActivationsAndGradients`` keeps the target layer's output
    from a forward hook and its gradient from a full backward hook (Grad-CAM) or a tensor hook
    registered on the output (Grad-CAM++); the class score of ``ClassifierOutputTarget`` is
    summed and backpropagated, the channel weights are the spatially averaged gradients (or the
    second/third-order alphas), the CAM is ReLU'd, upsampled with ``interpolate`` and min-max
    scaled per image; the handles are removed afterwards."""
    F = torch.nn.functional
    model = _cnn(torch, seed=12)
    target_layer = model.features[-1]
    images = torch.tensor(_uniform(13, 2, 1, 8, 8))
    activations, gradients = [], []

    def save_activation(module, input, output):
        activations.append(output.cpu().detach())

    def save_gradient(module, grad_input, grad_output):
        gradients.insert(0, grad_output[0].cpu().detach())

    handles = [target_layer.register_forward_hook(save_activation),
               target_layer.register_full_backward_hook(save_gradient)]  # fmt: skip
    model.zero_grad()
    outputs = model(images)
    categories = outputs.argmax(dim=-1).tolist()
    loss = sum([out[c] for c, out in zip(categories, outputs)])
    loss.backward(retain_graph=True)
    for h in handles:
        h.remove()

    def scale_cam(cam, size):
        cam = F.interpolate(cam.unsqueeze(1), size=size, mode="bilinear", align_corners=False)
        cam = cam.squeeze(1)
        flat = cam.flatten(1)
        cam_min, cam_max = flat.min(1)[0].view(-1, 1, 1), flat.max(1)[0].view(-1, 1, 1)
        return (cam - cam_min) / (1e-7 + cam_max - cam_min)

    acts, grads = activations[0], gradients[0]
    weights = torch.mean(grads, dim=(2, 3))
    cam = torch.relu((weights[:, :, None, None] * acts).sum(dim=1))
    gradcam = scale_cam(cam, images.shape[-2:])

    # Grad-CAM++ with the tensor-hook variant.
    store = {}

    def forward_hook(module, input, output):
        store["act"] = output.detach()

        def _store_grad(grad):
            store["grad"] = grad.detach()

        output.register_hook(_store_grad)

    handle = target_layer.register_forward_hook(forward_hook)
    outputs2 = model(images)
    model.zero_grad()
    target_scores = torch.stack([out[c] for c, out in zip(categories, outputs2)])
    target_scores.sum().backward()
    handle.remove()
    grads2, acts2 = store["grad"], store["act"]
    grads_power_2 = grads2**2
    grads_power_3 = grads_power_2 * grads2
    sum_activations = torch.sum(acts2, dim=(2, 3))
    aij = grads_power_2 / (
        2 * grads_power_2 + sum_activations[:, :, None, None] * grads_power_3 + 1e-6
    )
    aij = torch.where(grads2 != 0, aij, torch.zeros_like(aij))
    weights_pp = torch.sum(torch.clamp(grads2, min=0) * aij, dim=(2, 3))
    cam_pp = torch.relu(torch.einsum("bc,bchw->bhw", weights_pp, acts2))
    gradcampp = scale_cam(cam_pp, (8, 8))
    return {"categories": categories, "weights": weights, "cam": cam, "gradcam": gradcam,
            "weights_pp": weights_pp, "gradcampp": gradcampp,
            "same_grads": torch.allclose(grads, grads2), "conv_grad": model.features[2].weight.grad,
            "hooks_left": len(target_layer._forward_hooks)}  # fmt: skip


@program
def interp_activation_patching_residual_stream(torch):
    """TransformerLens's activation patching: ``run_with_cache`` on the clean prompt, then for
    every layer and position a forward hook on ``blocks.{l}.hook_resid_pre`` that writes the clean
    activation into the corrupted run (``resid[:, pos, :] = clean_cache[name][:, pos, :]``,
    returned to replace the output); the logit difference normalised between the corrupted (0)
    and clean (1) baselines, plus head-output patching of ``hook_z``."""
    model = _tiny_transformer(torch, seed=14)
    clean = torch.tensor([[1, 4, 2, 7, 3, 5], [2, 6, 2, 8, 1, 9]])
    corrupted = torch.tensor([[1, 4, 9, 7, 3, 5], [2, 6, 0, 8, 1, 9]])
    answer, wrong = torch.tensor([4, 6]), torch.tensor([7, 8])

    def logit_diff(logits):
        last = logits[:, -1, :]
        return (last.gather(-1, answer[:, None]) - last.gather(-1, wrong[:, None])).mean()

    with torch.no_grad():
        clean_logits, clean_cache = model.run_with_cache(clean)
        corrupted_logits = model(corrupted)
    clean_ld, corrupted_ld = logit_diff(clean_logits).item(), logit_diff(corrupted_logits).item()

    def patch_residual(module, inputs, resid, pos, name):
        resid = resid.clone()
        resid[:, pos, :] = clean_cache[name][:, pos, :]
        return resid

    points = model.hook_points()
    n_layers, seq = len(model.blocks), clean.shape[1]
    results = torch.zeros(n_layers, seq)
    for layer in range(n_layers):
        name = f"blocks.{layer}.hook_resid_pre"
        for pos in range(seq):
            hook = partial(patch_residual, pos=pos, name=name)
            handle = points[name].register_forward_hook(hook)
            with torch.no_grad():
                patched = model(corrupted)
            handle.remove()
            results[layer, pos] = (logit_diff(patched) - corrupted_ld) / (clean_ld - corrupted_ld)

    head_results = torch.zeros(n_layers, 2)
    for layer in range(n_layers):
        name = f"blocks.{layer}.attn.hook_z"
        for head in range(2):

            def patch_head(module, inputs, z, head=head, name=name):
                z[:, :, head, :] = clean_cache[name][:, :, head, :]

            handle = points[name].register_forward_hook(patch_head)
            with torch.no_grad():
                head_results[layer, head] = logit_diff(model(corrupted))
            handle.remove()
    return {"clean_ld": clean_ld, "corrupted_ld": corrupted_ld, "resid_patching": results,
            "head_patching": head_results, "cache_keys": sorted(clean_cache)[:6],
            "n_cached": len(clean_cache),
            "resid_post_last": clean_cache["blocks.1.hook_resid_post"][:, -1]}  # fmt: skip


@program
def interp_logit_lens_and_direct_logit_attribution(torch):
    """The logit lens (every layer's residual stream through ``ln_final`` and ``W_U``, the
    probability of the next token, the top-1 prediction per layer and the KL to the final
    distribution), and TransformerLens's direct logit attribution: ``accumulated_resid`` and
    ``decompose_resid`` stacks, scaled by the cached final ``hook_scale``
    (``apply_ln_to_stack``) and projected on the logit-difference direction
    ``W_U[:, answer] - W_U[:, wrong]``."""
    F = torch.nn.functional
    model = _tiny_transformer(torch, seed=15)
    tokens = torch.tensor(ints(16, 10, 3, 7))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    n_layers = len(model.blocks)
    resids = [cache[f"blocks.{l}.hook_resid_pre"] for l in range(n_layers)]
    resids.append(cache[f"blocks.{n_layers - 1}.hook_resid_post"])
    accumulated = torch.stack(resids)  # (layer, batch, pos, d_model)

    with torch.no_grad():
        lens_logits = model.ln_final(accumulated) @ model.W_U + model.b_U
    log_probs = lens_logits[..., :-1, :].log_softmax(dim=-1)
    next_tokens = tokens[:, 1:]
    next_lp = log_probs.gather(-1, next_tokens.expand(n_layers + 1, -1, -1).unsqueeze(-1))
    final_lp = F.log_softmax(logits[:, :-1], dim=-1)
    kl = torch.stack([
        F.kl_div(log_probs[l], final_lp, log_target=True, reduction="batchmean")
        for l in range(n_layers + 1)
    ])  # fmt: skip
    top1 = lens_logits.argmax(dim=-1)

    def apply_ln_to_stack(stack):
        stack = stack - stack.mean(-1, keepdim=True)
        return stack / cache["ln_final.hook_scale"][:, -1]

    answer, wrong = tokens[:, 0], (tokens[:, 0] + 1) % 10
    direction = model.W_U[:, answer] - model.W_U[:, wrong]  # (d_model, batch)
    with torch.no_grad():
        direction = direction * model.ln_final.w[:, None]
    last = accumulated[:, :, -1, :]
    acc_attr = torch.einsum("lbd,db->lb", apply_ln_to_stack(last), direction)
    components = [cache["hook_embed"][:, -1], cache["hook_pos_embed"].expand(3, -1, -1)[:, -1]]
    labels = ["embed", "pos_embed"]
    for l in range(n_layers):
        components += [cache[f"blocks.{l}.hook_attn_out"][:, -1], cache[f"blocks.{l}.hook_mlp_out"][:, -1]]  # fmt: skip
        labels += [f"{l}_attn_out", f"{l}_mlp_out"]
    decomposed = torch.stack(components)
    per_component = torch.einsum("cbd,db->cb", apply_ln_to_stack(decomposed), direction)
    true_ld = (
        logits[:, -1].gather(-1, answer[:, None]) - logits[:, -1].gather(-1, wrong[:, None])
    ).squeeze(-1)
    biggest = labels[per_component.mean(1).abs().argmax().item()]
    return {"next_token_logprob": next_lp.squeeze(-1), "kl_to_final": kl, "top1": top1,
            "accumulated_attr": acc_attr, "per_component": per_component,
            "final_minus_recon": acc_attr[-1] - per_component.sum(0), "true_ld": true_ld,
            "biggest": biggest}  # fmt: skip


@program
def interp_attention_patterns_and_head_scores(torch):
    """Attention-pattern analysis: ``hook_pattern`` caches on a repeated random sequence give each
    head's previous-token score (``diagonal(offset=-1)``), induction score (``diagonal(offset=
    1 - seq_len)``), entropy and attention to the first token; and ``nn.MultiheadAttention`` with
    ``need_weights=True, average_attn_weights=False`` under a boolean causal mask."""
    nn = torch.nn
    model = _tiny_transformer(torch, seed=17, n_layers=2)
    half = torch.tensor(ints(18, 10, 2, 4))
    rep_tokens = torch.cat([half, half], dim=1)
    with torch.no_grad():
        _, cache = model.run_with_cache(rep_tokens)
    seq_len = half.shape[1]
    prev, induction, entropy, first = [], [], [], []
    for layer in range(len(model.blocks)):
        pattern = cache[f"blocks.{layer}.attn.hook_pattern"]  # (batch, head, q, k)
        prev.append(pattern.diagonal(offset=-1, dim1=-2, dim2=-1).mean(dim=(0, -1)))
        induction.append(
            torch.diagonal(pattern, offset=1 - seq_len, dim1=-2, dim2=-1).mean(dim=(0, -1))
        )
        ent = -(pattern * torch.log(pattern.clamp(min=1e-12))).sum(-1)
        entropy.append(ent.mean(dim=(0, 2)))
        first.append(pattern[..., 1:, 0].mean(dim=(0, -1)))
    prev, induction = torch.stack(prev), torch.stack(induction)
    best = divmod(int(induction.flatten().argmax()), induction.shape[1])
    rows_sum_to_one = torch.allclose(
        cache["blocks.0.attn.hook_pattern"].sum(-1), torch.ones(2, 2, 8)
    )
    upper_zero = bool((cache["blocks.1.attn.hook_pattern"].triu(diagonal=1) == 0).all())

    mha = set_weights(torch, nn.MultiheadAttention(8, 2, batch_first=True), seed=19)
    x = torch.tensor(arr(20, 2, 5, 8))
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        out, attn = mha(x, x, x, attn_mask=causal, need_weights=True, average_attn_weights=False)
        _, attn_avg = mha(x, x, x, attn_mask=causal)
    return {"prev_token": prev, "induction": induction, "entropy": torch.stack(entropy),
            "first_token": torch.stack(first), "best_induction_head": f"L{best[0]}H{best[1]}",
            "rows_sum_to_one": rows_sum_to_one, "upper_zero": upper_zero, "mha_out": out,
            "mha_attn": attn, "mha_attn_avg": attn_avg,
            "avg_matches": torch.allclose(attn.mean(1), attn_avg, atol=1e-6)}  # fmt: skip


@program
def interp_linear_probes_on_frozen_activations(torch):
    """Probing: a frozen classifier's hidden layers are read with forward hooks under
    ``torch.no_grad()``, standardised, and a logistic-regression probe (``nn.Linear`` +
    ``BCEWithLogitsLoss``, Adam) is trained per layer for a property of the input; a closed-form
    ridge probe (``torch.linalg.solve``) and a control task with shuffled labels give
    selectivity."""
    nn = torch.nn
    model = _mlp(torch, seed=21, d_in=6, hidden=10)
    for p in model.parameters():
        p.requires_grad_(False)
    x = torch.tensor(arr(22, 48, 6))
    prop = (x[:, 0] * x[:, 1] > 0).float()
    control = prop[torch.from_numpy(np.random.default_rng(23).permutation(48))]

    feats = {}
    hooks = [model[i].register_forward_hook(
        lambda m, inp, out, i=i: feats.__setitem__(f"relu{i}", out.detach()))
        for i in (1, 3)]  # fmt: skip
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    feats["input"] = x

    def train_probe(acts, labels, seed):
        acts = (acts - acts.mean(0)) / (acts.std(0) + 1e-6)
        probe = set_weights(torch, nn.Linear(acts.shape[1], 1), seed=seed)
        opt = torch.optim.Adam(probe.parameters(), lr=0.1)
        loss_fn = nn.BCEWithLogitsLoss()
        losses = []
        for _ in range(15):
            opt.zero_grad()
            loss = loss_fn(probe(acts).squeeze(-1), labels)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with torch.no_grad():
            acc = ((probe(acts).squeeze(-1) > 0).float() == labels).float().mean().item()
        return losses, acc, probe.weight.detach().clone()

    out = {}
    for name in ["input", "relu1", "relu3"]:
        losses, acc, w = train_probe(feats[name], prop, seed=24)
        _, control_acc, _ = train_probe(feats[name], control, seed=24)
        A = torch.cat([feats[name], torch.ones(48, 1)], dim=1)
        lam = 0.1
        w_ridge = torch.linalg.solve(A.T @ A + lam * torch.eye(A.shape[1]), A.T @ (2 * prop - 1))
        ridge_acc = ((A @ w_ridge > 0).float() == prop).float().mean()
        out[name] = {"losses": losses, "acc": acc, "selectivity": acc - control_acc,
                     "weight": w, "ridge": w_ridge, "ridge_acc": ridge_acc}  # fmt: skip
    out["frozen"] = all(not p.requires_grad and p.grad is None for p in model.parameters())
    return out


@program
def interp_occlusion_sliding_window_and_unfold_fold(torch):
    """Captum's ``Occlusion``: a baseline patch slid over the image with ``strides``, the drop of
    the target's softmax probability added to every pixel the window covers and divided by how
    often each pixel was covered; the same map batched with ``F.unfold``/``F.fold`` masks (one
    occluded copy per window) and the coverage counts from ``fold(unfold(ones))``."""
    F = torch.nn.functional
    model = _cnn(torch, seed=25)
    images = torch.tensor(_uniform(26, 2, 1, 6, 6))
    win, stride = 3, 1
    with torch.no_grad():
        base_probs = F.softmax(model(images), dim=1)
    target = base_probs.argmax(1)
    base = base_probs.gather(1, target[:, None]).squeeze(1)

    attr = torch.zeros_like(images)
    counts = torch.zeros_like(images)
    n_pos = (6 - win) // stride + 1
    for i in range(n_pos):
        for j in range(n_pos):
            occluded = images.clone()
            occluded[:, :, i * stride : i * stride + win, j * stride : j * stride + win] = 0.0
            with torch.no_grad():
                p = F.softmax(model(occluded), dim=1).gather(1, target[:, None]).squeeze(1)
            diff = (base - p).view(-1, 1, 1, 1)
            attr[:, :, i * stride : i * stride + win, j * stride : j * stride + win] += diff
            counts[:, :, i * stride : i * stride + win, j * stride : j * stride + win] += 1
    attr_loop = attr / counts

    L = n_pos * n_pos
    ones = torch.ones(1, win * win, L)
    coverage = F.fold(
        F.unfold(torch.ones(1, 1, 6, 6), win, stride=stride), (6, 6), win, stride=stride
    )
    eye = torch.eye(L).unsqueeze(0).expand(win * win, L, L).permute(1, 0, 2)  # (window, k*k, L)
    masks = F.fold(ones * eye, (6, 6), win, stride=stride).clamp(max=1)  # (L, 1, 6, 6)
    batch = images.unsqueeze(1) * (1 - masks.unsqueeze(0))  # (N, L, 1, 6, 6)
    with torch.no_grad():
        probs = F.softmax(model(batch.view(-1, 1, 6, 6)), dim=1).view(2, L, -1)
    drops = base[:, None] - probs.gather(2, target.view(2, 1, 1).expand(2, L, 1)).squeeze(2)
    spread = F.fold(drops.unsqueeze(1).expand(2, win * win, L), (6, 6), win, stride=stride)
    attr_fold = spread / coverage
    return {"attr_loop": attr_loop, "counts": counts[0, 0], "coverage": coverage[0, 0],
            "attr_fold": attr_fold, "masks_sum": masks.sum(dim=(1, 2, 3)), "drops": drops,
            "agree": torch.allclose(attr_loop, attr_fold, atol=1e-6)}  # fmt: skip


@program
def interp_deeplift_rescale_rule(torch):
    """DeepLIFT's rescale rule as Captum implements it: inputs and baselines run as one batch
    (``torch.cat``), forward hooks keep each ReLU's input and output, and a full backward hook
    replaces the ReLU's gradient by the multiplier ``(y - y_ref) / (x - x_ref)`` (the plain
    gradient where ``|x - x_ref| < eps``); attributions are ``torch.autograd.grad`` times
    ``input - baseline`` and sum to ``f(x) - f(baseline)``. Also the same multipliers through a
    straight-through detach trick, and gradient x input for comparison."""
    nn = torch.nn
    model = _mlp(torch, seed=27)
    x = torch.tensor(arr(28, 4, 8))
    baseline = torch.tensor(arr(29, 1, 8, scale=0.1)).expand(4, -1)
    target = torch.tensor(ints(30, 4, 4))
    saved, handles = {}, []

    def fwd_hook(module, inputs, output):
        saved[module] = (inputs[0].detach(), output.detach())

    def bwd_hook(module, grad_input, grad_output):
        inp, out = saved[module]
        n = inp.shape[0] // 2
        delta_in = torch.cat([inp[:n] - inp[n:]] * 2)
        delta_out = torch.cat([out[:n] - out[n:]] * 2)
        new_grad = torch.where(
            delta_in.abs() < 1e-10, grad_input[0], grad_output[0] * delta_out / delta_in
        )
        return (new_grad,)

    relus = [m for m in model.modules() if isinstance(m, nn.ReLU)]
    for m in relus:
        handles.append(m.register_forward_hook(fwd_hook))
        handles.append(m.register_full_backward_hook(bwd_hook))
    inputs = torch.cat([x, baseline]).requires_grad_()
    out = model(inputs)
    t = torch.cat([target, target])
    (g,) = torch.autograd.grad(out[torch.arange(8), t].sum(), inputs)
    for h in handles:
        h.remove()
    attributions = (x - baseline) * g[:4]
    with torch.no_grad():
        f_x = model(x)[torch.arange(4), target]
        f_b = model(baseline)[torch.arange(4), target]
    delta = attributions.sum(1) - (f_x - f_b)

    class RescaleReLU(nn.Module):
        def forward(self, pair):
            xin, xref = pair
            y, yref = torch.relu(xin), torch.relu(xref)
            dx = xin - xref
            m = torch.where(dx.abs() > 1e-10, (y - yref) / dx, (xin > 0).to(xin.dtype))
            return (xin * m.detach() + (y - xin * m).detach(), yref)

    lin = [m for m in model if isinstance(m, nn.Linear)]
    xin = x.clone().requires_grad_(True)
    h, href = xin, baseline
    for k, layer in enumerate(lin):
        h, href = layer(h), layer(href)
        if k < len(lin) - 1:
            h, href = RescaleReLU()((h, href))
    (g2,) = torch.autograd.grad(h.gather(1, target[:, None]).sum(), xin)
    attr2 = (x - baseline) * g2

    xg = x.clone().requires_grad_(True)
    (gg,) = torch.autograd.grad(model(xg).gather(1, target[:, None]).sum(), xg)
    return {"deeplift": attributions, "delta": delta, "straight_through": attr2,
            "agree": torch.allclose(attributions, attr2, atol=1e-5), "grad_x_input": gg * x,
            "hooks_cleared": all(len(m._forward_hooks) == 0 for m in relus)}  # fmt: skip


@program
def interp_tcav_concept_activation_vectors(torch):
    """TCAV: bottleneck activations of concept and random examples (a forward hook on the
    layer), a linear classifier trained with SGD on them whose normalised weight is the CAV, the
    directional derivative of each class logit along the CAV (gradients w.r.t. the hooked
    activation via ``retain_grad``), the TCAV score (fraction positive) over several random
    counterpart sets, and their mean and std."""
    nn, F = torch.nn, torch.nn.functional
    model = _mlp(torch, seed=31, d_in=6, hidden=10, classes=3)
    bottleneck = model[2]
    concept = torch.tensor(arr(32, 20, 6) + np.array([1.5, 0, 0, -1.0, 0, 0], dtype=np.float32))
    inputs = torch.tensor(arr(33, 16, 6))

    def activations(x):
        store = []
        h = bottleneck.register_forward_hook(lambda m, i, o: store.append(o))
        with torch.no_grad():
            model(x)
        h.remove()
        return store[0].flatten(1)

    def train_cav(pos, neg, seed):
        X = torch.cat([pos, neg])
        y = torch.cat([torch.ones(len(pos)), torch.zeros(len(neg))])
        clf = set_weights(torch, nn.Linear(X.shape[1], 1), seed=seed)
        opt = torch.optim.SGD(clf.parameters(), lr=0.5, momentum=0.9)
        for _ in range(12):
            opt.zero_grad()
            F.binary_cross_entropy_with_logits(clf(X).squeeze(1), y).backward()
            opt.step()
        acc = ((clf(X).squeeze(1) > 0).float() == y).float().mean().item()
        w = clf.weight.detach().squeeze(0)
        return w / w.norm(), acc

    # gradients of the logits with respect to the bottleneck
    acts = {}

    def keep(module, inp, out):
        out.retain_grad()
        acts["out"] = out

    handle = bottleneck.register_forward_hook(keep)
    logits = model(inputs.requires_grad_())
    grads_per_class = []
    for c in range(3):
        if acts["out"].grad is not None:
            acts["out"].grad.zero_()
        logits[:, c].sum().backward(retain_graph=True)
        grads_per_class.append(acts["out"].grad.clone())
    handle.remove()
    grads = torch.stack(grads_per_class)  # (class, N, hidden)

    pos = activations(concept)
    cavs, accs, scores = [], [], []
    for r in range(4):
        neg = activations(torch.tensor(arr(40 + r, 20, 6)))
        cav, acc = train_cav(pos, neg, seed=50 + r)
        dd = torch.einsum("cnh,h->cn", grads, cav)
        scores.append((dd > 0).float().mean(dim=1))
        cavs.append(cav)
        accs.append(acc)
    scores = torch.stack(scores)
    return {"cavs": torch.stack(cavs), "cav_accs": accs, "tcav_scores": scores,
            "tcav_mean": scores.mean(0), "tcav_std": scores.std(0),
            "cav_cos": F.cosine_similarity(cavs[0], cavs[1], dim=0),
            "grads": grads}  # fmt: skip


@program
def interp_sparse_autoencoder_dictionary_learning(torch):
    """A sparse autoencoder on cached residual-stream activations, as in "Towards
    Monosemanticity" and SAELens: ``b_dec`` initialised at the data mean and subtracted before
    encoding, ReLU features, MSE plus an L1 penalty, the decoder-norm-parallel component removed
    from ``W_dec.grad`` before ``Adam.step`` and the decoder rows renormalised after it; feature
    frequencies, dead features, L0, explained variance, the top activating examples of a feature
    (``torch.topk``), and a TopK-SAE encoder (``scatter`` of the ``k`` largest pre-activations)."""
    nn = torch.nn
    model = _tiny_transformer(torch, seed=34)
    tokens = torch.tensor(ints(35, 10, 4, 6))
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens)
    acts = cache["blocks.0.hook_resid_post"].reshape(-1, 16)
    d_in, d_sae, l1_coeff = 16, 32, 3e-3

    class SparseAutoencoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.W_enc = nn.Parameter(torch.empty(d_in, d_sae))
            self.b_enc = nn.Parameter(torch.zeros(d_sae))
            self.W_dec = nn.Parameter(torch.empty(d_sae, d_in))
            self.b_dec = nn.Parameter(torch.zeros(d_in))

        def encode(self, x):
            return torch.relu((x - self.b_dec) @ self.W_enc + self.b_enc)

        def forward(self, x):
            feature_acts = self.encode(x)
            return feature_acts @ self.W_dec + self.b_dec, feature_acts

        @torch.no_grad()
        def set_decoder_norm_to_unit_norm(self):
            self.W_dec.data /= torch.norm(self.W_dec.data, dim=1, keepdim=True)

        @torch.no_grad()
        def remove_gradient_parallel_to_decoder_directions(self):
            parallel = torch.einsum("sd,sd->s", self.W_dec.grad, self.W_dec.data)
            self.W_dec.grad -= torch.einsum("s,sd->sd", parallel, self.W_dec.data)

    sae = set_weights(torch, SparseAutoencoder(), seed=36, scale=0.3)
    with torch.no_grad():
        sae.b_enc.zero_()
        sae.b_dec.copy_(acts.mean(0))
        sae.W_enc.copy_(sae.W_dec.data.T)
    sae.set_decoder_norm_to_unit_norm()
    opt = torch.optim.Adam(sae.parameters(), lr=1e-2)
    mse_losses, l1_losses, l0s = [], [], []
    for _ in range(10):
        recon, feature_acts = sae(acts)
        mse = (recon - acts).pow(2).sum(-1).mean()
        l1 = feature_acts.abs().sum(-1).mean()
        loss = mse + l1_coeff * l1
        opt.zero_grad()
        loss.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        opt.step()
        sae.set_decoder_norm_to_unit_norm()
        mse_losses.append(mse.item())
        l1_losses.append(l1.item())
        l0s.append((feature_acts > 0).float().sum(-1).mean().item())
    with torch.no_grad():
        recon, feature_acts = sae(acts)
    freqs = (feature_acts > 0).float().mean(0)
    explained = 1 - (recon - acts).pow(2).sum() / (acts - acts.mean(0)).pow(2).sum()
    top_feature = int(freqs.argmax())
    top_vals, top_idx = torch.topk(feature_acts[:, top_feature], k=5)

    k = 4
    with torch.no_grad():
        pre = (acts - sae.b_dec) @ sae.W_enc + sae.b_enc
        vals, idx = pre.topk(k, dim=-1)
        topk_acts = torch.zeros_like(pre).scatter(-1, idx, torch.relu(vals))
        topk_recon = topk_acts @ sae.W_dec + sae.b_dec
    return {"mse": mse_losses, "l1": l1_losses, "l0": l0s, "freqs": freqs,
            "dead": int((freqs == 0).sum()), "explained_variance": explained,
            "dec_norms": sae.W_dec.norm(dim=1), "top_vals": top_vals, "top_idx": top_idx,
            "topk_l0": (topk_acts > 0).sum(-1), "topk_mse": (topk_recon - acts).pow(2).mean(),
            "W_enc": sae.W_enc, "b_dec": sae.b_dec}  # fmt: skip


@program
def interp_attention_rollout_and_gradient_weighted_attention(torch):
    """Attention rollout (Abnar & Zuidema: head-averaged patterns plus the identity,
    row-normalised and multiplied layer by layer) and Chefer et al.'s gradient-weighted relevance
    (``(grad * attn).clamp(min=0).mean(heads)`` accumulated as ``R = R + cam @ R``), with the
    patterns kept by forward hooks that also ``register_hook`` on them for their gradients."""
    model = _tiny_transformer(torch, seed=37)
    tokens = torch.tensor(ints(38, 10, 2, 6))
    attn_maps, attn_grads, handles = {}, {}, []

    def save_attention(name, module, inputs, output):
        attn_maps[name] = output

        def save_grad(grad):
            attn_grads[name] = grad

        output.register_hook(save_grad)

    for name, hp in model.hook_points().items():
        if name.endswith("hook_pattern"):
            handles.append(hp.register_forward_hook(partial(save_attention, name)))
    logits = model(tokens)
    target = logits[:, -1].argmax(-1)
    model.zero_grad()
    logits[torch.arange(2), -1, target].sum().backward()
    for h in handles:
        h.remove()

    names = sorted(attn_maps)
    n = tokens.shape[1]
    eye = torch.eye(n).expand(2, n, n)
    rollout = eye.clone()
    relevance = eye.clone()
    for name in names:
        attn = attn_maps[name].detach()
        a = attn.mean(dim=1) + eye
        a = a / a.sum(dim=-1, keepdim=True)
        rollout = torch.bmm(a, rollout)
        cam = (attn_grads[name] * attn).clamp(min=0).mean(dim=1)
        relevance = relevance + torch.matmul(cam, relevance)
    last_row = rollout[:, -1]
    rel_last = relevance[:, -1]
    rel_norm = rel_last / rel_last.max(dim=-1, keepdim=True).values
    return {"target": target, "rollout": rollout, "rollout_last": last_row,
            "relevance": relevance, "relevance_norm": rel_norm,
            "rollout_rows_sum": rollout.sum(-1), "grad_max": [attn_grads[n].abs().max() for n in names],
            "W_Q_grad": model.blocks[0].attn.W_Q.grad}  # fmt: skip


@program
def interp_shapley_sampling_and_kernel_shap(torch):
    """Shapley values three ways over grouped features (a Captum ``feature_mask``): exact, by
    enumerating every coalition with the Shapley weights; Captum's ``ShapleyValueSampling``
    (random permutations, NumPy here, adding one group at a time from the baseline); and
    KernelSHAP (NumPy-sampled coalitions, the Shapley kernel weights, weighted least squares with
    ``torch.linalg.lstsq``). The efficiency property ties them to ``f(x) - f(baseline)``."""
    model = _mlp(torch, seed=39)
    x = torch.tensor(arr(40, 2, 8))
    baseline = torch.zeros(1, 8)
    feature_mask = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    M = int(feature_mask.max()) + 1
    target = 1

    @torch.no_grad()
    def f(coalitions):  # (k, M) 0/1 -> (k, N) target scores
        masks = coalitions[:, feature_mask].unsqueeze(1)  # (k, 1, 8)
        inp = baseline + masks * (x.unsqueeze(0) - baseline)
        return model(inp.reshape(-1, 8))[:, target].view(coalitions.shape[0], -1)

    all_coalitions = torch.tensor(
        [[(i >> j) & 1 for j in range(M)] for i in range(2**M)], dtype=torch.float32
    )
    values = f(all_coalitions)
    exact = torch.zeros(2, M)
    for i in range(M):
        for c in range(2**M):
            if all_coalitions[c, i] == 0:
                with_i = c | (1 << i)
                s = int(all_coalitions[c].sum())
                weight = math.factorial(s) * math.factorial(M - s - 1) / math.factorial(M)
                exact[:, i] += weight * (values[with_i] - values[c])

    rng = np.random.default_rng(41)
    n_samples = 6
    sampled = torch.zeros(2, M)
    for _ in range(n_samples):
        perm = rng.permutation(M)
        current = torch.zeros(1, M)
        prev = f(current)
        for i in perm:
            current = current.clone()
            current[0, i] = 1
            out = f(current)
            sampled[:, i] += (out - prev).squeeze(0)
            prev = out
    sampled /= n_samples

    Z = torch.tensor(rng.integers(0, 2, (24, M)).astype(np.float32))
    sizes = Z.sum(1)
    keep = (sizes > 0) & (sizes < M)
    Z = Z[keep]
    sizes = sizes[keep]
    kernel = torch.tensor([(M - 1) / (math.comb(M, int(s)) * s * (M - s)) for s in sizes.tolist()])
    y = f(Z)
    y0, y1 = f(torch.zeros(1, M)), f(torch.ones(1, M))
    A = torch.cat([Z, torch.ones(len(Z), 1)], dim=1) * kernel.sqrt()[:, None]
    b = (y - y0) * kernel.sqrt()[:, None]
    sol = torch.linalg.lstsq(A, b).solution
    kernel_shap = sol[:M].T
    return {"values": values, "exact": exact, "exact_efficiency": exact.sum(1) - (y1 - y0)[0],
            "sampled": sampled, "sampled_efficiency": sampled.sum(1) - (y1 - y0)[0],
            "kernel_weights": kernel, "kernel_shap": kernel_shap, "intercept": sol[M],
            "n_coalitions": len(Z)}  # fmt: skip


@program
def interp_steering_ablation_and_functorch_jacobians(torch):
    """Activation steering and ablations with module hooks: an ActAdd steering vector (the
    difference of two prompts' cached residuals) added by a ``register_forward_pre_hook(...,
    with_kwargs=True)`` on a block, mean- and zero-ablation of each head's ``hook_z`` output by a
    replacing forward hook; and ``torch.func``: per-example input gradients with
    ``vmap(grad(...))`` over ``functional_call`` and the Jacobian of the last-position logits
    w.r.t. the embeddings with ``jacrev``."""
    functional_call, grad = torch.func.functional_call, torch.func.grad
    jacrev, vmap = torch.func.jacrev, torch.func.vmap
    model = _tiny_transformer(torch, seed=42)
    prompts = torch.tensor(ints(43, 10, 3, 5))
    pos_prompt, neg_prompt = torch.tensor([[3, 1, 4, 1, 5]]), torch.tensor([[2, 7, 1, 8, 2]])
    layer, coeff = 1, 2.0
    with torch.no_grad():
        _, pos_cache = model.run_with_cache(pos_prompt)
        _, neg_cache = model.run_with_cache(neg_prompt)
        base_logits = model(prompts)
    name = f"blocks.{layer}.hook_resid_pre"
    steering = (pos_cache[name] - neg_cache[name])[0]  # (pos, d_model)

    def add_steering(module, args, kwargs):
        (resid,) = args
        resid = resid.clone()
        resid[:, : steering.shape[0]] += coeff * steering
        return (resid,), kwargs

    handle = model.blocks[layer].register_forward_pre_hook(add_steering, with_kwargs=True)
    with torch.no_grad():
        steered_logits = model(prompts)
    handle.remove()
    kl = torch.nn.functional.kl_div(
        steered_logits[:, -1].log_softmax(-1), base_logits[:, -1].log_softmax(-1),
        log_target=True, reduction="batchmean",
    )  # fmt: skip

    with torch.no_grad():
        _, cache = model.run_with_cache(prompts)
    points = model.hook_points()
    ablation = {}
    for kind in ["mean", "zero"]:
        effects = torch.zeros(2, 2)
        for l in range(2):
            hook_name = f"blocks.{l}.attn.hook_z"
            for h in range(2):

                def ablate(module, inputs, z, h=h, hook_name=hook_name, kind=kind):
                    z = z.clone()
                    if kind == "mean":
                        z[:, :, h] = cache[hook_name][:, :, h].mean(dim=(0, 1))
                    else:
                        z[:, :, h] = 0.0
                    return z

                handle = points[hook_name].register_forward_hook(ablate)
                with torch.no_grad():
                    out = model(prompts)
                handle.remove()
                effects[l, h] = (out[:, -1] - base_logits[:, -1]).pow(2).sum(-1).mean()
        ablation[kind] = effects

    params = {k: v.detach() for k, v in model.named_parameters()}
    head = torch.nn.Linear(16, 3)
    set_weights(torch, head, seed=44)
    head_params = {k: v.detach() for k, v in head.named_parameters()}
    feats = torch.tensor(arr(45, 5, 16))
    labels = torch.tensor(ints(46, 3, 5))

    def loss_fn(p, x, y):
        out = functional_call(head, p, (x.unsqueeze(0),))
        return torch.nn.functional.cross_entropy(out, y.unsqueeze(0))

    per_example_input_grads = vmap(grad(loss_fn, argnums=1), in_dims=(None, 0, 0))(
        head_params, feats, labels
    )

    def last_logits_from_embed(embed):
        residual = embed + params["W_pos"][: embed.shape[0]]
        for block in model.blocks:
            residual = block(residual.unsqueeze(0)).squeeze(0)
        return (model.ln_final(residual) @ params["W_U"] + params["b_U"])[-1]

    embed = params["W_E"][prompts[0]]
    jac = jacrev(last_logits_from_embed)(embed)  # (vocab, pos, d_model)
    token_attr = jac[base_logits[0, -1].argmax()].mul(embed).sum(-1)
    return {"steering_norm": steering.norm(dim=-1), "steered": steered_logits[:, -1],
            "kl": kl, "ablation": ablation,
            "per_example_input_grads": per_example_input_grads,
            "jac_shape": list(jac.shape), "jac_norm": jac.norm(dim=(1, 2)),
            "token_attr": token_attr}  # fmt: skip


@program
def interp_ov_qk_circuits_and_attribution_patching(torch):
    """Weight-based circuit analysis from "A Mathematical Framework for Transformer Circuits":
    each head's full OV circuit ``W_E @ W_V @ W_O @ W_U`` and its copying score (the share of
    positive real part among the eigenvalues, ``torch.linalg.eigvals``), the QK circuit's top
    singular values, and Q/K/V-composition scores between layer-0 and layer-1 heads (Frobenius
    norms); then attribution patching, the gradient approximation of activation patching:
    ``(clean_act - corrupted_act) * corrupted_grad`` summed over ``d_model`` for every
    residual-stream position, with the gradients caught by tensor hooks registered in forward
    hooks."""
    model = _tiny_transformer(torch, seed=47)
    W_E, W_U = model.W_E.detach(), model.W_U.detach()
    copying, qk_svals, ov_by_layer, qk_by_layer = [], [], [], []
    for block in model.blocks:
        W_V, W_O = block.attn.W_V.detach(), block.attn.W_O.detach()
        W_Q, W_K = block.attn.W_Q.detach(), block.attn.W_K.detach()
        OV = W_V @ W_O  # (head, d_model, d_model)
        QK = W_Q @ W_K.transpose(-1, -2)
        full_ov = W_E @ OV @ W_U  # (head, vocab, vocab)
        eigenvalues = torch.linalg.eigvals(full_ov)
        copying.append((eigenvalues.sum(-1) / eigenvalues.abs().sum(-1)).real)
        qk_svals.append(torch.linalg.svdvals(W_E @ QK @ W_E.T)[:, :3])
        ov_by_layer.append(OV)
        qk_by_layer.append(QK)

    def composition_score(W_A, W_B):
        return (W_A @ W_B).norm(dim=(-2, -1)) / (W_A.norm(dim=(-2, -1)) * W_B.norm(dim=(-2, -1)))

    ov0 = ov_by_layer[0][:, None]  # (head0, 1, d, d)
    qk1, ov1 = qk_by_layer[1][None], ov_by_layer[1][None]
    k_comp = composition_score(qk1.transpose(-1, -2), ov0)
    q_comp = composition_score(qk1, ov0)
    v_comp = composition_score(ov0, ov1)

    clean = torch.tensor([[3, 1, 4, 1, 5, 9]])
    corrupted = torch.tensor([[3, 1, 4, 2, 5, 9]])
    answer, wrong = 1, 2
    points = model.hook_points()
    names = [f"blocks.{i}.hook_resid_pre" for i in range(2)] + ["blocks.1.hook_resid_post"]
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
    acts, act_grads, handles = {}, {}, []

    def cache_with_grad(name, module, inputs, output):
        acts[name] = output.detach()
        output.register_hook(lambda g: act_grads.__setitem__(name, g.detach()))

    for name in names:
        handles.append(points[name].register_forward_hook(partial(cache_with_grad, name)))
    logits = model(corrupted)
    metric = logits[0, -1, answer] - logits[0, -1, wrong]
    metric.backward()
    for h in handles:
        h.remove()
    attribution = torch.stack([
        ((clean_cache[n] - acts[n]) * act_grads[n]).sum(-1)[0] for n in names
    ])  # fmt: skip
    with torch.no_grad():
        clean_logits = model(clean)
    true_change = (clean_logits[0, -1, answer] - clean_logits[0, -1, wrong]) - metric
    return {"copying_scores": torch.stack(copying), "qk_svals": torch.stack(qk_svals),
            "k_comp": k_comp, "q_comp": q_comp, "v_comp": v_comp,
            "eig_dtype": str(eigenvalues.dtype), "metric": metric,
            "attribution": attribution, "true_change": true_change,
            "W_E_grad": model.W_E.grad}  # fmt: skip
