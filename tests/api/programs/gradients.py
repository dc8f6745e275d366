"""Gradients beyond ``loss.backward()``: ``torch.autograd.grad`` (a WGAN-GP gradient penalty, a
Hessian-vector product, a MAML inner step, gradients of intermediate tensors), tensor hooks,
module forward hooks, and ``autograd.backward`` with several roots or ``inputs=``."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


@program(rtol=1e-3, atol=1e-5)
def wgan_gradient_penalty(torch):
    nn = torch.nn
    critic = set_weights(
        torch,
        nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16), nn.Tanh(),
                      nn.Linear(16, 1)),
        seed=1,
    )  # fmt: skip
    opt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    real = torch.tensor(arr(2, 8, 4))
    fake = torch.tensor(arr(3, 8, 4, scale=0.5))
    alpha = torch.tensor(np.random.default_rng(4).random((8, 1)).astype(np.float32))
    out = {}
    for step in range(3):
        interp = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        score = critic(interp)
        g = torch.autograd.grad(
            outputs=score, inputs=interp, grad_outputs=torch.ones_like(score),
            create_graph=True, retain_graph=True,
        )[0]  # fmt: skip
        gp = ((g.norm(2, dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + 10 * gp
        opt.zero_grad()
        loss.backward()
        opt.step()
        out[f"gp{step}"] = gp
        out[f"loss{step}"] = loss
    return {**out, **grads(critic)}


@program(rtol=1e-3, atol=1e-5)
def hessian_vector_products(torch):
    a = torch.tensor(arr(5, 4, 4, scale=0.5))
    x = torch.tensor(arr(6, 4), requires_grad=True)
    v = torch.tensor(arr(7, 4))
    f = (torch.sin(x) * x**2).sum() + x @ a @ x + torch.exp(0.3 * x).sum() + torch.sigmoid(x).sum()
    (g,) = torch.autograd.grad(f, x, create_graph=True)
    (hv,) = torch.autograd.grad(g @ v, x, retain_graph=True)
    (g2,) = torch.autograd.grad(g.pow(2).sum(), x)
    y = torch.tensor(arr(8, 3), requires_grad=True)
    (d1,) = torch.autograd.grad(torch.tanh(y).sum(), y, create_graph=True)
    (d2,) = torch.autograd.grad(d1.sum(), y, create_graph=True)
    (d3,) = torch.autograd.grad(d2.sum(), y)
    return {"f": f, "g": g, "hv": hv, "g2": g2, "d1": d1, "d2": d2, "d3": d3}


@program(rtol=1e-3, atol=1e-5)
def maml_inner_step(torch):
    F = torch.nn.functional
    w = torch.tensor(arr(9, 3, 1, scale=0.3), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    xs, ys = torch.tensor(arr(10, 6, 3)), torch.tensor(arr(11, 6, 1))
    xq, yq = torch.tensor(arr(12, 5, 3)), torch.tensor(arr(13, 5, 1))
    meta = torch.optim.SGD([w, b], lr=0.05)
    losses = []
    for _ in range(3):
        inner = F.mse_loss(F.relu(xs @ w + b) + xs @ w, ys)
        gw, gb = torch.autograd.grad(inner, [w, b], create_graph=True)
        w2, b2 = w - 0.1 * gw, b - 0.1 * gb
        outer = F.mse_loss(F.relu(xq @ w2 + b2) + xq @ w2, yq)
        meta.zero_grad()
        outer.backward()
        meta.step()
        losses.append(outer.item())
    return {"losses": losses, "w": w, "b": b, "w_grad": w.grad, "b_grad": b.grad}


@program
def gradients_of_intermediates_and_unused_inputs(torch):
    x = torch.tensor(arr(14, 3, 2), requires_grad=True)
    unused = torch.tensor(arr(15, 2), requires_grad=True)
    h = x * 2 + 1
    y = (h**2).sum(dim=1)
    gh, gx = torch.autograd.grad(y.sum(), [h, x], retain_graph=True)
    g_none = torch.autograd.grad(y.sum(), [x, unused], allow_unused=True, retain_graph=True)
    g_zero = torch.autograd.grad(y.sum(), [unused], materialize_grads=True, retain_graph=True)
    (gv,) = torch.autograd.grad(y, x, grad_outputs=torch.tensor([1.0, -1.0, 0.5]))
    return {
        "gh": gh,
        "gx": gx,
        "none_is_none": g_none[1] is None,
        "first": g_none[0],
        "zero": g_zero[0],
        "gv": gv,
        "x_grad_untouched": x.grad is None,
    }


@program
def tensor_hooks_clip_scale_and_record(torch):
    w = torch.tensor(arr(16, 3, 3), requires_grad=True)
    x = torch.tensor(arr(17, 4, 3))
    seen = []
    clip = w.register_hook(lambda g: g.clamp(-0.5, 0.5))
    h = x @ w
    h.register_hook(lambda g: seen.append(g.abs().sum().item()))
    h.register_hook(lambda g: g * 2)
    h.retain_grad()
    (h.tanh() ** 2).sum().backward()
    first = w.grad.clone()
    clip.remove()
    clip.remove()  # harmless twice
    w.grad = None
    (x @ w).sum().backward()
    return {"first": first, "seen": seen, "h_grad": h.grad, "unclipped": w.grad}


@program
def module_forward_hooks_capture_and_change(torch):
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2)), seed=18)
    acts = {}
    handles = [
        m.register_forward_hook(lambda mod, args, out, name=name: acts.__setitem__(name, out))
        for name, m in model.named_children()
    ]
    pre = model[0].register_forward_pre_hook(lambda mod, args: (args[0] * 0.5,))
    post = model[2].register_forward_hook(lambda mod, args, out: out + 1)
    kw = model[1].register_forward_pre_hook(
        lambda mod, args, kwargs: ((args[0] - 0.1,), kwargs), with_kwargs=True, prepend=True
    )
    x = torch.tensor(arr(19, 4, 3))
    y = model(x)
    captured = {k: v.detach().clone() for k, v in acts.items()}
    for hnd in [*handles, pre, post, kw]:
        hnd.remove()
    acts.clear()
    plain = model(x)
    return {"y": y, "plain": plain, "captured": captured, "after_remove": len(acts)}


@program
def backward_with_many_roots_and_inputs(torch):
    w = torch.tensor(arr(20, 2, 2), requires_grad=True)
    b = torch.tensor(arr(21, 2), requires_grad=True)
    x = torch.tensor(arr(22, 3, 2))
    out = x @ w + b
    l1, l2 = out.sum(), (out**2).mean()
    torch.autograd.backward([l1, l2], [torch.tensor(2.0), None], retain_graph=True)
    both_w, both_b = w.grad.clone(), b.grad.clone()
    w.grad, b.grad = None, None
    l2.backward(inputs=[b])
    return {"both_w": both_w, "both_b": both_b, "only_b": b.grad, "w_untouched": w.grad is None}
