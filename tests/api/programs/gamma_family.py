"""The gamma family where models use it: a Gamma likelihood fitted by maximum likelihood, a
Dirichlet prior's KL in a topic-model style encoder, a Student-t regression, Beta and Poisson
log-likelihoods, and ``lgamma``/``digamma``/``polygamma``/``erfinv`` with their gradients. Samples
are never compared (the two libraries' random streams differ)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


@program(rtol=1e-4, atol=1e-6)
def gamma_family_functions_and_gradients(torch):
    x = torch.tensor(np.linspace(0.2, 6.0, 9), requires_grad=True)  # float64
    neg = torch.tensor([-2.5, -1.3, -0.4], dtype=torch.float64, requires_grad=True)
    p = torch.tensor([-0.95, -0.5, 0.0, 0.3, 0.99], dtype=torch.float64, requires_grad=True)
    out = {
        "lgamma": torch.lgamma(x),
        "lgamma_neg": neg.lgamma(),
        "digamma": torch.digamma(x),
        "digamma_neg": torch.special.digamma(neg),
        "trigamma": torch.polygamma(1, x),
        "polygamma3": x.polygamma(3),
        "erfinv": torch.erfinv(p),
        "ndtri": torch.special.ndtri((p + 1) / 2.001 + 1e-4),
        "mvlgamma": torch.mvlgamma(x + 1.0, p=3),
        "gammaln": torch.special.gammaln(x),
        "psi": torch.special.psi(x),
    }
    total = sum(v.sum() for v in out.values())
    (gx, gn, gp) = torch.autograd.grad(total, [x, neg, p], create_graph=True)
    (hx,) = torch.autograd.grad(gx.sum(), x)
    return {**out, "x_grad": gx, "neg_grad": gn, "p_grad": gp, "x_hess_diag": hx}


@program
def gamma_maximum_likelihood_fit(torch):
    D = torch.distributions
    data = torch.tensor(np.random.default_rng(3).gamma(2.5, 1 / 1.5, 64).astype(np.float32))
    raw_c = torch.tensor([0.0], requires_grad=True)
    raw_r = torch.tensor([0.0], requires_grad=True)
    opt = torch.optim.Adam([raw_c, raw_r], lr=0.1)
    losses = []
    for _ in range(6):
        c = torch.nn.functional.softplus(raw_c)
        r = torch.nn.functional.softplus(raw_r)
        dist = D.Gamma(c, r)
        nll = -dist.log_prob(data).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    with torch.no_grad():
        dist = D.Gamma(torch.nn.functional.softplus(raw_c), torch.nn.functional.softplus(raw_r))
        prior = D.Gamma(torch.tensor([2.0]), torch.tensor([1.0]))
        chi = D.Chi2(torch.tensor([3.0, 5.0]))
    return {"losses": losses, "raw_c": raw_c, "raw_r": raw_r, "mean": dist.mean,
            "variance": dist.variance, "mode": dist.mode, "entropy": dist.entropy(),
            "kl": D.kl_divergence(dist, prior), "chi_logp": chi.log_prob(data[:2]),
            "chi_mean": chi.mean, "chi_df": chi.df}  # fmt: skip


@program
def dirichlet_prior_kl_in_an_encoder(torch):
    D = torch.distributions
    nn = torch.nn
    enc = set_weights(torch, nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4)), seed=21)
    x = torch.tensor(arr(22, 10, 6))
    docs = torch.tensor(
        np.random.default_rng(23).dirichlet([1.0, 2.0, 1.5, 0.5], 10).astype(np.float32)
    )
    prior = D.Dirichlet(torch.full((4,), 0.7))
    opt = torch.optim.SGD(enc.parameters(), lr=0.05)
    losses = []
    for _ in range(3):
        alpha = nn.functional.softplus(enc(x)) + 0.1
        post = D.Dirichlet(alpha)
        loss = (-post.log_prob(docs) + D.kl_divergence(post, prior)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():
        post = D.Dirichlet(nn.functional.softplus(enc(x)) + 0.1)
    return {"losses": losses, **grads(enc), "mean": post.mean, "variance": post.variance,
            "entropy": post.entropy(), "batch": list(post.batch_shape),
            "event": list(post.event_shape)}  # fmt: skip


@program
def student_t_regression_beta_and_poisson_likelihoods(torch):
    D = torch.distributions
    w = torch.tensor(arr(31, 3, scale=0.3), requires_grad=True)
    log_df = torch.tensor([1.0], requires_grad=True)
    x, y = torch.tensor(arr(32, 20, 3)), torch.tensor(arr(33, 20))
    opt = torch.optim.Adam([w, log_df], lr=0.05)
    losses = []
    for _ in range(4):
        dist = D.StudentT(log_df.exp(), x @ w, torch.tensor(0.8))
        nll = -dist.log_prob(y).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    a = torch.tensor([2.0, 0.5, 3.0], requires_grad=True)
    b = torch.tensor([3.0, 0.5, 1.0], requires_grad=True)
    beta = D.Beta(a, b)
    v = torch.tensor([0.3, 0.9, 0.6])
    rate = torch.tensor([0.5, 2.0, 7.5], requires_grad=True)
    counts = torch.tensor(ints(34, 6, 3)).float()
    pois = D.Poisson(rate)
    total = beta.log_prob(v).sum() + beta.entropy().sum() + pois.log_prob(counts).sum()
    total = total + D.kl_divergence(beta, D.Beta(torch.ones(3), torch.ones(3))).sum()
    total.backward()
    t = D.StudentT(torch.tensor([0.5, 1.5, 3.0]))
    n = D.Normal(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0]))
    return {"losses": losses, "w": w, "log_df": log_df, "beta_mean": beta.mean,
            "beta_var": beta.variance, "beta_mode": beta.mode, "a_grad": a.grad, "b_grad": b.grad,
            "rate_grad": rate.grad, "pois_mean": pois.mean, "pois_mode": pois.mode,
            "t_mean": t.mean, "t_var": t.variance, "t_entropy": t.entropy(),
            "icdf": n.icdf(torch.tensor([0.025, 0.9]))}  # fmt: skip


@program(rtol=1e-5, atol=1e-7)
def bessel_zeta_incomplete_gamma_and_gamma_cdf(torch):
    sp = torch.special
    x = torch.tensor(np.linspace(-6.0, 6.0, 7), requires_grad=True)  # float64
    q = torch.tensor([0.5, 1.0, 2.5], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([0.2, 1.5, 4.0], dtype=torch.float64, requires_grad=True)
    out = {
        "i0": torch.i0(x), "i0e": sp.i0e(x), "i1": sp.i1(x), "i1e": sp.i1e(x),
        "erfcx": sp.erfcx(x / 3), "zeta": sp.zeta(3.0, q), "zeta_t": sp.zeta(q + 1.5, q),
        "gammainc": sp.gammainc(q.detach(), v), "gammaincc": torch.igammac(q.detach(), v),
        "igamma": q.detach().igamma(v),
        "spherical_j0": sp.spherical_bessel_j0(x), "mod_i0": sp.modified_bessel_i0(x),
        "mod_i1": sp.modified_bessel_i1(x),
    }  # fmt: skip
    # (torch's spherical_bessel_j0 and modified_bessel_* have no derivative: GT's do; left out)
    skip = ("zeta_t", "spherical_j0", "mod_i0", "mod_i1")
    total = sum(t.sum() for k, t in out.items() if k not in skip)
    (gx, gq, gv) = torch.autograd.grad(total, [x, q, v])
    rate = torch.tensor([1.5, 0.5], requires_grad=True)
    dist = torch.distributions.Gamma(torch.tensor([2.0, 0.7]), rate)
    cdf = dist.cdf(torch.tensor([1.0, 2.0]))
    cdf.sum().backward()
    chi = torch.distributions.Chi2(torch.tensor([3.0])).cdf(torch.tensor([2.5]))
    pts = torch.tensor(np.concatenate([np.linspace(-60.0, 60.0, 25), [0.0, 1e-6, 7.9, 8.1, 49.0,
                                                                       51.0, 300.0]]))  # fmt: skip
    pos = pts.abs() + 1e-3
    bessel = {"j0": sp.bessel_j0(pts), "j1": sp.bessel_j1(pts), "y0": sp.bessel_y0(pos),
              "y1": sp.bessel_y1(pos), "k0": sp.modified_bessel_k0(pos),
              "k1": sp.modified_bessel_k1(pos), "k0e": sp.scaled_modified_bessel_k0(pos),
              "k1e": sp.scaled_modified_bessel_k1(pos), "y0_neg": sp.bessel_y0(pts[:3]),
              "requires_grad": sp.bessel_j0(x).requires_grad}  # fmt: skip
    return {**out, "x_grad": gx, "q_grad": gq, "v_grad": gv, "cdf": cdf, "rate_grad": rate.grad,
            "chi2_cdf": chi, **bessel}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def orthogonal_polynomials(torch):
    sp = torch.special
    x = torch.tensor([0.3, -1.0, 1.0, 2.5, -0.7], dtype=torch.float64)
    n = torch.tensor([0, 1, -1, 7, 4])
    names = ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
             "chebyshev_polynomial_w", "shifted_chebyshev_polynomial_t",
             "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
             "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
             "laguerre_polynomial_l", "legendre_polynomial_p")  # fmt: skip
    out = {}
    for name in names:
        fn = getattr(sp, name)
        out[name + "_3"] = fn(x, 3)
        out[name + "_n"] = fn(x, n)
        out[name + "_grid"] = fn(x[:, None], torch.arange(6)[None, :])
    out["float32"] = sp.legendre_polynomial_p(torch.tensor([0.5, 0.25]), 5)
    return out
