"""The last of ``torch.distributions``' families: NegativeBinomial count likelihoods fitted by
gradient descent, ContinuousBernoulli (a VAE's pixel likelihood) and its KL divergences,
InverseGamma, FisherSnedecor, GeneralizedPareto, VonMises and LogisticNormal values, moments,
shapes and gradients. Values are fixed NumPy inputs: samples are never compared (the two
libraries' random streams differ); only their shapes are."""

from __future__ import annotations

import numpy as np

from programs import program
from programs.common import arr, ints


def _pos(seed: int, *shape: int, low: float = 0.5, high: float = 3.0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(low, high, shape).astype(np.float32)


@program
def negative_binomial_regression(torch):
    D = torch.distributions
    w = torch.tensor(arr(201, 3, scale=0.3), requires_grad=True)
    x = torch.tensor(arr(202, 16, 3))
    counts = torch.tensor(ints(203, 9, 16)).float()
    total = torch.tensor(_pos(204, 16, low=1.0, high=5.0), requires_grad=True)
    opt = torch.optim.SGD([w, total], lr=0.05)
    losses = []
    for _ in range(4):
        nll = -D.NegativeBinomial(total, logits=x @ w).log_prob(counts).mean()
        opt.zero_grad()
        nll.backward()
        opt.step()
        losses.append(nll.item())
    p = torch.tensor([0.0, 0.3, 0.8], requires_grad=True)
    nb = D.NegativeBinomial(torch.tensor([2.5, 0.0, 4.0]), probs=p)
    k = torch.tensor([3.0, 0.0, 1.0])
    nb.log_prob(k).sum().backward()
    expanded = D.NegativeBinomial(3.0, probs=torch.tensor([0.2, 0.6])).expand((4, 2))
    with torch.no_grad():
        return {"losses": losses, "w": w, "total": total, "p_grad": p.grad,
                "log_prob": nb.log_prob(k), "mean": nb.mean, "variance": nb.variance,
                "mode": nb.mode, "logits": nb.logits,
                "expanded": expanded.log_prob(torch.tensor([1.0, 2.0])),
                "batch": list(expanded.batch_shape),
                "sample_shape": list(expanded.sample((5,)).shape)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def continuous_bernoulli_pixels(torch):
    D = torch.distributions
    logits = torch.tensor(arr(211, 3, 5, scale=2.0), requires_grad=True)
    pixels = torch.tensor(np.random.default_rng(212).uniform(0, 1, (3, 5)).astype(np.float32))
    cb = D.ContinuousBernoulli(logits=logits)
    probs = torch.tensor([0.1, 0.4995, 0.5, 0.7, 0.99], requires_grad=True)
    cp = D.ContinuousBernoulli(probs=probs)
    u = torch.tensor([0.05, 0.3, 0.5, 0.8, 0.95])
    q = D.ContinuousBernoulli(probs=torch.tensor(0.3))
    kls = {"cb": D.kl_divergence(cp, q),
           "cb_normal": D.kl_divergence(cp, D.Normal(0.2, 1.5)),
           "cb_exponential": D.kl_divergence(cp, D.Exponential(torch.tensor(2.0))),
           "cb_uniform": D.kl_divergence(cp, D.Uniform(torch.tensor(-0.5), torch.tensor(1.5))),
           "cb_uniform_inside": D.kl_divergence(cp, D.Uniform(0.2, 0.9)),
           "beta_cb": D.kl_divergence(D.Beta(torch.tensor(2.0), torch.tensor(3.0)), cp),
           "uniform_cb": D.kl_divergence(D.Uniform(torch.tensor(0.1), torch.tensor(0.6)), cp),
           "normal_cb": D.kl_divergence(D.Normal(torch.zeros(5), 1.0), cp),
           "cb_pareto": D.kl_divergence(cp, D.Pareto(torch.tensor(1.0), torch.tensor(2.0)))}  # fmt: skip
    total = -cb.log_prob(pixels).sum() + cp.log_prob(u).sum() + cp.entropy().sum()
    total = total + cp.cdf(u).sum() + cp.icdf(u).sum() + cp.mean.sum() + cp.variance.sum()
    total = total + kls["cb"].sum() + kls["cb_normal"].sum() + kls["beta_cb"].sum()
    total.backward()
    with torch.no_grad():
        return {"log_prob": cb.log_prob(pixels), "mean": cb.mean, "variance": cb.variance,
                "probs": cb.probs, "p_log_prob": cp.log_prob(u), "cdf": cp.cdf(u),
                "icdf": cp.icdf(u), "entropy": cp.entropy(), "p_mean": cp.mean,
                "p_var": cp.variance, "stddev": cp.stddev, "logits_grad": logits.grad,
                "probs_grad": probs.grad, "kl": kls,
                "log_normalizer": cp._log_normalizer(torch.tensor([-2.0, -0.0005, 0.3])),
                "expanded": cp.expand((2, 5)).log_prob(u),
                "sample_shape": list(cb.rsample((2,)).shape)}  # fmt: skip


@program(rtol=1e-3, atol=1e-4)
def gamma_relatives_and_tails(torch):
    D = torch.distributions
    conc = torch.tensor([0.8, 1.5, 2.5, 4.0], requires_grad=True)
    rate = torch.tensor([1.0, 2.0, 0.5, 3.0], requires_grad=True)
    v = torch.tensor([0.4, 1.2, 2.0, 0.7])
    ig = D.InverseGamma(conc, rate)
    df1 = torch.tensor([1.0, 3.0, 5.0, 10.0], requires_grad=True)
    df2 = torch.tensor([2.0, 4.5, 6.0, 12.0], requires_grad=True)
    fs = D.FisherSnedecor(df1, df2)
    loc = torch.tensor([0.0, 0.5, -1.0, 0.2], requires_grad=True)
    scale = torch.tensor([1.0, 2.0, 0.5, 1.5], requires_grad=True)
    xi = torch.tensor([0.0, 0.3, -0.5, -1.0], requires_grad=True)
    gp = D.GeneralizedPareto(loc, scale, xi)
    gv = torch.tensor([0.5, 1.0, -0.5, 0.9])
    u = torch.tensor([0.1, 0.4, 0.7, 0.95])
    total = ig.log_prob(v).sum() + ig.entropy().sum()
    total = total + fs.log_prob(v).sum() + gp.log_prob(gv).sum() + gp.cdf(gv).sum()
    total = total + gp.icdf(u).sum() + gp.entropy().sum()
    total.backward()
    with torch.no_grad():
        return {"ig": {"log_prob": ig.log_prob(v), "mean": ig.mean, "mode": ig.mode,
                       "variance": ig.variance, "entropy": ig.entropy(), "cdf": ig.cdf(v),
                       "expanded": ig.expand((2, 4)).log_prob(v)},
                "fs": {"log_prob": fs.log_prob(v), "mean": fs.mean, "mode": fs.mode,
                       "variance": fs.variance, "batch": list(fs.batch_shape),
                       "sample_shape": list(fs.rsample((3,)).shape),
                       "expanded": fs.expand((2, 4)).log_prob(v)},
                "gp": {"log_prob": gp.log_prob(gv), "cdf": gp.cdf(gv), "icdf": gp.icdf(u),
                       "log_survival": gp.log_survival_function(gv),
                       "mean": gp.mean, "variance": gp.variance, "mode": gp.mode,
                       "entropy": gp.entropy(), "upper": gp.support.upper_bound},
                "grads": [conc.grad, rate.grad, df1.grad, df2.grad, loc.grad, scale.grad,
                          xi.grad]}  # fmt: skip


@program(rtol=1e-4, atol=1e-5)
def von_mises_and_logistic_normal(torch):
    D = torch.distributions
    loc = torch.tensor([0.0, 1.0, -2.5, 3.0], requires_grad=True)
    kappa = torch.tensor([0.5, 2.0, 4.0, 20.0], requires_grad=True)
    vm = D.VonMises(loc, kappa)
    angles = torch.tensor([[0.3, 1.2, -2.0, 9.0], [-3.0, 0.0, 2.5, 3.1]])
    ln_loc = torch.tensor(arr(221, 2, 3, scale=0.5), requires_grad=True)
    ln_scale = torch.tensor(_pos(222, 2, 3), requires_grad=True)
    ln = D.LogisticNormal(ln_loc, ln_scale)
    simplex = torch.tensor(np.random.default_rng(223).dirichlet(np.ones(4), 2).astype(np.float32))
    x = torch.tensor(arr(224, 5, 3))
    sb = D.transforms.StickBreakingTransform()
    y = sb(x)
    total = vm.log_prob(angles).sum() + vm.variance.sum() + ln.log_prob(simplex).sum()
    total.backward()
    scalar = D.LogisticNormal(0.3, 1.2)
    with torch.no_grad():
        return {"vm_log_prob": vm.log_prob(angles), "vm_mean": vm.mean, "vm_mode": vm.mode,
                "vm_var": vm.variance, "loc_grad": loc.grad, "kappa_grad": kappa.grad,
                "vm_sample_shape": list(vm.sample((3,)).shape),
                "vm_expanded": vm.expand((2, 4)).log_prob(angles),
                "ln_log_prob": ln.log_prob(simplex), "ln_loc_grad": ln_loc.grad,
                "ln_scale_grad": ln_scale.grad, "ln_event": list(ln.event_shape),
                "ln_batch": list(ln.batch_shape),
                "ln_sample_shape": list(ln.rsample((3,)).shape),
                "ln_expanded": ln.expand((4, 2)).log_prob(simplex),
                "scalar_event": list(scalar.event_shape),
                "scalar_log_prob": scalar.log_prob(torch.tensor([0.3, 0.7])),
                "sb": y, "sb_inv": sb.inv(y), "sb_ladj": sb.log_abs_det_jacobian(x, y),
                "sb_shape": list(sb.forward_shape((5, 3)))}  # fmt: skip


@program(rtol=1e-6, atol=1e-8)
def wishart_and_lkj_cholesky_densities(torch):
    D = torch.distributions
    rng = np.random.default_rng(225)
    m = rng.standard_normal((2, 3, 3))
    cov = torch.tensor(m @ np.swapaxes(m, -1, -2) + np.eye(3), requires_grad=True)
    df = torch.tensor([5.5, 7.0], dtype=torch.float64, requires_grad=True)
    w = D.Wishart(df, covariance_matrix=cov)
    x0 = rng.standard_normal((3, 3))
    x = torch.tensor(x0 @ x0.T + 2 * np.eye(3))
    total = w.log_prob(x).sum() + w.entropy().sum()
    conc = torch.tensor([0.5, 1.0, 3.0], dtype=torch.float64, requires_grad=True)
    lkj = D.LKJCholesky(4, conc)
    corr_factor = torch.tensor(np.linalg.cholesky(np.corrcoef(rng.standard_normal((4, 10)))))
    total = total + lkj.log_prob(corr_factor).sum()
    total.backward()
    precision = D.Wishart(torch.tensor(4.0, dtype=torch.float64),
                          precision_matrix=torch.tensor(np.linalg.inv(m[0] @ m[0].T + np.eye(3))))  # fmt: skip
    with torch.no_grad():
        return {"log_prob": w.log_prob(x), "entropy": w.entropy(), "mean": w.mean,
                "variance": w.variance, "mode": w.mode, "df_grad": df.grad, "cov_grad": cov.grad,
                "lkj_log_prob": lkj.log_prob(corr_factor), "conc_grad": conc.grad,
                "precision_log_prob": precision.log_prob(x),
                "scale_tril": precision.scale_tril, "shapes": [list(w.batch_shape), list(w.event_shape),
                list(lkj.batch_shape), list(lkj.event_shape), list(w.rsample((4,)).shape),
                list(lkj.sample((2,)).shape)]}  # fmt: skip
