"""``torch.nn.utils`` beyond clipping, and more optimizers and schedulers: spectral and weight
normalization (the hook-based and the parametrization-based forms), ``parametrize``,
``orthogonal``, ``functional_call``, batch-norm fusion, ``get_total_norm``, ``Rprop``,
``Adafactor``, ``CyclicLR``, ``ChainedScheduler`` and ``nn.init``'s deprecated aliases.

Spectral norm starts its power iteration from random vectors, drawn differently by the two
libraries: the programs overwrite them with fixed ones before the first forward.
"""

from __future__ import annotations

import warnings

import numpy as np

from programs import program
from programs.common import arr, params, set_weights


def _keys(module) -> str:
    return "\n".join(module.state_dict().keys())


def _unit(seed: int, n: int) -> np.ndarray:
    v = arr(seed, n)
    return (v / np.linalg.norm(v)).astype(np.float32)


@program
def spectral_norm_gan_discriminator(torch):
    """A small GAN: a discriminator whose layers are spectrally normalized (one with the
    parametrization, one with the hook), trained a few steps against a generator."""
    nn, P = torch.nn, torch.nn.utils.parametrizations
    disc = set_weights(torch, nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)),
                       seed=1)  # fmt: skip
    gen = set_weights(torch, nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 4)), seed=2)
    P.spectral_norm(disc[0])
    nn.utils.spectral_norm(disc[2])
    with torch.no_grad():
        disc[0].parametrizations.weight[0]._u.copy_(torch.tensor(_unit(3, 8)))
        disc[0].parametrizations.weight[0]._v.copy_(torch.tensor(_unit(4, 4)))
        disc[2].weight_u.copy_(torch.tensor(_unit(5, 1)))
        disc[2].weight_v.copy_(torch.tensor(_unit(6, 8)))
    keys = _keys(disc)
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-3, betas=(0.0, 0.9))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-3, betas=(0.0, 0.9))
    bce = nn.BCEWithLogitsLoss()
    real = torch.tensor(arr(7, 16, 4) * 0.5 + 1.0)
    noise = torch.tensor(arr(8, 16, 3))
    ones, zeros = torch.ones(16, 1), torch.zeros(16, 1)
    d_losses, g_losses = [], []
    for _ in range(4):
        fake = gen(noise)
        d_loss = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
        opt_d.zero_grad()
        d_loss.backward()
        opt_d.step()
        g_loss = bce(disc(gen(noise)), ones)
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        d_losses.append(d_loss.item())
        g_losses.append(g_loss.item())
    disc.eval()
    with torch.no_grad():
        scores = disc(real)
        sigma0 = torch.linalg.matrix_norm(disc[0].weight, ord=2)
    return {
        "keys": keys,
        "d_losses": d_losses,
        "g_losses": g_losses,
        "scores": scores,
        "disc": params(disc),
        "gen": params(gen),
        "u0": disc[0].parametrizations.weight[0]._u,
        "v0": disc[0].parametrizations.weight[0]._v,
        "u2": disc[2].weight_u,
        "v2": disc[2].weight_v,
        "weight0": disc[0].weight,
        "weight2": disc[2].weight,
        "sigma0": sigma0,
        "class": type(disc[0]).__name__,
    }


@program
def remove_spectral_norm_keeps_the_normalized_weight(torch):
    nn = torch.nn
    a = set_weights(torch, nn.Linear(5, 3), seed=9)
    b = set_weights(torch, nn.Conv2d(2, 3, 3), seed=10)
    torch.nn.utils.parametrizations.spectral_norm(a)
    nn.utils.spectral_norm(b, n_power_iterations=2)
    with torch.no_grad():
        a.parametrizations.weight[0]._u.copy_(torch.tensor(_unit(11, 3)))
        a.parametrizations.weight[0]._v.copy_(torch.tensor(_unit(12, 5)))
        b.weight_u.copy_(torch.tensor(_unit(13, 3)))
        b.weight_v.copy_(torch.tensor(_unit(14, 18)))
    x = torch.tensor(arr(15, 2, 5))
    y = torch.tensor(arr(16, 1, 2, 5, 5))
    out_a, out_b = a(x), b(y)
    torch.nn.utils.parametrize.remove_parametrizations(a, "weight")
    nn.utils.remove_spectral_norm(b)
    return {"out_a": out_a, "out_b": out_b, "a": params(a), "b": params(b),
            "keys_a": _keys(a), "keys_b": _keys(b), "class_a": type(a).__name__}  # fmt: skip


@program
def weight_norm_both_apis(torch):
    """The parametrization (``original0``/``original1``) and the hook (``weight_g``/``weight_v``)
    give the same weights and gradients; ``dim=None`` and ``dim=1`` too."""
    nn = torch.nn
    a = set_weights(torch, nn.Linear(3, 4), seed=20)
    b = set_weights(torch, nn.Linear(3, 4), seed=20)
    c = set_weights(torch, nn.Conv2d(2, 3, 2), seed=21)
    d = set_weights(torch, nn.Linear(3, 4), seed=22)
    torch.nn.utils.parametrizations.weight_norm(a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        nn.utils.weight_norm(b)
        nn.utils.weight_norm(c, dim=1)
        nn.utils.weight_norm(d, dim=None)
    x = torch.tensor(arr(23, 5, 3))
    loss = (a(x) ** 2).sum() + (b(x) ** 2).sum() + d(x).sum()
    loss = loss + c(torch.tensor(arr(24, 1, 2, 4, 4))).sum()
    loss.backward()
    grads = {name: p.grad for name, p in list(a.named_parameters()) + list(b.named_parameters())}
    opt = torch.optim.SGD(list(a.parameters()) + list(b.parameters()), lr=0.1)
    opt.step()
    out = {
        "keys_a": _keys(a), "keys_b": _keys(b), "keys_c": _keys(c), "keys_d": _keys(d),
        "g_shapes": [list(b.weight_g.shape), list(c.weight_g.shape), list(d.weight_g.shape)],
        "warning": str(caught[0].message), "warning_kind": caught[0].category.__name__,
        "grads": grads, "weight_a": a.weight, "weight_b": b(x) - b.bias,
        "a": params(a), "b": params(b), "c": params(c), "d": params(d),
    }  # fmt: skip
    torch.nn.utils.parametrize.remove_parametrizations(a, "weight")
    nn.utils.remove_weight_norm(b)
    out["after_a"], out["after_b"] = params(a), params(b)
    out["keys_after"] = _keys(a) + "|" + _keys(b)
    return out


@program
def parametrize_custom_symmetric_and_cached(torch):
    """A user parametrization with ``right_inverse``, stacked with a second one, assigned to,
    cached, trained, and removed both ways."""
    nn, P = torch.nn, torch.nn.utils.parametrize

    class Symmetric(nn.Module):
        def forward(self, X):  # noqa: N803
            return X.triu() + X.triu(1).transpose(0, 1)

        def right_inverse(self, A):  # noqa: N803
            return A.triu()

    class Scale(nn.Module):
        def forward(self, X):  # noqa: N803
            return X * 2.0

        def right_inverse(self, A):  # noqa: N803
            return A / 2.0

    m = set_weights(torch, nn.Linear(3, 3), seed=30)
    P.register_parametrization(m, "weight", Symmetric())
    first = m.weight.detach().clone()
    P.register_parametrization(m, "weight", Scale())
    sym = arr(31, 3, 3)
    m.weight = torch.tensor(sym + sym.T)
    assigned = m.weight.detach().clone()
    x = torch.tensor(arr(32, 4, 3))
    with P.cached():
        y = m(x) + m(x)
    y.sum().backward()
    grad = m.parametrizations.weight.original.grad
    torch.optim.SGD(m.parameters(), lr=0.05).step()
    trained = m.weight.detach().clone()
    state = {
        "parametrized": P.is_parametrized(m), "on_weight": P.is_parametrized(m, "weight"),
        "on_bias": P.is_parametrized(m, "bias"), "keys": _keys(m),
        "type_before": P.type_before_parametrizations(m).__name__,
        "n_parametrizations": len(m.parametrizations.weight),
    }  # fmt: skip
    m2 = set_weights(torch, nn.Linear(3, 3), seed=33)
    P.register_parametrization(m2, "weight", Symmetric())
    P.remove_parametrizations(m2, "weight", leave_parametrized=False)
    P.remove_parametrizations(m, "weight")
    return {"first": first, "assigned": assigned, "y": y, "grad": grad, "trained": trained,
            **state, "after": params(m), "after_keys": _keys(m), "class": type(m).__name__,
            "unparametrized": params(m2)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def orthogonal_parametrization_maps(torch):
    """``orthogonal`` with the matrix exponential, Cayley and Householder maps (the latter without
    the trivialization), each trained a step and still orthogonal."""
    nn, P = torch.nn, torch.nn.utils.parametrizations
    out = {}
    for name, shape, kw in (("matrix_exp", (4, 4), {}),
                            ("cayley", (4, 4), {"orthogonal_map": "cayley"}),
                            ("householder", (5, 3), {"orthogonal_map": "householder",
                                                     "use_trivialization": False})):  # fmt: skip
        m = set_weights(torch, nn.Linear(shape[1], shape[0]), seed=40)
        P.orthogonal(m, **kw)
        w0 = m.weight.detach().clone()
        x = torch.tensor(arr(41, 6, shape[1]))
        loss = (m(x) ** 2).mean()
        loss.backward()
        torch.optim.SGD(m.parameters(), lr=0.1).step()
        w1 = m.weight.detach()
        out[name] = {"w0": w0, "w1": w1, "loss": loss, "keys": _keys(m),
                     "gram": w1.transpose(0, 1) @ w1}  # fmt: skip
    return out


@program
def functional_call_with_other_parameters(torch):
    """``torch.func.functional_call`` and the deprecated ``stateless`` one: other weights for one
    call (the model's own are untouched), gradients to them, buffers, tied weights, several dicts,
    and a parametrization's original."""
    nn = torch.nn
    model = set_weights(torch, nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(),
                                             nn.Linear(4, 2)), seed=50)  # fmt: skip
    model.eval()
    x = torch.tensor(arr(51, 5, 3))
    own = model(x)
    new = {k: torch.tensor(arr(52 + i, *v.shape) * 0.5, requires_grad=True)
           for i, (k, v) in enumerate(model.named_parameters())}  # fmt: skip
    buffers = {"1.running_mean": torch.tensor(arr(60, 4) * 0.1),
               "1.running_var": torch.tensor(np.abs(arr(61, 4)) + 0.5)}  # fmt: skip
    out = torch.func.functional_call(model, (new, buffers), (x,))
    grads = torch.autograd.grad(out.sum(), list(new.values()))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        legacy = torch.nn.utils.stateless.functional_call(model, new, x)
    tied = nn.Sequential(nn.Linear(3, 3, bias=False), nn.Linear(3, 3, bias=False))
    tied[1].weight = tied[0].weight
    set_weights(torch, tied, seed=64)
    w = torch.tensor(arr(62, 3, 3))
    tied_out = torch.func.functional_call(tied, {"0.weight": w}, x)
    untied_out = torch.func.functional_call(tied, {"0.weight": w}, x, tie_weights=False)
    wn = set_weights(torch, nn.Linear(3, 2), seed=63)
    torch.nn.utils.parametrizations.weight_norm(wn)
    g = torch.tensor(np.array([[2.0], [0.5]], np.float32))
    wn_out = torch.func.functional_call(wn, {"parametrizations.weight.original0": g}, (x,))
    return {"own": own, "out": out, "grads": list(grads), "legacy": legacy,
            "warning_kind": caught[0].category.__name__, "after": model(x),
            "tied": tied_out, "untied": untied_out, "wn": wn_out}  # fmt: skip


@program
def fuse_conv_and_linear_with_batch_norm(torch):
    nn, U = torch.nn, torch.nn.utils
    out = {}
    for name, conv, bn, transpose, x in (
        ("conv", nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), False, arr(70, 2, 2, 5, 5)),
        ("conv_nobias", nn.Conv2d(2, 3, 3, bias=False), nn.BatchNorm2d(3), False,
         arr(71, 1, 2, 5, 5)),
        ("transpose", nn.ConvTranspose2d(3, 2, 2), nn.BatchNorm2d(2), True, arr(72, 1, 3, 4, 4)),
    ):  # fmt: skip
        set_weights(torch, conv, seed=73)
        c = bn.num_features
        with torch.no_grad():
            bn.weight.copy_(torch.tensor(arr(74, c) * 0.3 + 1.0))
            bn.bias.copy_(torch.tensor(arr(75, c) * 0.2))
            bn.running_mean.copy_(torch.tensor(arr(76, c) * 0.5))
            bn.running_var.copy_(torch.tensor(np.abs(arr(77, c)) + 0.3))
        conv.eval()
        bn.eval()
        fused = U.fuse_conv_bn_eval(conv, bn, transpose=transpose)
        xt = torch.tensor(x)
        out[name] = {"fused": fused(xt), "ref": bn(conv(xt)), "weight": fused.weight,
                     "bias": fused.bias, "requires_grad": fused.weight.requires_grad}  # fmt: skip
    lin = set_weights(torch, nn.Linear(4, 3), seed=78)
    bn1 = nn.BatchNorm1d(3)
    with torch.no_grad():
        bn1.running_mean.copy_(torch.tensor(arr(79, 3)))
        bn1.running_var.copy_(torch.tensor(np.abs(arr(80, 3)) + 0.2))
    lin.eval()
    bn1.eval()
    fl = U.fuse_linear_bn_eval(lin, bn1)
    xl = torch.tensor(arr(81, 6, 4))
    w, b = U.fuse_linear_bn_weights(lin.weight, None, bn1.running_mean, bn1.running_var, 1e-3,
                                    bn1.weight, bn1.bias)  # fmt: skip
    out["linear"] = {"fused": fl(xl), "ref": bn1(lin(xl)), "w": w, "b": b}
    return out


@program
def total_norm_and_clipping_in_two_steps(torch):
    model = set_weights(torch, torch.nn.Linear(4, 3), seed=90)
    loss = (model(torch.tensor(arr(91, 8, 4))) ** 2).sum()
    loss.backward()
    grads = [p.grad for p in model.parameters()]
    norms = {str(t): torch.nn.utils.get_total_norm(grads, norm_type=t)
             for t in (1.0, 2.0, float("inf"))}  # fmt: skip
    total = torch.nn.utils.get_total_norm(grads)
    torch.nn.utils.clip_grads_with_norm_(model.parameters(), 1.5, total)
    clipped = [p.grad.clone() for p in model.parameters()]
    again = torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type=1.0)
    vec = torch.nn.utils.convert_parameters.parameters_to_vector(model.parameters())
    return {"norms": norms, "total": total, "clipped": clipped, "again": again,
            "after": [p.grad for p in model.parameters()], "vec": vec}  # fmt: skip


def _fit(torch, make_opt, seed: int, steps: int = 6):
    model = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                                                   torch.nn.Linear(4, 1)), seed=seed)  # fmt: skip
    opt = make_opt(model.parameters())
    x, y = torch.tensor(arr(seed + 1, 12, 3)), torch.tensor(arr(seed + 2, 12, 1))
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, opt, losses


@program
def rprop_fits(torch):
    out = {}
    for name, kw in (("default", {}),
                     ("custom", {"lr": 0.05, "etas": (0.3, 1.5), "step_sizes": (1e-3, 0.2)}),
                     ("maximize", {"lr": 0.02, "maximize": True})):  # fmt: skip
        model, opt, losses = _fit(torch, lambda p, kw=kw: torch.optim.Rprop(p, **kw), seed=100)
        st = opt.state_dict()
        out[name] = {
            "losses": losses, "params": params(model),
            "step": float(st["state"][0]["step"]), "prev": st["state"][0]["prev"],
            "step_size": st["state"][2]["step_size"],
            "etas": list(st["param_groups"][0]["etas"]),
            "step_sizes": list(st["param_groups"][0]["step_sizes"]),
        }  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def adafactor_fits(torch):
    out = {}
    for name, kw in (("default", {}),
                     ("decay", {"lr": 0.05, "weight_decay": 0.1, "beta2_decay": -0.5,
                                "eps": (1e-20, 1e-3), "d": 2.0}),
                     ("maximize", {"lr": 0.01, "maximize": True})):  # fmt: skip
        model, opt, losses = _fit(torch, lambda p, kw=kw: torch.optim.Adafactor(p, **kw), seed=110)
        st = opt.state_dict()
        out[name] = {
            "losses": losses, "params": params(model),
            "step": float(st["state"][0]["step"]), "row_var": st["state"][0]["row_var"],
            "col_var": st["state"][0]["col_var"], "variance": st["state"][1]["variance"],
            "state_keys": sorted(st["state"][0]), "group_keys": sorted(st["param_groups"][0]),
        }  # fmt: skip
    # a batch of matrices (3-d parameter): factored over its last two dimensions
    p = torch.tensor(arr(120, 2, 3, 4), requires_grad=True)
    opt = torch.optim.Adafactor([p], lr=0.1)
    for i in range(3):
        p.grad = torch.tensor(arr(121 + i, 2, 3, 4))
        opt.step()
    st = opt.state[p]
    out["batched"] = {"p": p, "row_var": st["row_var"], "col_var": st["col_var"]}
    return out


def _cycle(torch, make_opt, make_sched, steps: int = 14):
    model = set_weights(torch, torch.nn.Linear(3, 1), seed=130)
    opt = make_opt(model.parameters())
    sched = make_sched(opt)
    x, y = torch.tensor(arr(131, 8, 3)), torch.tensor(arr(132, 8, 1))
    lrs, moms = [], []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        g = opt.param_groups[0]
        lrs.append(g["lr"])
        moms.append(float(g["betas"][0] if "betas" in g else g.get("momentum", 0.0)))
    return {"lrs": lrs, "moms": moms, "last_lr": sched.get_last_lr(), "params": params(model)}


@program
def cyclic_lr_modes(torch):
    S = torch.optim.lr_scheduler
    sgd = lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)  # noqa: E731
    out = {
        "triangular": _cycle(torch, sgd, lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3)),
        "triangular2": _cycle(torch, sgd, lambda o: S.CyclicLR(
            o, 0.01, 0.1, step_size_up=2, step_size_down=4, mode="triangular2")),
        "exp_range": _cycle(torch, sgd, lambda o: S.CyclicLR(
            o, [0.02], [0.2], step_size_up=3, mode="exp_range", gamma=0.9,
            base_momentum=0.7, max_momentum=0.95)),
        "custom": _cycle(torch, sgd, lambda o: S.CyclicLR(
            o, 0.01, 0.05, step_size_up=2, scale_fn=lambda i: 1.0 / (1.0 + 0.1 * i),
            scale_mode="iterations")),
        "adam_beta1": _cycle(torch, lambda p: torch.optim.Adam(p, lr=0.01),
                             lambda o: S.CyclicLR(o, 0.001, 0.01, step_size_up=4)),
        "no_momentum": _cycle(torch, lambda p: torch.optim.SGD(p, lr=0.1),
                              lambda o: S.CyclicLR(o, 0.01, 0.1, step_size_up=3,
                                                   cycle_momentum=False)),
    }  # fmt: skip
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = S.CyclicLR(opt, 0.01, 0.1, step_size_up=3)
    for _ in range(4):
        opt.step()
        sched.step()
    state = sched.state_dict()
    wanted = ("base_lrs", "max_lrs", "base_momentums", "max_momentums", "total_size", "mode",
              "gamma", "scale_mode", "cycle_momentum", "use_beta1", "last_epoch", "_last_lr",
              "_scale_fn_ref", "optimizer")  # fmt: skip
    out["state_has"] = [k in state for k in wanted]
    out["state"] = {"last_epoch": state["last_epoch"], "total_size": state["total_size"],
                    "step_ratio": state["step_ratio"], "scale_mode": state["scale_mode"],
                    "custom": str(state["_scale_fn_custom"])}  # fmt: skip
    return out


@program
def chained_scheduler_warmup_then_decay(torch):
    S = torch.optim.lr_scheduler
    out = _cycle(torch, lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.5),
                 lambda o: S.ChainedScheduler([S.LinearLR(o, start_factor=0.25, total_iters=4),
                                               S.ExponentialLR(o, gamma=0.9)]))  # fmt: skip
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    chain = S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                                S.StepLR(opt, step_size=3, gamma=0.1)], optimizer=opt)  # fmt: skip
    lrs = []
    for _ in range(7):
        opt.step()
        chain.step()
        lrs.append(chain.get_last_lr()[0])
    state = chain.state_dict()
    out["chain_lrs"] = lrs
    out["state_keys"] = sorted(state)
    out["inner_epochs"] = [s["last_epoch"] for s in state["_schedulers"]]
    return out


@program
def init_deprecated_aliases_and_sparse(torch):
    init = torch.nn.init
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = init.constant(torch.empty(2, 3), 0.25)
        b = init.eye(torch.empty(3, 4))
        c = init.dirac(torch.empty(4, 2, 3, 3), groups=2)
        d = init.uniform(torch.empty(50, 40), -0.5, 0.5)
        e = init.normal(torch.empty(60, 50), 1.0, 0.1)
        f = init.xavier_uniform(torch.empty(30, 40))
        g = init.kaiming_normal(torch.empty(80, 60), mode="fan_out")
        h = init.orthogonal(torch.empty(5, 7))
        s = init.sparse(torch.empty(10, 6), 0.35, std=0.2)
        init.xavier_normal(torch.empty(3, 3))
        init.kaiming_uniform(torch.empty(3, 3))
    messages = [str(w.message) for w in caught]
    return {
        "a": a, "b": b, "c": c, "messages": messages,
        "kinds": sorted({w.category.__name__ for w in caught}),
        "d_range": bool(d.min() >= -0.5) and bool(d.max() < 0.5),
        "e_mean_close": abs(e.mean().item() - 1.0) < 0.02,
        "f_bound": bool(f.abs().max() <= (6 / 70) ** 0.5),
        "g_std_close": abs(g.std().item() - (2 / 80) ** 0.5) < 0.02,
        "h_orthonormal_rows": bool(torch.allclose(h @ h.transpose(0, 1), torch.eye(5), atol=1e-5)),
        "sparse_zeros_per_column": (s == 0).sum(0),
        "skip_init_shape": list(torch.nn.utils.skip_init(torch.nn.Linear, 4, 3).weight.shape),
    }  # fmt: skip
