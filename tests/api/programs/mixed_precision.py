"""Mixed precision as CPU training scripts write it: ``torch.autocast("cpu", dtype=torch.bfloat16)``
(or float16) around the forward pass and the loss, ``backward`` outside (and inside) the region,
``torch.amp.GradScaler("cpu")`` with skipped steps, ``@torch.autocast`` as a decorator, a loss
computed in float32 under ``autocast(enabled=False)``, ``custom_fwd(cast_inputs=...)`` on a
custom function, and the dtypes PyTorch's op lists give. bfloat16 values can legitimately differ by
one bfloat16 rounding where float32 sums are ordered differently (an ulp is 0.4-0.8 %), so these
programs compare with ``rtol=atol=2e-2``; dtypes and skipped steps are compared exactly."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints, params, set_weights

_TOL = {"rtol": 2e-2, "atol": 2e-2}


def _dt(t) -> str:
    return str(t.dtype).split(".")[-1]


@program(**_TOL)
def bf16_autocast_mlp_training_loop(torch):
    """The recipe of PyTorch's CPU AMP docs: forward and loss under autocast, backward outside."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), seed=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = torch.tensor(arr(2, 12, 8)), torch.tensor(ints(3, 4, 12))
    losses, dtypes = [], []
    for _ in range(4):
        opt.zero_grad()
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
        dtypes.append(f"{_dt(logits)}/{_dt(loss)}")
        loss.backward()
        dtypes.append(_dt(model[0].weight.grad))
        opt.step()
        losses.append(loss.item())
    return {"losses": losses, "dtypes": dtypes, "params": params(model), "logits": logits.float()}


@program(**_TOL)
def bf16_autocast_convnet_with_batchnorm(torch):
    """A small convnet (conv, batch norm, pooling, linear head) trained two steps under autocast."""
    nn = torch.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.head = nn.Linear(4 * 3 * 3, 3)

        def forward(self, x):
            h = torch.relu(self.bn(self.conv(x)))
            h = torch.nn.functional.max_pool2d(h, 2)
            return self.head(h.flatten(1))

    net = set_weights(torch, Net(), seed=5)
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    x, y = torch.tensor(arr(6, 5, 2, 6, 6)), torch.tensor(ints(7, 3, 5))
    out = {}
    for step in range(2):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = net(x)
            loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        opt.step()
        out[f"loss{step}"] = loss.item()
    out["dtype"] = _dt(logits)
    out["running_mean"], out["running_var"] = net.bn.running_mean, net.bn.running_var
    out["stats_dtype"] = _dt(net.bn.running_mean)
    out["conv_grad"] = net.conv.weight.grad
    return out


@program(**_TOL)
def bf16_autocast_attention_block(torch):
    """A pre-norm attention block (layer norm, scaled dot-product attention, MLP) under autocast,
    with the residual stream in float32, and its gradients."""
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self, d=8, heads=2):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    block = set_weights(torch, Block(), seed=9)
    x = torch.tensor(arr(10, 2, 5, 8), requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = block(x)
        loss = y.float().pow(2).mean()
    loss.backward()
    return {"y": y.float(), "dtype": _dt(y), "loss": loss, "x_grad": x.grad,
            "qkv_grad": block.qkv.weight.grad, "ln_grad": block.ln1.weight.grad}  # fmt: skip


@program(**_TOL)
def grad_scaler_cpu_skips_steps_and_adjusts_the_scale(torch):
    """``GradScaler("cpu")`` with a small growth interval: scaled losses, an overflowing step
    skipped and the scale backed off, growth after good steps, clipping after ``unscale_``."""
    nn = torch.nn
    model = set_weights(torch, nn.Linear(4, 2), seed=11)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=2)
    x, y = torch.tensor(arr(12, 6, 4)), torch.tensor(arr(13, 6, 2))
    scales, scaled, skipped, norms = [], [], [], []
    for step in range(5):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        s = scaler.scale(loss)
        scaled.append(s.item())
        s.backward()
        if step == 2:  # an overflow, as a float16 run would hit
            model.weight.grad[0, 0] = float("inf")
        scaler.unscale_(opt)
        norms.append(float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1e9)))
        skipped.append(scaler.step(opt) is None)
        scaler.update()
        scales.append(scaler.get_scale())
    return {"scales": scales, "scaled": scaled, "skipped": skipped, "state": scaler.state_dict(),
            "norms": [n if np.isfinite(n) else -1.0 for n in norms], "params": params(model)}  # fmt: skip


@program(**_TOL)
def autocast_decorator_nesting_and_queries(torch):
    """``@torch.autocast`` on a forward, a float32 loss under ``autocast(enabled=False)``, and the
    queries code branches on (``is_autocast_enabled``, ``get_autocast_dtype``)."""
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        @torch.autocast("cpu", dtype=torch.bfloat16)
        def forward(self, x):
            return self.fc(x)

    model = set_weights(torch, Model(), seed=14)
    x = torch.tensor(arr(15, 4, 6))
    out = model(x)
    seen = [torch.is_autocast_enabled("cpu")]
    with torch.autocast("cpu"):
        seen.append(torch.is_autocast_enabled("cpu"))
        seen.append(str(torch.get_autocast_dtype("cpu")))
        h = model.fc(x)
        with torch.autocast("cpu", enabled=False):
            seen.append(torch.is_autocast_enabled("cpu"))
            full = model.fc(x)  # float32 inside the region
            loss = (full - h.float()).pow(2).mean() + full.pow(2).mean()
        seen.append(torch.is_autocast_enabled("cpu"))
    loss.backward()
    return {"out": out.float(), "out_dtype": _dt(out), "h_dtype": _dt(h), "full_dtype": _dt(full),
            "seen": [str(s) for s in seen], "grad": model.fc.weight.grad}  # fmt: skip


@program(**_TOL)
def autocast_op_dtype_table(torch):
    """Which dtype each kind of op gives under CPU autocast (float32 inputs unless noted)."""
    F = torch.nn.functional
    a, b = torch.tensor(arr(16, 4, 4)), torch.tensor(arr(17, 4, 4))
    v = torch.tensor(arr(18, 4))
    img = torch.tensor(arr(19, 1, 2, 5, 5))
    h = a.bfloat16()
    spd = a @ a.T + 4 * torch.eye(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        table = {
            "matmul": a @ b, "bmm": a[None].bmm(b[None]), "addmm": torch.addmm(v, a, b),
            "mv": a.mv(v), "dot": v.dot(v), "einsum": torch.einsum("ij,jk->ik", a, b),
            "conv2d": F.conv2d(img, torch.ones(3, 2, 3, 3)), "linear": F.linear(a, b),
            "softmax_bf16": h.softmax(-1), "exp_bf16": h.exp(), "sum_bf16": h.sum(),
            "mse_bf16": F.mse_loss(h, h.flip(0)), "nll_bf16": F.nll_loss(h.log_softmax(-1), torch.tensor([0, 1, 2, 3])),
            "inv_bf16": torch.linalg.inv(spd.bfloat16()), "cat_mixed": torch.cat([h, a]),
            "stack_mixed": torch.stack([h, a]), "layer_norm_bf16": F.layer_norm(h, (4,)),
            "prod_bf16": h.prod(), "cdist_bf16": torch.cdist(h, h.flip(0)),
            "double": a.double() @ b.double(), "pad_reflect": F.pad(img.bfloat16(), (1, 1, 1, 1), mode="reflect"),
        }  # fmt: skip
    return {"dtypes": [f"{k}:{_dt(t)}" for k, t in table.items()],
            **{k: t.float() for k, t in table.items()}}  # fmt: skip


@program(**_TOL)
def custom_fwd_casts_a_custom_function_to_float32(torch):
    """A custom function marked ``custom_fwd(cast_inputs=torch.float32)`` (a numerically touchy
    op kept in float32) between bfloat16 layers."""

    class LogSumExpRows(torch.autograd.Function):
        @staticmethod
        @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
        def forward(ctx, x):
            m = x.max(dim=-1, keepdim=True).values
            out = m + (x - m).exp().sum(-1, keepdim=True).log()
            ctx.save_for_backward(x, out)
            return out

        @staticmethod
        @torch.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return g * (x - out).exp()

    lin = set_weights(torch, torch.nn.Linear(5, 6), seed=20)
    x = torch.tensor(arr(21, 3, 5))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = lin(x)
        lse = LogSumExpRows.apply(z)
    lse.sum().backward()
    return {"z_dtype": _dt(z), "lse_dtype": _dt(lse), "lse": lse, "grad": lin.weight.grad}


@program(**_TOL)
def float16_autocast_with_grad_scaler_on_cpu(torch):
    """A float16 autocast region on the CPU (as a GPU script ported to CPU reads) with the usual
    scaler loop: scale, backward, step, update."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 1)), seed=22)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu")
    x, y = torch.tensor(arr(23, 10, 6)), torch.tensor(arr(24, 10, 1))
    losses = []
    for _ in range(3):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            pred = model(x)
            loss = torch.nn.functional.smooth_l1_loss(pred, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return {"losses": losses, "pred_dtype": _dt(pred), "scale": scaler.get_scale(),
            "params": params(model)}  # fmt: skip
