"""More of ``torch.distributions`` where models use it: a mixture density network head trained
with ``MixtureSameFamily``, count likelihoods (Binomial, Geometric, Multinomial) with gradients,
the relaxed (Gumbel-softmax) densities, and the heavy-tailed, extreme-value, power and low-rank
Gaussian families' values, moments and KL divergences. Values are fixed NumPy inputs: samples are
never compared (the two libraries' random streams differ)."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, grads, ints, set_weights


@program
def mixture_density_network_head(torch):
    D = torch.distributions
    nn = torch.nn
    k, dim = 3, 2
    net = set_weights(torch, nn.Sequential(nn.Linear(4, 16), nn.Tanh(),
                                           nn.Linear(16, k + 2 * k * dim)), seed=81)  # fmt: skip
    x, y = torch.tensor(arr(82, 24, 4)), torch.tensor(arr(83, 24, dim))
    opt = torch.optim.Adam(net.parameters(), lr=0.02)

    def mixture(out):
        logits = out[:, :k]
        mu = out[:, k : k + k * dim].reshape(-1, k, dim)
        sigma = torch.nn.functional.softplus(out[:, k + k * dim :]).reshape(-1, k, dim) + 0.05
        comp = D.Independent(D.Normal(mu, sigma), 1)
        return D.MixtureSameFamily(D.Categorical(logits=logits), comp)

    losses = []
    for _ in range(4):
        nll = -mixture(net(x)).log_prob(y).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    with torch.no_grad():
        gmm = mixture(net(x))
        one = D.MixtureSameFamily(D.Categorical(probs=torch.tensor([0.2, 0.5, 0.3])),
                                  D.Normal(torch.tensor([-1.0, 0.0, 2.0]),
                                           torch.tensor([0.5, 1.0, 2.0])))  # fmt: skip
    return {"losses": losses, **grads(net), "mean": gmm.mean, "variance": gmm.variance,
            "log_prob": gmm.log_prob(y), "batch": list(gmm.batch_shape),
            "event": list(gmm.event_shape), "one_cdf": one.cdf(torch.tensor([-0.5, 0.3, 4.0])),
            "one_mean": one.mean, "one_var": one.variance,
            "one_expanded": one.expand((2, 3)).log_prob(torch.tensor([0.1, 0.2, 0.3]))}  # fmt: skip


@program
def count_likelihoods_with_gradients(torch):
    D = torch.distributions
    w = torch.tensor(arr(84, 3, scale=0.3), requires_grad=True)
    x = torch.tensor(arr(85, 20, 3))
    trials = torch.tensor(ints(86, 8, 20) + 1).float()
    successes = torch.floor(trials * torch.tensor(np.random.default_rng(87).uniform(0, 1, 20)
                                                  .astype(np.float32)))  # fmt: skip
    opt = torch.optim.SGD([w], lr=0.05)
    losses = []
    for _ in range(4):
        dist = D.Binomial(trials, logits=x @ w)
        nll = -dist.log_prob(successes).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    p = torch.tensor([0.15, 0.5, 0.8], requires_grad=True)
    geo = D.Geometric(p)
    waits = torch.tensor([4.0, 0.0, 2.0])
    logits = torch.tensor(arr(88, 2, 4), requires_grad=True)
    multi = D.Multinomial(5, logits=logits)
    counts = torch.tensor([[1.0, 0.0, 3.0, 1.0], [0.0, 2.0, 2.0, 1.0]])
    total = geo.log_prob(waits).sum() + geo.entropy().sum() + multi.log_prob(counts).sum()
    total = total + multi.entropy().sum()
    total.backward()
    b = D.Binomial(6, probs=torch.tensor([0.1, 0.45, 0.9]))
    q = D.Binomial(6, probs=torch.tensor([0.3, 0.3, 0.3]))
    return {"losses": losses, "w": w, "p_grad": p.grad, "logits_grad": logits.grad,
            "geo_mean": geo.mean, "geo_var": geo.variance, "geo_logits": geo.logits,
            "multi_mean": multi.mean, "multi_var": multi.variance, "multi_probs": multi.probs,
            "b_mode": b.mode, "b_entropy": b.entropy(), "b_support": b.enumerate_support(),
            "b_logits": b.logits, "kl_binomial": D.kl_divergence(b, q),
            "kl_geometric": D.kl_divergence(geo, D.Geometric(torch.tensor(0.4))),
            "kl_bern_pois": D.kl_divergence(D.Bernoulli(torch.tensor([0.3])),
                                            D.Poisson(torch.tensor([1.5])))}  # fmt: skip


@program
def relaxed_bernoulli_and_gumbel_softmax_densities(torch):
    D = torch.distributions
    temp = torch.tensor(0.6, requires_grad=True)
    logits = torch.tensor(arr(89, 5), requires_grad=True)
    rb = D.RelaxedBernoulli(temp, logits=logits)
    v = torch.tensor([0.05, 0.3, 0.5, 0.8, 0.97])
    cat_temp = torch.tensor(0.4, requires_grad=True)
    cat_logits = torch.tensor(arr(90, 2, 4), requires_grad=True)
    rc = D.RelaxedOneHotCategorical(cat_temp, logits=cat_logits)
    y = torch.softmax(torch.tensor(arr(91, 3, 2, 4)), -1)
    lp_b, lp_c = rb.log_prob(v), rc.log_prob(y)
    (lp_b.sum() + lp_c.sum()).backward()
    probs = D.RelaxedBernoulli(torch.tensor(2.0), probs=torch.tensor([0.2, 0.7]))
    return {"lp_bernoulli": lp_b, "lp_categorical": lp_c, "temp_grad": temp.grad,
            "logits_grad": logits.grad, "cat_temp_grad": cat_temp.grad,
            "cat_logits_grad": cat_logits.grad, "probs": rb.probs, "cat_probs": rc.probs,
            "batch": list(rc.batch_shape), "event": list(rc.event_shape),
            "probs_lp": probs.log_prob(torch.tensor([0.4, 0.6])), "temperature": rb.temperature,
            "expanded": probs.expand((3, 2)).log_prob(torch.tensor([0.4, 0.6]))}  # fmt: skip


@program
def heavy_tailed_extreme_value_and_low_rank_families(torch):
    D = torch.distributions
    loc = torch.tensor([0.0, 1.0, -2.0], requires_grad=True)
    scale = torch.tensor([1.0, 0.5, 3.0], requires_grad=True)
    conc = torch.tensor([0.8, 1.5, 3.0], requires_grad=True)
    v = torch.tensor([0.3, 1.2, 2.5])
    u = torch.tensor([0.1, 0.5, 0.85])
    fams = {
        "cauchy": D.Cauchy(loc, scale), "gumbel": D.Gumbel(loc, scale),
        "half_normal": D.HalfNormal(scale), "half_cauchy": D.HalfCauchy(scale),
        "weibull": D.Weibull(scale, conc), "pareto": D.Pareto(scale * 0.2, conc),
        "kumaraswamy": D.Kumaraswamy(conc, scale),
    }  # fmt: skip
    out, total = {}, 0.0
    for name, d in fams.items():
        x = v / 3.0 if name == "kumaraswamy" else v
        lp, cdf, ent = d.log_prob(x), d.cdf(x), d.entropy()
        total = total + lp.sum() + cdf.sum() + ent.sum()
        out[name] = {"log_prob": lp, "cdf": cdf, "icdf": d.icdf(u), "entropy": ent}
        for moment in ("mean", "variance", "mode"):
            out[name][moment] = getattr(d, moment)
    rng = np.random.default_rng(92)
    lr_loc = torch.tensor(rng.standard_normal((2, 4)).astype(np.float32), requires_grad=True)
    factor = torch.tensor(rng.standard_normal((2, 4, 2)).astype(np.float32), requires_grad=True)
    diag = torch.tensor(rng.uniform(0.5, 2.0, 4).astype(np.float32), requires_grad=True)
    lr = D.LowRankMultivariateNormal(lr_loc, factor, diag)
    q = D.LowRankMultivariateNormal(torch.zeros(4), torch.ones(4, 1) * 0.5, torch.ones(4))
    full = D.MultivariateNormal(torch.zeros(4), torch.eye(4) * 1.5)
    pts = torch.tensor(rng.standard_normal((3, 2, 4)).astype(np.float32))
    kls = {"lowrank": D.kl_divergence(lr, q), "to_full": D.kl_divergence(lr, full),
           "from_full": D.kl_divergence(full, lr),
           "gumbel": D.kl_divergence(fams["gumbel"], D.Gumbel(torch.tensor(0.5), torch.tensor(2.0))),
           "gumbel_normal": D.kl_divergence(fams["gumbel"], D.Normal(0.0, 2.0)),
           "cauchy": D.kl_divergence(fams["cauchy"], D.Cauchy(0.0, 1.0)),
           "half_normal": D.kl_divergence(fams["half_normal"], D.HalfNormal(torch.tensor(1.0))),
           "pareto": D.kl_divergence(fams["pareto"], D.Pareto(torch.tensor(0.05), torch.tensor(2.0))),
           "pareto_exp": D.kl_divergence(fams["pareto"], D.Exponential(torch.tensor(1.5)))}  # fmt: skip
    total = total + lr.log_prob(pts).sum() + lr.entropy().sum()
    total = total + sum(t.sum() for t in kls.values())
    total.backward()
    with torch.no_grad():
        lr_values = {"log_prob": lr.log_prob(pts), "covariance": lr.covariance_matrix,
                     "precision": lr.precision_matrix, "scale_tril": lr.scale_tril,
                     "variance": lr.variance}  # fmt: skip
    return {**out, "kl": kls, "lowrank": lr_values, "loc_grad": loc.grad,
            "scale_grad": scale.grad, "conc_grad": conc.grad, "factor_grad": factor.grad,
            "diag_grad": diag.grad, "lr_loc_grad": lr_loc.grad}  # fmt: skip
