"""The last ``torch.nn`` names: adaptive softmax, fractional max pooling (fixed samples), the legacy
modules (``CrossMapLRN2d``, ``NLLLoss2d``, ``Container``, ``DataParallel``), lazy transposed
convolutions and instance norms, ``nn.Buffer`` and the uninitialized placeholders,
``F.multi_head_attention_forward`` and the linear cross entropy."""

from __future__ import annotations

import warnings

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


@program(rtol=5e-4, atol=5e-5)
def adaptive_log_softmax_training(torch):
    nn = torch.nn
    asm = nn.AdaptiveLogSoftmaxWithLoss(8, 20, [4, 10, 15], div_value=2.0, head_bias=True)
    set_weights(torch, asm, seed=3)
    x = torch.tensor(arr(1, 7, 8))
    t = torch.tensor(np.array([0, 5, 3, 12, 19, 2, 6]))
    opt = torch.optim.SGD(asm.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for _ in range(3):
        out, loss = asm(x, t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    res = asm(x, t)
    asm.zero_grad()
    shortlist_only = asm(x, torch.tensor(np.array([0, 1, 2, 3, 1, 2, 0])))
    shortlist_only.loss.backward()  # the tail clusters are not evaluated: no gradient there
    single = asm(x[0], torch.tensor(np.array(12)))
    return {"losses": losses, "output": res.output, "loss": res.loss, "fields": list(res._fields),
            "log_prob": asm.log_prob(x), "predict": asm.predict(x),
            "shortlist_grads": grads(asm), "single_output": single.output,
            "single_loss": single.loss, "repr": repr(asm), "keys": list(asm.state_dict()),
            "sizes": [asm.shortlist_size, asm.n_clusters, asm.head_size],
            "cutoffs": asm.cutoffs, "params": params(asm)}  # fmt: skip


@program
def fractional_max_pooling_fixed_samples(torch):
    nn, F = torch.nn, torch.nn.functional
    x = torch.tensor(arr(20, 2, 3, 9, 8), requires_grad=True)
    u = torch.tensor(np.random.default_rng(21).random((2, 3, 2)).astype(np.float32))
    y, idx = F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True,
                                     _random_samples=u)  # fmt: skip
    y_ratio = F.fractional_max_pool2d(x, (3, 2), output_ratio=(0.5, 0.6), _random_samples=u)
    v1, i1 = F.fractional_max_pool2d_with_indices(x[0], 2, output_size=3, _random_samples=u[:1])
    (y.pow(2).sum() + y_ratio.sum() + v1.sum()).backward()
    unpooled = F.max_unpool2d(y, idx, kernel_size=(2, 4), stride=(2, 1), output_size=(9, 8))
    x3 = torch.tensor(arr(22, 2, 2, 6, 7, 8), requires_grad=True)
    u3 = torch.tensor(np.random.default_rng(23).random((2, 2, 3)).astype(np.float32))
    y3, i3 = F.fractional_max_pool3d(x3, (2, 3, 2), output_size=(3, 4, 5), return_indices=True,
                                     _random_samples=u3)  # fmt: skip
    v3 = F.fractional_max_pool3d_with_indices(x3[1], 2, output_ratio=(0.5, 0.5, 0.5),
                                              _random_samples=u3[1:])[0]  # fmt: skip
    (y3 * y3).sum().backward()
    m2 = nn.FractionalMaxPool2d(3, output_ratio=0.5, return_indices=True, _random_samples=u)
    m3 = nn.FractionalMaxPool3d(2, output_size=(2, 3, 3), _random_samples=u3)
    mo, mi = m2(x.detach())
    free = nn.FractionalMaxPool2d(2, output_size=(3, 3))(x.detach())  # GT's own samples: shape
    return {"y": y, "idx": idx, "y_ratio": y_ratio, "v1": v1, "i1": i1, "dx": x.grad,
            "unpooled": unpooled, "y3": y3, "i3": i3, "v3": v3, "dx3": x3.grad,
            "module2": mo, "module2_idx": mi, "module3": m3(x3.detach()),
            "free_shape": list(free.shape), "reprs": [repr(m2), repr(m3)],
            "buffers": [k for k, _ in m2.named_buffers()], "keys": list(m3.state_dict())}  # fmt: skip


@program
def cross_map_lrn_and_legacy_modules(torch):
    nn = torch.nn
    x = torch.tensor(arr(30, 2, 7, 3, 4), requires_grad=True)
    lrn = nn.CrossMapLRN2d(5, alpha=0.3, beta=0.75, k=2.0)
    y = lrn(x)
    (y * torch.tensor(arr(31, 2, 7, 3, 4))).sum().backward()
    lrn3 = nn.CrossMapLRN2d(3)
    y3 = lrn3(x.detach() * 3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nll2d = nn.NLLLoss2d(ignore_index=1)
        box = nn.Container(a=nn.Linear(2, 3), b=nn.ReLU())
    logp = torch.tensor(arr(32, 2, 4, 3, 3)).log_softmax(1)
    target = torch.tensor(ints(33, 4, 2, 3, 3))
    dp = nn.DataParallel(set_weights(torch, nn.Linear(4, 2), seed=34))
    z = dp(torch.tensor(arr(35, 3, 4)))
    z.sum().backward()
    return {"y": y, "dx": x.grad, "y3": y3, "lrn_reprs": [repr(lrn), repr(lrn3)],
            "warnings": [[w.category.__name__, str(w.message)] for w in caught],
            "nll2d": nll2d(logp, target), "nll2d_repr": repr(nll2d), "container": repr(box),
            "container_keys": list(box.state_dict()), "dp_out": z, "dp_repr": repr(dp),
            "dp_keys": list(dp.state_dict()), "dp_grads": grads(dp)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def lazy_transposed_convs_and_instance_norms(torch):
    nn = torch.nn
    t1 = nn.LazyConvTranspose1d(3, 2, stride=2)
    t2 = nn.LazyConvTranspose2d(4, 3, stride=2, padding=1, groups=2)
    t3 = nn.LazyConvTranspose3d(2, 2, bias=False)
    n1, n2 = nn.LazyInstanceNorm1d(), nn.LazyInstanceNorm2d(affine=False, track_running_stats=False)
    n3 = nn.LazyInstanceNorm3d(momentum=0.3, bias=False)
    mods = {"t1": t1, "t2": t2, "t3": t3, "n1": n1, "n2": n2, "n3": n3}
    before = {k: repr(m) for k, m in mods.items()}
    lazy = [m.has_uninitialized_params() for m in mods.values()]
    lazy += [isinstance(t1.weight, nn.UninitializedParameter),
             isinstance(n1.running_mean, nn.UninitializedBuffer)]  # fmt: skip
    opt = torch.optim.SGD(t1.parameters(), lr=0.1)  # made before the parameters have a shape
    x1 = torch.tensor(arr(40, 2, 5, 6))
    x2 = torch.tensor(arr(41, 2, 4, 5, 5))
    x3 = torch.tensor(arr(42, 1, 3, 3, 3, 3))
    shapes = [list(t1(x1).shape), list(t2(x2, output_size=[10, 10]).shape), list(t3(x3).shape)]
    for i, m in enumerate((t1, t2, t3)):
        set_weights(torch, m, seed=43 + i)
    loss = t1(x1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    outs = {"t1": t1(x1), "t2": t2(x2), "t3": t3(x3)}
    h1 = torch.tensor(arr(46, 3, 4, 6))
    h3 = torch.tensor(arr(47, 2, 2, 3, 4, 3))
    norms = {"n1_train": n1(h1), "n1_unbatched": n1(h1[0]), "n2": n2(x2), "n3_train": n3(h3)}
    stats = {"n1_mean": n1.running_mean, "n1_var": n1.running_var,
             "n3_mean": n3.running_mean, "n3_var": n3.running_var}  # fmt: skip
    n1.eval()
    n3.eval()
    norms["n1_eval"], norms["n3_eval"] = n1(h1), n3(h3)
    after = {k: repr(m) for k, m in mods.items()}
    kinds = [type(t1).__name__, type(t2).__name__, type(t3).__name__, type(n2).__name__,
             isinstance(n1, nn.InstanceNorm1d), isinstance(n3, nn.InstanceNorm3d),
             type(t1.weight).__name__, isinstance(n1.running_mean, nn.Buffer),
             [m.has_uninitialized_params() for m in (n1, n3)]
             if hasattr(n1, "has_uninitialized_params") else "gone"]  # fmt: skip
    keys = {k: list(m.state_dict()) for k, m in mods.items()}
    return {"before": before, "lazy": lazy, "shapes": shapes, "loss": loss, "outs": outs,
            "norms": norms, "stats": stats, "after": after, "kinds": kinds, "keys": keys,
            "t1_params": params(t1)}  # fmt: skip


@program
def buffers_and_uninitialized_placeholders(torch):
    nn = torch.nn

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Buffer(torch.tensor(np.array([2.0, 3.0], dtype=np.float32)))
            self.offset = nn.Buffer(torch.zeros(2), persistent=False)
            self.plain = torch.ones(2)  # a plain tensor attribute, not a buffer
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            return self.lin(x) * self.scale + self.offset

    m = set_weights(torch, Scaled(), seed=50)
    y = m(torch.tensor(arr(51, 3, 2)))
    keys = list(m.state_dict())
    m.scale = nn.Buffer(torch.tensor(np.array([1.0, -1.0], dtype=np.float32)), persistent=False)
    y2 = m(torch.tensor(arr(51, 3, 2)))
    p, b = nn.UninitializedParameter(), nn.UninitializedBuffer()
    reprs = [repr(p), repr(b)]
    p.materialize((2, 3))
    b.materialize(4)
    return {"y": y, "y2": y2, "buffers": [k for k, _ in m.named_buffers()], "keys": keys,
            "keys_after": list(m.state_dict()), "is_buffer": isinstance(m.scale, nn.Buffer),
            "persistent": m.scale.persistent, "plain_is_attribute": "plain" not in m.state_dict(),
            "reprs": reprs, "param": [type(p).__name__, list(p.shape), p.requires_grad],
            "buffer": [list(b.shape), b.requires_grad, isinstance(b, nn.Buffer)]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def multi_head_attention_forward_functional(torch):
    F = torch.nn.functional
    e, h, ln, sn, n = 8, 2, 4, 5, 3
    q = torch.tensor(arr(60, ln, n, e), requires_grad=True)
    k, v = torch.tensor(arr(61, sn, n, e)), torch.tensor(arr(62, sn, n, e))
    w_in = torch.tensor(arr(63, 3 * e, e, scale=0.3), requires_grad=True)
    b_in = torch.tensor(arr(64, 3 * e, scale=0.1))
    bias_k, bias_v = torch.tensor(arr(65, 1, 1, e)), torch.tensor(arr(66, 1, 1, e))
    w_out = torch.tensor(arr(67, e, e, scale=0.3), requires_grad=True)
    b_out = torch.tensor(arr(68, e, scale=0.1))
    pad = torch.tensor(np.array([[False] * 5, [False] * 3 + [True] * 2, [False] * 4 + [True]]))
    mask = torch.tensor(np.triu(np.ones((ln, sn), dtype=bool), 1))
    out, w = F.multi_head_attention_forward(q, k, v, e, h, w_in, b_in, bias_k, bias_v, True, 0.0,
                                            w_out, b_out, key_padding_mask=pad, attn_mask=mask)  # fmt: skip
    (out.sum() + w.pow(2).sum()).backward()
    out2, w2 = F.multi_head_attention_forward(q, k, v, e, h, w_in, b_in, None, None, False, 0.0,
                                              w_out, None, key_padding_mask=pad,
                                              need_weights=False)  # fmt: skip
    float_mask = torch.tensor(arr(69, n * h, ln, sn))
    out3, w3 = F.multi_head_attention_forward(q, k, v, e, h, w_in, b_in, None, None, False, 0.5,
                                              w_out, b_out, training=False, attn_mask=float_mask,
                                              average_attn_weights=False)  # fmt: skip
    k5, v3 = torch.tensor(arr(70, sn, n, 5)), torch.tensor(arr(71, sn, n, 3))
    qw, kw, vw = (torch.tensor(arr(72 + i, e, d, scale=0.3)) for i, d in enumerate((e, 5, 3)))
    out4, w4 = F.multi_head_attention_forward(q, k5, v3, e, h, None, b_in, None, None, False, 0.0,
                                              w_out, b_out, use_separate_proj_weight=True,
                                              q_proj_weight=qw, k_proj_weight=kw,
                                              v_proj_weight=vw)  # fmt: skip
    sk, sv = torch.tensor(arr(75, n * h, 6, e // h)), torch.tensor(arr(76, n * h, 6, e // h))
    out5, w5 = F.multi_head_attention_forward(q, k, v, e, h, w_in, b_in, None, None, False, 0.0,
                                              w_out, b_out, static_k=sk, static_v=sv)  # fmt: skip
    out6, w6 = F.multi_head_attention_forward(q[:, 0], k[:, 0], v[:, 0], e, h, w_in, b_in, bias_k,
                                              bias_v, False, 0.0, w_out, b_out,
                                              key_padding_mask=pad[1], attn_mask=mask)  # fmt: skip
    causal = torch.tensor(np.triu(np.ones((ln, ln), dtype=bool), 1))
    out7, _ = F.multi_head_attention_forward(q, q, q, e, h, w_in, b_in, None, None, False, 0.0,
                                             w_out, b_out, attn_mask=causal, is_causal=True,
                                             need_weights=False)  # fmt: skip
    mha = torch.nn.MultiheadAttention(e, h, add_bias_kv=True, add_zero_attn=True, batch_first=True)
    set_weights(torch, mha, seed=77)
    x = torch.tensor(arr(78, n, ln, e), requires_grad=True)
    mo, mw = mha(x, x, x, key_padding_mask=pad[:, :ln])
    mo.sum().backward()
    return {"out": out, "w": w, "dq": q.grad, "dw_in": w_in.grad, "dw_out": w_out.grad,
            "out2": out2, "w2": w2, "out3": out3, "w3": w3, "out4": out4, "w4": w4,
            "out5": out5, "w5": w5, "out6": out6, "w6": w6, "out7": out7, "mha_out": mo,
            "mha_w": mw, "dx": x.grad, "mha_keys": list(mha.state_dict()),
            "mha_grads": grads(mha), "mha_repr": repr(mha)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def linear_cross_entropy_losses(torch):
    nn, F = torch.nn, torch.nn.functional
    x = torch.tensor(arr(80, 6, 5), requires_grad=True)
    w = torch.tensor(arr(81, 7, 5, scale=0.4), requires_grad=True)
    b = torch.tensor(arr(82, 7, scale=0.1))
    t_np = ints(83, 7, 6)
    t_np[4] = -100
    t = torch.tensor(t_np)
    cw = torch.tensor(np.linspace(0.5, 1.5, 7).astype(np.float32))
    logits = arr(84, 6, 7)
    probs = torch.tensor((np.exp(logits) / np.exp(logits).sum(1, keepdims=True)).astype(np.float32))
    wk = torch.tensor(arr(85, 7, 2, 3, 5, scale=0.4))
    tk = torch.tensor(ints(86, 7, 6, 2, 3))
    losses = {
        "plain": F.linear_cross_entropy(x, w, t, linear_bias=b),
        "none": F.linear_cross_entropy(x, w, torch.tensor(ints(83, 7, 6)), weight=cw, reduction="none", ignore_index=2,
                                       label_smoothing=0.1),
        "probs": F.linear_cross_entropy(x, w, probs, reduction="sum"),
        "kdim": F.linear_cross_entropy(x, wk, tk, linear_bias=torch.tensor(arr(87, 7, 2, 3))),
        "unbatched": F.linear_cross_entropy(x[0], w, t[0]),
    }  # fmt: skip
    sum(v.sum() for v in losses.values()).backward()
    opts = nn.LinearCrossEntropyOptions(batch_chunk_size=4, chunking_method=None)
    mod = nn.LinearCrossEntropyLoss(5, 7, out_features=(2, 3), bias=True, reduction="sum",
                                    label_smoothing=0.05)  # fmt: skip
    set_weights(torch, mod, seed=88)
    mod_loss = mod(x.detach(), tk)
    chunked = nn.LinearCrossEntropyLoss(5, 7, weight=cw, options=opts)
    set_weights(torch, chunked, seed=89)
    chunked_loss = chunked(x.detach(), t)
    chunked_loss.backward()
    return {**losses, "dx": x.grad, "dw": w.grad, "mod_loss": mod_loss, "mod_repr": repr(mod),
            "mod_keys": list(mod.state_dict()), "chunked_loss": chunked_loss,
            "chunked_repr": repr(chunked), "chunked_keys": list(chunked.state_dict()),
            "chunked_grads": grads(chunked), "options": repr(nn.LinearCrossEntropyOptions())}  # fmt: skip
