"""Mixed precision recipes as CPU training code writes them: an HF-Trainer/accelerate style step
(``torch.autocast("cpu", dtype=torch.bfloat16)``, gradient accumulation, clipping, a warmup
schedule, ``convert_outputs_to_fp32``), timm's ``amp_autocast`` + ``NativeScaler`` wrapper around
``torch.amp.GradScaler("cpu")`` with a checkpoint round trip, Lightning-style precision plugins
("bf16-mixed", "bf16-true", "32-true"), pure bfloat16 training with float32 master weights copied by
hand, inference under ``torch.inference_mode()``, nested ``autocast(enabled=False)`` for router
softmaxes and losses, branches on ``is_autocast_enabled``/``get_autocast_dtype`` (Llama's RMSNorm,
a flash-attention style cast), float16 autocast on the CPU with a scaler that starts too high,
and RNNs, attention, convolutions and batch norm under autocast.

bfloat16 values can legitimately differ by one bfloat16 rounding where float32 sums are ordered
differently (an ulp is 0.4-0.8 %), so every program compares with ``rtol=atol=2e-2``; dtypes,
skipped steps and scales are compared exactly (as strings and numbers)."""

from __future__ import annotations

import contextlib
import functools
import io
import math

from programs import program
from programs.common import arr, ints, params, set_weights

_TOL = {"rtol": 2e-2, "atol": 2e-2}


def _dt(t) -> str:
    return str(t.dtype)


@program(**_TOL)
def hf_trainer_bf16_step_with_accumulation_and_clipping(torch):
    """An HF Trainer style loop: ``--bf16`` autocast around forward and loss, the loss divided by
    ``gradient_accumulation_steps``, ``clip_grad_norm_`` and AdamW with a linear warmup/decay
    ``LambdaLR`` every second micro-batch, then ``zero_grad(set_to_none=True)``."""
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(10, 16)
            self.norm = nn.LayerNorm(16)
            self.classifier = nn.Linear(16, 3)

        def forward(self, input_ids, labels=None):
            hidden = self.norm(torch.nn.functional.gelu(self.embed(input_ids)))
            logits = self.classifier(hidden)
            loss = None
            if labels is not None:
                loss = nn.CrossEntropyLoss()(logits.view(-1, 3), labels.view(-1))
            return {"loss": loss, "logits": logits}

    model = set_weights(torch, Classifier(), seed=101)
    no_decay = ["bias", "norm.weight"]
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
    ]  # fmt: skip
    optimizer = torch.optim.AdamW(groups, lr=5e-3)
    num_training_steps, num_warmup_steps = 3, 1

    def lr_lambda(current_step):
        if current_step < num_warmup_steps:
            return float(current_step + 1) / float(max(1, num_warmup_steps + 1))
        return max(0.0, float(num_training_steps - current_step) / float(max(1, num_training_steps - num_warmup_steps)))  # fmt: skip

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    xs, ys = torch.tensor(arr(102, 6, 4, 10)), torch.tensor(ints(103, 3, 6, 4))
    gradient_accumulation_steps, max_grad_norm = 2, 0.5
    tr_losses, grad_norms, lrs, dtypes = [], [], [], []
    for step, (input_ids, labels) in enumerate(zip(xs, ys)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            outputs = model(input_ids, labels=labels)
            loss = outputs["loss"]
        dtypes.append(f"{_dt(outputs['logits'])}/{_dt(loss)}")
        loss = loss / gradient_accumulation_steps
        loss.backward()
        tr_losses.append(loss.detach())
        if (step + 1) % gradient_accumulation_steps == 0:
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
            grad_norms.append(grad_norm)
            optimizer.step()
            scheduler.step()
            lrs.append(scheduler.get_last_lr()[0])
            optimizer.zero_grad(set_to_none=True)
    return {"tr_loss": torch.stack(tr_losses).sum() / len(xs), "losses": tr_losses,
            "grad_norms": grad_norms, "lrs": lrs, "dtypes": dtypes, "params": params(model),
            "grad_after": str(model.embed.weight.grad)}  # fmt: skip


@program(**_TOL)
def timm_native_scaler_amp_autocast_train_one_epoch(torch):
    """timm's ``train_one_epoch``: ``amp_autocast = partial(torch.autocast, device_type=..., dtype=
    torch.float16)`` (``suppress`` without AMP), a ``NativeScaler`` that scales, backwards, unscales
    for clipping and steps, its ``state_dict`` in the checkpoint; the same epoch without AMP."""
    nn = torch.nn

    class NativeScaler:
        state_dict_key = "amp_scaler"

        def __init__(self, device="cpu"):
            self._scaler = torch.amp.GradScaler(device, init_scale=2.0**12, growth_interval=2)

        def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False,
                     need_update=True):  # fmt: skip
            self._scaler.scale(loss).backward(create_graph=create_graph)
            if need_update:
                if clip_grad is not None:
                    assert parameters is not None
                    self._scaler.unscale_(optimizer)
                    torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
                self._scaler.step(optimizer)
                self._scaler.update()

        def state_dict(self):
            return self._scaler.state_dict()

        def load_state_dict(self, state_dict):
            self._scaler.load_state_dict(state_dict)

    def make_model():
        return set_weights(torch, nn.Sequential(
            nn.Conv2d(2, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.GELU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 3)), seed=111)  # fmt: skip

    x, y = torch.tensor(arr(112, 4, 4, 2, 5, 5)), torch.tensor(ints(113, 3, 4, 4))

    def train_one_epoch(use_amp):
        model = make_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        loss_fn = nn.CrossEntropyLoss(label_smoothing=0.1)
        amp_autocast = suppress = contextlib.nullcontext
        loss_scaler = None
        if use_amp:
            amp_autocast = functools.partial(torch.autocast, device_type="cpu", dtype=torch.float16)
            loss_scaler = NativeScaler()
        losses = []
        for input, target in zip(x, y):
            with amp_autocast():
                output = model(input)
                loss = loss_fn(output, target)
            optimizer.zero_grad()
            if loss_scaler is not None:
                loss_scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())
            else:
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
            losses.append(loss.item())
        assert suppress is contextlib.nullcontext
        ckpt = {"state_dict": model.state_dict()}
        if loss_scaler is not None:
            ckpt[loss_scaler.state_dict_key] = loss_scaler.state_dict()
        return losses, ckpt, _dt(output)

    amp_losses, amp_ckpt, amp_dtype = train_one_epoch(True)
    fp32_losses, fp32_ckpt, fp32_dtype = train_one_epoch(False)
    resumed = NativeScaler()
    resumed.load_state_dict(amp_ckpt["amp_scaler"])
    return {"amp_losses": amp_losses, "fp32_losses": fp32_losses, "dtypes": [amp_dtype, fp32_dtype],
            "scaler": amp_ckpt["amp_scaler"], "resumed_scale": resumed._scaler.get_scale(),
            "amp_bn_mean": amp_ckpt["state_dict"]["1.running_mean"],
            "amp_head": amp_ckpt["state_dict"]["5.weight"],
            "fp32_head": fp32_ckpt["state_dict"]["5.weight"]}  # fmt: skip


@program(**_TOL)
def lightning_precision_plugins_mixed_true_and_full(torch):
    """Lightning-style precision plugins: "bf16-mixed" (``forward_context`` is an autocast region),
    "bf16-true" (``convert_module`` casts the module, ``convert_input`` casts float inputs,
    ``convert_output`` back to float32) and "32-true", driving the same ``training_step``."""
    nn = torch.nn

    class Precision:
        precision = "32-true"

        def convert_module(self, module):
            return module

        def forward_context(self):
            return contextlib.nullcontext()

        def convert_input(self, data):
            return data

        def convert_output(self, data):
            return data

    class MixedPrecision(Precision):
        def __init__(self, precision, device="cpu"):
            self.precision, self.device = precision, device

        def forward_context(self):
            return torch.autocast(self.device, dtype=torch.bfloat16 if self.precision == "bf16-mixed" else torch.half)  # fmt: skip

        def convert_output(self, data):
            return data.to(torch.get_default_dtype()) if torch.is_floating_point(data) else data

    class HalfPrecision(Precision):
        def __init__(self, precision):
            self.precision = precision
            self._desired_input_dtype = torch.bfloat16

        def convert_module(self, module):
            return module.to(dtype=self._desired_input_dtype)

        def convert_input(self, data):
            return data.to(self._desired_input_dtype) if torch.is_floating_point(data) else data

        def convert_output(self, data):
            return data.to(torch.get_default_dtype()) if torch.is_floating_point(data) else data

    class LitModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.Sequential(nn.Linear(6, 12), nn.SiLU(), nn.Linear(12, 2))

        def training_step(self, batch):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

    x, y = torch.tensor(arr(121, 3, 8, 6)), torch.tensor(arr(122, 3, 8, 2))
    out = {}
    for plugin in (MixedPrecision("bf16-mixed"), HalfPrecision("bf16-true"), Precision()):
        model = plugin.convert_module(set_weights(torch, LitModel(), seed=123))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for batch in zip(x, y):
            batch = [plugin.convert_input(t) for t in batch]
            with plugin.forward_context():
                loss = model.training_step(batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(plugin.convert_output(loss).detach())
        out[plugin.precision] = {
            "losses": losses, "loss_dtype": _dt(loss), "param_dtype": _dt(model.layer[0].weight),
            "weight": model.layer[2].weight.float(),
        }  # fmt: skip
    return out


@program(**_TOL)
def pure_bf16_model_with_fp32_master_weights(torch):
    """Pure bfloat16 training (``model.to(torch.bfloat16)``) with float32 master weights kept by
    hand: bf16 forward and backward, gradients copied into the masters, the update in float32,
    the masters copied back into the bf16 model; a plain bf16 SGD run alongside for contrast."""
    nn = torch.nn

    def make():
        return set_weights(torch, nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1)), seed=131)  # fmt: skip

    x, y = torch.tensor(arr(132, 16, 8)), torch.tensor(arr(133, 16, 1))
    model = make().to(torch.bfloat16)
    printed = [str(model[2].bias), repr(x[:2, :5].to(torch.bfloat16))]  # (exact casts: same digits)
    master_params = [p.detach().clone().float() for p in make().parameters()]
    for mp in master_params:
        mp.requires_grad_(True)
    optimizer = torch.optim.SGD(master_params, lr=0.05, momentum=0.9)
    naive = make().bfloat16()
    naive_opt = torch.optim.SGD(naive.parameters(), lr=0.05, momentum=0.9)
    losses, naive_losses = [], []
    for _ in range(4):
        pred = model(x.to(torch.bfloat16))
        loss = torch.nn.functional.mse_loss(pred.float(), y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        for mp, p in zip(master_params, model.parameters()):
            mp.grad = p.grad.detach().float()
        optimizer.step()
        with torch.no_grad():
            for mp, p in zip(master_params, model.parameters()):
                p.copy_(mp)
        losses.append(loss.item())
        naive_opt.zero_grad()
        nl = torch.nn.functional.mse_loss(naive(x.bfloat16()), y.bfloat16())
        nl.backward()
        naive_opt.step()
        naive_losses.append(nl.float().item())
    return {"losses": losses, "naive_losses": naive_losses, "masters": master_params, "printed": printed,
            "model_bias": model[2].bias.float(), "dtypes": [_dt(pred), _dt(loss), _dt(nl),
            _dt(model[0].weight.grad), _dt(master_params[0].grad),
            _dt(naive_opt.state[naive[0].weight]["momentum_buffer"])]}  # fmt: skip


@program(**_TOL)
def autocast_inference_mode_eval_pipeline(torch):
    """Inference as serving code writes it: ``model.eval()``, ``torch.inference_mode()`` around
    ``torch.autocast("cpu", dtype=torch.bfloat16)``, probabilities in float32, top-k, and what
    the outputs say about themselves (``is_inference``, ``requires_grad``)."""
    nn = torch.nn
    model = nn.Sequential(nn.Conv1d(3, 8, 3, padding=1), nn.BatchNorm1d(8), nn.ReLU(),
                          nn.Dropout(0.3), nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(8, 5))  # fmt: skip
    set_weights(torch, model, seed=141)
    with torch.no_grad():
        model[1].running_mean.copy_(torch.tensor(arr(142, 8, scale=0.1)))
        model[1].running_var.fill_(1.5)
    model.eval()
    batch = torch.tensor(arr(143, 4, 3, 10))
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(batch)
        probs = torch.softmax(logits.float(), dim=-1)
        top_p, top_i = probs.topk(2, dim=-1)
        features = model[:3](batch)
    return {"logits": logits.float(), "probs": probs, "top_p": top_p,
            "facts": [_dt(logits), _dt(probs), _dt(features), str(logits.is_inference()),
                      str(logits.requires_grad), str(torch.is_inference_mode_enabled())],
            "features_mean": features.float().mean(dim=(0, 2))}  # fmt: skip


@program(**_TOL)
def autocast_disabled_for_router_softmax_and_loss(torch):
    """A mixture-of-experts layer as Switch/Mixtral code writes it: experts in bf16 under autocast,
    the router's logits and softmax in float32 under ``autocast(enabled=False)``, the router
    z-loss and load-balancing loss in float32 too, and the loss computed outside the region."""
    nn, F = torch.nn, torch.nn.functional

    class MoE(nn.Module):
        def __init__(self, d=6, n_experts=3, top_k=2):
            super().__init__()
            self.top_k, self.n_experts = top_k, n_experts
            self.gate = nn.Linear(d, n_experts, bias=False)
            self.experts = nn.ModuleList(
                nn.Sequential(nn.Linear(d, 8), nn.SiLU(), nn.Linear(8, d)) for _ in range(n_experts)
            )

        def forward(self, hidden_states):
            with torch.autocast("cpu", enabled=False):
                router_logits = self.gate(hidden_states.float())
                routing_weights = F.softmax(router_logits, dim=-1, dtype=torch.float)
                z_loss = torch.logsumexp(router_logits, dim=-1).pow(2).mean()
            routing_weights, selected = torch.topk(routing_weights, self.top_k, dim=-1)
            routing_weights = routing_weights / routing_weights.sum(dim=-1, keepdim=True)
            routing_weights = routing_weights.to(hidden_states.dtype)
            out = torch.zeros_like(hidden_states)
            expert_mask = F.one_hot(selected, num_classes=self.n_experts).permute(2, 1, 0)
            for e, expert in enumerate(self.experts):
                idx, top_x = torch.where(expert_mask[e])
                if top_x.numel() == 0:
                    continue
                current = expert(hidden_states[top_x]) * routing_weights[top_x, idx, None]
                out.index_add_(0, top_x, current.to(hidden_states.dtype))
            tokens_per_expert = expert_mask.float().sum(dim=(1, 2)) / selected.numel()
            balance = (
                self.n_experts * (tokens_per_expert * F.softmax(router_logits, -1).mean(0)).sum()
            )
            return out, z_loss, balance, router_logits

    moe = set_weights(torch, MoE(), seed=151)
    x = torch.tensor(arr(152, 10, 6))
    target = torch.tensor(arr(153, 10, 6))
    opt = torch.optim.Adam(moe.parameters(), lr=1e-2)
    losses, dtypes = [], []
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, z_loss, balance, router_logits = moe(x)
        loss = F.mse_loss(out.float(), target) + 1e-3 * z_loss + 1e-2 * balance
        loss.backward()
        opt.step()
        losses.append(loss)
        dtypes.append(f"{_dt(out)} {_dt(router_logits)} {_dt(z_loss)} {_dt(balance)}")
    return {"losses": losses, "dtypes": dtypes, "gate_grad": moe.gate.weight.grad,
            "router_logits": router_logits, "gate": moe.gate.weight}  # fmt: skip


@program(**_TOL)
def autocast_dtype_queries_drive_rmsnorm_and_attention(torch):
    """Code that branches on the autocast state: Llama's ``RMSNorm`` (variance in float32, back to
    the input dtype), a flash-attention style cast of float32 q/k/v to
    ``torch.get_autocast_dtype("cpu")`` when ``torch.is_autocast_enabled("cpu")``, the mask's fill
    value from ``torch.finfo`` of the compute dtype, and the legacy no-argument queries."""
    nn = torch.nn

    class LlamaRMSNorm(nn.Module):
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

    class Attention(nn.Module):
        def __init__(self, d=8, heads=2):
            super().__init__()
            self.heads = heads
            self.norm = LlamaRMSNorm(d)
            self.q_proj, self.k_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)
            self.v_proj, self.o_proj = nn.Linear(d, d, bias=False), nn.Linear(d, d, bias=False)

        def forward(self, x):
            b, t, d = x.shape
            h = self.norm(x)
            q, k, v = (p(h).view(b, t, self.heads, -1).transpose(1, 2)
                       for p in (self.q_proj, self.k_proj, self.v_proj))  # fmt: skip
            self.seen = [_dt(h), _dt(q)]
            if q.dtype == torch.float32:
                if torch.is_autocast_enabled("cpu"):
                    target_dtype = torch.get_autocast_dtype("cpu")
                else:
                    target_dtype = self.q_proj.weight.dtype
                q, k, v = q.to(target_dtype), k.to(target_dtype), v.to(target_dtype)
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
            attn = nn.functional.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            self.seen += [_dt(q), _dt(scores), _dt(attn), str(torch.finfo(scores.dtype).min)]
            out = (attn @ v).transpose(1, 2).reshape(b, t, d)
            return self.o_proj(out)

    model = set_weights(torch, Attention(), seed=161)
    x = torch.tensor(arr(162, 2, 4, 8), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
        queries = [str(torch.is_autocast_enabled()), str(torch.is_autocast_enabled("cpu")),
                   str(torch.get_autocast_dtype("cpu")), str(torch.is_autocast_cpu_enabled())]  # fmt: skip
    seen_amp = model.seen
    y.float().sum().backward()
    y32 = model(x.detach())
    queries += [str(torch.is_autocast_enabled("cpu")), str(torch.get_autocast_dtype("cpu"))]
    return {"y": y.float(), "y32": y32, "seen_amp": seen_amp, "seen_fp32": model.seen,
            "queries": queries, "x_grad": x.grad, "norm_grad": model.norm.weight.grad}  # fmt: skip


@program(**_TOL)
def float16_cpu_autocast_scaler_backs_off_from_overflow(torch):
    """A GPU float16 recipe run on the CPU: ``torch.autocast("cpu", dtype=torch.float16)`` with a
        ``GradScaler`` whose initial scale is far too high, so the float16 backward overflows and the
        scaler skips steps and halves its scale until the gradients fit (the float16 weight gradient of
    the head overflows up to a scale of 2**14 and fits from 2**13, with a margin of 30 %)."""
    nn = torch.nn
    model = set_weights(
        torch, nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1)), seed=171
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**22, growth_interval=3)
    x = torch.tensor(arr(172, 8, 4, scale=3.0))
    y = torch.tensor(arr(173, 8, 1, scale=3.0))
    scales, stepped, losses, peaks = [], [], [], []
    for _ in range(10):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            pred = model(x)
            loss = (pred.float() - y).pow(2).mean()
        pred.retain_grad()
        scaler.scale(loss).backward()
        peaks.append(pred.grad.float().abs().max().item())
        scaler.unscale_(optimizer)
        finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        stepped.append(finite)
        scaler.step(optimizer)
        scaler.update()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return {"scales": scales, "stepped": stepped, "losses": losses, "params": params(model),
            "pred_dtype": _dt(pred), "pred_grad_peaks": peaks}  # fmt: skip


@program(**_TOL)
def autocast_lstm_gru_sequence_classifier(torch):
    """Recurrent models under autocast: an LSTM tagger and a GRU encoder with packed sequences,
    forward and loss in the region, backward outside; the dtypes each layer hands back."""
    nn = torch.nn
    pack = torch.nn.utils.rnn.pack_padded_sequence

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(12, 6)
            self.lstm = nn.LSTM(6, 5, batch_first=True, bidirectional=True)
            self.gru = nn.GRU(6, 4, batch_first=True)
            self.fc = nn.Linear(10 + 4, 3)

        def forward(self, tokens, lengths):
            emb = self.embedding(tokens)
            out, (h, c) = self.lstm(emb)
            _, g = self.gru(pack(emb, lengths, batch_first=True, enforce_sorted=False))
            feats = torch.cat([out[:, -1], g[-1]], dim=-1)
            self.dtypes = [_dt(emb), _dt(out), _dt(h), _dt(c), _dt(g), _dt(feats)]
            return self.fc(feats)

    model = set_weights(torch, Tagger(), seed=181)
    tokens = torch.tensor(ints(182, 12, 3, 5))
    lengths = torch.tensor([5, 3, 4])
    labels = torch.tensor([0, 2, 1])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(tokens, lengths)
            loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "dtypes": model.dtypes + [_dt(logits), _dt(loss)],
            "logits": logits.float(), "lstm_grad": model.lstm.weight_hh_l0.grad,
            "gru_grad": model.gru.weight_ih_l0.grad, "emb_grad": model.embedding.weight.grad}  # fmt: skip


@program(**_TOL)
def autocast_resnet_block_batchnorm_train_then_eval(torch):
    """A ResNet basic block (conv-bn-relu-conv-bn plus a 1x1 downsample) trained two steps under
    bfloat16 autocast with SGD and weight decay, then evaluated in the region with running stats."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes))  # fmt: skip

        def forward(self, x):
            identity = self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            self.inner = [_dt(out), _dt(identity)]
            out += identity
            return self.relu(out)

    net = nn.Sequential(BasicBlock(2, 4, stride=2), nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(),
                        nn.Linear(4, 3))  # fmt: skip
    set_weights(torch, net, seed=191)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x, y = torch.tensor(arr(192, 6, 2, 6, 6)), torch.tensor(ints(193, 3, 6))
    losses = []
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    net.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        eval_logits = net(x)
    block = net[0]
    return {"losses": losses, "inner": block.inner, "eval_logits": eval_logits.float(),
            "eval_dtype": _dt(eval_logits), "bn1_mean": block.bn1.running_mean,
            "bn2_var": block.bn2.running_var, "tracked": block.bn1.num_batches_tracked,
            "conv1_grad": block.conv1.weight.grad}  # fmt: skip


@program(**_TOL)
def accelerate_autocast_convert_outputs_to_fp32(torch):
    """accelerate's mixed precision: ``model.forward`` wrapped in an autocast region and
    ``convert_outputs_to_fp32`` (nested outputs back to float32), ``accelerator.backward`` dividing
    by the accumulation steps, and ``unwrap_model`` restoring the original forward."""
    nn = torch.nn

    def recursively_apply(func, data):
        if isinstance(data, (tuple, list)):
            return type(data)(recursively_apply(func, o) for o in data)
        if isinstance(data, dict):
            return type(data)({k: recursively_apply(func, v) for k, v in data.items()})
        if torch.is_tensor(data) and data.dtype in (torch.float16, torch.bfloat16):
            return func(data)
        return data

    def convert_outputs_to_fp32(forward):
        @functools.wraps(forward)
        def wrapper(*args, **kwargs):
            return recursively_apply(lambda t: t.float(), forward(*args, **kwargs))

        return wrapper

    class Accelerator:
        def __init__(self, mixed_precision="bf16", gradient_accumulation_steps=1):
            self.mixed_precision = mixed_precision
            self.gradient_accumulation_steps = gradient_accumulation_steps

        def autocast(self):
            return torch.autocast(
                "cpu", dtype=torch.bfloat16, enabled=self.mixed_precision == "bf16"
            )

        def prepare_model(self, model):
            model._original_forward = model.forward
            forward = model.forward
            model.forward = convert_outputs_to_fp32(
                torch.autocast("cpu", dtype=torch.bfloat16)(forward)
            )
            return model

        def unwrap_model(self, model):
            model.forward = model.__dict__.pop("_original_forward")
            return model

        def backward(self, loss):
            (loss / self.gradient_accumulation_steps).backward()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(5, 7)
            self.heads = nn.ModuleDict({"cls": nn.Linear(7, 2), "reg": nn.Linear(7, 1)})

        def forward(self, x):
            h = torch.relu(self.encoder(x))
            return {
                "cls": self.heads["cls"](h),
                "reg": self.heads["reg"](h),
                "hidden": (h, h.sum()),
            }

    accelerator = Accelerator(gradient_accumulation_steps=2)
    model = accelerator.prepare_model(set_weights(torch, Net(), seed=201))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    x, cls, reg = torch.tensor(arr(202, 4, 3, 5)), torch.tensor(ints(203, 2, 4, 3)), torch.tensor(arr(204, 4, 3, 1))  # fmt: skip
    losses, dtypes = [], []
    for i in range(4):
        out = model(x[i])
        dtypes.append(" ".join(_dt(t) for t in (out["cls"], out["reg"], *out["hidden"])))
        with accelerator.autocast():
            loss = nn.functional.cross_entropy(out["cls"], cls[i]) + nn.functional.l1_loss(
                out["reg"], reg[i]
            )
        accelerator.backward(loss)
        if (i + 1) % accelerator.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())
    unwrapped = accelerator.unwrap_model(model)
    plain = unwrapped(x[0])
    return {"losses": losses, "dtypes": dtypes, "plain_dtype": _dt(plain["cls"]),
            "plain_cls": plain["cls"], "params": params(unwrapped)}  # fmt: skip


@program(**_TOL)
def grad_scaler_checkpoint_resume_bit_for_bit(torch):
    """Saving and resuming a mixed precision run: model, optimizer, scheduler and
    ``GradScaler`` state dicts through ``torch.save``/``torch.load`` mid-run; the resumed run's
    losses, scales and weights must match an uninterrupted one."""
    nn = torch.nn
    x, y = torch.tensor(arr(211, 6, 5, 4)), torch.tensor(arr(212, 6, 5, 2))

    def build():
        model = set_weights(
            torch, nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 2)), seed=213
        )
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        scaler = torch.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
        return model, opt, sched, scaler

    def train(model, opt, sched, scaler, steps):
        losses, scales = [], []
        for i in steps:
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = nn.functional.huber_loss(model(x[i]), y[i])
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            sched.step()
            losses.append(loss.item())
            scales.append(scaler.get_scale())
        return losses, scales

    full = build()
    full_losses, full_scales = train(*full, range(6))
    first = build()
    l1, s1 = train(*first, range(3))
    buf = io.BytesIO()
    torch.save({"model": first[0].state_dict(), "optimizer": first[1].state_dict(),
                "scheduler": first[2].state_dict(), "scaler": first[3].state_dict()}, buf)  # fmt: skip
    buf.seek(0)
    ckpt = torch.load(buf, weights_only=True)
    resumed = build()
    resumed[0].load_state_dict(ckpt["model"])
    resumed[1].load_state_dict(ckpt["optimizer"])
    resumed[2].load_state_dict(ckpt["scheduler"])
    resumed[3].load_state_dict(ckpt["scaler"])
    l2, s2 = train(*resumed, range(3, 6))
    return {"full_losses": full_losses, "full_scales": full_scales, "resumed_losses": l1 + l2,
            "resumed_scales": s1 + s2, "scaler_state": ckpt["scaler"],
            "lr": resumed[2].get_last_lr(), "full_w": full[0][2].weight,
            "resumed_w": resumed[0][2].weight}  # fmt: skip


@program(**_TOL)
def autocast_transformer_encoder_and_mha_bf16(torch):
    """``nn.TransformerEncoderLayer`` (norm-first, GELU, no dropout) and ``nn.MultiheadAttention``
    with a key padding mask under bfloat16 autocast: outputs, attention weights and gradients."""
    nn = torch.nn
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0,
                                       activation="gelu", batch_first=True, norm_first=True)  # fmt: skip
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    set_weights(torch, layer, seed=221)
    set_weights(torch, mha, seed=222)
    x = torch.tensor(arr(223, 2, 5, 8))
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        enc = layer(x, src_key_padding_mask=pad)
        attn_out, attn_w = mha(enc, enc, enc, key_padding_mask=pad)
        loss = attn_out.float().pow(2).mean() + enc.float().abs().mean()
    loss.backward()
    return {"enc": enc.float(), "attn_out": attn_out.float(), "attn_w": attn_w.float(),
            "dtypes": [_dt(enc), _dt(attn_out), _dt(attn_w), _dt(loss)], "loss": loss,
            "in_proj_grad": mha.in_proj_weight.grad, "ff_grad": layer.linear1.weight.grad,
            "norm_grad": layer.norm1.weight.grad}  # fmt: skip


@program(**_TOL)
def bf16_true_adamw_with_clipping_and_bf16_optimizer_state(torch):
    """ "bf16-true" fine-tuning as Lightning/Fabric run it: the whole model and the AdamW states in
    bfloat16, ``clip_grad_norm_`` over bfloat16 gradients (its norm's dtype too), a cosine schedule,
    and ``torch.finfo`` of the dtype that code uses for epsilons."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(6, 12), nn.LayerNorm(12), nn.GELU(),
                                             nn.Linear(12, 3)), seed=231).to(torch.bfloat16)  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2, betas=(0.9, 0.95), weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=4)
    x = torch.tensor(arr(232, 4, 5, 6)).bfloat16()
    y = torch.tensor(ints(233, 3, 4, 5))
    losses, norms = [], []
    for xb, yb in zip(x, y):
        logits = model(xb)
        loss = nn.functional.cross_entropy(logits, yb)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        norms.append(norm.float())
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        losses.append(loss.float())
    state = optimizer.state[model[0].weight]
    fi = torch.finfo(torch.bfloat16)
    return {"losses": losses, "norms": norms, "norm_dtype": _dt(norm), "loss_dtype": _dt(loss),
            "exp_avg_dtype": _dt(state["exp_avg"]), "exp_avg_sq": state["exp_avg_sq"].float(),
            "weights": [p.float() for p in model.parameters()], "lr": scheduler.get_last_lr(),
            "finfo": [fi.eps, fi.tiny, fi.max, fi.resolution, str(fi.dtype), fi.bits]}  # fmt: skip


@program(**_TOL)
def gan_two_optimizers_one_grad_scaler_float16(torch):
    """PyTorch's AMP recipe for several models, losses and optimizers (a GAN): two float16
    autocast regions, ``scaler.scale(loss).backward()`` per loss (``retain_graph`` for the first),
    ``unscale_`` + clipping of one optimizer only, ``scaler.step`` for each and one ``update``."""
    nn, F = torch.nn, torch.nn.functional
    G = set_weights(torch, nn.Sequential(nn.Linear(3, 8), nn.LeakyReLU(0.2), nn.Linear(8, 4), nn.Tanh()), seed=241)  # fmt: skip
    D = set_weights(torch, nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)), seed=242)  # fmt: skip
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-3, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-3, betas=(0.5, 0.999))
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=2)
    z, real = torch.tensor(arr(243, 3, 6, 3)), torch.tensor(arr(244, 3, 6, 4, scale=0.5))
    hist = {"d": [], "g": [], "scale": [], "fake_dtype": [], "d_norm": []}
    for zb, rb in zip(z, real):
        with torch.autocast("cpu", dtype=torch.float16):
            fake = G(zb)
            d_real, d_fake = D(rb), D(fake.detach())
            loss_d = F.binary_cross_entropy_with_logits(
                d_real, torch.ones_like(d_real)
            ) + F.binary_cross_entropy_with_logits(d_fake, torch.zeros_like(d_fake))
            loss_g = F.binary_cross_entropy_with_logits(D(fake), torch.ones_like(d_fake))
        opt_d.zero_grad()
        opt_g.zero_grad()
        scaler.scale(loss_d).backward(retain_graph=True)
        scaler.unscale_(opt_d)
        hist["d_norm"].append(torch.nn.utils.clip_grad_norm_(D.parameters(), 5.0))
        scaler.step(opt_d)
        opt_d.zero_grad()  # (the generator's loss flows through D too)
        scaler.scale(loss_g).backward()
        scaler.step(opt_g)
        scaler.update()
        hist["d"].append(loss_d.item())
        hist["g"].append(loss_g.item())
        hist["scale"].append(scaler.get_scale())
        hist["fake_dtype"].append(f"{_dt(fake)} {_dt(d_real)} {_dt(loss_d)}")
    return {**hist, "G": params(G), "D": params(D)}


@program(**_TOL)
def autocast_segmentation_head_ops_and_losses(torch):
    """A small segmentation model under bfloat16 autocast, with the ops such code mixes in:
    ``interpolate`` back to the input size, ``GroupNorm``, an embedding of class ids, a sigmoid
    with ``binary_cross_entropy`` (on autocast's float32 list), a dice loss by hand, and
    ``F.normalize``/``cosine_similarity`` of pixel features; each result's dtype."""
    nn, F = torch.nn, torch.nn.functional

    class SegNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
            self.gn = nn.GroupNorm(2, 8)
            self.head = nn.Conv2d(8, 2, 1)
            self.class_embed = nn.Embedding(2, 8)

        def forward(self, x):
            f = F.relu(self.gn(self.stem(x)))
            logits = F.interpolate(
                self.head(f), size=x.shape[-2:], mode="bilinear", align_corners=False
            )
            protos = F.normalize(self.class_embed.weight, dim=-1)
            sim = F.cosine_similarity(f.mean((2, 3))[:, None], protos[None], dim=-1)
            self.kinds = {"stem": _dt(self.stem(x)), "gn": _dt(self.gn(self.stem(x))), "f": _dt(f),
                          "logits": _dt(logits), "protos": _dt(protos), "sim": _dt(sim)}  # fmt: skip
            return logits, sim

    net = set_weights(torch, SegNet(), seed=251)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    x = torch.tensor(arr(252, 2, 3, 8, 8))
    target = torch.tensor((arr(253, 2, 2, 8, 8) > 0.3).astype("float32"))
    cls = torch.tensor([0, 1])
    losses = []
    for _ in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits, sim = net(x)
            probs = logits.sigmoid()
            bce = F.binary_cross_entropy(probs, target)
            inter = (probs * target).sum((2, 3))
            dice = 1 - (2 * inter + 1) / (probs.sum((2, 3)) + target.sum((2, 3)) + 1)
            ce = F.cross_entropy(sim * 10, cls)
            loss = bce + dice.mean() + 0.1 * ce
        loss.backward()
        opt.step()
        losses.append(loss.item())
    kinds = {
        **net.kinds,
        "probs": _dt(probs),
        "bce": _dt(bce),
        "dice": _dt(dice),
        "loss": _dt(loss),
    }
    return {"losses": losses, "kinds": [f"{k}:{v}" for k, v in kinds.items()],
            "logits": logits.float(), "sim": sim.float(), "gn_grad": net.gn.weight.grad,
            "embed_grad": net.class_embed.weight.grad}  # fmt: skip


@program(**_TOL)
def half_model_cpu_inference_and_legacy_amp_spellings(torch):
    """A model cast with ``.half()`` for CPU inference (float16 linear, layer norm, softmax,
    GELU), compared with float32; then the older spellings scripts still use:
    ``torch.cpu.amp.autocast()``, ``torch.amp.autocast("cpu")``, ``torch.get_autocast_cpu_dtype()``,
    ``autocast(cache_enabled=False)`` and a float32 autocast request (which disables it)."""
    import warnings

    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(6, 10), nn.LayerNorm(10), nn.GELU(), nn.Linear(10, 4)), seed=261)  # fmt: skip
    x = torch.tensor(arr(262, 5, 6))
    full = torch.softmax(model(x), -1)
    half = model.half().eval()
    with torch.no_grad():
        probs = torch.softmax(half(x.half()), dim=-1)
    model.float()
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.cpu.amp.autocast():
            seen.append(f"cpu.amp {_dt(model(x))} {torch.get_autocast_cpu_dtype()}")
        with torch.amp.autocast("cpu", dtype=torch.float16, cache_enabled=False):
            seen.append(f"amp fp16 {_dt(model(x))} {torch.get_autocast_dtype('cpu')}")
        with torch.autocast("cpu", dtype=torch.float32):
            seen.append(f"fp32 request {_dt(model(x))} {torch.is_autocast_enabled('cpu')}")
        with torch.autocast("cpu", enabled=False):
            seen.append(f"disabled {_dt(model(x))}")
    return {"full": full, "probs": probs.float(), "probs_dtype": _dt(probs), "seen": seen,
            "weight_dtype": _dt(model[0].weight)}  # fmt: skip


@program(**_TOL)
def autocast_spatial_transformer_network(torch):
    """The spatial transformer tutorial's net trained under bfloat16 autocast: the localization
    head's ``theta`` comes out of a linear layer in bfloat16, ``F.affine_grid`` builds the grid in
    that dtype, ``F.grid_sample`` (on autocast's float32 list) samples in float32."""
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.localization = nn.Sequential(nn.Conv2d(1, 4, 3), nn.MaxPool2d(2), nn.ReLU(True))
            self.fc_loc = nn.Sequential(nn.Linear(4 * 3 * 3, 8), nn.ReLU(True), nn.Linear(8, 3 * 2))
            self.classifier = nn.Linear(8 * 8, 3)

        def stn(self, x):
            xs = self.localization(x)
            xs = xs.view(-1, 4 * 3 * 3)
            theta = self.fc_loc(xs)
            theta = theta.view(-1, 2, 3)
            grid = F.affine_grid(theta, x.size(), align_corners=False)
            self.kinds = [_dt(theta), _dt(grid)]
            return F.grid_sample(x, grid, align_corners=False)

        def forward(self, x):
            x = self.stn(x)
            self.kinds.append(_dt(x))
            return F.log_softmax(self.classifier(x.flatten(1)), dim=1)

    model = set_weights(torch, Net(), seed=271)
    with torch.no_grad():  # start from the identity transform, as the tutorial does
        model.fc_loc[2].weight.mul_(0.1)
        model.fc_loc[2].bias.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data, target = torch.tensor(arr(272, 4, 1, 8, 8)), torch.tensor(ints(273, 3, 4))
    losses = []
    for _ in range(2):
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            output = model(data)
            loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return {"losses": losses, "kinds": model.kinds + [_dt(output)], "output": output.float(),
            "fc_loc_grad": model.fc_loc[2].weight.grad, "conv_grad": model.localization[0].weight.grad}  # fmt: skip
