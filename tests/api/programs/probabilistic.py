"""Probabilistic modelling as Pyro/NumPyro-style and research code writes it with
``torch.distributions``: amortised variational inference with reparameterised ELBOs, unconstrained
parameters through ``biject_to``/``transform_to`` (and a registered custom constraint), HMC leapfrog
steps, IWAE bounds and self-normalised importance sampling, SVGD, planar/radial flows and a masked
autoregressive flow written as ``Transform`` subclasses, conjugate Bayesian linear regression,
Bayes by backprop, a KL table with ``register_kl``, ``TransformedDistribution`` CDFs, shapes and
validation, and a whitened sparse variational GP. Every random draw (reparameterisation noise,
momenta, Metropolis uniforms) is a fixed NumPy input: library samples are never compared."""

from __future__ import annotations

import math

import numpy as np

from programs import program
from programs.common import arr, grads, params, set_weights


def _unif(seed: int, *shape: int, low: float = 0.0, high: float = 1.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


@program(rtol=5e-4, atol=5e-5)
def amortised_lognormal_guide_for_poisson_rates(torch):
    # Pyro-style amortised guide: an encoder maps each group's counts to the loc/scale of a
    # LogNormal posterior over its Poisson rate, written as TransformedDistribution(Normal, Exp);
    # the ELBO is reparameterised with fixed noise (4 particles) under a Gamma(2, 1) prior
    nn, D = torch.nn, torch.distributions
    F = nn.functional
    counts = torch.tensor(np.random.default_rng(300).poisson(3.0, (12, 6)).astype(np.float32))
    encoder = set_weights(torch, nn.Sequential(nn.Linear(6, 16), nn.Softplus(), nn.Linear(16, 2)),
                          seed=301)  # fmt: skip
    eps = torch.tensor(arr(302, 4, 12))
    prior = D.Gamma(torch.tensor(2.0), torch.tensor(1.0))
    opt = torch.optim.Adam(encoder.parameters(), lr=0.02)

    def guide():
        loc, raw = encoder(counts.log1p()).unbind(-1)
        scale = F.softplus(raw) + 1e-3
        return loc, scale, D.TransformedDistribution(D.Normal(loc, scale), [D.ExpTransform()])

    elbos = []
    for _ in range(5):
        loc, scale, q = guide()
        z = q.transforms[0](loc + scale * eps)  # q.rsample() with fixed noise, (4, 12)
        lik = D.Poisson(z.unsqueeze(-1)).log_prob(counts).sum(-1)
        elbo = (lik + prior.log_prob(z) - q.log_prob(z)).mean(0).sum()
        opt.zero_grad()
        (-elbo).backward()
        opt.step()
        elbos.append(elbo.item())
    loc, scale, q = guide()
    z = (loc + scale * eps).exp()
    same = D.LogNormal(loc, scale)
    composed = D.TransformedDistribution(
        D.Normal(loc, scale), D.ComposeTransform([D.AffineTransform(0.0, 2.0), D.ExpTransform()])
    )
    exact = D.Gamma(2.0 + counts.sum(-1), torch.tensor(1.0 + counts.shape[-1]))
    with torch.no_grad():
        return {"elbos": elbos, "grads": grads(encoder), "log_q": q.log_prob(z),
                "log_q_lognormal": same.log_prob(z), "log_q_composed": composed.log_prob(z * z),
                "guide_mean": same.mean, "exact_mean": exact.mean,
                "exact_log_prob": exact.log_prob(z), "support": str(q.support),
                "shapes": [list(q.batch_shape), list(q.event_shape), q.has_rsample],
                "entropy": same.entropy()}  # fmt: skip


@program
def biject_to_and_transform_to_unconstrained_parameters(torch):
    # how Pyro's param store and NumPyro's samplers reach constrained sites: biject_to for
    # HMC-style (bijective, with a log-Jacobian), transform_to for optimisation; plus a custom
    # ordered-vector constraint registered with its own bijection
    D = torch.distributions
    C, T = D.constraints, D.transforms
    rng = np.random.default_rng(310)
    cases = {
        "positive": (C.positive, (3,)), "nonnegative": (C.nonnegative, (3,)),
        "unit": (C.unit_interval, (3,)), "interval": (C.interval(-2.0, 3.0), (3,)),
        "half_open": (C.half_open_interval(0.0, 5.0), (3,)), "greater": (C.greater_than(1.5), (3,)),
        "less": (C.less_than(-1.0), (3,)), "real": (C.real, (3,)), "simplex": (C.simplex, (2, 3)),
        "corr_cholesky": (C.corr_cholesky, (2, 3)),
        "independent": (C.independent(C.positive, 1), (2, 3)),
    }  # fmt: skip
    out = {}
    for name, (constraint, shape) in cases.items():
        u = torch.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)
        t = D.biject_to(constraint)
        y = t(u)
        ladj = t.log_abs_det_jacobian(u, y)
        (y.sum() + ladj.sum()).backward()
        out[name] = {"type": type(t).__name__, "y": y, "inv": t.inv(y), "ladj": ladj,
                     "check": constraint.check(y), "grad": u.grad, "bijective": t.bijective,
                     "event_dims": [t.domain.event_dim, t.codomain.event_dim]}  # fmt: skip
    for name in ("positive", "interval", "less", "greater"):
        out[name]["sign"] = D.biject_to(cases[name][0]).sign
    logits = torch.tensor(rng.standard_normal((2, 4)).astype(np.float32))
    raw = torch.tensor(rng.standard_normal((2, 3, 3)).astype(np.float32))
    soft, chol, pd = (D.transform_to(c) for c in (C.simplex, C.lower_cholesky, C.positive_definite))
    probs, tril, spd = soft(logits), chol(raw), pd(raw)
    out["transform_to"] = {"types": [type(t).__name__ for t in (soft, chol, pd)],
                           "probs": probs, "probs_inv": soft(soft.inv(probs)),
                           "tril": tril, "tril_inv": chol.inv(tril), "spd": spd,
                           "spd_inv": pd.inv(spd), "checks": [C.simplex.check(probs),
                           C.lower_cholesky.check(tril), C.positive_definite.check(spd)],
                           "positive_is_exp": D.transform_to(C.positive) == T.ExpTransform(),
                           "bijective": [soft.bijective, chol.bijective]}  # fmt: skip

    class _Ordered(C.Constraint):
        event_dim = 1

        def check(self, value):
            return (value[..., 1:] > value[..., :-1]).all(-1)

    class OrderedTransform(T.Transform):
        domain = C.real_vector
        codomain = _Ordered()
        bijective = True

        def __eq__(self, other):
            return isinstance(other, OrderedTransform)

        def _call(self, x):
            return torch.cat([x[..., :1], x[..., 1:].exp()], dim=-1).cumsum(-1)

        def _inverse(self, y):
            return torch.cat([y[..., :1], (y[..., 1:] - y[..., :-1]).log()], dim=-1)

        def log_abs_det_jacobian(self, x, y):
            return x[..., 1:].sum(-1)

    ordered = _Ordered()
    D.biject_to.register(_Ordered, lambda constraint: OrderedTransform())
    cutpoints_raw = torch.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    t = D.biject_to(ordered)
    cutpoints = t(cutpoints_raw)
    # ordinal regression likelihood with the ordered cutpoints (Pyro's OrderedLogistic idiom)
    eta = torch.tensor(rng.standard_normal(3).astype(np.float32))
    cdf = torch.sigmoid(cutpoints - eta.unsqueeze(-1))
    probs5 = torch.cat([cdf[..., :1], cdf[..., 1:] - cdf[..., :-1], 1 - cdf[..., -1:]], dim=-1)
    nll = -D.Categorical(probs=probs5).log_prob(torch.tensor([0, 2, 4])).sum()
    (nll - t.log_abs_det_jacobian(cutpoints_raw, cutpoints).sum()).backward()
    out["ordered"] = {"type": type(t).__name__, "cutpoints": cutpoints, "check": ordered.check(cutpoints),
                      "inv": t.inv(cutpoints), "nll": nll, "grad": cutpoints_raw.grad,
                      "probs": probs5}  # fmt: skip
    return out


@program(rtol=1e-6, atol=1e-8)
def hmc_leapfrog_with_fixed_momenta_and_constrained_scale(torch):
    # a Normal model with unknown mean and a HalfCauchy scale, sampled by HMC in unconstrained
    # space (the scale through biject_to(positive) plus its log-Jacobian), with momenta and
    # Metropolis uniforms drawn in NumPy
    D = torch.distributions
    f64 = torch.float64
    y = torch.tensor(arr(320, 10, scale=1.5, dtype=np.float64) + 0.7)
    to_pos = D.biject_to(D.constraints.positive)
    prior_mu = D.Normal(torch.tensor(0.0, dtype=f64), torch.tensor(5.0, dtype=f64))
    prior_sigma = D.HalfCauchy(torch.tensor(1.0, dtype=f64))

    def potential(q):
        mu, sigma = q[0], to_pos(q[1])
        log_joint = prior_mu.log_prob(mu) + prior_sigma.log_prob(sigma)
        log_joint = log_joint + to_pos.log_abs_det_jacobian(q[1], sigma)
        return -(log_joint + D.Normal(mu, sigma).log_prob(y).sum())

    def grad_potential(q):
        q = q.detach().requires_grad_(True)
        energy = potential(q)
        (g,) = torch.autograd.grad(energy, q)
        return energy.detach(), g

    momenta = torch.tensor(arr(321, 5, 2, dtype=np.float64))
    uniforms = torch.tensor(_unif(322, 5, dtype=np.float64))
    q = torch.tensor([0.0, 0.0], dtype=f64)
    step, n_leapfrog = 0.1, 6
    trace, energies, accept_probs, accepted, paths = [], [], [], [], []
    for it in range(5):
        p0 = momenta[it]
        u0, g = grad_potential(q)
        q_new, p = q.clone(), p0 - 0.5 * step * g
        path = []
        for i in range(n_leapfrog):
            q_new = q_new + step * p
            u_new, g = grad_potential(q_new)
            if i < n_leapfrog - 1:
                p = p - step * g
            path.append(q_new)
        p = p - 0.5 * step * g
        h0 = u0 + 0.5 * p0.pow(2).sum()
        h1 = u_new + 0.5 * p.pow(2).sum()
        accept_prob = torch.exp(h0 - h1).clamp(max=1.0)
        accept = uniforms[it] < accept_prob
        q = torch.where(accept, q_new, q)
        trace.append(q)
        energies.append(torch.stack([h0, h1]))
        accept_probs.append(accept_prob)
        accepted.append(bool(accept))
        paths.append(torch.stack(path))
    samples = torch.stack(trace)
    return {"samples": samples, "sigma": to_pos(samples[:, 1]), "energies": energies,
            "accept_probs": torch.stack(accept_probs), "accepted": accepted,
            "paths": torch.stack(paths), "final_potential": potential(q)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def iwae_bound_and_self_normalised_importance_sampling(torch):
    # linear-Gaussian latent model whose marginal is exact: an amortised Gaussian encoder is
    # trained on the IWAE bound (logsumexp over K fixed-noise particles), then the bound, the
    # ELBO, the exact log marginal and self-normalised posterior means are compared
    nn, D = torch.nn, torch.distributions
    dx, dz, K, N = 4, 2, 8, 6
    W = torch.tensor(arr(330, dx, dz, scale=0.8))
    b = torch.tensor(arr(331, dx, scale=0.3))
    noise = 0.5
    x = torch.tensor(arr(332, N, dx))
    enc = set_weights(torch, nn.Linear(dx, 2 * dz), seed=333)
    eps = torch.tensor(arr(334, K, N, dz))
    prior = D.Independent(D.Normal(torch.zeros(dz), torch.ones(dz)), 1)
    opt = torch.optim.Adam(enc.parameters(), lr=0.05)

    def weights():
        loc, log_scale = enc(x).chunk(2, dim=-1)
        q = D.Independent(D.Normal(loc, log_scale.exp()), 1)
        z = q.base_dist.loc + q.base_dist.scale * eps  # (K, N, dz)
        lik = D.Independent(D.Normal(z @ W.T + b, noise), 1)
        log_w = lik.log_prob(x) + prior.log_prob(z) - q.log_prob(z)  # (K, N)
        return q, z, log_w

    bounds = []
    for _ in range(4):
        q, z, log_w = weights()
        iwae = (torch.logsumexp(log_w, dim=0) - math.log(K)).mean()
        opt.zero_grad()
        (-iwae).backward()
        opt.step()
        bounds.append(iwae.item())
    q, z, log_w = weights()
    iwae = torch.logsumexp(log_w, dim=0) - math.log(K)
    elbo = log_w.mean(0)
    exact = D.MultivariateNormal(b, covariance_matrix=W @ W.T + noise**2 * torch.eye(dx))
    w = torch.softmax(log_w, dim=0)
    precision = torch.eye(dz) + W.T @ W / noise**2
    exact_mean = torch.linalg.solve(precision, (W.T @ (x - b).T) / noise**2).T
    with torch.no_grad():
        return {"bounds": bounds, "grads": grads(enc), "iwae": iwae, "elbo": elbo,
                "exact": exact.log_prob(x), "gap": exact.log_prob(x) - iwae,
                "ess": 1.0 / w.pow(2).sum(0), "snis_mean": (w.unsqueeze(-1) * z).sum(0),
                "exact_mean": exact_mean, "q_mean": q.mean, "q_stddev": q.stddev,
                "shapes": [list(q.batch_shape), list(q.event_shape), list(exact.event_shape)]}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def svgd_rbf_kernel_particles_on_mvn_mixture(torch):
    # Stein variational gradient descent (Liu & Wang's reference code): RBF kernel with the
    # median-heuristic bandwidth, scores by autograd of a MixtureSameFamily of full-covariance
    # Gaussians (scale_tril through LowerCholeskyTransform), then gradients of the mixture's
    # log-likelihood at the particles with respect to its parameters
    D = torch.distributions
    logits = torch.tensor([0.2, -0.3, 0.5], requires_grad=True)
    locs = torch.tensor([[-2.0, 0.0], [2.0, 1.0], [0.0, -2.5]], requires_grad=True)
    raw_tril = torch.tensor(arr(340, 3, 2, 2, scale=0.3), requires_grad=True)

    def target():
        scale_tril = D.transforms.LowerCholeskyTransform()(raw_tril)
        comp = D.MultivariateNormal(locs, scale_tril=scale_tril)
        return D.MixtureSameFamily(D.Categorical(logits=logits), comp)

    def svgd_kernel(theta):
        sq = torch.cdist(theta, theta).pow(2)
        h = sq.median() / math.log(theta.shape[0] + 1)
        k = torch.exp(-sq / h)
        dxkxy = -(k @ theta - theta * k.sum(1, keepdim=True)) * (2.0 / h)
        return k, dxkxy, h

    particles = torch.tensor(arr(341, 16, 2, scale=2.0))
    bandwidths, steps = [], []
    for _ in range(6):
        x = particles.detach().requires_grad_(True)
        (score,) = torch.autograd.grad(target().log_prob(x).sum(), x)
        k, dxkxy, h = svgd_kernel(particles)
        phi = (k @ score + dxkxy) / particles.shape[0]
        particles = particles + 0.3 * phi
        bandwidths.append(h)
        steps.append(phi.norm())
    # the kernel's repulsive term by autograd equals the closed form
    x = particles.detach().requires_grad_(True)
    h = torch.cdist(x, x).pow(2).median().detach() / math.log(x.shape[0] + 1)
    (rep,) = torch.autograd.grad(torch.exp(-torch.cdist(x, x.detach()).pow(2) / h).sum(), x)
    mix = target()
    ll = mix.log_prob(particles).mean()
    ll.backward()
    comp_lp = mix.component_distribution.log_prob(particles.unsqueeze(-2))
    resp = torch.softmax(comp_lp + torch.log_softmax(logits, -1), dim=-1)
    with torch.no_grad():
        return {"particles": particles, "bandwidths": bandwidths, "steps": steps,
                "repulsive": rep, "closed_form": svgd_kernel(particles)[1], "ll": ll,
                "logits_grad": logits.grad, "locs_grad": locs.grad, "tril_grad": raw_tril.grad,
                "resp": resp, "mean": mix.mean, "variance": mix.variance,
                "shapes": [list(mix.batch_shape), list(mix.event_shape),
                           list(mix.component_distribution.batch_shape)],
                "mixture_probs": mix.mixture_distribution.probs}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def planar_and_radial_flows_reverse_kl(torch):
    # Rezende & Mohamed (2015): planar flows with the invertibility fix u_hat, radial flows with
    # beta_hat >= -alpha, trained by the reverse KL to the "potential 2" energy at fixed base noise
    nn, D = torch.nn, torch.distributions
    F = nn.functional

    class Planar(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.u = nn.Parameter(torch.zeros(d))
            self.w = nn.Parameter(torch.zeros(d))
            self.b = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            wu = self.w @ self.u
            u_hat = self.u + (-1 + F.softplus(wu) - wu) * self.w / (self.w @ self.w)
            lin = z @ self.w + self.b
            f = z + u_hat * torch.tanh(lin).unsqueeze(-1)
            psi = (1 - torch.tanh(lin) ** 2).unsqueeze(-1) * self.w
            return f, torch.log((1 + psi @ u_hat).abs() + 1e-8)

    class Radial(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.z0 = nn.Parameter(torch.zeros(d))
            self.log_alpha = nn.Parameter(torch.zeros(1))
            self.beta = nn.Parameter(torch.zeros(1))

        def forward(self, z):
            d = z.shape[-1]
            alpha = self.log_alpha.exp()
            beta_hat = -alpha + F.softplus(self.beta)
            diff = z - self.z0
            r = diff.norm(dim=-1, keepdim=True)
            h = 1 / (alpha + r)
            f = z + beta_hat * h * diff
            ladj = (d - 1) * torch.log1p(beta_hat * h) + torch.log1p(
                beta_hat * h - beta_hat * r * h**2
            )
            return f, ladj.squeeze(-1)

    def energy(z):
        w1 = torch.sin(2 * math.pi * z[:, 0] / 4)
        return 0.5 * ((z[:, 1] - w1) / 0.4) ** 2

    flows = nn.ModuleList([Planar(2), Radial(2), Planar(2), Planar(2), Radial(2)])
    set_weights(torch, flows, seed=350, scale=0.5)
    base = D.MultivariateNormal(torch.zeros(2), torch.eye(2))
    eps = torch.tensor(arr(351, 64, 2))
    opt = torch.optim.Adam(flows.parameters(), lr=0.01)

    def push(z):
        total = torch.zeros(z.shape[0])
        for flow in flows:
            z, ladj = flow(z)
            total = total + ladj
        return z, total

    losses = []
    for _ in range(5):
        zk, ladj = push(eps)
        loss = (base.log_prob(eps) - ladj + energy(zk)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    zk, ladj = push(eps)
    log_q = base.log_prob(eps) - ladj
    with torch.no_grad():
        return {"losses": losses, "zk": zk, "log_q": log_q, "energy": energy(zk),
                "params": params(flows)}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def masked_autoregressive_flow_transform_subclass(torch):
    # a MAF written as Pyro writes its transforms: a Transform subclass with vector
    # (domain/codomain event_dim 1) that holds a MADE, a Permute transform between layers, a
    # final AffineTransform(event_dim=1), all inside TransformedDistribution over an Independent
    # standard normal; trained by maximum likelihood and inverted exactly
    nn, D = torch.nn, torch.distributions
    C, F = D.constraints, nn.functional
    d, hidden = 4, 12

    class MaskedLinear(nn.Linear):
        def __init__(self, n_in, n_out, mask):
            super().__init__(n_in, n_out)
            self.register_buffer("mask", mask)

        def forward(self, x):
            return F.linear(x, self.weight * self.mask, self.bias)

    in_deg = torch.arange(1, d + 1)
    hid_deg = torch.arange(hidden) % (d - 1) + 1
    out_deg = torch.cat([in_deg, in_deg])

    class MADE(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1 = MaskedLinear(d, hidden, (hid_deg[:, None] >= in_deg[None, :]).float())
            self.l2 = MaskedLinear(hidden, 2 * d, (out_deg[:, None] > hid_deg[None, :]).float())

        def forward(self, x):
            mu, alpha = self.l2(torch.tanh(self.l1(x))).chunk(2, dim=-1)
            return mu, alpha.clamp(-3.0, 3.0)

    class MaskedAutoregressive(D.Transform):
        domain = C.real_vector
        codomain = C.real_vector
        bijective = True
        sign = +1

        def __init__(self, made):
            super().__init__(cache_size=1)
            self.made = made

        def _call(self, u):  # noise -> data, one dimension at a time
            x = torch.zeros_like(u)
            for i in range(d):
                mu, alpha = self.made(x)
                x = torch.cat([x[..., :i], (u[..., i] * alpha[..., i].exp() + mu[..., i]).unsqueeze(-1),
                               x[..., i + 1 :]], dim=-1)  # fmt: skip
            return x

        def _inverse(self, x):  # data -> noise, one pass
            mu, alpha = self.made(x)
            return (x - mu) * torch.exp(-alpha)

        def log_abs_det_jacobian(self, u, x):
            return self.made(x)[1].sum(-1)

    class Permute(D.Transform):
        domain = C.real_vector
        codomain = C.real_vector
        bijective = True

        def __init__(self, perm):
            super().__init__()
            self.perm = perm
            self.inv_perm = torch.argsort(perm)

        def _call(self, x):
            return x[..., self.perm]

        def _inverse(self, y):
            return y[..., self.inv_perm]

        def log_abs_det_jacobian(self, x, y):
            return torch.zeros(x.shape[:-1])

    mades = nn.ModuleList([MADE(), MADE()])
    set_weights(torch, mades, seed=360, scale=0.4)
    shift = nn.Parameter(torch.tensor([0.5, -0.5, 0.0, 1.0]))
    log_scale = nn.Parameter(torch.tensor([0.1, -0.2, 0.3, 0.0]))
    base = D.Independent(D.Normal(torch.zeros(d), torch.ones(d)), 1)
    data = torch.tensor(arr(361, 32, d) * np.array([1.0, 0.5, 2.0, 1.0], np.float32))

    def flow():
        layers = [MaskedAutoregressive(mades[0]), Permute(torch.tensor([3, 2, 1, 0])),
                  MaskedAutoregressive(mades[1]),
                  D.AffineTransform(shift, log_scale.exp(), event_dim=1)]  # fmt: skip
        return D.TransformedDistribution(base, layers)

    opt = torch.optim.Adam([*mades.parameters(), shift, log_scale], lr=0.01)
    losses = []
    for _ in range(4):
        nll = -flow().log_prob(data).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    dist = flow()
    points = data[:5]
    lp = dist.log_prob(points)
    lp.sum().backward()
    maf = dist.transforms[0]
    noise = torch.tensor(arr(362, 3, d))
    x = maf(noise)
    with torch.no_grad():
        return {"losses": losses, "log_prob": lp, "shift_grad": shift.grad,
                "log_scale_grad": log_scale.grad, "grads": grads(mades),
                "forward": x, "round_trip": maf.inv(x), "ladj": maf.log_abs_det_jacobian(noise, x),
                "shapes": [list(dist.batch_shape), list(dist.event_shape)],
                "support": str(dist.support),
                "event_dims": [maf.event_dim, dist.transforms[-1].event_dim]}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def bayesian_linear_regression_conjugate_updates(torch):
    # Bishop ch. 3 in float64: Gaussian prior, known noise precision, the posterior as a
    # MultivariateNormal built from its precision, sequential updates equal to one batch update,
    # the evidence two ways with its type-II ML gradients, the predictive, and the unknown-noise
    # Normal-inverse-gamma case with its Student-t predictive
    D = torch.distributions
    f64 = torch.float64
    rng = np.random.default_rng(370)
    xs = rng.uniform(-1, 1, 20)
    ys = np.sin(2.5 * xs) + 0.2 * rng.standard_normal(20)
    phi = torch.tensor(np.stack([xs**k for k in range(4)], 1))
    y = torch.tensor(ys)
    M, N = 4, 20
    log_alpha = torch.tensor(math.log(2.0), dtype=f64, requires_grad=True)
    log_beta = torch.tensor(math.log(25.0), dtype=f64, requires_grad=True)
    alpha, beta = log_alpha.exp(), log_beta.exp()
    prior = D.MultivariateNormal(torch.zeros(M, dtype=f64),
                                 precision_matrix=alpha * torch.eye(M, dtype=f64))  # fmt: skip

    def update(belief, X, t):
        s0_inv, m0 = belief.precision_matrix, belief.loc
        sn_inv = s0_inv + beta * X.T @ X
        mn = torch.linalg.solve(sn_inv, s0_inv @ m0 + beta * X.T @ t)
        return D.MultivariateNormal(mn, precision_matrix=sn_inv)

    post = update(prior, phi, y)
    seq = update(update(prior, phi[:8], y[:8]), phi[8:], y[8:])
    marginal = D.MultivariateNormal(torch.zeros(N, dtype=f64),
                                    covariance_matrix=phi @ phi.T / alpha
                                    + torch.eye(N, dtype=f64) / beta)  # fmt: skip
    mn = post.loc
    e_mn = beta / 2 * (y - phi @ mn).pow(2).sum() + alpha / 2 * mn @ mn
    log_ev = (M / 2 * log_alpha + N / 2 * log_beta - e_mn
              - 0.5 * torch.logdet(post.precision_matrix) - N / 2 * math.log(2 * math.pi))  # fmt: skip
    ev = marginal.log_prob(y)
    g_alpha, g_beta = torch.autograd.grad(ev, [log_alpha, log_beta])
    xt = np.linspace(-1, 1, 5)
    phi_t = torch.tensor(np.stack([xt**k for k in range(4)], 1))
    pred_var = 1 / beta + (phi_t @ post.covariance_matrix * phi_t).sum(-1)
    predictive = D.Normal(phi_t @ mn, pred_var.sqrt())
    yt = torch.tensor(np.sin(2.5 * xt))
    joint_pred = D.MultivariateNormal(phi_t @ mn, phi_t @ post.covariance_matrix @ phi_t.T
                                      + torch.eye(5, dtype=f64) / beta)  # fmt: skip
    # unknown noise: Normal-inverse-gamma prior (a0, b0), Student-t posterior predictive
    a0, b0, lam0 = 2.0, 1.0, torch.eye(M, dtype=f64)
    lam_n = lam0 + phi.T @ phi
    mu_n = torch.linalg.solve(lam_n, phi.T @ y)
    a_n = a0 + N / 2
    b_n = b0 + 0.5 * (y @ y - mu_n @ lam_n @ mu_n)
    scale2 = b_n / a_n * (1 + (phi_t @ torch.linalg.inv(lam_n) * phi_t).sum(-1))
    student = D.StudentT(2 * a_n, phi_t @ mu_n, scale2.sqrt())
    noise_post = D.InverseGamma(torch.tensor(a_n, dtype=f64), b_n)
    w_draws = torch.tensor(rng.standard_normal((3, M)))
    with torch.no_grad():
        return {"post_mean": mn, "post_cov": post.covariance_matrix, "post_tril": post.scale_tril,
                "seq_mean": seq.loc, "seq_cov": seq.covariance_matrix, "evidence": ev,
                "evidence_closed_form": log_ev, "type2_grads": [g_alpha, g_beta],
                "predictive_lp": predictive.log_prob(yt), "joint_pred_lp": joint_pred.log_prob(yt),
                "kl_to_prior": D.kl_divergence(post, prior), "entropy": post.entropy(),
                "expanded_lp": post.expand((3,)).log_prob(w_draws),
                "expanded_shape": list(post.expand((3,)).batch_shape),
                "student_lp": student.log_prob(yt), "student_var": student.variance,
                "noise_mean": noise_post.mean, "noise_lp": noise_post.log_prob(1 / beta),
                "stddev": post.stddev}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def bayes_by_backprop_scale_mixture_prior(torch):
    # Blundell et al. (2015): weights ~ Normal(mu, softplus(rho)) as Independent posteriors,
    # fixed noise per forward pass, a two-component scale-mixture prior as a MixtureSameFamily,
    # the Monte Carlo KL term, the closed-form KL to an expanded Gaussian prior, and a layer with
    # the local reparameterisation trick
    nn, D = torch.nn, torch.distributions
    F = nn.functional
    prior = D.MixtureSameFamily(D.Categorical(probs=torch.tensor([0.5, 0.5])),
                                D.Normal(torch.zeros(2), torch.tensor([1.0, math.exp(-3)])))  # fmt: skip

    class BayesLinear(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.w_mu = nn.Parameter(torch.zeros(n_out, n_in))
            self.w_rho = nn.Parameter(torch.zeros(n_out, n_in))
            self.b_mu = nn.Parameter(torch.zeros(n_out))
            self.b_rho = nn.Parameter(torch.zeros(n_out))

        def posterior(self):
            qw = D.Independent(D.Normal(self.w_mu, F.softplus(self.w_rho)), 2)
            qb = D.Independent(D.Normal(self.b_mu, F.softplus(self.b_rho)), 1)
            return qw, qb

        def forward(self, x, eps_w, eps_b):
            qw, qb = self.posterior()
            w = qw.base_dist.loc + qw.base_dist.scale * eps_w
            b = qb.base_dist.loc + qb.base_dist.scale * eps_b
            log_q = qw.log_prob(w) + qb.log_prob(b)
            log_p = prior.log_prob(w).sum() + prior.log_prob(b).sum()
            return F.linear(x, w, b), log_q - log_p

        def local_reparam(self, x, eps_act):
            qw, qb = self.posterior()
            mean = F.linear(x, qw.base_dist.loc, qb.base_dist.loc)
            var = F.linear(x.pow(2), qw.base_dist.scale.pow(2), qb.base_dist.scale.pow(2))
            return mean + var.sqrt() * eps_act

    l1, l2 = BayesLinear(5, 8), BayesLinear(8, 3)
    for layer, seed in ((l1, 380), (l2, 381)):
        with torch.no_grad():
            layer.w_mu.copy_(torch.tensor(arr(seed, *layer.w_mu.shape, scale=0.3)))
            layer.w_rho.fill_(-3.0)
            layer.b_rho.fill_(-3.0)
    x = torch.tensor(arr(382, 10, 5))
    labels = torch.tensor(np.random.default_rng(383).integers(0, 3, 10))
    rng = np.random.default_rng(384)
    noise = [[torch.tensor(rng.standard_normal(s).astype(np.float32))
              for s in ((8, 5), (8,), (3, 8), (3,))] for _ in range(2)]  # fmt: skip
    opt = torch.optim.Adam([*l1.parameters(), *l2.parameters()], lr=0.01)
    n_batches = 4
    losses, kls = [], []
    for _ in range(3):
        nll, kl = 0.0, 0.0
        for ew1, eb1, ew2, eb2 in noise:  # two Monte Carlo samples
            h, kl1 = l1(x, ew1, eb1)
            logits, kl2 = l2(F.relu(h), ew2, eb2)
            nll = nll - D.Categorical(logits=logits).log_prob(labels).sum() / len(noise)
            kl = kl + (kl1 + kl2) / len(noise)
        loss = kl / n_batches + nll
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        kls.append(kl.item())
    qw, qb = l1.posterior()
    gauss = D.Independent(D.Normal(0.0, 1.0).expand(qw.base_dist.batch_shape), 2)
    closed = D.kl_divergence(qw, gauss)
    eps_act = torch.tensor(arr(385, 10, 8))
    lr_out = l1.local_reparam(x, eps_act)
    (closed + lr_out.pow(2).mean()).backward()
    with torch.no_grad():
        return {"losses": losses, "kls": kls, "closed_kl": closed, "local_reparam": lr_out,
                "w_mu_grad": l1.w_mu.grad, "w_rho_grad": l1.w_rho.grad,
                "prior_lp": prior.log_prob(torch.tensor([0.0, 0.01, 0.5, -2.0])),
                "prior_var": prior.variance, "gauss_shapes": [list(gauss.batch_shape),
                list(gauss.event_shape), list(gauss.base_dist.batch_shape)],
                "params": {**params(l1), **{"l2." + k: v for k, v in params(l2).items()}}}  # fmt: skip


@program(rtol=5e-4, atol=5e-5)
def kl_divergence_table_and_register_kl_for_custom_family(torch):
    # closed-form KLs between many pairs (same and mixed families), checked against Monte Carlo
    # with fixed noise for one pair, gradients through all of them, and register_kl for a
    # user-defined LogitNormal and for a Normal subclass (the most specific rule wins)
    D = torch.distributions
    a = torch.tensor([0.5, 1.5, 3.0], requires_grad=True)
    b = torch.tensor([2.0, 0.7, 1.2], requires_grad=True)
    loc = torch.tensor([0.0, -1.0, 2.0], requires_grad=True)
    scale = torch.tensor([1.0, 0.5, 2.0], requires_grad=True)
    conc = torch.tensor([[1.0, 2.0, 0.5], [3.0, 3.0, 3.0]], requires_grad=True)
    pairs = {
        "gamma_gamma": (D.Gamma(a, b), D.Gamma(torch.tensor(2.0), torch.tensor(1.0))),
        "beta_beta": (D.Beta(a, b), D.Beta(torch.tensor(1.0), torch.tensor(1.0))),
        "dirichlet": (D.Dirichlet(conc), D.Dirichlet(torch.ones(3))),
        "poisson": (D.Poisson(a), D.Poisson(b.detach())),
        "exp_gamma": (D.Exponential(b), D.Gamma(a.detach(), torch.tensor(1.0))),
        "gamma_normal": (D.Gamma(a, b), D.Normal(loc.detach(), 2.0)),
        "beta_normal": (D.Beta(a, b), D.Normal(0.5, 1.0)),
        "uniform_normal": (D.Uniform(loc, loc + scale), D.Normal(0.0, 1.0)),
        "uniform_gumbel": (D.Uniform(loc, loc + scale), D.Gumbel(torch.tensor(0.0), torch.tensor(2.0))),
        "laplace_normal": (D.Laplace(loc, scale), D.Normal(torch.tensor(0.5), torch.tensor(1.5))),
        "normal_laplace": (D.Normal(loc, scale), D.Laplace(torch.tensor(0.5), torch.tensor(1.5))),
        "normal_gumbel": (D.Normal(loc, scale), D.Gumbel(torch.tensor(0.5), torch.tensor(1.5))),
        "exp_normal": (D.Exponential(b), D.Normal(0.0, 1.0)),
        "uniform_beta": (D.Uniform(torch.tensor(0.2), torch.tensor(0.9)), D.Beta(a, b)),
        "halfnormal": (D.HalfNormal(scale), D.HalfNormal(torch.tensor(1.0))),
        "lognormal": (D.LogNormal(loc, scale), D.LogNormal(torch.tensor(0.0), torch.tensor(1.0))),
        "independent": (D.Independent(D.Normal(loc, scale), 1),
                        D.Independent(D.Normal(torch.zeros(3), torch.ones(3)), 1)),
        "onehot": (D.OneHotCategorical(logits=conc), D.OneHotCategorical(probs=torch.ones(3) / 3)),
    }  # fmt: skip
    kls = {name: D.kl_divergence(p, q) for name, (p, q) in pairs.items()}
    eps = torch.tensor(arr(390, 4000, 3))
    p, q = D.Normal(loc, scale), D.Normal(torch.tensor(0.5), torch.tensor(1.5))
    z = loc + scale * eps
    mc = (p.log_prob(z) - q.log_prob(z)).mean(0)

    class LogitNormal(D.TransformedDistribution):
        def __init__(self, loc, scale, validate_args=None):
            super().__init__(
                D.Normal(loc, scale), D.SigmoidTransform(), validate_args=validate_args
            )

    @D.register_kl(LogitNormal, LogitNormal)
    def _kl_logitnormal(p, q):
        return D.kl_divergence(p.base_dist, q.base_dist)

    class TemperedNormal(D.Normal):
        pass

    @D.register_kl(TemperedNormal, D.Normal)
    def _kl_tempered_normal(p, q):
        return 2.0 * D.kl_divergence(D.Normal(p.loc, p.scale), q)

    ln_p, ln_q = LogitNormal(loc, scale), LogitNormal(torch.tensor(0.0), torch.tensor(1.0))
    custom = {"logitnormal": D.kl_divergence(ln_p, ln_q),
              "tempered": D.kl_divergence(TemperedNormal(loc, scale), D.Normal(0.0, 1.0)),
              "reverse": D.kl_divergence(D.Normal(0.0, 1.0), TemperedNormal(loc, scale)),
              "transformed": D.kl_divergence(
                  D.TransformedDistribution(D.Normal(loc, scale), [D.ExpTransform()]),
                  D.TransformedDistribution(D.Normal(0.0, 1.0), [D.ExpTransform()]))}  # fmt: skip
    total = sum(k.sum() for k in kls.values()) + sum(k.sum() for k in custom.values())
    total.backward()
    try:
        D.kl_divergence(D.StudentT(3.0), D.Normal(0.0, 1.0))
        missing = "no error"
    except NotImplementedError as e:
        missing = str(e)
    with torch.no_grad():
        return {"kl": kls, "mc": mc, "closed": D.kl_divergence(p, q),
                "custom": custom, "grads": [a.grad, b.grad, loc.grad, scale.grad, conc.grad],
                "missing": missing, "ln_support": str(ln_p.support),
                "ln_log_prob": ln_p.log_prob(torch.tensor([0.3, 0.5, 0.9]))}  # fmt: skip


@program
def transformed_distribution_cdf_icdf_shapes_and_validation(torch):
    # the TransformedDistribution docstring's logistic (Uniform through an inverted sigmoid and
    # an affine map), a reflected exponential (negative scale: cdf/icdf flip), SAC's action
    # rescaling (tanh then affine to [low, high]), Independent's reinterpreted_batch_ndims, expand
    # and batch/event shapes, support.check, and validate_args on parameters and values
    D = torch.distributions
    T = D.transforms
    loc = torch.tensor([0.0, 0.5, -1.0], requires_grad=True)
    scale = torch.tensor([1.0, 0.5, 2.0], requires_grad=True)
    logistic = D.TransformedDistribution(D.Uniform(torch.zeros(3), torch.ones(3)),
                                         [T.SigmoidTransform().inv, T.AffineTransform(loc, scale)])  # fmt: skip
    x = torch.tensor([[-1.0, 0.3, 2.0], [0.5, 0.5, -3.0]])
    u = torch.tensor([0.1, 0.5, 0.9])
    lp, cdf, icdf = logistic.log_prob(x), logistic.cdf(x), logistic.icdf(u)
    (lp.sum() + cdf.sum() + icdf.sum()).backward()
    reflected = D.TransformedDistribution(D.Exponential(torch.tensor([1.0, 2.0])),
                                          [T.AffineTransform(3.0, -1.0)])  # fmt: skip
    r = torch.tensor([2.5, -1.0])
    low, high = torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 1.0])
    mu = torch.tensor([[0.3, -0.2], [1.5, 0.1]])
    sigma = torch.tensor([[0.5, 1.0], [0.2, 0.7]])
    squash = T.ComposeTransform(
        [T.TanhTransform(), T.AffineTransform((high + low) / 2, (high - low) / 2)]
    )
    action_dist = D.TransformedDistribution(D.Independent(D.Normal(mu, sigma), 1), [squash])
    pre = torch.tensor([[0.4, -0.3], [1.0, 0.5]])
    action = squash(pre)
    base = D.Normal(torch.zeros(2, 3, 4), torch.ones(2, 3, 4))
    shapes = {}
    for n in range(4):
        ind = D.Independent(base, n)
        shapes[f"independent_{n}"] = [list(ind.batch_shape), list(ind.event_shape),
                                      list(ind.log_prob(torch.zeros(2, 3, 4)).shape)]  # fmt: skip
    ind = D.Independent(base, 2)
    shapes["expanded"] = [list(ind.expand((5, 2)).batch_shape), list(ind.expand((5, 2)).event_shape),
                          list(ind.expand((5, 2)).log_prob(torch.zeros(3, 4)).shape)]  # fmt: skip
    shapes["dirichlet"] = [list(D.Dirichlet(torch.ones(2, 5)).expand((3, 2)).batch_shape),
                           list(D.Dirichlet(torch.ones(2, 5)).event_shape)]  # fmt: skip
    checks = {
        "beta": D.Beta(2.0, 3.0).support.check(torch.tensor([-0.1, 0.0, 0.5, 1.0, 1.2])),
        "categorical": D.Categorical(logits=torch.zeros(4)).support.check(torch.tensor([0, 3, 4, -1])),
        "simplex": D.Dirichlet(torch.ones(3)).support.check(torch.tensor([[0.2, 0.3, 0.5], [0.5, 0.6, -0.1]])),
        "independent": ind.support.check(torch.zeros(2, 3, 4)),
        "logistic": logistic.support.check(x),
        "action": action_dist.support.check(torch.tensor([[1.9, 0.5], [2.5, 0.5]])),
        "is_discrete": [D.Poisson(2.0).support.is_discrete, D.Normal(0.0, 1.0).support.is_discrete],
        "event_dims": [D.Dirichlet(torch.ones(3)).support.event_dim, ind.support.event_dim,
                       D.MultivariateNormal(torch.zeros(2), torch.eye(2)).support.event_dim],
    }  # fmt: skip
    errors = []
    for make in (lambda: D.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, -1.0])),
                 lambda: D.Beta(2.0, 3.0, validate_args=True).log_prob(torch.tensor(1.5)),
                 lambda: reflected.log_prob(torch.tensor([4.0, 1.0])),
                 lambda: D.Categorical(probs=torch.tensor([0.5, 0.5])).log_prob(torch.tensor(2))):  # fmt: skip
        try:
            make()
            errors.append("no error")
        except ValueError as e:
            errors.append(str(e).splitlines()[0])
    unchecked = D.Beta(2.0, 3.0, validate_args=False).log_prob(torch.tensor([1.5, 0.5]))
    with torch.no_grad():
        return {"logistic": {"log_prob": lp, "cdf": cdf, "icdf": icdf, "loc_grad": loc.grad,
                             "scale_grad": scale.grad, "support": str(logistic.support),
                             "shapes": [list(logistic.batch_shape), list(logistic.event_shape)]},
                "reflected": {"log_prob": reflected.log_prob(r), "cdf": reflected.cdf(r),
                              "icdf": reflected.icdf(torch.tensor([0.25, 0.75])),
                              "expanded": reflected.expand((3, 2)).log_prob(r)},
                "action": {"value": action, "log_prob": action_dist.log_prob(action),
                           "shapes": [list(action_dist.batch_shape), list(action_dist.event_shape)],
                           "support": str(action_dist.support),
                           "expanded": list(action_dist.expand((4, 2)).batch_shape)},
                "shapes": shapes, "checks": checks, "errors": errors, "unchecked": unchecked}  # fmt: skip


@program(rtol=1e-5, atol=1e-7)
def svgp_whitened_inducing_points_elbo(torch):
    # a GPyTorch-style sparse variational GP in float64: whitened q(u) = MVN(m, LL^T) with L from
    # LowerCholeskyTransform, KL to N(0, I), predictive marginals through the inducing points'
    # Cholesky factor, the Gaussian expected log-likelihood in closed form, softplus-constrained
    # hyperparameters through SoftplusTransform, and Adam on everything
    nn, D = torch.nn, torch.distributions
    T = D.transforms
    f64 = torch.float64
    rng = np.random.default_rng(400)
    X = torch.tensor(np.sort(rng.uniform(-3, 3, 30)))[:, None]
    y = torch.sin(1.5 * X[:, 0]) + 0.1 * torch.tensor(rng.standard_normal(30))
    M = 6
    Z = nn.Parameter(torch.linspace(-2.5, 2.5, M, dtype=f64)[:, None])
    m = nn.Parameter(torch.zeros(M, dtype=f64))
    raw_L = nn.Parameter(torch.tensor(0.1 * rng.standard_normal((M, M))) - torch.eye(M, dtype=f64))
    raw = nn.Parameter(torch.tensor([0.0, 0.5, -2.0], dtype=f64))  # lengthscale, outputscale, noise
    pos = T.SoftplusTransform()

    def kernel(a, b, lengthscale, outputscale):
        return outputscale * torch.exp(-0.5 * torch.cdist(a, b).pow(2) / lengthscale**2)

    def elbo_terms():
        lengthscale, outputscale, noise = pos(raw).unbind()
        L = T.LowerCholeskyTransform()(raw_L)
        q_u = D.MultivariateNormal(m, scale_tril=L)
        p_u = D.MultivariateNormal(torch.zeros(M, dtype=f64), scale_tril=torch.eye(M, dtype=f64))
        kl = D.kl_divergence(q_u, p_u)
        Kuu = kernel(Z, Z, lengthscale, outputscale) + 1e-6 * torch.eye(M, dtype=f64)
        Luu = torch.linalg.cholesky(Kuu)
        A = torch.linalg.solve_triangular(Luu, kernel(Z, X, lengthscale, outputscale), upper=False)
        f_mean = A.T @ m
        f_var = outputscale - A.pow(2).sum(0) + (L.T @ A).pow(2).sum(0)
        ell = D.Normal(f_mean, noise.sqrt()).log_prob(y) - 0.5 * f_var / noise
        return ell.sum() - kl, kl, f_mean, f_var, noise

    opt = torch.optim.Adam([Z, m, raw_L, raw], lr=0.05)
    elbos, kls = [], []
    for _ in range(6):
        elbo, kl, *_ = elbo_terms()
        opt.zero_grad()
        (-elbo).backward()
        opt.step()
        elbos.append(elbo.item())
        kls.append(kl.item())
    elbo, kl, f_mean, f_var, noise = elbo_terms()
    elbo.backward()
    L = T.LowerCholeskyTransform()(raw_L)
    predictive = D.Normal(f_mean, (f_var + noise).sqrt())
    with torch.no_grad():
        return {"elbos": elbos, "kls": kls, "f_mean": f_mean, "f_var": f_var,
                "pred_lp": predictive.log_prob(y), "L": L, "hypers": pos(raw),
                "hypers_inv": pos.inv(pos(raw)), "softplus_ladj": pos.log_abs_det_jacobian(raw, pos(raw)),
                "grads": [Z.grad, m.grad, raw_L.grad, raw.grad], "Z": Z}  # fmt: skip
