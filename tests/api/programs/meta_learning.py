"""Meta-learning and higher-order gradients as research code writes them: MAML, prototypical networks, hypernetworks, implicit differentiation."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _sine_tasks(seed, n_tasks, n_support, n_query):
    # MAML sine regression: amplitude in [0.1, 5], phase in [0, pi], x in [-5, 5]
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(n_tasks):
        amp, phase = rng.uniform(0.1, 5.0), rng.uniform(0.0, np.pi)
        xs = rng.uniform(-5, 5, (n_support, 1)).astype(np.float32)
        xq = rng.uniform(-5, 5, (n_query, 1)).astype(np.float32)
        tasks.append(
            (xs, (amp * np.sin(xs - phase)).astype(np.float32),
             xq, (amp * np.sin(xq - phase)).astype(np.float32))
        )  # fmt: skip
    return tasks


def _episode(seed, n_way, k_shot, n_query, dim, spread=1.5):
    # class centres plus noise; support and query sorted by class as episodic loaders give them
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((n_way, dim)) * spread
    xs = centres[:, None] + rng.standard_normal((n_way, k_shot, dim))
    xq = centres[:, None] + rng.standard_normal((n_way, n_query, dim))
    return xs.reshape(-1, dim).astype(np.float32), xq.reshape(-1, dim).astype(np.float32)


@program(rtol=5e-4, atol=5e-5)
def maml_second_order_sine_regression(torch):
    # Finn et al. MAML written by hand: functional forward with F.linear, inner SGD steps through
    # autograd.grad(create_graph=True), meta-batch of tasks, Adam on the meta-parameters
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(
        torch,
        nn.Sequential(nn.Linear(1, 20), nn.Tanh(), nn.Linear(20, 20), nn.Tanh(), nn.Linear(20, 1)),
        seed=1,
    )

    def forward(x, w):
        h = torch.tanh(F.linear(x, w[0], w[1]))
        h = torch.tanh(F.linear(h, w[2], w[3]))
        return F.linear(h, w[4], w[5])

    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    tasks = [tuple(torch.from_numpy(a) for a in t) for t in _sine_tasks(2, 3, 5, 6)]
    out = {"meta_losses": [], "inner_losses": [], "first_grads": None}
    for it in range(3):
        meta_opt.zero_grad()
        query_losses = []
        for xs, ys, xq, yq in tasks:
            fast = list(model.parameters())
            for _ in range(2):
                loss = F.mse_loss(forward(xs, fast), ys)
                g = torch.autograd.grad(loss, fast, create_graph=True)
                fast = [w - 0.01 * gi for w, gi in zip(fast, g)]
                out["inner_losses"].append(loss.item())
            query_losses.append(F.mse_loss(forward(xq, fast), yq))
        meta_loss = torch.stack(query_losses).mean()
        meta_loss.backward()
        if it == 0:
            out["first_grads"] = {k: v.clone() for k, v in grads(model).items()}
        meta_opt.step()
        out["meta_losses"].append(meta_loss.detach())
    out["params"] = params(model)
    out["adapted_pred"] = forward(tasks[0][2], [f.detach() for f in fast])

    # the same inner loop with torch.func: grad of grad, and vmapped over the stacked tasks
    def task_loss(pd, x, y):
        return F.mse_loss(torch.func.functional_call(model, pd, (x,)), y)

    def adapted_query_loss(pd, xs, ys, xq, yq):
        for _ in range(2):
            g = torch.func.grad(task_loss)(pd, xs, ys)
            pd = {k: pd[k] - 0.01 * g[k] for k in pd}
        return task_loss(pd, xq, yq)

    pd = dict(model.named_parameters())
    ql = adapted_query_loss(pd, *tasks[0])
    out["func_meta_grad"] = list(torch.autograd.grad(ql, list(pd.values())))
    detached = {k: v.detach() for k, v in pd.items()}
    stacked = [torch.stack(list(col)) for col in zip(*tasks)]
    per_task = torch.func.vmap(torch.func.grad(adapted_query_loss), in_dims=(None, 0, 0, 0, 0))(
        detached, *stacked
    )
    out["vmap_meta_grad"] = {k: v.mean(0) for k, v in per_task.items()}
    return out


@program(rtol=5e-4, atol=5e-5)
def first_order_maml_and_reptile(torch):
    # FOMAML (inner gradients without create_graph) and OpenAI's Reptile (inner SGD on a module,
    # then interpolate the state_dict toward the adapted weights; parameters_to_vector deltas)
    nn, F = torch.nn, torch.nn.functional
    V = nn.utils

    def make():
        return set_weights(
            torch, nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1)), seed=3
        )

    tasks = [tuple(torch.from_numpy(a) for a in t) for t in _sine_tasks(4, 3, 6, 6)]
    fo = make()
    meta_opt = torch.optim.SGD(fo.parameters(), lr=0.01, momentum=0.9)
    fo_losses = []
    names = [n for n, _ in fo.named_parameters()]
    for _ in range(3):
        meta_opt.zero_grad()
        total = 0.0
        for xs, ys, xq, yq in tasks:
            fast = list(fo.parameters())
            for _ in range(2):
                pred = torch.func.functional_call(fo, dict(zip(names, fast)), (xs,))
                inner = F.mse_loss(pred, ys)
                g = torch.autograd.grad(inner, fast)
                fast = [w - 0.02 * gi.detach() for w, gi in zip(fast, g)]
            q = F.mse_loss(torch.func.functional_call(fo, dict(zip(names, fast)), xq), yq)
            (q / len(tasks)).backward()
            total += q.item() / len(tasks)
        meta_opt.step()
        fo_losses.append(total)

    rep = make()
    deltas, rep_losses = [], []
    for outer in range(3):
        weights_before = copy.deepcopy(rep.state_dict())
        before_vec = V.parameters_to_vector(rep.parameters()).detach().clone()
        xs, ys, _, _ = tasks[outer % len(tasks)]
        inner_opt = torch.optim.SGD(rep.parameters(), lr=0.02)
        for k in range(3):
            mb = slice(2 * k, 2 * k + 2)
            loss = F.mse_loss(rep(xs[mb]), ys[mb])
            inner_opt.zero_grad()
            loss.backward()
            inner_opt.step()
            rep_losses.append(loss.item())
        deltas.append((V.parameters_to_vector(rep.parameters()) - before_vec).norm())
        outer_stepsize = 0.1 * (1 - outer / 3)
        weights_after = rep.state_dict()
        rep.load_state_dict(
            {
                name: weights_before[name] + (weights_after[name] - weights_before[name]) * outer_stepsize
                for name in weights_before
            }
        )  # fmt: skip
    flat = V.parameters_to_vector(rep.parameters())
    probe = make()
    V.vector_to_parameters(flat * 2, probe.parameters())
    return {"fo_losses": fo_losses, "fo_params": params(fo), "rep_losses": rep_losses,
            "deltas": deltas, "rep_params": params(rep), "probe": params(probe)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def prototypical_network_episodes(torch):
    # Snell et al. protonets: mean support embedding per class, squared Euclidean distances by
    # expand (their euclidean_dist), log_softmax(-d), gather of the query targets, accuracy
    nn, F = torch.nn, torch.nn.functional
    NW, K, NQ, D = 4, 3, 2, 10
    enc = set_weights(
        torch,
        # no biases: BatchNorm cancels the first, distances are translation invariant in the last
        nn.Sequential(
            nn.Linear(D, 24, bias=False),
            nn.BatchNorm1d(24),
            nn.ReLU(),
            nn.Linear(24, 8, bias=False),
        ),
        seed=5,
    )
    # SGD, not Adam: a BatchNorm shift of a channel that stays positive through the ReLU
    # translates every embedding, so its gradient is zero up to rounding
    opt = torch.optim.SGD(enc.parameters(), lr=0.05, momentum=0.9)

    def euclidean_dist(x, y):
        n, m, d = x.size(0), y.size(0), x.size(1)
        x = x.unsqueeze(1).expand(n, m, d)
        y = y.unsqueeze(0).expand(n, m, d)
        return torch.pow(x - y, 2).sum(2)

    target_inds = torch.arange(0, NW).view(NW, 1, 1).expand(NW, NQ, 1).long()
    out = {"losses": [], "accs": [], "dists": []}
    for ep in range(3):
        xs, xq = (torch.from_numpy(a) for a in _episode(6 + ep, NW, K, NQ, D))
        z = enc(torch.cat([xs, xq], 0))
        z_dim = z.size(-1)
        z_proto = z[: NW * K].view(NW, K, z_dim).mean(1)
        zq = z[NW * K :]
        dists = euclidean_dist(zq, z_proto)
        log_p_y = F.log_softmax(-dists, dim=1).view(NW, NQ, -1)
        loss_val = -log_p_y.gather(2, target_inds).squeeze().view(-1).mean()
        _, y_hat = log_p_y.max(2)
        acc_val = torch.eq(y_hat, target_inds.squeeze()).float().mean()
        opt.zero_grad()
        loss_val.backward()
        opt.step()
        out["losses"].append(loss_val.item())
        out["accs"].append(acc_val.item())
        out["dists"].append(dists.detach())
    enc.eval()
    with torch.no_grad():
        xs, xq = (torch.from_numpy(a) for a in _episode(20, NW, K, NQ, D))
        protos = enc(xs).view(NW, K, -1).mean(1)
        d_cdist = torch.cdist(enc(xq), protos).pow(2)
        out["eval_probs"] = F.softmax(-d_cdist, dim=1)
    out["params"] = params(enc)
    out["running_var"] = enc[1].running_var
    return out


@program(rtol=5e-4, atol=5e-5)
def matching_network_cosine_attention_fce(torch):
    # Vinyals et al. matching nets: support embeddings with a bidirectional LSTM context (FCE),
    # cosine-similarity attention over the support set, label mixing with one-hot labels
    nn, F = torch.nn, torch.nn.functional
    NW, K, NQ, D, H = 3, 2, 3, 6, 8

    class MatchingNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H))
            self.lstm = nn.LSTM(H, H // 2, bidirectional=True, batch_first=True)

        def forward(self, xs, ys, xq):
            g = self.enc(xs)
            ctx, _ = self.lstm(g.unsqueeze(0))
            g = g + ctx.squeeze(0)
            f = self.enc(xq)
            sim = F.cosine_similarity(f.unsqueeze(1), g.unsqueeze(0), dim=-1, eps=1e-8)
            attn = F.softmax(sim * 10.0, dim=1)
            return attn @ F.one_hot(ys, NW).float(), sim

    net = set_weights(torch, MatchingNet(), seed=8)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    ys = torch.arange(NW).repeat_interleave(K)
    yq = torch.arange(NW).repeat_interleave(NQ)
    out = {"losses": [], "sims": []}
    for ep in range(3):
        xs, xq = (torch.from_numpy(a) for a in _episode(30 + ep, NW, K, NQ, D, spread=1.0))
        probs, sim = net(xs, ys, xq)
        loss = F.nll_loss(torch.log(probs.clamp_min(1e-8)), yq)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
        out["sims"].append(sim.detach())
    with torch.no_grad():
        f, g = net.enc(xq), net.enc(xs)
        manual = F.normalize(f, dim=-1) @ F.normalize(g, dim=-1).T
        out["manual_cos"] = manual
        out["pairwise_cos"] = F.cosine_similarity(f[:, None], g[None], dim=2)
    out["params"] = params(net)
    return out


@program(rtol=5e-4, atol=5e-5)
def hypernetwork_functional_call_target(torch):
    # a hypernetwork maps a task embedding to the flat parameter vector of a target MLP, split into
    # the target's named shapes and run with torch.func.functional_call
    nn, F = torch.nn, torch.nn.functional
    target = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    shapes = {n: p.shape for n, p in target.named_parameters()}
    sizes = [math.prod(s) for s in shapes.values()]
    hyper = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, sum(sizes)))
    set_weights(torch, hyper, seed=9)
    with torch.no_grad():
        hyper[2].weight.mul_(0.5)
    task_emb = nn.Embedding(3, 4)
    set_weights(torch, task_emb, seed=10, scale=1.0)
    opt = torch.optim.Adam(list(hyper.parameters()) + list(task_emb.parameters()), lr=5e-3)
    X = torch.tensor(arr(11, 3, 10, 3))
    Wt = arr(12, 3, 3, 2)
    Y = torch.tensor(np.tanh(np.einsum("tnd,tdk->tnk", arr(11, 3, 10, 3), Wt)).astype(np.float32))
    out = {"losses": []}
    for _ in range(3):
        total = 0
        for t in range(3):
            flat = hyper(task_emb(torch.tensor(t)))
            weights = {
                n: chunk.view(shape)
                for (n, shape), chunk in zip(shapes.items(), torch.split(flat, sizes))
            }
            pred = torch.func.functional_call(target, weights, (X[t],))
            total = total + F.mse_loss(pred, Y[t])
        opt.zero_grad()
        total.backward()
        opt.step()
        out["losses"].append(total.item())
    out["emb_grad"] = task_emb.weight.grad
    out["hyper"] = params(hyper)
    out["last_weights"] = {k: v.detach() for k, v in weights.items()}
    out["target_untouched"] = all(p.grad is None for p in target.parameters())
    return out


@program(rtol=5e-4, atol=5e-5)
def hypernetwork_generated_conv_and_per_sample_linear(torch):
    # Ha et al. static hypernetwork: learned layer embeddings z_j -> conv kernels used with
    # F.conv2d; plus a conditional HyperLinear whose per-sample weights are applied with bmm
    nn, F = torch.nn, torch.nn.functional

    class HyperConvNet(nn.Module):
        def __init__(self, zdim=4, cin=2, cout=4, k=3):
            super().__init__()
            self.shape1, self.shape2 = (cout, cin, k, k), (cout, cout, k, k)
            self.z = nn.Parameter(torch.zeros(2, zdim))
            self.w1 = nn.Linear(zdim, 16)
            self.out1 = nn.Linear(16, cout * cin * k * k)
            self.out2 = nn.Linear(16, cout * cout * k * k)
            self.head = nn.Linear(cout, 3)

        def kernels(self):
            h = F.relu(self.w1(self.z))
            return self.out1(h[0]).view(self.shape1), self.out2(h[1]).view(self.shape2)

        def forward(self, x):
            k1, k2 = self.kernels()
            x = F.relu(F.conv2d(x, k1, padding=1))
            x = F.relu(F.conv2d(x, k2, stride=2, padding=1))
            return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class HyperLinear(nn.Module):
        def __init__(self, zdim, fin, fout):
            super().__init__()
            self.fin, self.fout = fin, fout
            self.w_gen = nn.Linear(zdim, fin * fout)
            self.b_gen = nn.Linear(zdim, fout)

        def forward(self, x, z):
            W = self.w_gen(z).view(-1, self.fout, self.fin)
            return torch.bmm(W, x.unsqueeze(-1)).squeeze(-1) + self.b_gen(z)

    conv = set_weights(torch, HyperConvNet(), seed=13)
    with torch.no_grad():
        conv.z.copy_(torch.tensor(arr(14, 2, 4)))
    hl = set_weights(torch, HyperLinear(3, 5, 2), seed=15)
    opt = torch.optim.Adam(list(conv.parameters()) + list(hl.parameters()), lr=2e-3)
    imgs, labels = torch.tensor(arr(16, 6, 2, 8, 8)), torch.tensor(ints(17, 3, 6))
    x, z, y = torch.tensor(arr(18, 6, 5)), torch.tensor(arr(19, 6, 3)), torch.tensor(arr(20, 6, 2))
    out = {"conv_losses": [], "hl_losses": []}
    for _ in range(3):
        l1 = F.cross_entropy(conv(imgs), labels)
        l2 = F.mse_loss(hl(x, z), y)
        opt.zero_grad()
        (l1 + l2).backward()
        opt.step()
        out["conv_losses"].append(l1.item())
        out["hl_losses"].append(l2.item())
    with torch.no_grad():
        W = hl.w_gen(z).view(-1, 2, 5)
        out["einsum_match"] = torch.einsum("boi,bi->bo", W, x) + hl.b_gen(z)
        shared = F.linear(x, hl.w_gen(z[0]).view(2, 5), hl.b_gen(z[0]))
        out["shared_task_out"] = shared
        out["kernels"] = list(conv.kernels())
    out["z_grad"] = conv.z.grad
    out["conv"] = params(conv)
    out["hl"] = params(hl)
    return out


@program(rtol=5e-4, atol=5e-5)
def learned_optimizer_mlp_unrolled(torch):
    # learning to learn by gradient descent (coordinatewise, MLP instead of LSTM): log-scaled
    # gradient preprocessing, unrolled optimizee steps, meta-loss = sum of optimizee losses,
    # truncated BPTT through the updates (gradients of the optimizee detached, as in the paper)
    nn = torch.nn
    P = 10.0

    class LearnedOpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))

        def forward(self, g, theta):
            big = g.abs() >= math.exp(-P)
            f1 = torch.where(big, torch.log(g.abs() + 1e-8) / P, -torch.ones_like(g))
            f2 = torch.where(big, torch.sign(g), math.exp(P) * g)
            feats = torch.stack([f1, f2, theta], dim=-1)
            return 0.1 * self.net(feats).squeeze(-1)

    opt_net = set_weights(torch, LearnedOpt(), seed=21)
    meta_opt = torch.optim.Adam(opt_net.parameters(), lr=3e-3)
    Ws, ys = torch.tensor(arr(22, 3, 8, 6, scale=0.4)), torch.tensor(arr(23, 3, 8))

    def f(theta, t):
        return ((Ws[t] @ theta - ys[t]) ** 2).sum()

    out = {"meta_losses": [], "traj": []}
    for it in range(3):
        t = it % 3
        theta = torch.zeros(6, requires_grad=True)
        meta_loss = 0
        for _ in range(4):
            loss = f(theta, t)
            meta_loss = meta_loss + loss
            (g,) = torch.autograd.grad(loss, theta, create_graph=True)
            theta = theta + opt_net(g.detach(), theta)
        meta_loss = meta_loss + f(theta, t)
        meta_opt.zero_grad()
        meta_loss.backward()
        torch.nn.utils.clip_grad_norm_(opt_net.parameters(), 1.0)
        meta_opt.step()
        out["meta_losses"].append(meta_loss.item())
    with torch.no_grad():
        theta = torch.zeros(6)
        for _ in range(5):
            theta.requires_grad_(True)
            with torch.enable_grad():
                (g,) = torch.autograd.grad(f(theta, 0), theta)
            theta = theta.detach() + opt_net(g, theta.detach())
            out["traj"].append(f(theta, 0))
    out["params"] = params(opt_net)
    out["theta"] = theta
    return out


@program(rtol=5e-4, atol=5e-5)
def unrolled_hypergradient_learning_rate(torch):
    # gradient-based hyperparameter optimisation: differentiate the validation loss after K unrolled
    # SGD steps (functional_call on a params dict) w.r.t. log learning rate and log weight decay
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(
        torch, nn.Sequential(nn.Linear(5, 12), nn.Tanh(), nn.Linear(12, 3)), seed=24
    )
    init = {k: v.detach().clone() for k, v in model.named_parameters()}
    Xtr, ytr = torch.tensor(arr(25, 20, 5)), torch.tensor(ints(26, 3, 20))
    Xva, yva = torch.tensor(arr(27, 15, 5)), torch.tensor(ints(28, 3, 15))
    log_lr = torch.tensor(math.log(0.3), requires_grad=True)
    log_wd = torch.tensor(math.log(1e-2), requires_grad=True)
    hyper_opt = torch.optim.Adam([log_lr, log_wd], lr=0.05)
    out = {"val": [], "lr": [], "wd": [], "hypergrads": []}
    for _ in range(3):
        p = {k: v.clone().requires_grad_(True) for k, v in init.items()}
        lr, wd = log_lr.exp(), log_wd.exp()
        for _ in range(4):
            logits = torch.func.functional_call(model, p, (Xtr,))
            train_loss = F.cross_entropy(logits, ytr) + wd * sum((w**2).sum() for w in p.values())
            g = torch.autograd.grad(train_loss, list(p.values()), create_graph=True)
            p = {name: w - lr * gi for (name, w), gi in zip(p.items(), g)}
        val_loss = F.cross_entropy(torch.func.functional_call(model, p, Xva), yva)
        hyper_opt.zero_grad()
        val_loss.backward()
        out["hypergrads"].append(torch.stack([log_lr.grad, log_wd.grad]).clone())
        hyper_opt.step()
        out["val"].append(val_loss.item())
        out["lr"].append(log_lr.exp().item())
        out["wd"].append(log_wd.exp().item())
    out["final_params"] = {k: v.detach() for k, v in p.items()}
    out["model_untouched"] = all(p_.grad is None for p_ in model.parameters())
    return out


@program(rtol=5e-4, atol=5e-5)
def hessian_and_gauss_newton_vector_products(torch):
    # HVP by double backward (grad_outputs= and the dot-product form), forward-over-reverse with
    # torch.func.jvp, GGN products J^T H_out J v via the double-vjp trick, power iteration
    nn, F = torch.nn, torch.nn.functional
    model = set_weights(
        torch, nn.Sequential(nn.Linear(4, 10), nn.Tanh(), nn.Linear(10, 3)), seed=29
    )
    X, y = torch.tensor(arr(30, 16, 4)), torch.tensor(ints(31, 3, 16))
    ps = list(model.parameters())
    v = [torch.tensor(arr(32 + i, *p.shape)) for i, p in enumerate(ps)]
    loss = F.cross_entropy(model(X), y)
    g = torch.autograd.grad(loss, ps, create_graph=True)
    Hv = torch.autograd.grad(g, ps, grad_outputs=v, retain_graph=True)
    Hb = torch.autograd.grad(
        g, ps, grad_outputs=[torch.stack([vi, -2 * vi, vi.flip(0)]) for vi in v],
        retain_graph=True, is_grads_batched=True,
    )  # fmt: skip
    gv = sum((gi * vi).sum() for gi, vi in zip(g, v))
    Hv2 = torch.autograd.grad(gv, ps)

    names = [n for n, _ in model.named_parameters()]

    def loss_fn(pd):
        return F.cross_entropy(torch.func.functional_call(model, pd, (X,)), y)

    pd = {n: p.detach() for n, p in zip(names, ps)}
    _, Hv3 = torch.func.jvp(torch.func.grad(loss_fn), (pd,), (dict(zip(names, v)),))

    def ggn(vec):
        out = model(X)
        u = torch.zeros_like(out, requires_grad=True)
        JTu = torch.autograd.grad(out, ps, grad_outputs=u, create_graph=True)
        (Jv,) = torch.autograd.grad(JTu, u, grad_outputs=vec)
        lo = F.cross_entropy(out, y)
        (gout,) = torch.autograd.grad(lo, out, create_graph=True)
        (HJv,) = torch.autograd.grad(gout, out, grad_outputs=Jv)
        return torch.autograd.grad(out, ps, grad_outputs=HJv), Jv

    Gv, Jv = ggn(v)
    vGv = sum((a * b).sum() for a, b in zip(Gv, v))
    vHv = sum((a * b).sum() for a, b in zip(Hv, v))

    def hvp(vec):
        lo = F.cross_entropy(model(X), y)
        gg = torch.autograd.grad(lo, ps, create_graph=True)
        return torch.autograd.grad(gg, ps, grad_outputs=vec)

    u = [vi.clone() for vi in v]
    eig = []
    for _ in range(6):
        norm = torch.sqrt(sum((ui**2).sum() for ui in u))
        u = [ui / norm for ui in u]
        Hu = hvp(u)
        eig.append(sum((a * b).sum() for a, b in zip(Hu, u)).item())
        u = [h.detach() for h in Hu]
    x0 = X[0].clone()

    def loss_in_x(x):
        return F.cross_entropy(model(x.unsqueeze(0)), y[:1])

    with torch.no_grad():
        Hx = torch.func.hessian(loss_in_x)(x0)
    _, hvp_x = torch.autograd.functional.hvp(loss_in_x, x0, torch.ones(4))
    return {"Hb": list(Hb), "Hx": Hx, "hvp_x": hvp_x,
            "Hv": list(Hv), "Hv2": list(Hv2), "Hv3": Hv3, "Gv": list(Gv), "Jv": Jv,
            "vGv": vGv, "vHv": vHv, "psd": bool(vGv >= 0), "eig": eig,
            "grad": [gi.detach() for gi in g]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def implicit_ridge_meta_learning(torch):
    # R2D2 / MetaOptNet-style: differentiable closed-form ridge head on support embeddings
    # (Woodbury form with torch.linalg.solve), learned log lambda and scale; plus the implicit
    # function theorem hypergradient of a ridge inner problem vs autograd through solve/cholesky
    nn, F = torch.nn, torch.nn.functional
    NW, K, NQ, D, E = 3, 4, 3, 8, 6
    enc = set_weights(torch, nn.Sequential(nn.Linear(D, 16), nn.ReLU(), nn.Linear(16, E)), seed=40)
    log_lam = nn.Parameter(torch.tensor(0.0))
    scale = nn.Parameter(torch.tensor(1.0))
    opt = torch.optim.Adam([*enc.parameters(), log_lam, scale], lr=2e-3)
    ys = torch.arange(NW).repeat_interleave(K)
    yq = torch.arange(NW).repeat_interleave(NQ)
    Ys = F.one_hot(ys, NW).float()
    out = {"losses": []}
    for ep in range(3):
        xs, xq = (torch.from_numpy(a) for a in _episode(41 + ep, NW, K, NQ, D))
        zs, zq = enc(xs), enc(xq)
        n = zs.shape[0]
        A = zs @ zs.T + log_lam.exp() * torch.eye(n)
        alpha = torch.linalg.solve(A, Ys)
        W = zs.T @ alpha
        logits = scale * (zq @ W)
        loss = F.cross_entropy(logits, yq)
        opt.zero_grad()
        loss.backward()
        opt.step()
        out["losses"].append(loss.item())
    out["W"] = W.detach()
    out["enc"] = params(enc)
    out["lam"] = log_lam.exp()
    out["scale"] = scale

    # ridge inner problem w*(lam) = argmin ||Xw - y||^2 + lam ||w||^2, validation loss of w*
    Xtr, ytr = torch.tensor(arr(45, 20, 5)), torch.tensor(arr(46, 20))
    Xva, yva = torch.tensor(arr(47, 10, 5)), torch.tensor(arr(48, 10))
    lam = torch.tensor(0.7, requires_grad=True)
    Hm = Xtr.T @ Xtr + lam * torch.eye(5)
    w_star = torch.linalg.solve(Hm, Xtr.T @ ytr)
    val = ((Xva @ w_star - yva) ** 2).mean()
    (auto,) = torch.autograd.grad(val, lam, retain_graph=True)
    with torch.no_grad():
        gw = 2 * Xva.T @ (Xva @ w_star - yva) / Xva.shape[0]
        Hd = Hm.detach()
        dw_dlam = -torch.linalg.solve(Hd, w_star)
        implicit = gw @ dw_dlam
        v = torch.linalg.solve(Hd, gw)  # adjoint form: -v^T d(grad_w inner)/d lam
        adjoint = -(v @ w_star)
    L = torch.linalg.cholesky(Xtr.T @ Xtr + lam * torch.eye(5))
    w_chol = torch.cholesky_solve((Xtr.T @ ytr).unsqueeze(-1), L).squeeze(-1)
    val2 = ((Xva @ w_chol - yva) ** 2).mean()
    (auto_chol,) = torch.autograd.grad(val2, lam)
    A_aug = torch.cat([Xtr, lam.sqrt() * torch.eye(5)])
    b_aug = torch.cat([ytr, torch.zeros(5)]).unsqueeze(-1)
    w_lstsq = torch.linalg.lstsq(A_aug, b_aug).solution.squeeze(-1)
    (auto_lstsq,) = torch.autograd.grad(((Xva @ w_lstsq - yva) ** 2).mean(), lam)
    out.update(w_star=w_star, val=val, auto=auto, implicit=implicit, adjoint=adjoint,
               w_chol=w_chol, auto_chol=auto_chol, w_lstsq=w_lstsq, auto_lstsq=auto_lstsq)  # fmt: skip
    return out


@program(rtol=5e-4, atol=5e-5)
def deep_equilibrium_fixed_point_backward_hook(torch):
    # the DEQ tutorial (Kolter, Duvenaud, Johnson): forward fixed point under no_grad, one more
    # f application with grad, and a backward hook that solves the adjoint fixed point with
    # autograd.grad(f0, z0, y); compared with the exact implicit gradient through linalg.solve
    nn, F = torch.nn, torch.nn.functional
    H, D = 6, 4

    class TanhFixedPointLayer(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(H, H, bias=False)
            self.inj = nn.Linear(D, H)

        def forward(self, z, x):
            return torch.tanh(self.linear(z) + self.inj(x))

    def forward_iteration(f, x0, iters=40):
        z = x0
        res = []
        for _ in range(iters):
            z_next = f(z)
            res.append((z_next - z).norm().item() / (1e-5 + z_next.norm().item()))
            z = z_next
        return z, res

    class DEQFixedPoint(nn.Module):
        def __init__(self, f, solver):
            super().__init__()
            self.f, self.solver = f, solver

        def forward(self, x):
            with torch.no_grad():
                z, self.forward_res = self.solver(
                    lambda z: self.f(z, x), torch.zeros(x.shape[0], H)
                )
            z = self.f(z, x)
            z0 = z.clone().detach().requires_grad_()
            f0 = self.f(z0, x)

            def backward_hook(grad):
                g, self.backward_res = self.solver(
                    lambda y: torch.autograd.grad(f0, z0, y, retain_graph=True)[0] + grad, grad
                )
                return g

            z.register_hook(backward_hook)
            return z

    f = set_weights(torch, TanhFixedPointLayer(), seed=50)
    with torch.no_grad():
        f.linear.weight.mul_(0.8)
    deq = DEQFixedPoint(f, forward_iteration)
    head = set_weights(torch, nn.Linear(H, 3), seed=51)
    model = nn.Sequential(deq, head)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    X, y = torch.tensor(arr(52, 8, D)), torch.tensor(ints(53, 3, 8))
    out = {"losses": [], "fwd_res": [], "bwd_res": []}
    for _ in range(2):
        loss = F.cross_entropy(model(X), y)
        opt.zero_grad()
        loss.backward()
        out["grads_hook"] = {k: v.clone() for k, v in grads(model).items()}
        opt.step()
        out["losses"].append(loss.item())
        out["fwd_res"].append(deq.forward_res[-1] < 1e-4)
        out["bwd_res"].append(deq.backward_res[-1] < 1e-4)

    # exact implicit gradient: dz*/dtheta via (I - df/dz)^{-T} per sample
    with torch.no_grad():
        z, _ = forward_iteration(lambda z: f(z, X), torch.zeros(8, H))
    z = z.requires_grad_()
    fz = f(z, X)
    lo = F.cross_entropy(head(fz), y)
    (dl_dz,) = torch.autograd.grad(lo, fz, retain_graph=True)
    s = 1 - fz.detach() ** 2  # tanh'
    Jf = s.unsqueeze(-1) * f.linear.weight.detach().unsqueeze(0)  # (B, H, H) df/dz per sample
    eye = torch.eye(H).expand(8, H, H)
    w = torch.linalg.solve((eye - Jf).transpose(1, 2), dl_dz.unsqueeze(-1)).squeeze(-1)
    implicit = torch.autograd.grad(fz, [f.linear.weight, f.inj.weight, f.inj.bias], grad_outputs=w)
    out["implicit"] = list(implicit)
    out["z_star"] = fz.detach()
    out["params"] = params(model)
    return out


@program(rtol=5e-4, atol=5e-5)
def wgan_gp_training_and_dpsgd_per_sample_clipping(torch):
    # WGAN-GP alternating updates (n_critic=2, Adam betas (0.5, 0.9), penalty on interpolates with
    # grad_outputs=ones_like) and DP-SGD: per-sample gradient norms by vmap(grad) and by a loop,
    # per-sample clipping, Gaussian noise from NumPy, averaged update
    nn, F = torch.nn, torch.nn.functional
    G = set_weights(torch, nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2)), seed=60)
    Dn = set_weights(
        torch,
        nn.Sequential(nn.Linear(2, 16), nn.LeakyReLU(0.2), nn.Linear(16, 16), nn.Tanh(),
                      nn.Linear(16, 1)),
        seed=61,
    )  # fmt: skip
    opt_g = torch.optim.Adam(G.parameters(), lr=1e-3, betas=(0.5, 0.9))
    opt_d = torch.optim.Adam(Dn.parameters(), lr=1e-3, betas=(0.5, 0.9))
    out = {"d_losses": [], "g_losses": [], "gps": []}
    for it in range(2):
        for c in range(2):
            real = torch.tensor(arr(62 + 10 * it + c, 8, 2) + np.float32(1.5))
            z = torch.tensor(arr(63 + 10 * it + c, 8, 3))
            fake = G(z).detach()
            alpha = torch.tensor(np.random.default_rng(64 + it).random((8, 1)).astype(np.float32))
            interpolates = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
            d_interp = Dn(interpolates)
            gradients = torch.autograd.grad(
                outputs=d_interp, inputs=interpolates, grad_outputs=torch.ones_like(d_interp),
                create_graph=True, retain_graph=True, only_inputs=True,
            )[0]  # fmt: skip
            gradients = gradients.view(gradients.size(0), -1)
            gp = ((gradients.norm(2, dim=1) - 1) ** 2).mean() * 10
            d_loss = Dn(fake).mean() - Dn(real).mean() + gp
            opt_d.zero_grad()
            d_loss.backward()
            opt_d.step()
            out["d_losses"].append(d_loss.item())
            out["gps"].append(gp.item())
        g_loss = -Dn(G(torch.tensor(arr(70 + it, 8, 3)))).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
        out["g_losses"].append(g_loss.item())
    out["G"] = params(G)
    out["D"] = params(Dn)

    clf = set_weights(torch, nn.Sequential(nn.Linear(5, 8), nn.Tanh(), nn.Linear(8, 3)), seed=80)
    X, y = torch.tensor(arr(81, 10, 5)), torch.tensor(ints(82, 3, 10))
    C, sigma, lr = 0.5, 0.8, 0.1
    noise = arr(83, 2, sum(p.numel() for p in clf.parameters()), scale=1.0)

    def compute_loss(pd, xb, yb):
        logits = torch.func.functional_call(clf, pd, (xb.unsqueeze(0),))
        return F.cross_entropy(logits, yb.unsqueeze(0))

    # Opacus-style per-sample norms for Linear layers: forward hooks keep the activations,
    # full backward hooks the output gradients, per-sample weight grads are their outer products
    acts, gouts = {}, {}
    handles = []

    def save_act(i):
        return lambda module, inp, output: acts.__setitem__(i, inp[0].detach())

    def save_gout(i):
        return lambda module, grad_in, grad_out: gouts.__setitem__(i, grad_out[0].detach())

    for i in (0, 2):
        handles.append(clf[i].register_forward_hook(save_act(i)))
        handles.append(clf[i].register_full_backward_hook(save_gout(i)))
    F.cross_entropy(clf(X), y, reduction="sum").backward()
    sq = 0
    for i in (0, 2):
        gw = torch.einsum("bo,bi->boi", gouts[i], acts[i])
        sq = sq + gw.pow(2).sum((1, 2)) + gouts[i].pow(2).sum(1)
    out["hook_norms"] = sq.sqrt()
    for h in handles:
        h.remove()
    clf.zero_grad(set_to_none=True)
    norms_vmap, norms_loop = [], []
    for step in range(2):
        pd = {k: v.detach() for k, v in clf.named_parameters()}
        per = torch.func.vmap(torch.func.grad(compute_loss), in_dims=(None, 0, 0))(pd, X, y)
        flat = torch.cat([g.reshape(X.shape[0], -1) for g in per.values()], dim=1)
        norms = flat.norm(dim=1)
        loop = []
        for i in range(X.shape[0]):
            li = F.cross_entropy(clf(X[i : i + 1]), y[i : i + 1])
            gi = torch.autograd.grad(li, list(clf.parameters()))
            loop.append(torch.sqrt(sum((g**2).sum() for g in gi)))
        factor = (C / (norms + 1e-6)).clamp(max=1.0)
        summed = (flat * factor[:, None]).sum(0) + sigma * C * torch.from_numpy(noise[step])
        update = summed / X.shape[0]
        with torch.no_grad():
            vec = nn.utils.parameters_to_vector(clf.parameters())
            nn.utils.vector_to_parameters(vec - lr * update, clf.parameters())
        norms_vmap.append(norms)
        norms_loop.append(torch.stack(loop))
    out.update(norms_vmap=norms_vmap, norms_loop=norms_loop, clf=params(clf))
    return out
