"""Learning to rank and optimal transport as their libraries write them: POT's log-domain Sinkhorn
and entropic barycenters, geomloss's debiased Sinkhorn divergence with epsilon scaling, 1-D
Wasserstein distances from sorted samples and quantile functions, sliced Wasserstein with fixed
projections, NeuralSort / SoftSort relaxations, Gumbel-Sinkhorn with fixed noise, top-k through
an entropic transport plan, allRank's ListNet / ListMLE / LambdaLoss / ApproxNDCG / NeuralNDCG
with padded slates, and NDCG@k / MRR / MAP with tied scores.

On ties: PyTorch's CPU ``sort`` keeps equal elements in their original order for rows of at most
16 elements (and always with ``stable=True``); ``topk`` orders tied elements in no documented way
(for ``[.5, .2, .5, .9, .2, .5, .9, .1]`` its top 4 are at ``[6, 3, 5, 2]``). The programs sort
short lists or pass ``stable=True`` where ties decide a result, and use ``topk`` where they do not.
"""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, set_weights


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


PADDED_Y_VALUE = -1.0


# --------------------------------------------------------------------------- optimal transport
@program(rtol=1e-7, atol=1e-9)
def pot_sinkhorn_log_plan_loss_and_batched_histograms(torch):
    """POT's ``sinkhorn_log`` on the torch backend: squared Euclidean costs as ``ot.dist`` builds
    them (``|x|^2 + |y|^2 - 2 x y^T`` clamped at 0) normalised by their max, dual potentials
    updated with ``logsumexp`` over the Gibbs kernel's log, the marginal error checked every 10
    iterations with early stopping, ``sinkhorn2``'s loss ``<T, M>`` differentiated through the
    iterations to the source weights and positions; then several target histograms at once (the
    ``b`` with columns POT accepts) and the barycentric projection of the source points."""
    f64 = torch.float64
    rng = _rng(1)
    xs = torch.tensor(rng.standard_normal((9, 2)), requires_grad=True)
    xt = torch.tensor(rng.standard_normal((11, 2)) * 0.7 + np.array([2.0, -1.0]))
    a = torch.tensor(rng.uniform(0.5, 1.5, 9)).div(1).requires_grad_()
    b = torch.ones(11, dtype=f64) / 11

    def dist(x1, x2):
        a2 = torch.sum(x1**2, 1)
        b2 = torch.sum(x2**2, 1)
        return torch.clamp(a2[:, None] + b2[None, :] - 2 * x1 @ x2.T, min=0)

    def sinkhorn_log(a, b, M, reg, num_iter=1000, stop_thr=1e-9):
        Mr = -M / reg
        u = torch.zeros(M.shape[0], dtype=M.dtype)
        v = torch.zeros(M.shape[1], dtype=M.dtype)
        loga, logb = torch.log(a), torch.log(b)
        errs = []
        for ii in range(num_iter):
            v = logb - torch.logsumexp(Mr + u[:, None], 0)
            u = loga - torch.logsumexp(Mr + v[None, :], 1)
            if ii % 10 == 0:
                tmp2 = torch.sum(torch.exp(Mr + u[:, None] + v[None, :]), 0)
                err = torch.linalg.norm(tmp2 - b)
                errs.append(err.item())
                if err < stop_thr:
                    break
        return torch.exp(Mr + u[:, None] + v[None, :]), {"u": u, "v": v, "err": errs, "n_iter": ii}

    an = a / a.sum()
    M = dist(xs, xt)
    M = M / M.max()
    T, log = sinkhorn_log(an, b, M, reg=0.05)
    loss = torch.sum(T * M)
    loss.backward()
    out = {"T": T, "loss": loss, "u": log["u"], "v": log["v"], "errs": log["err"],
           "n_iter": log["n_iter"], "grad_a": a.grad, "grad_xs": xs.grad,
           "row_marg": T.sum(1) - an, "col_marg": T.sum(0) - b}  # fmt: skip

    with torch.no_grad():
        B = torch.tensor(rng.uniform(0.1, 1.0, (11, 3)))
        B = B / B.sum(0, keepdim=True)
        Mr = -M / 0.05
        U = torch.zeros(9, 3, dtype=f64)
        V = torch.zeros(11, 3, dtype=f64)
        for _ in range(200):
            V = torch.log(B) - torch.logsumexp(Mr[:, :, None] + U[:, None, :], 0)
            U = torch.log(an)[:, None] - torch.logsumexp(Mr[:, :, None] + V[None, :, :], 1)
        Ts = torch.exp(Mr[:, :, None] + U[:, None, :] + V[None, :, :])
        out["batched_losses"] = torch.einsum("ijk,ij->k", Ts, M)
        out["batched_col_err"] = (Ts.sum(0) - B).abs().amax(0)
        out["mapped"] = (T @ xt) / T.sum(1, keepdim=True)
    return out


@program(rtol=2e-4, atol=5e-5)  # float32 logsumexp over 20+ epsilon-scaling steps
def geomloss_sinkhorn_divergence_epsilon_scaling_flow(torch):
    """geomloss's debiased Sinkhorn divergence (``p=2``, cost ``|x-y|^2/2``): a ``softmin``
    written with ``logsumexp``, symmetric updates averaged with the previous potentials, the
    blur annealed from the diameter by ``scaling``, the loop under ``set_grad_enabled(False)``
    and a last extrapolation step with gradients, as the library's ``sinkhorn_loop`` does; then
    the gradient flow of its tutorial (``x -= lr * len(x) * grad``)."""
    x = torch.tensor(arr(11, 16, 2) * 0.5 + np.array([-1.0, 0.0], dtype=np.float32))
    y = torch.tensor(arr(12, 20, 2) * 0.3 + np.array([1.0, 0.5], dtype=np.float32))
    a = torch.ones(16) / 16
    b = torch.ones(20) / 20
    blur, scaling, p = 0.05, 0.5, 2

    def cost(u, v):
        return ((u[:, None, :] - v[None, :, :]) ** 2).sum(-1) / 2

    def softmin(eps, C, h):
        return -eps * torch.logsumexp(h[None, :] - C / eps, dim=1)

    def epsilon_schedule(diameter):
        return ([diameter**p]
                + [math.exp(e) for e in np.arange(p * math.log(diameter), p * math.log(blur),
                                                   p * math.log(scaling))]
                + [blur**p])  # fmt: skip

    def sinkhorn_divergence(x, y):
        C_xy, C_yx = cost(x, y), cost(y, x)
        C_xx, C_yy = cost(x, x), cost(y, y)
        with torch.no_grad():
            lo = torch.min(torch.cat([x, y]).min(0).values)
            hi = torch.max(torch.cat([x, y]).max(0).values)
            diameter = float(torch.sqrt(torch.tensor(2.0)) * (hi - lo))
        eps_list = epsilon_schedule(diameter)
        a_log, b_log = a.log(), b.log()
        torch.autograd.set_grad_enabled(False)
        eps = eps_list[0]
        g_ab = softmin(eps, C_yx, a_log)
        f_ba = softmin(eps, C_xy, b_log)
        f_aa = softmin(eps, C_xx, a_log)
        g_bb = softmin(eps, C_yy, b_log)
        for eps in eps_list:
            ft_ba = softmin(eps, C_xy, b_log + g_ab / eps)
            gt_ab = softmin(eps, C_yx, a_log + f_ba / eps)
            ft_aa = softmin(eps, C_xx, a_log + f_aa / eps)
            gt_bb = softmin(eps, C_yy, b_log + g_bb / eps)
            f_ba, g_ab = 0.5 * (f_ba + ft_ba), 0.5 * (g_ab + gt_ab)
            f_aa, g_bb = 0.5 * (f_aa + ft_aa), 0.5 * (g_bb + gt_bb)
        torch.autograd.set_grad_enabled(True)
        f_ba, g_ab = (softmin(eps, C_xy, (b_log + g_ab / eps).detach()),
                      softmin(eps, C_yx, (a_log + f_ba / eps).detach()))  # fmt: skip
        f_aa = softmin(eps, C_xx, (a_log + f_aa / eps).detach())
        g_bb = softmin(eps, C_yy, (b_log + g_bb / eps).detach())
        return (a * (f_ba - f_aa)).sum() + (b * (g_ab - g_bb)).sum(), len(eps_list)

    losses, n_eps = [], []
    lr = 0.2
    for _ in range(4):
        x.requires_grad_(True)
        loss, n = sinkhorn_divergence(x, y)
        [g] = torch.autograd.grad(loss, [x])
        losses.append(loss.item())
        n_eps.append(n)
        x = (x - lr * len(x) * g).detach()
    return {"losses": losses, "n_eps": n_eps, "x": x, "last_grad": g,
            "mean_gap": x.mean(0) - y.mean(0)}  # fmt: skip


@program(rtol=1e-7, atol=1e-10)
def pot_entropic_barycenters_bregman_log_and_convolutional(torch):
    """Entropic Wasserstein barycenters as POT computes them: ``barycenter_sinkhorn`` (iterative
    Bregman projections, Benamou et al. 2015, the weighted geometric mean ``exp(log(UKv) @ w)``),
    its log-domain version with per-histogram ``logsumexp`` updates, both on 1-D Gaussian-mixture
    histograms for several interpolation weights; then ``convolutional_barycenter2d`` on small
    images with a separable Gaussian kernel applied as ``K @ img @ K``."""
    f64 = torch.float64
    n = 40
    grid = torch.arange(n, dtype=f64)

    def gauss(m, s):
        h = torch.exp(-((grid - m) ** 2) / (2 * s**2))
        return h / h.sum()

    A = torch.stack([gauss(10, 3) * 0.6 + gauss(17, 2) * 0.4, gauss(30, 4)], dim=1)
    M = (grid[:, None] - grid[None, :]) ** 2
    M = M / M.max()
    reg = 2e-3

    def geometric_bar(weights, alldistribT):
        return torch.exp(torch.log(alldistribT) @ weights)

    def barycenter_sinkhorn(A, M, reg, weights, num_iter=50):
        K = torch.exp(-M / reg)
        UKv = K @ (A.T / torch.sum(K, 0)).T
        u = (torch.exp(torch.log(UKv).mean(1)) / UKv.T).T
        for _ in range(num_iter):
            UKv = u * (K.T @ (A / (K @ u)))
            u = (u.T * geometric_bar(weights, UKv)).T / UKv
        return geometric_bar(weights, UKv)

    def barycenter_sinkhorn_log(A, M, reg, weights, num_iter=50):
        n_hists = A.shape[1]
        Mr = -M / reg
        logA = torch.log(A + 1e-300)
        log_KU = torch.zeros_like(A)
        G = torch.zeros_like(A)
        for _ in range(num_iter):
            log_bar = torch.zeros(A.shape[0], dtype=A.dtype)
            for k in range(n_hists):
                f = logA[:, k] - torch.logsumexp(Mr + G[None, :, k], dim=1)
                log_KU[:, k] = torch.logsumexp(Mr + f[:, None], dim=0)
                log_bar = log_bar + weights[k] * log_KU[:, k]
            G = log_bar[:, None] - log_KU
        return torch.exp(log_bar)

    out = {}
    for t in (0.3, 0.7):
        w = torch.tensor([1 - t, t], dtype=f64)
        bar = barycenter_sinkhorn(A, M, reg, w)
        bar_log = barycenter_sinkhorn_log(A, M, reg, w)
        out[f"t={t}"] = {"bar": bar, "bar_log": bar_log, "mass": bar.sum(),
                         "mean": (bar * grid).sum() / bar.sum(), "argmax": bar.argmax()}  # fmt: skip

    side = 12
    yy, xx = torch.meshgrid(torch.arange(side, dtype=f64), torch.arange(side, dtype=f64),
                            indexing="ij")  # fmt: skip
    square = ((yy - 3).abs() <= 2) & ((xx - 3).abs() <= 2)
    disk = (yy - 8) ** 2 + (xx - 8) ** 2 <= 6.0
    imgs = torch.stack([square.to(f64), disk.to(f64)])
    imgs = imgs / imgs.sum((1, 2), keepdim=True)
    t = torch.linspace(0, 1, side, dtype=f64)
    K1 = torch.exp(-((t[:, None] - t[None, :]) ** 2) / 0.004)

    def convol_imgs(imgs):
        kx = torch.einsum("...ij,kjl->kil", K1, imgs)
        return torch.einsum("...ij,klj->kli", K1, kx)

    weights = torch.tensor([0.5, 0.5], dtype=f64)
    bar = torch.ones(side, side, dtype=f64)
    V = torch.ones_like(imgs)
    for _ in range(40):
        U = imgs / convol_imgs(V)
        KU = convol_imgs(U)
        bar = torch.exp(torch.sum(weights[:, None, None] * torch.log(V * KU + 1e-300), 0))
        V = bar[None] / KU
    out["conv_bar"] = bar
    out["conv_mass"] = bar.sum()
    out["conv_center"] = torch.stack([(bar * yy).sum(), (bar * xx).sum()]) / bar.sum()
    return out


@program
def wasserstein_1d_sorted_samples_and_quantile_functions(torch):
    """1-D Wasserstein distances: equal-size samples compared after ``sort`` (``W_p^p = mean
    |x_(i) - y_(i)|^p``) with the gradient to the samples; POT's ``wasserstein_1d`` with weights,
    several columns at once (``argsort`` + ``take_along_dim``, cumulative weights, the merged
    quantile levels, ``searchsorted`` on the transposed CDFs as its torch backend does); SciPy's
    CDF form ``sum |F_u - F_v| * diff`` with ``searchsorted(..., right=True)``; the Q-Q gap from
    ``torch.quantile``."""
    x = torch.tensor(arr(21, 30), requires_grad=True)
    y = torch.tensor(arr(22, 30, scale=1.5) + 0.7)
    xs, _ = torch.sort(x)
    ys, _ = torch.sort(y)
    w1 = (xs - ys).abs().mean()
    w2 = ((xs - ys) ** 2).mean().sqrt()
    (w1 + w2).backward()
    out = {"w1": w1, "w2": w2, "grad_x": x.grad}

    f64 = torch.float64
    rng = _rng(23)
    u_values = torch.tensor(rng.standard_normal((12, 3)), requires_grad=True)
    v_values = torch.tensor(rng.standard_normal((9, 3)) * 0.5 + 1.0)
    u_weights = torch.tensor(rng.uniform(0.1, 1.0, (12, 3)), requires_grad=True)
    v_weights = torch.full((9, 3), 1.0 / 9, dtype=f64)

    def quantile_function(qs, cws, xs):
        n = xs.shape[0]
        idx = torch.searchsorted(cws.T.contiguous(), qs.T.contiguous()).T
        return torch.take_along_dim(xs, torch.clip(idx, 0, n - 1), dim=0)

    def wasserstein_1d(u_values, v_values, u_weights, v_weights, p=1):
        u_weights = u_weights / u_weights.sum(0, keepdim=True)
        v_weights = v_weights / v_weights.sum(0, keepdim=True)
        u_sorter = torch.argsort(u_values, 0)
        u_values = torch.take_along_dim(u_values, u_sorter, 0)
        v_sorter = torch.argsort(v_values, 0)
        v_values = torch.take_along_dim(v_values, v_sorter, 0)
        u_cumweights = torch.cumsum(torch.take_along_dim(u_weights, u_sorter, 0), 0)
        v_cumweights = torch.cumsum(torch.take_along_dim(v_weights, v_sorter, 0), 0)
        qs = torch.sort(torch.cat((u_cumweights, v_cumweights), 0), 0)[0]
        u_quantiles = quantile_function(qs, u_cumweights, u_values)
        v_quantiles = quantile_function(qs, v_cumweights, v_values)
        qs = torch.nn.functional.pad(qs.T, (1, 0)).T
        delta = qs[1:, ...] - qs[:-1, ...]
        diff_quantiles = torch.abs(u_quantiles - v_quantiles)
        if p == 1:
            return torch.sum(delta * diff_quantiles, dim=0)
        return torch.sum(delta * torch.pow(diff_quantiles, p), dim=0)

    pot_w1 = wasserstein_1d(u_values, v_values, u_weights, v_weights, p=1)
    pot_w2 = wasserstein_1d(u_values, v_values, u_weights, v_weights, p=2)
    (pot_w1.sum() + pot_w2.sum()).backward()
    out.update(pot_w1=pot_w1, pot_w2=pot_w2, grad_u_values=u_values.grad,
               grad_u_weights=u_weights.grad)  # fmt: skip

    with torch.no_grad():
        # samples with repeated values: the CDFs jump at shared points
        u = torch.tensor(np.round(rng.standard_normal(15), 1))
        v = torch.tensor(np.round(rng.standard_normal(10) + 0.3, 1))
        u_sorted, v_sorted = torch.sort(u).values, torch.sort(v).values
        all_values = torch.sort(torch.cat([u, v])).values
        deltas = torch.diff(all_values)
        u_cdf = torch.searchsorted(u_sorted, all_values[:-1], right=True) / u.numel()
        v_cdf = torch.searchsorted(v_sorted, all_values[:-1], right=True) / v.numel()
        out["scipy_w1"] = torch.sum(torch.abs(u_cdf - v_cdf) * deltas)
        out["cdf_u"] = u_cdf
        levels = torch.linspace(0, 1, 21, dtype=f64)
        out["qq_gap"] = torch.quantile(u, levels) - torch.quantile(v, levels)
        out["w1_qq"] = out["qq_gap"].abs().mean()
    return out


@program(rtol=5e-4, atol=5e-5)  # Adam steps on sorted projections: float32 sums in other orders
def sliced_wasserstein_fixed_projections_flow_and_max_sliced(torch):
    """Sliced Wasserstein with projections drawn once in NumPy and normalised: project both
    clouds, sort along the samples, mean ``p``-th power gap; a particle flow with Adam on the
    source points; clouds of different sizes compared through ``torch.quantile`` at common
    levels (as POT's ``sliced_wasserstein_distance`` does with weights); max-sliced Wasserstein
    by projected gradient ascent on one direction."""
    d, L = 3, 40
    theta = arr(31, L, d)
    theta = torch.tensor(theta / np.linalg.norm(theta, axis=1, keepdims=True))
    x = torch.tensor(arr(32, 24, d)).requires_grad_()
    y = torch.tensor(arr(33, 24, d) * np.array([0.5, 2.0, 1.0], dtype=np.float32) + 1.0)

    def sliced(x, y, p=2):
        px = x @ theta.T
        py = y @ theta.T
        sx = torch.sort(px, dim=0).values
        sy = torch.sort(py, dim=0).values
        return torch.mean(torch.abs(sx - sy) ** p, dim=0).mean() ** (1 / p)

    opt = torch.optim.Adam([x], lr=0.1)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = sliced(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"losses": losses, "x": x.detach(), "x_grad": x.grad}

    z = torch.tensor(arr(34, 17, d) * 0.8)
    levels = torch.linspace(0, 1, 50)
    qz = torch.quantile(z @ theta.T, levels, dim=0)
    qy = torch.quantile(y @ theta.T, levels, dim=0)
    per_direction = ((qz - qy) ** 2).mean(0)
    out["sw_unequal"] = per_direction.mean().sqrt()
    out["worst_direction"] = per_direction.argmax()

    direction = torch.tensor(arr(35, d)).requires_grad_()
    xd = x.detach()
    ascent = []
    for _ in range(5):
        t = direction / direction.norm()
        gap = (torch.sort(xd @ t).values - torch.sort(y @ t).values).pow(2).mean()
        (g,) = torch.autograd.grad(gap, direction)
        with torch.no_grad():
            direction += 0.5 * g
        ascent.append(gap.item())
    out["max_sliced"] = ascent
    out["direction"] = (direction / direction.norm()).detach()
    return out


@program(rtol=1e-7, atol=1e-10)
def unbalanced_sinkhorn_and_implicit_gradient_function(torch):
    """Unbalanced entropic OT (Chizat et al. 2018) as POT's ``sinkhorn_unbalanced`` computes it
    in log space: the KL-relaxed marginals damp each potential update by ``reg_m / (reg_m +
    reg)``, the plan's mass falls between the two measures' masses; then the OT cost wrapped in a
    ``torch.autograd.Function`` whose forward runs Sinkhorn under ``no_grad`` and whose backward
    returns ``grad * plan`` for the cost matrix (Danskin's theorem, the "implicit" mode of OT
    libraries), its gradient to the points compared with unrolled autograd."""
    f64 = torch.float64
    rng = _rng(131)
    x0 = rng.standard_normal((10, 2))
    y0 = rng.standard_normal((8, 2)) * 0.6 + np.array([1.5, 0.0])
    a = torch.tensor(rng.uniform(0.5, 1.5, 10) / 8.0)  # total mass ~1.25
    b = torch.tensor(rng.uniform(0.5, 1.5, 8) / 10.0)  # total mass ~0.8
    M = torch.cdist(torch.tensor(x0), torch.tensor(y0)) ** 2
    out = {"mass_a": a.sum(), "mass_b": b.sum()}
    for reg_m in (0.1, 1.0, 100.0):
        reg = 0.1
        fi = reg_m / (reg_m + reg)
        Mr = -M / reg
        log_u = torch.zeros(10, dtype=f64)
        log_v = torch.zeros(8, dtype=f64)
        for _ in range(100):
            log_u = fi * (torch.log(a) - torch.logsumexp(Mr + log_v[None, :], dim=1))
            log_v = fi * (torch.log(b) - torch.logsumexp(Mr + log_u[:, None], dim=0))
        plan = torch.exp(log_u[:, None] + Mr + log_v[None, :])
        out[f"reg_m={reg_m}"] = {"plan": plan, "mass": plan.sum(), "cost": (plan * M).sum(),
                                 "row": plan.sum(1), "col": plan.sum(0)}  # fmt: skip

    def sinkhorn_plan(C, a, b, eps, iters):
        f = torch.zeros_like(a)
        g = torch.zeros_like(b)
        for _ in range(iters):
            f = -eps * torch.logsumexp((g[None, :] - C) / eps + b.log()[None, :], dim=1)
            g = -eps * torch.logsumexp((f[:, None] - C) / eps + a.log()[:, None], dim=0)
        return torch.exp((f[:, None] + g[None, :] - C) / eps) * a[:, None] * b[None, :]

    class OTCost(torch.autograd.Function):
        @staticmethod
        def forward(ctx, C, a, b, eps):
            with torch.no_grad():
                P = sinkhorn_plan(C, a, b, eps, iters=100)
            ctx.save_for_backward(P)
            return (P * C).sum()

        @staticmethod
        def backward(ctx, grad_output):
            (P,) = ctx.saved_tensors
            return grad_output * P, None, None, None

    a_n, b_n = a / a.sum(), b / b.sum()
    x = torch.tensor(x0, requires_grad=True)
    y = torch.tensor(y0)
    cost = OTCost.apply(torch.cdist(x, y) ** 2, a_n, b_n, 0.5)
    cost.backward()
    out["implicit_cost"] = cost
    out["implicit_grad"] = x.grad.clone()
    x.grad = None
    P = sinkhorn_plan(torch.cdist(x, y) ** 2, a_n, b_n, 0.5, iters=100)
    (P.detach() * torch.cdist(x, y) ** 2).sum().backward()
    out["envelope_grad"] = x.grad
    out["grad_fn"] = type(cost.grad_fn).__name__
    return out


# --------------------------------------------------------------------------- sorting relaxations
@program(rtol=5e-4, atol=5e-5)  # softmax over scores * (n + 1 - 2i) through Adam steps
def neuralsort_relaxed_permutations_straight_through(torch):
    """NeuralSort (Grover et al. 2019) as in its reference code: ``A_s = |s - s^T|``, ``B = A_s
    1 1^T``, ``C = s (n + 1 - 2i)^T``, ``P_hat = softmax((C - B)^T / tau)``; the hard variant sets
    the row-wise ``argmax`` to one through advanced indexing and passes gradients straight
    through; a linear scorer trained with the permutation cross-entropy against the true
    ordering; the soft sort ``P_hat @ y`` and the sorted-order accuracy."""
    bsize, dim, feat = 4, 6, 5
    F = torch.nn.functional

    def neural_sort(scores, tau, hard=False):
        one = torch.ones((dim, 1))
        A_scores = torch.abs(scores - scores.permute(0, 2, 1))
        B = torch.matmul(A_scores, torch.matmul(one, torch.transpose(one, 0, 1)))
        scaling = (dim + 1 - 2 * (torch.arange(dim) + 1)).type(torch.FloatTensor)
        C = torch.matmul(scores, scaling.unsqueeze(0))
        P_max = (C - B).permute(0, 2, 1)
        P_hat = F.softmax(P_max / tau, dim=-1)
        if hard:
            P = torch.zeros_like(P_hat)
            b_idx = torch.arange(bsize).repeat([1, dim]).view(dim, bsize).transpose(1, 0).flatten()
            r_idx = torch.arange(dim).repeat([bsize, 1]).flatten()
            c_idx = torch.argmax(P_hat, dim=-1).flatten()
            P[b_idx, r_idx, c_idx] = 1
            P_hat = (P - P_hat).detach() + P_hat
        return P_hat

    X = torch.tensor(arr(41, bsize, dim, feat))
    w_true = torch.tensor(arr(42, feat))
    y = X @ w_true
    true_perm = torch.argsort(y, dim=-1, descending=True)
    P_true = F.one_hot(true_perm, dim).float()
    scorer = set_weights(torch, torch.nn.Linear(feat, 1, bias=False), seed=43)  # shift-invariant
    opt = torch.optim.Adam(scorer.parameters(), lr=0.05)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        s = scorer(X)  # (bsize, dim, 1)
        P_hat = neural_sort(s, tau=1.0)
        loss = -torch.sum(P_true * torch.log(P_hat + 1e-20), dim=(1, 2)).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"losses": losses, "P_hat": P_hat.detach(), "grads": grads(scorer)}
    s = scorer(X)
    P_st = neural_sort(s, tau=0.5, hard=True)
    soft_sorted = (P_st @ y.unsqueeze(-1)).squeeze(-1)
    soft_sorted.sum().backward()
    out["hard_P"] = P_st.detach()
    out["st_sorted"] = soft_sorted.detach()
    out["st_grad_w"] = scorer.weight.grad
    out["acc"] = (P_st.argmax(-1) == true_perm).float().mean()
    out["row_sums"] = neural_sort(s, tau=0.1).sum(-1).detach()
    return out


# (softmax of |sorted - s| / tau through six SGD steps with momentum: a last-bit change grows to
# 0.2 % in the gradients; see the spatial transformer program)
@program(rtol=5e-3, atol=5e-4)
def softsort_soft_ranks_and_spearman_training(torch):
    """SoftSort (Prillo & Eisenschlos 2020): ``P_hat = softmax(-|sort(s)_i - s_j|^p / tau)``
    with the hard version built by ``scatter_`` of the row-wise ``topk(1)`` and a
    straight-through estimator; soft ranks ``P_hat^T @ arange`` and a pairwise-sigmoid soft rank;
    an MLP scorer trained by SGD on ``1 - soft Spearman``, the hard Spearman correlation from
    ``argsort(argsort)`` reported alongside."""
    F = torch.nn.functional

    def soft_sort(scores, tau=1.0, pow=1.0, hard=False):
        scores = scores.unsqueeze(-1)
        sorted_ = scores.sort(descending=True, dim=1)[0]
        pairwise_diff = (scores.transpose(1, 2) - sorted_).abs().pow(pow).neg() / tau
        P_hat = pairwise_diff.softmax(-1)
        if hard:
            P = torch.zeros_like(P_hat)
            P.scatter_(-1, P_hat.topk(1, -1)[1], value=1)
            P_hat = (P - P_hat).detach() + P_hat
        return P_hat

    def spearman(a, b):
        a = a - a.mean(-1, keepdim=True)
        b = b - b.mean(-1, keepdim=True)
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))

    B, n, d = 3, 10, 4
    X = torch.tensor(arr(51, B, n, d))
    target = torch.tensor(arr(52, B, n)) + X[..., 0] * 2
    target_rank = torch.argsort(torch.argsort(target, -1), -1).float()
    model = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(d, 8), torch.nn.Tanh(),
                                                   torch.nn.Linear(8, 1)), seed=53)  # fmt: skip
    opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    ranks_asc = torch.arange(n, dtype=torch.float32)
    losses, hard_rho = [], []
    for _ in range(6):
        opt.zero_grad()
        s = model(X).squeeze(-1)
        P = soft_sort(s, tau=0.3)
        soft_rank = (n - 1) - P.transpose(1, 2) @ ranks_asc  # rank 0 is the smallest score
        loss = (1 - spearman(soft_rank, target_rank)).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        with torch.no_grad():
            hard = torch.argsort(torch.argsort(s, -1), -1).float()
            hard_rho.append(spearman(hard, target_rank))
    s = model(X).squeeze(-1)
    P_st = soft_sort(s, tau=0.3, pow=2.0, hard=True)
    pairwise_rank = torch.sigmoid((s[:, :, None] - s[:, None, :]) / 0.1).sum(-1) - 0.5
    out = {"losses": losses, "hard_rho": hard_rho, "P_st": P_st.detach(),
           "pairwise_rank": pairwise_rank.detach(), "grads": grads(model),
           "st_is_permutation": bool((P_st.sum(1) == 1).all()),
           "sorted_by_P": (P_st @ s.unsqueeze(-1)).squeeze(-1).detach()}  # fmt: skip
    F.mse_loss(pairwise_rank, target_rank).backward()
    out["rank_grads"] = grads(model)
    return out


@program(rtol=1e-8, atol=1e-10)
def fast_soft_sort_and_rank_permutahedron_pav(torch):
    """Blondel et al.'s soft sort and soft rank (2020) in pure PyTorch, as the fallbacks of
    ``torchsort``-style packages write them: the projection onto the permutahedron reduces to an
    isotonic regression of the sorted input minus the weights, solved by pool-adjacent-violators
    over Python lists (block boundaries from ``tolist()``), the fitted values built from block
    ``mean``s so autograd differentiates through the block structure; soft ranks for several
    regularisation strengths, a differentiable Spearman loss trained with SGD in float64."""
    f64 = torch.float64

    def isotonic_nonincreasing(y):
        vals = y.detach().tolist()
        blocks = []  # [start, end, mean]
        for i, v in enumerate(vals):
            blocks.append([i, i + 1, v])
            while len(blocks) > 1 and blocks[-2][2] <= blocks[-1][2]:
                s1, _, m1 = blocks[-2]
                _, e2, m2 = blocks.pop()
                e1 = blocks[-1][1]
                blocks[-1] = [s1, e2, (m1 * (e1 - s1) + m2 * (e2 - e1)) / (e2 - s1)]
        return torch.cat([y[s:e].mean().expand(e - s) for s, e, _ in blocks]), len(blocks)

    def project_permutahedron(z, w):
        perm = torch.argsort(z, descending=True)
        s = z[perm]
        dual, n_blocks = isotonic_nonincreasing(s - w)
        inv = torch.empty_like(perm)
        inv[perm] = torch.arange(len(perm))
        return (s - dual)[inv], n_blocks

    def soft_rank(theta, eps):
        n = theta.shape[-1]
        rho = torch.arange(n, 0, -1, dtype=theta.dtype)
        return project_permutahedron(theta / eps, rho)

    def soft_sort(theta, eps):
        n = theta.shape[-1]
        z = torch.arange(n, 0, -1, dtype=theta.dtype) / eps
        t = torch.sort(theta, descending=True).values
        dual, _ = isotonic_nonincreasing(z - t)
        return z - dual

    theta = torch.tensor(_rng(141).standard_normal(9), requires_grad=True)
    out = {}
    for eps in (0.01, 0.3, 1.0, 10.0):
        r, nb = soft_rank(theta, eps)
        out[f"eps={eps}"] = {"rank": r, "blocks": nb, "sort": soft_sort(theta, eps)}
    r, _ = soft_rank(theta, 1.0)
    (r * torch.arange(9, dtype=f64)).sum().backward()
    out["rank_grad"] = theta.grad
    out["hard_rank"] = torch.argsort(torch.argsort(theta)) + 1

    X = torch.tensor(_rng(142).standard_normal((6, 12, 3)))
    target = X[..., 0] - 0.5 * X[..., 2] + 0.3 * torch.tensor(_rng(143).standard_normal((6, 12)))
    w = torch.zeros(3, dtype=f64).index_fill_(0, torch.tensor([1]), 1.0).requires_grad_()
    opt = torch.optim.SGD([w], lr=2.0)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = 0.0
        for q in range(X.shape[0]):
            r, _ = soft_rank(X[q] @ w, 0.5)
            t = torch.argsort(torch.argsort(target[q])).to(f64) + 1
            r, t = r - r.mean(), t - t.mean()
            loss = loss + (1 - (r * t).sum() / (r.norm() * t.norm())) / X.shape[0]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out["spearman_losses"] = losses
    out["w"] = w
    return out


@program(rtol=5e-4, atol=5e-5)  # 20 alternating logsumexp normalisations per step
def gumbel_sinkhorn_unscramble_sequences_fixed_noise(torch):
    """Gumbel-Sinkhorn networks (Mena et al. 2018) on the number-sorting task: an MLP maps each
    scrambled element to a row of ``log_alpha``, Gumbel noise ``-log(-log(U))`` drawn once in
    NumPy is added, ``sinkhorn`` alternates row and column ``logsumexp`` normalisation in log
    space, the soft permutation reorders the inputs and an MSE loss against the sorted sequence
    trains with Adam over several noise samples; a greedy hard matching from the row ``argmax``
    gives the error rates of the paper."""
    B, n, n_samples, tau = 5, 7, 2, 0.5
    rng = _rng(61)
    x = torch.tensor(rng.uniform(0, 1, (B, n)).astype(np.float32))
    x_sorted = torch.sort(x, dim=1).values
    U = rng.uniform(0, 1, (5, n_samples, B, n, n)).astype(np.float32)
    gumbel = torch.tensor(-np.log(-np.log(U + 1e-20) + 1e-20))

    def sinkhorn(log_alpha, n_iters=20):
        for _ in range(n_iters):
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=-1, keepdim=True)
            log_alpha = log_alpha - torch.logsumexp(log_alpha, dim=-2, keepdim=True)
        return log_alpha.exp()

    net = set_weights(torch, torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.ReLU(),
                                                 torch.nn.Linear(16, n)), seed=62)  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    losses = []
    for step in range(5):
        opt.zero_grad()
        log_alpha = net(x.unsqueeze(-1))  # (B, n, n): element i -> position logits
        noisy = (log_alpha.unsqueeze(0) + gumbel[step]) / tau
        P = sinkhorn(noisy)  # (S, B, n, n)
        ordered = torch.einsum("sbij,bi->sbj", P, x)
        loss = torch.mean((ordered - x_sorted.unsqueeze(0)) ** 2)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        log_alpha = net(x.unsqueeze(-1))
        P = sinkhorn(log_alpha / tau)
        hard_pos = P.argmax(-1)  # greedy: position chosen for each element
        true_pos = torch.argsort(torch.argsort(x, dim=1), dim=1)
        wrong = hard_pos != true_pos
    return {"losses": losses, "P": P, "hard_pos": hard_pos, "prop_wrong": wrong.float().mean(),
            "prop_any_wrong": wrong.any(1).float().mean(), "row_err": (P.sum(-1) - 1).abs().max(),
            "col_err": (P.sum(-2) - 1).abs().max(), "grads": grads(net)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # BCE and Adam in float32 around a float64 transport plan
def soft_topk_entropic_ot_indicator_training(torch):
    """Differentiable top-k through entropic optimal transport (Xie et al. 2020): the ``n``
    scores carry mass ``1/n`` to two anchors (the row's min and max, detached) with masses
    ``(n-k)/n`` and ``k/n``, cost ``(s - anchor)^2`` over its detached max, log-domain Sinkhorn
    unrolled for autograd in float64 (at this ``eps`` float32's rounding, magnified by the
    backward pass through the iterations, reaches 1e-3 of the gradients); the soft indicator ``n
    * Gamma[..., 1]`` compared with ``torch.topk`` and trained with a BCE loss against the true
    top-k set of a hidden score."""
    B, n, k, d, eps = 4, 12, 3, 6, 0.05
    X = torch.tensor(arr(71, B, n, d))
    hidden = X @ torch.tensor(arr(72, d))
    true_idx = torch.topk(hidden, k, dim=-1).indices
    true_mask = torch.zeros(B, n).scatter_(1, true_idx, 1.0)

    def soft_topk(scores, k, eps, iters=60):
        scores = scores.double()
        anchors = torch.stack([scores.min(-1).values, scores.max(-1).values], -1).detach()
        C = (scores[:, :, None] - anchors[:, None, :]) ** 2
        C = C / C.amax(dim=(1, 2), keepdim=True).detach()
        mu = torch.full((n,), 1.0 / n, dtype=torch.float64)
        nu = torch.tensor([(n - k) / n, k / n], dtype=torch.float64)
        f = torch.zeros(scores.shape[0], n, dtype=torch.float64)
        g = torch.zeros(scores.shape[0], 2, dtype=torch.float64)
        for _ in range(iters):
            f = -eps * torch.logsumexp((g[:, None, :] - C) / eps + nu.log(), dim=2)
            g = -eps * torch.logsumexp((f[:, :, None] - C) / eps + mu.log()[:, None], dim=1)
        Gamma = torch.exp((f[:, :, None] + g[:, None, :] - C) / eps) * mu[:, None] * nu
        return (n * Gamma[..., 1]).float(), Gamma

    scorer = set_weights(torch, torch.nn.Linear(d, 1, bias=False), seed=73)  # top-k: shift-free
    opt = torch.optim.Adam(scorer.parameters(), lr=0.05)
    losses, overlaps = [], []
    for _ in range(5):
        opt.zero_grad()
        s = scorer(X).squeeze(-1)
        A, Gamma = soft_topk(s, k, eps)
        loss = torch.nn.functional.binary_cross_entropy(A.clamp(1e-6, 1 - 1e-6), true_mask)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        hard = torch.topk(s, k, dim=-1).indices
        overlaps.append(torch.zeros(B, n).scatter_(1, hard, 1.0).mul(true_mask).sum().item())
    return {"losses": losses, "overlaps": overlaps, "A": A.detach(), "Gamma": Gamma.detach(),
            "mass_top": A.sum(-1).detach(), "grads": grads(scorer),
            "hard_topk_values": torch.topk(s, k, dim=-1).values.detach()}  # fmt: skip


# --------------------------------------------------------------------------- learning to rank
def _slates(torch, seed, B, n, d, lengths):
    """Features, graded relevance 0..4 (ties) and allRank's padding (``y = -1`` past a slate's
    length)."""
    rng = _rng(seed)
    X = rng.standard_normal((B, n, d)).astype(np.float32)
    y = rng.integers(0, 5, (B, n)).astype(np.float32)
    for i, m in enumerate(lengths):
        y[i, m:] = PADDED_Y_VALUE
        X[i, m:] = 0.0
    return torch.tensor(X), torch.tensor(y)


def _scorer(torch, d, seed):
    """A small MLP scorer. Listwise losses do not change when every score of a slate moves by the
    same amount, so an output bias would get a zero gradient, and Adam would turn its rounding
    noise into steps of ``lr``: the last layer has none."""
    nn = torch.nn
    return set_weights(torch, nn.Sequential(nn.Linear(d, 16), nn.ReLU(),
                                            nn.Linear(16, 1, bias=False)), seed=seed)  # fmt: skip


@program(rtol=5e-4, atol=5e-5)  # Adam steps on softmax cross-entropies
def allrank_listnet_padded_slates_adam(torch):
    """allRank's ListNet: padded positions (``y_true == -1``) set to ``-inf`` in clones of both
    score tensors by boolean-mask assignment, softmax over the slate, ``log(p + eps)``, cross
    entropy summed over the slate and averaged over queries; an MLP scorer trained with Adam;
    the top-one probabilities of the final model, masked ``log_softmax`` variant for comparison."""
    F = torch.nn.functional
    B, n, d = 4, 8, 5
    X, y = _slates(torch, 81, B, n, d, lengths=[8, 5, 7, 3])

    def list_net(y_pred, y_true, eps=1e-10):
        y_pred = y_pred.clone()
        y_true = y_true.clone()
        mask = y_true == PADDED_Y_VALUE
        y_pred[mask] = float("-inf")
        y_true[mask] = float("-inf")
        preds_smax = F.softmax(y_pred, dim=1) + eps
        true_smax = F.softmax(y_true, dim=1)
        return torch.mean(-torch.sum(true_smax * torch.log(preds_smax), dim=1))

    model = _scorer(torch, d, seed=82)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(6):
        opt.zero_grad()
        loss = list_net(model(X).squeeze(-1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"losses": losses, "grads": grads(model)}
    with torch.no_grad():
        s = model(X).squeeze(-1)
        mask = y == PADDED_Y_VALUE
        logp = F.log_softmax(s.masked_fill(mask, float("-inf")), dim=1)
        target = F.softmax(y.masked_fill(mask, float("-inf")), dim=1)
        out["masked_ce"] = -(target * logp.masked_fill(mask, 0.0)).sum(1).mean()
        out["top_one"] = logp.exp()
    return out


@program(rtol=5e-4, atol=5e-5)  # flipped cumsums of exponentials through Adam steps
def allrank_listmle_plackett_luce_and_logcumsumexp(torch):
    """ListMLE (Xia et al. 2008) as allRank writes it: the slate shuffled (a NumPy permutation
    standing in for ``randperm``) so tied labels are broken at random, ``sort(descending=True)``
    of the labels (rows of 10, where PyTorch keeps tied labels in order; the ``stable=True`` form
    is checked equal), scores ``gather``'d in that order, padded ones set to ``-inf``, the max
    subtracted, ``exp().flip().cumsum().flip()`` for the Plackett-Luce denominators; the
    PT-Ranking form with ``logcumsumexp`` on full slates; an MLP scorer trained with Adam."""
    B, n, d = 4, 10, 5
    X, y = _slates(torch, 91, B, n, d, lengths=[10, 6, 9, 4])
    perm = torch.tensor(_rng(92).permutation(n))

    def list_mle(y_pred, y_true, eps=1e-10):
        y_pred_shuffled = y_pred[:, perm]
        y_true_shuffled = y_true[:, perm]
        y_true_sorted, indices = y_true_shuffled.sort(descending=True, dim=-1)
        mask = y_true_sorted == PADDED_Y_VALUE
        preds_sorted_by_true = torch.gather(y_pred_shuffled, dim=1, index=indices)
        preds_sorted_by_true[mask] = float("-inf")
        max_pred_values, _ = preds_sorted_by_true.max(dim=1, keepdim=True)
        preds_minus_max = preds_sorted_by_true - max_pred_values
        cumsums = torch.cumsum(preds_minus_max.exp().flip(dims=[1]), dim=1).flip(dims=[1])
        observation_loss = torch.log(cumsums + eps) - preds_minus_max
        observation_loss[mask] = 0.0
        return torch.mean(torch.sum(observation_loss, dim=1)), indices

    model = _scorer(torch, d, seed=93)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss, order = list_mle(model(X).squeeze(-1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    stable_order = y[:, perm].sort(descending=True, stable=True).indices
    out = {"losses": losses, "order": order, "same_as_stable": bool((order == stable_order).all()),
           "grads": grads(model)}  # fmt: skip

    Xf, yf = _slates(torch, 94, 3, 7, d, lengths=[7, 7, 7])
    s = model(Xf).squeeze(-1)
    _, idx = yf.sort(descending=True, dim=-1, stable=True)
    s_sorted = s.gather(1, idx)
    denom = torch.logcumsumexp(s_sorted.flip(-1), dim=-1).flip(-1)
    lcse_loss = (denom - s_sorted).sum(-1).mean()
    model.zero_grad()
    lcse_loss.backward()
    out["lcse_loss"] = lcse_loss
    out["lcse_denominators"] = denom.detach()
    out["lcse_grads"] = grads(model)
    return out


@program(rtol=5e-4, atol=5e-5)  # pairwise sigmoid-power losses through SGD steps
def lambdarank_delta_ndcg_pairwise_weights(torch):
    """LambdaRank weights as allRank's ``lambdaLoss`` computes them: scores sorted descending,
    labels ``gather``'d in that order, pair label differences with padded pairs masked by
    ``isfinite``, ``|1/D_i - 1/D_j| * |G_i - G_j|`` from gains ``2^y - 1`` over the ideal DCG, the
    pair loss ``-log2(sigmoid(sigma * diff) ** w)`` restricted to the top-k block; then classic
    LambdaRank with explicit lambdas pushed in by ``scores.backward(lambdas)`` (the RankLib /
    LightGBM formulation), and the two gradients compared."""
    B, n, d, k, sigma, eps = 3, 8, 5, 5, 1.0, 1e-10
    X, y = _slates(torch, 101, B, n, d, lengths=[8, 6, 8])
    y = y.masked_fill(y == PADDED_Y_VALUE, float("-inf"))

    def lambda_loss(y_pred, y_true):
        y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
        y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
        true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
        true_diffs = true_sorted_by_preds[:, :, None] - true_sorted_by_preds[:, None, :]
        pairs_mask = torch.isfinite(true_diffs) & (true_diffs > 0)
        top_k = torch.zeros((n, n), dtype=torch.bool)
        top_k[:k, :k] = 1
        true_sorted_by_preds = true_sorted_by_preds.clamp(min=0.0)
        y_true_sorted = y_true_sorted.clamp(min=0.0)
        D = torch.log2(1.0 + torch.arange(1, n + 1).float())[None, :]
        max_dcg = torch.sum(((torch.pow(2, y_true_sorted) - 1) / D)[:, :k], dim=-1).clamp(min=eps)
        G = (torch.pow(2, true_sorted_by_preds) - 1) / max_dcg[:, None]
        weights = (torch.abs(torch.pow(D[:, :, None], -1.0) - torch.pow(D[:, None, :], -1.0))
                   * torch.abs(G[:, :, None] - G[:, None, :]))  # fmt: skip
        diffs = (y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]).clamp(min=-1e8, max=1e8)
        probas = (torch.sigmoid(sigma * diffs).clamp(min=eps) ** weights).clamp(min=eps)
        return -torch.sum(torch.log2(probas)[pairs_mask & top_k]), weights

    model = _scorer(torch, d, seed=102)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        opt.zero_grad()
        loss, weights = lambda_loss(model(X).squeeze(-1), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    out = {"losses": losses, "weights": weights.detach(), "grads": grads(model)}

    # classic LambdaRank: lambdas computed by hand, injected with backward(gradient=...)
    model.zero_grad()
    scores = model(X).squeeze(-1)
    with torch.no_grad():
        valid = torch.isfinite(y)
        rel = y.clamp(min=0)
        s = scores.masked_fill(~valid, float("-inf"))
        order = s.argsort(dim=1, descending=True)
        rank = torch.empty_like(order).scatter_(1, order, torch.arange(n).expand(B, n).contiguous())
        disc = 1.0 / torch.log2(rank.float() + 2.0)
        gains = torch.pow(2.0, rel) - 1
        ideal = torch.sort(gains, dim=1, descending=True).values
        idcg = (ideal / torch.log2(torch.arange(n).float() + 2.0)).sum(1, keepdim=True)
        gain_gap = (gains[:, :, None] - gains[:, None, :]).abs()
        delta = gain_gap * (disc[:, :, None] - disc[:, None, :]).abs() / idcg[:, :, None]
        better = (rel[:, :, None] > rel[:, None, :]) & valid[:, :, None] & valid[:, None, :]
        rho = torch.sigmoid(-sigma * (scores[:, :, None] - scores[:, None, :]))
        lam = torch.where(better, -sigma * rho * delta, torch.zeros_like(delta))
        lambdas = lam.sum(2) - lam.sum(1)
    scores.backward(lambdas)
    out["lambdas"] = lambdas
    out["rank"] = rank
    out["lambda_grads"] = grads(model)
    return out


@program(rtol=5e-4, atol=5e-5)  # NeuralSort + Sinkhorn scaling + Adam in float32
def allrank_approx_ndcg_and_neural_ndcg(torch):
    """Two differentiable NDCG surrogates of allRank with padded slates: ApproxNDCG (Qin et al.
    2010), the approximate rank ``1 + sum_j sigmoid(-(s_i - s_j) / alpha)`` over valid pairs put
    into the discount; NeuralNDCG (Pobrotyn & Bialobrzeski 2021), a NeuralSort permutation of the
    masked scores made doubly stochastic by Sinkhorn scaling (row and column sums divided out
    alternately), the gains permuted by it and discounted at each rank, cut at ``k``; a scorer
    trained on each with Adam."""
    B, n, d, k = 4, 8, 5, 5
    X, y = _slates(torch, 111, B, n, d, lengths=[8, 6, 8, 5])
    mask = y == PADDED_Y_VALUE

    def approx_ndcg(y_pred, y_true, alpha=1.0, eps=1e-10):
        y_pred = y_pred.clone().masked_fill(mask, float("-inf"))
        y_true = y_true.clone().masked_fill(mask, 0.0)
        y_pred_sorted, indices_pred = y_pred.sort(descending=True, dim=-1)
        y_true_sorted, _ = y_true.sort(descending=True, dim=-1)
        true_sorted_by_preds = torch.gather(y_true, dim=1, index=indices_pred)
        padded_pairs = torch.isfinite(y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :])
        pos = torch.arange(1, n + 1).float()
        D = torch.log2(1.0 + pos)[None, :]
        max_dcg = torch.sum((torch.pow(2, y_true_sorted) - 1) / D, dim=-1).clamp(min=eps)
        G = (torch.pow(2, true_sorted_by_preds) - 1) / max_dcg[:, None]
        diffs = (y_pred_sorted[:, :, None] - y_pred_sorted[:, None, :]).nan_to_num(0.0)
        diffs = diffs.masked_fill(~padded_pairs, 0.0)
        approx_pos = 1.0 + torch.sum(padded_pairs.float() * torch.sigmoid(-diffs / alpha), -1)
        approx_ndcg = torch.sum(G / torch.log2(1 + approx_pos), dim=-1)
        return -torch.mean(approx_ndcg)

    def sinkhorn_scaling(mat, tol=1e-6, max_iter=50):
        for _ in range(max_iter):
            mat = mat / mat.sum(dim=1, keepdim=True).clamp(min=1e-10)
            mat = mat / mat.sum(dim=2, keepdim=True).clamp(min=1e-10)
            if (
                torch.max(torch.abs(mat.sum(dim=2) - 1.0)) < tol
                and torch.max(torch.abs(mat.sum(dim=1) - 1.0)) < tol
            ):
                break
        return mat

    def masked_neural_sort(s, tau):
        # each slate sorted among its own m valid items; padded rows and columns form an
        # identity block below them
        valid_n = (~mask).sum(1, keepdim=True)
        pos = torch.arange(1, n + 1)[None, :]
        scaling = torch.where(pos <= valid_n, valid_n + 1 - 2 * pos, 0).float()
        s = s.masked_fill(mask, -1e8)
        A = (s[:, :, None] - s[:, None, :]).abs()
        pair_pad = mask[:, :, None] | mask[:, None, :]
        A = A.masked_fill(pair_pad, 0.0)
        Bsum = A.sum(-1, keepdim=True)
        C = s.masked_fill(mask, 0.0)[:, :, None] * scaling[:, None, :]
        P_max = (C - Bsum).transpose(1, 2)
        P_max = P_max.masked_fill(pair_pad, float("-inf"))
        P_max = P_max.masked_fill(mask[:, :, None] & mask[:, None, :], 1.0)
        return torch.softmax(P_max / tau, dim=-1)

    def neural_ndcg(y_pred, y_true, tau=1.0):
        y_true = y_true.masked_fill(mask, 0.0)
        P = sinkhorn_scaling(masked_neural_sort(y_pred, tau))
        gains = torch.pow(2.0, y_true) - 1
        discounts = 1.0 / torch.log2(torch.arange(n).float() + 2.0)
        discounts[k:] = 0.0
        dcg = ((P @ gains.unsqueeze(-1)).squeeze(-1) * discounts).sum(-1)
        ideal = torch.sort(gains, descending=True, dim=-1).values
        idcg = (ideal * discounts).sum(-1)
        return -(dcg / idcg.clamp(min=1e-10)).mean(), P

    out = {}
    for name, seed in (("approx", 112), ("neural", 113)):
        model = _scorer(torch, d, seed)
        opt = torch.optim.Adam(model.parameters(), lr=0.02)
        losses = []
        for _ in range(5):
            opt.zero_grad()
            s = model(X).squeeze(-1)
            loss = approx_ndcg(s, y) if name == "approx" else neural_ndcg(s, y)[0]
            loss.backward()
            opt.step()
            losses.append(loss.item())
        out[name] = {"losses": losses, "grads": grads(model)}
    with torch.no_grad():
        _, P = neural_ndcg(model(X).squeeze(-1), y)
    out["P"] = P
    out["P_row_sums"] = P.sum(-1)
    return out


@program
def ranking_metrics_ndcg_mrr_map_with_tied_scores(torch):
    """Evaluation of a ranker whose scores tie (rounded to one decimal, as from a coarse model):
    NDCG@k with gains ``2^rel - 1`` ranked by ``sort(descending=True, stable=True)`` (ties in
    document order), the pessimistic and optimistic orders (a stable sort by relevance, then by
    score), scikit-learn's tie-averaged DCG (``unique(return_inverse, return_counts)``, gains
    averaged over each tie group, discounts summed over its positions); MRR of the first relevant
    item, MAP from cumulative precision at relevant positions, precision@k from ``topk`` of the
    binary labels' values (tie-free); retrieval-style grouping of flat ``(indexes, preds,
    target)`` arrays by a stable ``argsort`` of the query ids and ``split`` by ``bincount``."""
    f64 = torch.float64
    rng = _rng(121)
    Q, n = 5, 12
    scores = torch.tensor(np.round(rng.uniform(0, 1, (Q, n)), 1))
    rel = torch.tensor(rng.integers(0, 4, (Q, n)).astype(np.float64))
    rel[2] = 0.0  # a query with nothing relevant
    rel[4, :3] = 3.0
    scores[4, :3] = scores[4, 3]  # a tie group holding relevant and irrelevant documents
    gains = torch.pow(2.0, rel) - 1
    discount = 1.0 / torch.log2(torch.arange(n, dtype=f64) + 2.0)

    def dcg_at_k(order, k):
        g = torch.gather(gains, 1, order)[:, :k]
        return (g * discount[:k]).sum(1)

    ideal_order = torch.sort(rel, dim=1, descending=True, stable=True).indices
    out = {}
    for k in (3, 5, 12):
        idcg = dcg_at_k(ideal_order, k)
        by_score = torch.sort(scores, dim=1, descending=True, stable=True).indices
        # pessimistic: among tied scores, the least relevant first (and the opposite)
        by_rel_up = torch.sort(rel, dim=1, stable=True).indices
        pess = by_rel_up.gather(1, torch.sort(scores.gather(1, by_rel_up), dim=1,
                                              descending=True, stable=True).indices)  # fmt: skip
        by_rel_down = torch.sort(rel, dim=1, descending=True, stable=True).indices
        opt = by_rel_down.gather(1, torch.sort(scores.gather(1, by_rel_down), dim=1,
                                               descending=True, stable=True).indices)  # fmt: skip
        safe = torch.where(idcg > 0, idcg, torch.ones_like(idcg))
        tie_avg = []
        for q in range(Q):
            _, inv, counts = torch.unique(-scores[q], return_inverse=True, return_counts=True)
            ranked = torch.zeros(len(counts), dtype=f64).scatter_add_(0, inv, gains[q])
            ranked = ranked / counts
            disc_k = discount.clone()
            disc_k[k:] = 0
            cum = torch.cumsum(disc_k, 0)
            groups = torch.cumsum(counts, 0) - 1
            discount_sums = torch.diff(cum[groups], prepend=torch.zeros(1, dtype=f64))
            tie_avg.append((ranked * discount_sums).sum())
        out[f"@{k}"] = {"ndcg": dcg_at_k(by_score, k) / safe,
                        "ndcg_pessimistic": dcg_at_k(pess, k) / safe,
                        "ndcg_optimistic": dcg_at_k(opt, k) / safe,
                        "ndcg_tie_avg": torch.stack(tie_avg) / safe,
                        "order": by_score[:, :k]}  # fmt: skip
    order = torch.sort(scores, dim=1, descending=True, stable=True).indices
    hits = (rel.gather(1, order) > 0).to(f64)
    has_rel = hits.sum(1) > 0
    first = hits.argmax(1)
    out["mrr"] = torch.where(has_rel, 1.0 / (first + 1).to(f64), torch.zeros(Q, dtype=f64))
    precision_at = hits.cumsum(1) / torch.arange(1, n + 1, dtype=f64)
    out["map"] = (precision_at * hits).sum(1) / hits.sum(1).clamp(min=1)
    out["p@4"] = torch.topk(hits, 4, dim=1).values.mean(1)
    out["topk_score_values"] = torch.topk(scores, 4, dim=1).values

    # retrieval metrics over flat arrays, queries in arbitrary order
    indexes = torch.tensor(_rng(122).integers(0, 4, 30))
    preds = torch.tensor(_rng(123).uniform(0, 1, 30)).float()
    target = torch.tensor(_rng(124).uniform(0, 1, 30) < 0.35)
    order = torch.argsort(indexes, stable=True)
    sizes = torch.bincount(indexes).tolist()
    per_query = []
    for p, t in zip(torch.split(preds[order], sizes), torch.split(target[order], sizes)):
        ranked = t[torch.argsort(p, descending=True)].float()
        if ranked.sum() == 0:
            per_query.append(torch.tensor(0.0))
            continue
        pos = torch.nonzero(ranked).flatten()
        rr = 1.0 / (pos[0] + 1).float()
        ap = (torch.arange(1, len(pos) + 1).float() / (pos + 1).float()).mean()
        per_query.append(torch.stack([rr, ap]).mean())
    out["flat_sizes"] = sizes
    out["flat_scores"] = torch.stack(per_query)
    out["flat_mean"] = torch.stack(per_query).mean()
    return out
