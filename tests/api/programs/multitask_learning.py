"""Multi-task learning and gradient surgery as the reference code of the methods writes it:
shared-bottom networks and MMoE with per-task softmax gates, per-task gradients gathered with
``loss.backward(retain_graph=True)`` or ``torch.autograd.grad`` and flattened with
``torch.cat([g.flatten() ...])``, then combined and written back into ``p.grad`` before the
optimizer step: PCGrad's projection of conflicting gradients, GradNorm's learned task weights,
MGDA's Frank-Wolfe min-norm solver on the shared representation's gradients, Kendall et al.'s
uncertainty weighting, CAGrad with its inner softmax-weight optimisation, IMTL-G, a Nash-MTL
fixed point and Aligned-MTL's eigen-decomposition, GradVac and per-task cosine similarities,
GradDrop on detached representation copies, dynamic weight average, and LibMTL-style weighting
classes. Every random draw (PCGrad's shuffles, GradDrop's thresholds, RLW's weights) comes from
NumPy."""

from __future__ import annotations

import copy
import math

import numpy as np

from programs import program
from programs.common import arr, grads, ints, params, set_weights


def _shared_bottom(torch, heads=(1, 3), seed=0, n_in=6, hidden=10, rep=8):
    nn = torch.nn

    class SharedBottom(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Sequential(
                nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, rep), nn.Tanh()
            )
            self.heads = nn.ModuleList([nn.Linear(rep, k) for k in heads])

        def forward(self, x):
            z = self.shared(x)
            return [head(z) for head in self.heads]

    return set_weights(torch, SharedBottom(), seed)


def _data(torch, seed, n=16, n_in=6):
    x = torch.tensor(arr(seed, n, n_in))
    y_reg = torch.tensor(arr(seed + 1, n, 1))
    y_cls = torch.tensor(ints(seed + 2, 3, n))
    y_bin = torch.tensor((arr(seed + 3, n, 1) > 0).astype(np.float32))
    return x, y_reg, y_cls, y_bin


def _task_losses(torch, outs, y_reg, y_cls, y_bin):
    F = torch.nn.functional
    losses = [F.mse_loss(outs[0], y_reg), F.cross_entropy(outs[1], y_cls)]
    if len(outs) > 2:
        losses.append(F.binary_cross_entropy_with_logits(outs[2], y_bin))
    return losses


@program
def mtl_pcgrad_projection_and_flat_grad_write_back(torch):
    """PCGrad as its PyTorch wrapper writes it: per task ``zero_grad(set_to_none=True)`` then
    ``backward(retain_graph=True)``, the gradients retrieved (zeros and a zero ``has_grad`` mask
    for the other tasks' heads, whose ``.grad`` is ``None``), flattened with ``torch.cat``,
    deep-copied and projected in place onto the normal plane of every conflicting task gradient
    (task order shuffled), merged (mean where every task has a gradient, sum elsewhere, through
    boolean-mask assignment), unflattened with ``view(shape).clone()`` and written into
    ``p.grad`` before an SGD-momentum step."""
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=1)
    x, y_reg, y_cls, y_bin = _data(torch, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(5)

    def retrieve_grad():
        grad, shape, has_grad = [], [], []
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    shape.append(p.shape)
                    grad.append(torch.zeros_like(p))
                    has_grad.append(torch.zeros_like(p))
                    continue
                shape.append(p.grad.shape)
                grad.append(p.grad.clone())
                has_grad.append(torch.ones_like(p))
        return grad, shape, has_grad

    def flatten_grad(gs):
        return torch.cat([g.flatten() for g in gs])

    def unflatten_grad(flat, shapes):
        out, idx = [], 0
        for shape in shapes:
            length = int(np.prod(shape))
            out.append(flat[idx : idx + length].view(shape).clone())
            idx += length
        return out

    def project_conflicting(task_grads, has_grads):
        shared = torch.stack(has_grads).prod(0).bool()
        pc_grad = copy.deepcopy(task_grads)
        conflicts = 0
        for g_i in pc_grad:
            for j in rng.permutation(len(task_grads)):
                g_j = task_grads[j]
                g_i_g_j = torch.dot(g_i, g_j)
                if g_i_g_j < 0:
                    g_i -= g_i_g_j * g_j / (g_j.norm() ** 2)
                    conflicts += 1
        merged = torch.zeros_like(task_grads[0])
        merged[shared] = torch.stack([g[shared] for g in pc_grad]).mean(dim=0)
        merged[~shared] = torch.stack([g[~shared] for g in pc_grad]).sum(dim=0)
        return merged, conflicts, shared

    history, conflicts, first = [], [], {}
    for step in range(3):
        losses = _task_losses(torch, model(x), y_reg, y_cls, y_bin)
        task_grads, has_grads, shapes = [], [], []
        for loss in losses:
            opt.zero_grad(set_to_none=True)
            loss.backward(retain_graph=True)
            g, shapes, h = retrieve_grad()
            task_grads.append(flatten_grad(g))
            has_grads.append(flatten_grad(h))
        merged, n, shared = project_conflicting(task_grads, has_grads)
        new_grads = unflatten_grad(merged, shapes)
        idx = 0
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad = new_grads[idx]
                idx += 1
        if step == 0:
            first = {"merged": merged, "shared": shared, "task_grads": torch.stack(task_grads)}
        opt.step()
        history.append(torch.stack([loss.detach() for loss in losses]))
        conflicts.append(n)
    return {"losses": torch.stack(history), "conflicts": conflicts, "first": first,
            "grads": grads(model), "params": params(model)}  # fmt: skip


@program
def mtl_gradnorm_learned_task_weights(torch):
    """GradNorm (Chen et al.) as its reference implementations write it: task weights as an
    ``nn.Parameter`` with their own Adam, the weighted loss backpropagated with
    ``retain_graph=True``, each weighted task loss's gradient norm at the last shared layer by
    ``torch.autograd.grad(..., create_graph=True)``, inverse training rates against the first
    step's losses, the L1 GradNorm loss against a detached target whose gradient with respect to
    the weights replaces ``weights.grad``, and the weights renormalised to sum to the number of
    tasks through ``.data``."""
    F = torch.nn.functional
    model = _shared_bottom(torch, heads=(1, 3), seed=2)
    x, y_reg, y_cls, _ = _data(torch, 20)
    T, alpha = 2, 1.5
    weights = torch.nn.Parameter(torch.ones(T).float())
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    opt_w = torch.optim.Adam([weights], lr=0.05)
    last_shared = model.shared[2].weight
    out = {"losses": [], "weights": [], "gw": [], "gradnorm_loss": [], "rt": []}
    for step in range(4):
        outs = model(x)
        task_losses = torch.stack([F.mse_loss(outs[0], y_reg), F.cross_entropy(outs[1], y_cls)])
        if step == 0:
            l0 = task_losses.detach()
        weighted_loss = weights @ task_losses
        opt.zero_grad()
        weighted_loss.backward(retain_graph=True)
        gw = []
        for i in range(T):
            dl = torch.autograd.grad(
                weights[i] * task_losses[i], last_shared, retain_graph=True, create_graph=True
            )[0]
            gw.append(torch.norm(dl))
        gw = torch.stack(gw)
        loss_ratio = task_losses.detach() / l0
        rt = loss_ratio / loss_ratio.mean()
        gw_avg = gw.mean().detach()
        constant = (gw_avg * rt**alpha).detach()
        gradnorm_loss = torch.abs(gw - constant).sum()
        weights.grad = torch.autograd.grad(gradnorm_loss, weights)[0]
        opt.step()
        opt_w.step()
        normalize_coeff = T / torch.sum(weights.data, dim=0)
        weights.data = weights.data * normalize_coeff
        out["losses"].append(task_losses.detach())
        out["weights"].append(weights.detach().clone())
        out["gw"].append(gw.detach())
        out["gradnorm_loss"].append(gradnorm_loss.item())
        out["rt"].append(rt)
    out = {k: torch.stack(v) if k != "gradnorm_loss" else v for k, v in out.items()}
    return {**out, "params": params(model), "adam_w_state": opt_w.state[weights]["exp_avg_sq"]}


@program
def mtl_mgda_ub_frank_wolfe_min_norm_solver(torch):
    """MGDA-UB (Sener & Koltun): the shared representation is cloned into a leaf
    (``rep.detach().clone().requires_grad_(True)``), each task's head and loss backpropagated to
    it alone and ``rep_variable.grad`` cloned then zeroed; the gradients normalised by
    ``loss * norm`` ('loss+'); the min-norm convex combination found by the Frank-Wolfe solver
    (best pair from the 2-task closed form, then line searches toward the vertex of smallest
    ``grad_mat @ sol``, stopping when the change is below ``STOP_CRIT``); the solution scales the
    task losses of a fresh forward pass."""
    F = torch.nn.functional
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=3)
    x, y_reg, y_cls, y_bin = _data(torch, 30)
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    MAX_ITER, STOP_CRIT = 40, 1e-5

    def min_norm_element_from2(v1v1, v1v2, v2v2):
        if v1v2 >= v1v1:
            return 0.999, v1v1
        if v1v2 >= v2v2:
            return 0.001, v2v2
        gamma = -1.0 * ((v1v2 - v2v2) / (v1v1 + v2v2 - 2 * v1v2))
        cost = v2v2 + gamma * (v1v2 - v2v2)
        return gamma, cost

    def min_norm_2d(grad_mat):
        dmin, sol = 1e8, None
        n = grad_mat.size()[0]
        for i in range(n):
            for j in range(i + 1, n):
                c, d = min_norm_element_from2(grad_mat[i, i], grad_mat[i, j], grad_mat[j, j])
                if d < dmin:
                    dmin, sol = d, [(i, j), c, d]
        return sol

    def find_min_norm_element_fw(vecs):
        grad_mat = vecs.mm(vecs.t())
        init_sol = min_norm_2d(grad_mat)
        n = vecs.size()[0]
        sol_vec = torch.zeros(n, dtype=vecs.dtype)
        sol_vec[init_sol[0][0]] = init_sol[1]
        sol_vec[init_sol[0][1]] = 1 - init_sol[1]
        iters = 0
        while iters < MAX_ITER:
            t_iter = torch.argmin(torch.matmul(grad_mat, sol_vec))
            v1v1 = torch.dot(sol_vec, torch.matmul(grad_mat, sol_vec))
            v1v2 = torch.dot(sol_vec, grad_mat[:, t_iter])
            v2v2 = grad_mat[t_iter, t_iter]
            nc, nd = min_norm_element_from2(v1v1, v1v2, v2v2)
            new_sol_vec = nc * sol_vec
            new_sol_vec[t_iter] += 1 - nc
            change = new_sol_vec - sol_vec
            iters += 1
            if torch.sum(torch.abs(change)) < STOP_CRIT:
                return new_sol_vec, nd, iters
            sol_vec = new_sol_vec
        return sol_vec, nd, iters

    targets = [y_reg, y_cls, y_bin]
    loss_fns = [F.mse_loss, F.cross_entropy, F.binary_cross_entropy_with_logits]
    out = {"sol": [], "min_norm": [], "iters": [], "loss": [], "gn": []}
    for _ in range(3):
        opt.zero_grad()
        with torch.no_grad():
            rep = model.shared(x)
        rep_variable = rep.detach().clone().requires_grad_(True)
        task_grads, loss_data = [], []
        for t, head in enumerate(model.heads):
            opt.zero_grad()
            loss = loss_fns[t](head(rep_variable), targets[t])
            loss.backward()
            task_grads.append(rep_variable.grad.data.clone().flatten())
            rep_variable.grad.data.zero_()
            loss_data.append(loss.item())
        gn = [loss_data[t] * task_grads[t].pow(2).sum().sqrt().item() for t in range(3)]
        vecs = torch.stack([task_grads[t] / gn[t] for t in range(3)]).double()
        sol, min_norm, iters = find_min_norm_element_fw(vecs)
        opt.zero_grad()
        outs = model(x)
        loss = sum(float(sol[t]) * loss_fns[t](outs[t], targets[t]) for t in range(3))
        loss.backward()
        opt.step()
        out["sol"].append(sol)
        out["min_norm"].append(float(min_norm))
        out["iters"].append(iters)
        out["loss"].append(loss.item())
        out["gn"].append(torch.tensor(gn))
    return {**out, "sol": torch.stack(out["sol"]), "gn": torch.stack(out["gn"]),
            "params": params(model)}  # fmt: skip


@program
def mtl_uncertainty_weighting_kendall(torch):
    """Homoscedastic uncertainty weighting (Kendall, Gal & Cipolla) as an ``nn.Module`` holding
    ``log_vars`` (``exp(-s) * L + s``, with the 1/2 of a Gaussian likelihood for the regression
    task), optimised with the network by Adam in two parameter groups with different learning
    rates; the learned sigmas, the loss module's ``state_dict`` and a ``clip_grad_norm_`` total
    norm are returned."""
    nn = torch.nn

    class MultiTaskLoss(nn.Module):
        def __init__(self, num_tasks, is_regression):
            super().__init__()
            self.is_regression = torch.tensor(is_regression)
            self.log_vars = nn.Parameter(torch.zeros(num_tasks))

        def forward(self, losses):
            stds = (torch.exp(self.log_vars) ** (1 / 2)).to(losses.device)
            coeffs = 1 / ((self.is_regression + 1) * (stds**2))
            return (coeffs * losses + torch.log(stds)).sum()

    model = _shared_bottom(torch, heads=(1, 3, 1), seed=4)
    mtl = MultiTaskLoss(3, [1.0, 0.0, 0.0])
    x, y_reg, y_cls, y_bin = _data(torch, 40)
    opt = torch.optim.Adam(
        [{"params": model.parameters()}, {"params": mtl.parameters(), "lr": 0.1}], lr=0.01
    )
    totals, norms, log_vars = [], [], []
    for _ in range(5):
        opt.zero_grad()
        losses = torch.stack(_task_losses(torch, model(x), y_reg, y_cls, y_bin))
        total = mtl(losses)
        total.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        opt.step()
        totals.append(total.item())
        log_vars.append(mtl.log_vars.detach().clone())
    return {"totals": totals, "grad_norms": torch.stack(norms),
            "log_vars": torch.stack(log_vars), "sigma": torch.exp(0.5 * mtl.log_vars),
            "state": mtl.state_dict(), "params": params(model)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # the inner SGD (lr 25) amplifies float32 rounding of GG
def mtl_cagrad_inner_softmax_weights(torch):
    """CAGrad (Liu et al.) as its multi-task RL code writes it: shared gradients copied into the
    columns of a preallocated ``grads`` matrix by ``grad2vec`` after each task's
    ``backward(retain_graph=True)`` (shared modules zeroed in between, heads accumulating), then
    ``GG = grads.t().mm(grads)``, the inner problem over ``softmax(w)`` solved by SGD with
    momentum keeping the best iterate, the conflict-averse direction rescaled by
    ``1 + alpha**2`` and written back with ``overwrite_grad`` (``view(param.data.size())``)."""
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=5)
    x, y_reg, y_cls, y_bin = _data(torch, 50)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    T, alpha = 3, 0.4
    grad_dims = [p.data.numel() for p in model.shared.parameters()]
    task_grads = torch.zeros(sum(grad_dims), T)

    def grad2vec(task):
        task_grads[:, task].fill_(0.0)
        cnt = 0
        for p in model.shared.parameters():
            if p.grad is not None:
                beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
                en = sum(grad_dims[: cnt + 1])
                task_grads[beg:en, task].copy_(p.grad.data.detach().clone().view(-1))
            cnt += 1

    def overwrite_grad(newgrad):
        newgrad = newgrad * T
        cnt = 0
        for param in model.shared.parameters():
            beg = 0 if cnt == 0 else sum(grad_dims[:cnt])
            en = sum(grad_dims[: cnt + 1])
            param.grad = newgrad[beg:en].contiguous().view(param.data.size()).data.clone()
            cnt += 1

    def cagrad(g):
        GG = g.t().mm(g)
        g0_norm = (GG.mean() + 1e-8).sqrt()
        w = torch.zeros(T, 1, requires_grad=True)
        w_opt = torch.optim.SGD([w], lr=25, momentum=0.5)
        c = (g0_norm * alpha).item()
        w_best, best = None, np.inf
        Gg, objs = GG.mean(1, keepdim=True), []
        for i in range(21):
            w_opt.zero_grad()
            ww = torch.softmax(w, 0)
            obj = ww.t().mm(Gg) + c * (ww.t().mm(GG).mm(ww) + 1e-4).sqrt()
            objs.append(obj.item())
            if obj.item() < best:
                best = obj.item()
                w_best = w.clone()
            if i < 20:
                obj.backward()
                w_opt.step()
        ww = torch.softmax(w_best, 0)
        gw_norm = (ww.t().mm(GG).mm(ww) + 1e-4).sqrt()
        lmbda = c / (gw_norm + 1e-4)
        new = ((1 / T + ww * lmbda).view(-1, 1) * g.t()).sum(0) / (1 + alpha**2)
        return new, ww.view(-1), objs

    out = {"losses": [], "ww": [], "objs": []}
    for _ in range(3):
        opt.zero_grad()
        losses = _task_losses(torch, model(x), y_reg, y_cls, y_bin)
        for i in range(T):
            losses[i].backward(retain_graph=i < T - 1)
            grad2vec(i)
            model.shared.zero_grad()
        g, ww, objs = cagrad(task_grads)
        overwrite_grad(g)
        opt.step()
        out["losses"].append(torch.stack([loss.detach() for loss in losses]))
        out["ww"].append(ww.detach())
        out["objs"].append(objs)
    return {"losses": torch.stack(out["losses"]), "ww": torch.stack(out["ww"]),
            "objs": out["objs"], "task_grads": task_grads, "grads": grads(model),
            "params": params(model)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)  # eigh and the 2x2 inverse of nearly parallel gradients
def mtl_imtl_nash_aligned_weightings(torch):
    """Loss-balancing weightings from the shared gradients as LibMTL writes them: IMTL-G's closed
    form (differences of gradients and of unit gradients, ``torch.inverse``), IMTL-L's learnable
    loss scales (``exp(s) * L - s``), a Nash-MTL bargaining fixed point on the normalised Gram
    matrix (``alpha_i (G^T G alpha)_i = 1``), and Aligned-MTL's whitening by
    ``torch.linalg.eigh`` with a rank tolerance from ``torch.finfo().eps``; IMTL trains the model
    a few steps with its combined shared gradient written back into ``p.grad``."""
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=6)
    x, y_reg, y_cls, y_bin = _data(torch, 60)
    loss_scale = torch.nn.Parameter(torch.tensor([0.0] * 3))
    opt = torch.optim.SGD([*model.parameters(), loss_scale], lr=0.1)
    shared = list(model.shared.parameters())

    def get_grads(losses):
        rows = []
        for loss in losses:
            gs = torch.autograd.grad(loss, shared, retain_graph=True)
            rows.append(torch.cat([g.flatten() for g in gs]))
        return torch.stack(rows)

    def imtl_g(G):
        unit = G / torch.norm(G, p=2, dim=-1, keepdim=True)
        D = G[0:1].repeat(G.size(0) - 1, 1) - G[1:]
        U = unit[0:1].repeat(G.size(0) - 1, 1) - unit[1:]
        a = torch.matmul(torch.matmul(G[0], U.t()), torch.inverse(torch.matmul(D, U.t())))
        return torch.cat((1 - a.sum().unsqueeze(0), a), dim=0)

    def nash(G, iters=20):
        GTG = torch.mm(G, G.t())
        GTG = GTG / torch.norm(GTG).item()
        a = torch.ones(G.size(0))
        for _ in range(iters):
            a = (a / (GTG @ a).clamp_min(1e-8)).sqrt()
        return a, (a * (GTG @ a) - 1).abs().max()

    def aligned(G):
        M = torch.matmul(G, G.t())
        lmbda, V = torch.linalg.eigh(M, UPLO="L")
        tol = torch.max(lmbda) * max(M.shape[-2:]) * torch.finfo().eps
        rank = int(sum(lmbda > tol))
        order = torch.argsort(lmbda, dim=-1, descending=True)
        lmbda, V = lmbda[order][:rank], V[:, order][:, :rank]
        sigma = torch.diag(1 / lmbda.sqrt())
        B = lmbda[-1].sqrt() * ((V @ sigma) @ V.t())
        return B.sum(0), rank

    out = {"imtl": [], "nash": [], "nash_residual": [], "aligned": [], "rank": [], "loss": []}
    for _ in range(3):
        opt.zero_grad()
        raw = torch.stack(_task_losses(torch, model(x), y_reg, y_cls, y_bin))
        losses = loss_scale.exp() * raw - loss_scale
        G = get_grads(losses)
        a = imtl_g(G)
        n, res = nash(G)
        al, rank = aligned(G)
        losses.sum().backward()
        combined = (a.unsqueeze(1) * G).sum(0)
        beg = 0
        for p in shared:
            p.grad.data = combined[beg : beg + p.numel()].view(p.shape).clone()
            beg += p.numel()
        opt.step()
        out["imtl"].append(a)
        out["nash"].append(n)
        out["nash_residual"].append(res)
        out["aligned"].append(al)
        out["rank"].append(rank)
        out["loss"].append(raw.detach())
    return {k: (torch.stack(v) if k != "rank" else v) for k, v in out.items()} | {
        "loss_scale": loss_scale, "params": params(model)}  # fmt: skip


@program
def mtl_mmoe_expert_gates_training(torch):
    """Multi-gate mixture-of-experts (Ma et al.) as its popular PyTorch port writes it: experts in
    an ``nn.ModuleList``, one gate matrix per task in an ``nn.ParameterList`` (``softmax(x @
    w_gate)``), expert outputs stacked and mixed by ``g.t().unsqueeze(2).expand(...) *
    experts_o`` summed over experts, towers per task; trained with MSE and BCE-with-logits by
    Adam, with the gates' expert usage and their entropy tracked."""
    nn, F = torch.nn, torch.nn.functional
    n_in, n_experts, expert_out, tasks = 6, 3, 5, 2

    class Expert(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(n_in, 8)
            self.fc2 = nn.Linear(8, expert_out)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.fc2(self.relu(self.fc1(x)))

    class Tower(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(expert_out, 4)
            self.fc2 = nn.Linear(4, 1)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))

    class MMoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = nn.ModuleList([Expert() for _ in range(n_experts)])
            self.w_gates = nn.ParameterList(
                [nn.Parameter(torch.zeros(n_in, n_experts)) for _ in range(tasks)]
            )
            self.towers = nn.ModuleList([Tower() for _ in range(tasks)])
            self.softmax = nn.Softmax(dim=1)

        def forward(self, x):
            experts_o = torch.stack([e(x) for e in self.experts])
            gates_o = [self.softmax(x @ g) for g in self.w_gates]
            tower_input = [
                g.t().unsqueeze(2).expand(-1, -1, expert_out) * experts_o for g in gates_o
            ]
            tower_input = [torch.sum(ti, dim=0) for ti in tower_input]
            return [t(ti) for t, ti in zip(self.towers, tower_input)], gates_o

    model = set_weights(torch, MMoE(), 7)
    x, y_reg, _, y_bin = _data(torch, 70)
    opt = torch.optim.Adam(model.parameters(), lr=0.02)
    losses, usage, entropy = [], [], []
    for _ in range(5):
        opt.zero_grad()
        (reg, logit), gates = model(x)
        task_losses = [F.mse_loss(reg, y_reg), F.binary_cross_entropy_with_logits(logit, y_bin)]
        loss = sum(task_losses)
        loss.backward()
        opt.step()
        losses.append(torch.stack(task_losses).detach())
        usage.append(torch.stack([g.mean(0) for g in gates]).detach())
        entropy.append(torch.stack([-(g * g.log()).sum(1).mean() for g in gates]).detach())
    with torch.no_grad():
        (reg, logit), gates = model(x)
    return {"losses": torch.stack(losses), "usage": torch.stack(usage),
            "entropy": torch.stack(entropy), "reg": reg, "prob": torch.sigmoid(logit),
            "top_expert": torch.stack([g.argmax(1) for g in gates]),
            "params": params(model)}  # fmt: skip


@program
def mtl_gradvac_cosine_similarity_and_vector_to_parameters(torch):
    """Per-task gradients of every parameter by ``torch.autograd.grad(..., retain_graph=True,
    allow_unused=True)`` (``None`` for the other heads replaced by ``zeros_like``), the pairwise
    cosine matrix with ``F.cosine_similarity`` on broadcast rows, gradient magnitude similarity
    and conflict counts; GradVac's EMA targets ``rho_hat`` and its correction of pairs below
    target; the summed gradient applied by hand through ``parameters_to_vector`` /
    ``vector_to_parameters`` after clipping."""
    F = torch.nn.functional
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=8)
    x, y_reg, y_cls, y_bin = _data(torch, 80)
    ps = list(model.parameters())
    T, beta, lr = 3, 0.5, 0.1
    rho_hat = torch.zeros(T, T)
    out = {"cos": [], "gms": [], "conflicts": [], "rho_hat": [], "loss": [], "norm": []}
    for _ in range(3):
        losses = _task_losses(torch, model(x), y_reg, y_cls, y_bin)
        flat = []
        for loss in losses:
            gs = torch.autograd.grad(loss, ps, retain_graph=True, allow_unused=True)
            gs = [torch.zeros_like(p) if g is None else g for g, p in zip(gs, ps)]
            flat.append(torch.cat([g.reshape(-1) for g in gs]))
        G = torch.stack(flat)
        cos = F.cosine_similarity(G.unsqueeze(1), G.unsqueeze(0), dim=-1)
        norms = G.norm(dim=1)
        gms = 2 * norms[:, None] * norms[None, :] / (norms[:, None] ** 2 + norms[None, :] ** 2)
        conflicts = int((cos < 0).sum().item()) // 2
        pc = G.clone()
        for i in range(T):
            for j in range(T):
                if i == j:
                    continue
                rho = torch.dot(pc[i], G[j]) / (pc[i].norm() * G[j].norm())
                if rho < rho_hat[i, j]:
                    w = (
                        pc[i].norm()
                        * (
                            rho_hat[i, j] * (1 - rho**2).sqrt()
                            - rho * (1 - rho_hat[i, j] ** 2).sqrt()
                        )
                        / (G[j].norm() * (1 - rho_hat[i, j] ** 2).sqrt())
                    )
                    pc[i] += G[j] * w
                rho_hat[i, j] = (1 - beta) * rho_hat[i, j] + beta * rho
        new = pc.sum(0)
        vec = torch.nn.utils.parameters_to_vector(ps).detach()
        with torch.no_grad():
            vec -= lr * new * torch.clamp(1.0 / (new.norm() + 1e-6), max=1.0)
            torch.nn.utils.vector_to_parameters(vec, ps)
        out["cos"].append(cos)
        out["gms"].append(gms)
        out["conflicts"].append(conflicts)
        out["rho_hat"].append(rho_hat.clone())
        out["loss"].append(torch.stack([loss.detach() for loss in losses]))
        out["norm"].append(new.norm())
    return {k: (torch.stack(v) if k != "conflicts" else v) for k, v in out.items()} | {
        "params": params(model)}  # fmt: skip


@program
def mtl_graddrop_on_detached_representation(torch):
    """GradDrop (Chen et al.) as LibMTL's representation-gradient mode writes it: the encoder's
    output detached and cloned once per task (``requires_grad = True``), each task's loss
    backpropagated into its head and its copy (``retain_graph=True``), the copies' ``.grad``
    stacked, the sign-purity ``P = 0.5 * (1 + sum / sum|.|)`` thresholded by fixed uniform draws
    into masks, and the masked sum sent through the encoder with ``rep.backward(grad)``."""
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=9)
    x, y_reg, y_cls, y_bin = _data(torch, 90)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.5)
    leak = 0.0
    uniforms = np.random.default_rng(11).uniform(size=(3, 16, 8)).astype(np.float32)
    out = {"P": [], "kept": [], "losses": [], "transformed": []}
    for step in range(3):
        opt.zero_grad()
        rep = model.shared(x)
        rep_tasks = []
        for _ in range(3):
            r = rep.detach().clone()
            r.requires_grad = True
            rep_tasks.append(r)
        outs = [head(r) for head, r in zip(model.heads, rep_tasks)]
        losses = _task_losses(torch, outs, y_reg, y_cls, y_bin)
        for loss in losses:
            loss.backward(retain_graph=True)
        per_grads = torch.stack([r.grad for r in rep_tasks])
        P = 0.5 * (1 + per_grads.sum(0) / (per_grads.abs().sum(0) + 1e-7))
        U = torch.from_numpy(uniforms[step])
        M = P.gt(U).unsqueeze(0).repeat(3, 1, 1) * per_grads.gt(0) + P.lt(U).unsqueeze(0).repeat(
            3, 1, 1
        ) * per_grads.lt(0)
        transformed = ((leak + (1 - leak) * M) * per_grads).sum(0)
        rep.backward(transformed)
        opt.step()
        out["P"].append(P)
        out["kept"].append(M.sum(dim=(1, 2)))
        out["losses"].append(torch.stack([loss.detach() for loss in losses]))
        out["transformed"].append(transformed)
    return {k: torch.stack(v) for k, v in out.items()} | {"grads": grads(model),
                                                          "params": params(model)}  # fmt: skip


@program
def mtl_dynamic_weight_average_epochs(torch):
    """Dynamic weight average (Liu et al., MTAN): per-epoch average task losses accumulated from
    ``loss.item()`` in a NumPy buffer, weights from the ratio of the last two epochs' losses
    (``T * softmax(w / temp)``, ones for the first two epochs), the weighted sum of task losses
    trained by SGD over mini-batches of a fixed split."""
    F = torch.nn.functional
    model = _shared_bottom(torch, heads=(1, 3), seed=10)
    x, y_reg, y_cls, _ = _data(torch, 100, n=24)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    n_tasks, epochs, temp, batch = 2, 5, 2.0, 8
    loss_buffer = np.zeros([n_tasks, epochs], dtype=np.float32)
    weights_hist, step_losses = [], []
    for epoch in range(epochs):
        if epoch > 1:
            w_i = torch.Tensor(loss_buffer[:, epoch - 1] / loss_buffer[:, epoch - 2])
            batch_weight = n_tasks * F.softmax(w_i / temp, dim=-1)
        else:
            batch_weight = torch.ones(n_tasks)
        weights_hist.append(batch_weight)
        for b in range(0, len(x), batch):
            xb, yr, yc = x[b : b + batch], y_reg[b : b + batch], y_cls[b : b + batch]
            outs = model(xb)
            train_losses = torch.stack([F.mse_loss(outs[0], yr), F.cross_entropy(outs[1], yc)])
            loss = torch.sum(train_losses * batch_weight)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_buffer[:, epoch] += train_losses.detach().numpy() / (len(x) // batch)
            step_losses.append(loss.item())
    return {"weights": torch.stack(weights_hist), "loss_buffer": loss_buffer,
            "step_losses": step_losses, "params": params(model)}  # fmt: skip


@program
def mtl_libmtl_style_weighting_classes_and_logs(torch):
    """A LibMTL-style weighting hierarchy: an abstract ``backward(losses)`` on a model mixin,
    equal weighting, the geometric loss strategy (``losses.prod() ** (1 / T)``), random loss
    weighting with fixed NumPy draws through ``F.softmax``, and a gradient-norm-scaled weighting
    that reads ``p.grad`` of the shared layer; each trains a copy (``copy.deepcopy``) of one
    model, with per-epoch log lines formatted the way training scripts print them."""
    F = torch.nn.functional
    base = _shared_bottom(torch, heads=(1, 3, 1), seed=11)
    x, y_reg, y_cls, y_bin = _data(torch, 110)
    rlw_draws = np.random.default_rng(12).standard_normal((3, 3)).astype(np.float32)

    class AbsWeighting:
        def __init__(self, model):
            self.model = model
            self.step = 0

        def backward(self, losses):
            raise NotImplementedError

    class EW(AbsWeighting):
        def backward(self, losses):
            loss = torch.mul(losses, torch.ones_like(losses)).sum()
            loss.backward()
            return torch.ones(len(losses))

    class GLS(AbsWeighting):
        def backward(self, losses):
            loss = torch.pow(losses.prod(), 1.0 / len(losses))
            loss.backward()
            return loss.detach() / (len(losses) * losses.detach())

    class RLW(AbsWeighting):
        def backward(self, losses):
            w = F.softmax(torch.from_numpy(rlw_draws[self.step]), dim=-1)
            self.step += 1
            torch.mul(losses, w).sum().backward()
            return w

    class GradNormScaled(AbsWeighting):
        def backward(self, losses):
            layer = self.model.shared[2].weight
            norms = []
            for loss in losses:
                self.model.zero_grad()
                loss.backward(retain_graph=True)
                norms.append(layer.grad.norm().clone())
            w = 1.0 / torch.stack(norms)
            w = w / w.sum() * len(losses)
            self.model.zero_grad()
            (losses * w).sum().backward()
            return w

    results, logs = {}, []
    for name, cls in [("EW", EW), ("GLS", GLS), ("RLW", RLW), ("GN", GradNormScaled)]:
        model = copy.deepcopy(base)
        method = cls(model)
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        ws = []
        for epoch in range(3):
            opt.zero_grad()
            losses = torch.stack(_task_losses(torch, model(x), y_reg, y_cls, y_bin))
            ws.append(method.backward(losses))
            opt.step()
            logs.append(f"{name} | Epoch: {epoch:04d} | " + " ".join(
                f"{v:.3f}" for v in losses.tolist()))  # fmt: skip
        results[name] = {"weights": torch.stack(ws), "params": params(model)}
    return {**results, "log": "\n".join(logs), "base_untouched": params(base)}


@program(rtol=1e-3, atol=1e-5)  # UPGrad's dual iterations accumulate float32 rounding of the Gram
def mtl_jacobian_descent_is_grads_batched_and_jacrev(torch):
    """Jacobian descent as TorchJD writes it: the Jacobian of the task-loss vector with respect to
    the shared parameters in one call, ``torch.autograd.grad(losses, shared, grad_outputs=eye,
    is_grads_batched=True, retain_graph=True)``, checked against a per-task loop and against
    ``torch.func.jacrev`` of a ``functional_call``; aggregated by UPGrad (every row projected onto
    the dual cone by projected gradient on ``u >= e_i``, step ``1 / eigvalsh(G).max()``) and by
    the mean; the update split back with ``torch.split(..., sizes)`` and ``view_as``."""
    functional_call, jacrev = torch.func.functional_call, torch.func.jacrev

    model = _shared_bottom(torch, heads=(1, 3, 1), seed=12)
    x, y_reg, y_cls, y_bin = _data(torch, 120)
    shared = list(model.shared.parameters())
    sizes = [p.numel() for p in shared]
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    m = 3

    def upgrad(J, iters=30):
        G = J @ J.T
        step = 1.0 / torch.linalg.eigvalsh(G).max()
        E = torch.eye(m)
        W = E.clone()
        for _ in range(iters):
            W = torch.maximum(W - step * W @ G, E)
        return J.T @ W.mean(0), W

    out = {"loss": [], "W": [], "dots": [], "loop_err": []}
    for it in range(3):
        opt.zero_grad()
        losses = torch.stack(_task_losses(torch, model(x), y_reg, y_cls, y_bin))
        jac = torch.autograd.grad(
            losses, shared, grad_outputs=torch.eye(m), is_grads_batched=True, retain_graph=True
        )
        J = torch.cat([j.reshape(m, -1) for j in jac], dim=1)
        if it == 0:
            loop = torch.stack([
                torch.cat([g.flatten() for g in torch.autograd.grad(loss, shared, retain_graph=True)])
                for loss in losses
            ])  # fmt: skip

            def compute_losses(p):
                return torch.stack(_task_losses(torch, functional_call(model, p, (x,)), y_reg,
                                                y_cls, y_bin))  # fmt: skip

            pdict = {k: v.detach() for k, v in model.named_parameters()}
            jf = jacrev(compute_losses)(pdict)
            jf_shared = torch.cat([jf[f"shared.{k}"].reshape(m, -1)
                                   for k in ("0.weight", "0.bias", "2.weight", "2.bias")], 1)  # fmt: skip
            first = {"J": J, "loop_diff": (J - loop).abs().max(), "jacrev": jf_shared,
                     "head_jac": jf["heads.1.weight"]}  # fmt: skip
        agg, W = upgrad(J)
        losses.sum().backward()
        for p, g in zip(shared, torch.split(agg, sizes)):
            p.grad = g.view_as(p).clone()
        opt.step()
        out["loss"].append(losses.detach())
        out["W"].append(W)
        out["dots"].append(J @ agg)
        out["loop_err"].append((J.mean(0) - agg).norm())
    return {k: torch.stack(v) for k, v in out.items()} | {"first": first, "params": params(model)}


@program
def mtl_famo_with_cross_stitch_network(torch):
    """FAMO (Liu et al. 2023) on a cross-stitch network (Misra et al.): two task columns mixed after
    every layer by learnable 2x2 cross-stitch units (``torch.einsum("ij,jbd->ibd", alpha,
    torch.stack([a, b]))``); FAMO's weighted log-loss with ``softmax(w)`` and its detached
    normaliser, the shared clipping, and its update of ``w`` from the drop in log-losses
    (``torch.autograd.grad(F.softmax(w, -1), w, grad_outputs=delta)`` then Adam with weight
    decay)."""
    nn, F = torch.nn, torch.nn.functional

    class CrossStitch(nn.Module):
        def __init__(self):
            super().__init__()
            self.col_a = nn.ModuleList([nn.Linear(6, 8), nn.Linear(8, 8)])
            self.col_b = nn.ModuleList([nn.Linear(6, 8), nn.Linear(8, 8)])
            self.alphas = nn.ParameterList([nn.Parameter(torch.eye(2)) for _ in range(2)])
            self.head_a = nn.Linear(8, 1)
            self.head_b = nn.Linear(8, 3)

        def forward(self, x):
            a = b = x
            for la, lb, alpha in zip(self.col_a, self.col_b, self.alphas):
                a, b = torch.relu(la(a)), torch.relu(lb(b))
                a, b = torch.einsum("ij,jbd->ibd", alpha, torch.stack([a, b])).unbind(0)
            return self.head_a(a), self.head_b(b)

    model = set_weights(torch, CrossStitch(), 13)
    with torch.no_grad():
        for alpha in model.alphas:
            alpha.copy_(torch.tensor([[0.9, 0.1], [0.1, 0.9]]))
    x, y_reg, y_cls, _ = _data(torch, 130)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    n_tasks = 2
    min_losses = torch.zeros(n_tasks)
    w = torch.tensor([0.0] * n_tasks, requires_grad=True)
    w_opt = torch.optim.Adam([w], lr=0.025, weight_decay=0.01)

    def compute(model):
        reg, logits = model(x)
        return torch.stack([F.mse_loss(reg, y_reg), F.cross_entropy(logits, y_cls)])

    out = {"losses": [], "z": [], "famo_loss": [], "clip": []}
    for _ in range(4):
        losses = compute(model)
        prev_loss = losses
        z = F.softmax(w, -1)
        D = losses - min_losses + 1e-8
        c = (z / D).sum().detach()
        loss = (D.log() * z / c).sum()
        opt.zero_grad()
        loss.backward()
        out["clip"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        with torch.no_grad():
            curr_loss = compute(model)
        delta = (prev_loss - min_losses + 1e-8).log() - (curr_loss - min_losses + 1e-8).log()
        with torch.enable_grad():
            d = torch.autograd.grad(F.softmax(w, -1), w, grad_outputs=delta.detach())[0]
        w_opt.zero_grad()
        w.grad = d
        w_opt.step()
        out["losses"].append(losses.detach())
        out["z"].append(z.detach())
        out["famo_loss"].append(loss.item())
    return {k: torch.stack(v) if k != "famo_loss" else v for k, v in out.items()} | {
        "w": w, "alphas": [a for a in model.alphas], "params": params(model)}  # fmt: skip


@program
def mtl_ple_cgc_gates_with_gradient_reversal(torch):
    """Progressive layered extraction's customized gate control (Tang et al.): task-specific and
    shared experts stacked to ``[B, E, d]`` and mixed per task by ``torch.bmm(gate.unsqueeze(1),
    experts)``, the shared gate over all experts feeding the next level; an adversarial domain
    task on the shared output through a gradient-reversal ``autograd.Function`` (``x.view_as(x)``
    forward, ``grad.neg() * lambd`` backward) with a schedule ``2 / (1 + exp(-10 p)) - 1``;
    trained by AdamW with the task gates' weights returned."""
    nn, F = torch.nn, torch.nn.functional

    class GradReverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, lambd):
            ctx.lambd = lambd
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output.neg() * ctx.lambd, None

    def expert(d_in, d_out):
        return nn.Sequential(nn.Linear(d_in, d_out), nn.ReLU())

    class CGC(nn.Module):
        def __init__(self, d_in, d_out, n_tasks=2, n_spec=2, n_shared=1, last=False):
            super().__init__()
            self.n_tasks, self.n_spec, self.n_shared, self.last = n_tasks, n_spec, n_shared, last
            self.task_experts = nn.ModuleList(
                [
                    nn.ModuleList([expert(d_in, d_out) for _ in range(n_spec)])
                    for _ in range(n_tasks)
                ]
            )
            self.shared_experts = nn.ModuleList([expert(d_in, d_out) for _ in range(n_shared)])
            self.gates = nn.ModuleList([nn.Linear(d_in, n_spec + n_shared) for _ in range(n_tasks)])
            if not last:
                self.shared_gate = nn.Linear(d_in, n_tasks * n_spec + n_shared)

        def forward(self, inputs):
            shared_out = [e(inputs[-1]) for e in self.shared_experts]
            task_out, outs, gate_ws = [], [], []
            for t in range(self.n_tasks):
                spec = [e(inputs[t]) for e in self.task_experts[t]]
                task_out += spec
                experts = torch.stack(spec + shared_out, dim=1)
                gate = F.softmax(self.gates[t](inputs[t]), dim=-1)
                gate_ws.append(gate)
                outs.append(torch.bmm(gate.unsqueeze(1), experts).squeeze(1))
            if not self.last:
                experts = torch.stack(task_out + shared_out, dim=1)
                gate = F.softmax(self.shared_gate(inputs[-1]), dim=-1)
                outs.append(torch.bmm(gate.unsqueeze(1), experts).squeeze(1))
            return outs, gate_ws

    class PLE(nn.Module):
        def __init__(self):
            super().__init__()
            self.level1 = CGC(6, 8)
            self.level2 = CGC(8, 8, last=False)
            self.towers = nn.ModuleList([nn.Linear(8, 1), nn.Linear(8, 3)])
            self.domain = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 2))

        def forward(self, x, lambd):
            outs, _ = self.level1([x, x, x])
            outs, gates = self.level2(outs)
            preds = [tower(o) for tower, o in zip(self.towers, outs[:2])]
            return preds, self.domain(GradReverse.apply(outs[2], lambd)), gates

    model = set_weights(torch, PLE(), 14)
    x, y_reg, y_cls, _ = _data(torch, 140)
    y_dom = torch.tensor(ints(145, 2, 16))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
    steps = 4
    out = {"losses": [], "lambd": [], "gates": []}
    for step in range(steps):
        p = step / steps
        lambd = 2.0 / (1.0 + math.exp(-10 * p)) - 1
        opt.zero_grad()
        (reg, logits), dom, gates = model(x, lambd)
        losses = torch.stack([F.mse_loss(reg, y_reg), F.cross_entropy(logits, y_cls),
                              F.cross_entropy(dom, y_dom)])  # fmt: skip
        losses.sum().backward()
        if step == 1:
            rev_grad = model.level2.shared_gate.weight.grad.clone()
            dom_grad = model.domain[0].weight.grad.clone()
        opt.step()
        out["losses"].append(losses.detach())
        out["lambd"].append(lambd)
        out["gates"].append(torch.stack([g.mean(0) for g in gates]).detach())
    return {"losses": torch.stack(out["losses"]), "lambd": out["lambd"],
            "gates": torch.stack(out["gates"]), "rev_grad": rev_grad, "dom_grad": dom_grad,
            "params": params(model)}  # fmt: skip


@program
def mtl_task_gradient_hooks_and_autograd_backward(torch):
    """Task-gradient bookkeeping through hooks, as analysis code for shared-bottom models writes
    it: a ``register_hook`` on the shared representation records each task's incoming gradient
    (and rescales it), ``torch.autograd.backward(losses, grad_tensors=[...])`` backpropagates the
    weighted tasks in one call, ``zero_grad(set_to_none=False)`` keeps zeroed buffers that
    ``p.grad.data.add_`` accumulates into, ``clip_grad_norm_(..., foreach=True)`` and
    ``clip_grad_value_`` clip, and a ``@torch.no_grad()`` method logs per-task accuracy."""
    F = torch.nn.functional
    model = _shared_bottom(torch, heads=(1, 3, 1), seed=15)
    x, y_reg, y_cls, y_bin = _data(torch, 150)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, nesterov=True, momentum=0.9)
    weights = [1.0, 0.5, 2.0]
    seen = []

    def record(grad):
        seen.append(grad.detach().clone())
        return grad * 0.5

    @torch.no_grad()
    def evaluate():
        reg, logits, logit_b = model(x)
        return torch.stack([F.l1_loss(reg, y_reg), (logits.argmax(1) == y_cls).float().mean(),
                            ((logit_b > 0).float() == y_bin).float().mean()])  # fmt: skip

    out = {"losses": [], "norms": [], "evals": [], "rep_grad_norm": []}
    for _ in range(3):
        opt.zero_grad(set_to_none=False)
        z = model.shared(x)
        handle = z.register_hook(record)
        outs = [head(z) for head in model.heads]
        losses = _task_losses(torch, outs, y_reg, y_cls, y_bin)
        torch.autograd.backward(losses, grad_tensors=[torch.tensor(w) for w in weights])
        handle.remove()
        for p in model.shared.parameters():
            p.grad.data.add_(p.data, alpha=1e-3)
        out["norms"].append(torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5, foreach=True))
        torch.nn.utils.clip_grad_value_(model.heads.parameters(), 0.05)
        opt.step()
        out["losses"].append(torch.stack(losses).detach())
        out["evals"].append(evaluate())
        out["rep_grad_norm"].append(seen[-1].norm())
    return {k: torch.stack(v) for k, v in out.items()} | {"hook_calls": len(seen),
            "grads": grads(model), "params": params(model)}  # fmt: skip
