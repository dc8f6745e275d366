"""Closed-form KL divergences that involve the counting, heavy-tailed, extreme-value, Pareto and
low-rank Gaussian families (PyTorch's formulas), registered with
:func:`gt.distributions.kl.register_kl` when :mod:`gt.distributions` is imported. Pairs whose
supports make the divergence infinite return ``inf``, as PyTorch does."""

from __future__ import annotations

import math

from gt.distributions.continuous import Exponential, Laplace, Normal, Uniform
from gt.distributions.discrete import Bernoulli
from gt.distributions.gamma_family import Beta, Gamma, Poisson
from gt.distributions.kl import _kl_normal_normal, register_kl
from gt.distributions.lowrank_multivariate_normal import (
    LowRankMultivariateNormal,
    batch_trace_xxt,
    lowrank_logdet,
    lowrank_mahalanobis,
)
from gt.distributions.more_continuous import EULER_GAMMA, Cauchy, Gumbel, HalfNormal
from gt.distributions.more_discrete import Binomial, Geometric
from gt.distributions.multivariate_normal import MultivariateNormal, _linalg, batch_mahalanobis
from gt.distributions.power_family import Pareto
from gt.factories import full_like
from gt.ops.functional import broadcast_shapes, where
from gt.special import xlogy
from gt.tensor import Tensor


def _infinite_like(t: Tensor) -> Tensor:
    return full_like(t, math.inf)


def _x_log_x(t: Tensor) -> Tensor:
    return xlogy(t, t)  # 0 at 0


# ------------------------------------------------------------------ same family
@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p: Binomial, q: Binomial) -> Tensor:
    if bool((p.total_count < q.total_count).any()):
        raise NotImplementedError(
            "KL between Binomials where q.total_count > p.total_count is not implemented"
        )
    kl = p.total_count * (p.probs * (p.logits - q.logits) + (-p.probs).log1p() - (-q.probs).log1p())
    return where(p.total_count > q.total_count, math.inf, kl)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p: Geometric, q: Geometric) -> Tensor:
    return -p.entropy() - (-q.probs).log1p() / p.probs - q.logits


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p: Cauchy, q: Cauchy) -> Tensor:
    t1 = ((p.scale + q.scale).pow(2) + (p.loc - q.loc).pow(2)).log()
    t2 = (4 * p.scale * q.scale).log()
    return t1 - t2


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p: HalfNormal, q: HalfNormal) -> Tensor:
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p: Gumbel, q: Gumbel) -> Tensor:
    ct1 = p.scale / q.scale
    ct2 = q.loc / q.scale
    ct3 = p.loc / q.scale
    t1 = -ct1.log() - ct2 + ct3
    t2 = ct1 * EULER_GAMMA
    t3 = (ct2 + (1 + ct1).lgamma() - ct3).exp()
    return t1 + t2 + t3 - (1 + EULER_GAMMA)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p: Pareto, q: Pareto) -> Tensor:
    scale_ratio = p.scale / q.scale
    alpha_ratio = q.alpha / p.alpha
    result = q.alpha * scale_ratio.log() - alpha_ratio.log() + alpha_ratio - 1
    return where(p.scale < q.scale, math.inf, result)


@register_kl(LowRankMultivariateNormal, LowRankMultivariateNormal)
def _kl_lowrank_lowrank(p: LowRankMultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Low Rank Multivariate Normals with "
            "different event shapes cannot be computed"
        )
    pw, pd = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    qw, qd = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    term1 = lowrank_logdet(qw, qd, q._capacitance_tril) - lowrank_logdet(
        pw, pd, p._capacitance_tril
    )
    term3 = lowrank_mahalanobis(qw, qd, q.loc - p.loc, q._capacitance_tril)
    # inv(qcov) pcov = [inv(qD) - A^T A] (pD + pW pW^T)
    a = _q_woodbury_factor(q)
    term21 = (pd / qd).sum(-1)
    term22 = batch_trace_xxt(pw * qd.rsqrt().unsqueeze(-1))
    term23 = batch_trace_xxt(a * pd.sqrt().unsqueeze(-2))
    term24 = batch_trace_xxt(a @ pw)
    return 0.5 * (term1 + term21 + term22 - term23 - term24 + term3 - p.event_shape[0])


@register_kl(MultivariateNormal, LowRankMultivariateNormal)
def _kl_mvn_lowrank(p: MultivariateNormal, q: LowRankMultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with "
            "different event shapes cannot be computed"
        )
    qw, qd = q._unbroadcasted_cov_factor, q._unbroadcasted_cov_diag
    pl = p._unbroadcasted_scale_tril
    term1 = lowrank_logdet(qw, qd, q._capacitance_tril) - 2 * pl.diagonal(
        dim1=-2, dim2=-1
    ).log().sum(-1)
    term3 = lowrank_mahalanobis(qw, qd, q.loc - p.loc, q._capacitance_tril)
    # inv(qcov) pcov = [inv(qD) - A^T A] pL pL^T
    a = _q_woodbury_factor(q)
    term21 = batch_trace_xxt(pl * qd.rsqrt().unsqueeze(-1))
    term22 = batch_trace_xxt(a @ pl)
    return 0.5 * (term1 + term21 - term22 + term3 - p.event_shape[0])


@register_kl(LowRankMultivariateNormal, MultivariateNormal)
def _kl_lowrank_mvn(p: LowRankMultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two (Low Rank) Multivariate Normals with "
            "different event shapes cannot be computed"
        )
    pw, pd = p._unbroadcasted_cov_factor, p._unbroadcasted_cov_diag
    ql = q._unbroadcasted_scale_tril
    term1 = 2 * ql.diagonal(dim1=-2, dim2=-1).log().sum(-1) - lowrank_logdet(
        pw, pd, p._capacitance_tril
    )
    term3 = batch_mahalanobis(ql, q.loc - p.loc)
    batch = tuple(broadcast_shapes(tuple(ql.shape[:-2]), tuple(pw.shape[:-2])))
    n = p.event_shape[0]
    lower = ql.expand(batch + (n, n))
    solve = _linalg().solve_triangular
    term21 = batch_trace_xxt(solve(lower, pw.expand(batch + (n, pw.shape[-1])), upper=False))
    term22 = batch_trace_xxt(solve(lower, pd.sqrt().diag_embed().expand(batch + (n, n)),
                                   upper=False))  # fmt: skip
    return 0.5 * (term1 + term21 + term22 + term3 - n)


def _q_woodbury_factor(q: LowRankMultivariateNormal) -> Tensor:
    """``A = C^-1 W^T D^-1`` (``C`` the capacitance factor), so ``inv(cov) = inv(D) - A^T A``."""
    wt_dinv = q._unbroadcasted_cov_factor.mT / q._unbroadcasted_cov_diag.unsqueeze(-2)
    cap = q._capacitance_tril
    batch = tuple(broadcast_shapes(tuple(cap.shape[:-2]), tuple(wt_dinv.shape[:-2])))
    cap = cap.expand(batch + tuple(cap.shape[-2:]))
    wt_dinv = wt_dinv.expand(batch + tuple(wt_dinv.shape[-2:]))
    return _linalg().solve_triangular(cap, wt_dinv, upper=False)


# ------------------------------------------------------------------ across families
@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p: Bernoulli, q: Poisson) -> Tensor:
    return -p.entropy() - (p.probs * q.rate.log() - q.rate)


@register_kl(Poisson, Bernoulli)
@register_kl(Poisson, Binomial)
def _kl_poisson_infinity(p: Poisson, q: object) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Beta, Pareto)
def _kl_beta_infinity(p: Beta, q: Pareto) -> Tensor:
    return _infinite_like(p.concentration1)


@register_kl(Exponential, Pareto)
def _kl_exponential_infinity(p: Exponential, q: Pareto) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Gamma, Pareto)
def _kl_gamma_infinity(p: Gamma, q: Pareto) -> Tensor:
    return _infinite_like(p.concentration)


@register_kl(Laplace, Pareto)
@register_kl(Normal, Pareto)
def _kl_loc_infinity(p: Laplace | Normal, q: Pareto) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Gumbel, Beta)
@register_kl(Gumbel, Exponential)
@register_kl(Gumbel, Gamma)
@register_kl(Gumbel, Pareto)
@register_kl(Gumbel, Uniform)
def _kl_gumbel_infinity(p: Gumbel, q: object) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Pareto, Beta)
@register_kl(Pareto, Uniform)
def _kl_pareto_infinity(p: Pareto, q: object) -> Tensor:
    return _infinite_like(p.scale)


@register_kl(Exponential, Gumbel)
def _kl_exponential_gumbel(p: Exponential, q: Gumbel) -> Tensor:
    scale_rate_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = scale_rate_prod.log() - 1
    t2 = loc_scale_ratio.exp() * scale_rate_prod / (scale_rate_prod + 1)
    t3 = scale_rate_prod.reciprocal()
    return t1 - loc_scale_ratio + t2 + t3


@register_kl(Gamma, Gumbel)
def _kl_gamma_gumbel(p: Gamma, q: Gumbel) -> Tensor:
    c = p.concentration
    beta_scale_prod = p.rate * q.scale
    loc_scale_ratio = q.loc / q.scale
    t1 = (c - 1) * c.digamma() - c.lgamma() - c
    t2 = beta_scale_prod.log() + c / beta_scale_prod
    t3 = loc_scale_ratio.exp() * (1 + beta_scale_prod.reciprocal()).pow(-c) - loc_scale_ratio
    return t1 + t2 + t3


@register_kl(Gumbel, Normal)
def _kl_gumbel_normal(p: Gumbel, q: Normal) -> Tensor:
    param_ratio = p.scale / q.scale
    t1 = (param_ratio / math.sqrt(2 * math.pi)).log()
    t2 = (math.pi * param_ratio * 0.5).pow(2) / 3
    t3 = ((p.loc + p.scale * EULER_GAMMA - q.loc) / q.scale).pow(2) * 0.5
    return -t1 + t2 + t3 - (EULER_GAMMA + 1)


@register_kl(Normal, Gumbel)
def _kl_normal_gumbel(p: Normal, q: Gumbel) -> Tensor:
    mean_scale_ratio = p.loc / q.scale
    var_scale_sqr_ratio = (p.scale / q.scale).pow(2)
    loc_scale_ratio = q.loc / q.scale
    t1 = var_scale_sqr_ratio.log() * 0.5
    t2 = mean_scale_ratio - loc_scale_ratio
    t3 = (-mean_scale_ratio + 0.5 * var_scale_sqr_ratio + loc_scale_ratio).exp()
    return -t1 + t2 + t3 - (0.5 * (1 + math.log(2 * math.pi)))


@register_kl(Uniform, Gumbel)
def _kl_uniform_gumbel(p: Uniform, q: Gumbel) -> Tensor:
    common_term = q.scale / (p.high - p.low)
    high_loc_diff = (p.high - q.loc) / q.scale
    low_loc_diff = (p.low - q.loc) / q.scale
    t1 = common_term.log() + 0.5 * (high_loc_diff + low_loc_diff)
    t2 = common_term * ((-high_loc_diff).exp() - (-low_loc_diff).exp())
    return t1 - t2


@register_kl(Pareto, Exponential)
def _kl_pareto_exponential(p: Pareto, q: Exponential) -> Tensor:
    scale_rate_prod = p.scale * q.rate
    t1 = (p.alpha / scale_rate_prod).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * scale_rate_prod / (p.alpha - 1)
    return where(p.alpha <= 1, math.inf, t1 - t2 + t3 - 1)


@register_kl(Pareto, Gamma)
def _kl_pareto_gamma(p: Pareto, q: Gamma) -> Tensor:
    common_term = p.scale.log() + p.alpha.reciprocal()
    t1 = p.alpha.log() - common_term
    t2 = q.concentration.lgamma() - q.concentration * q.rate.log()
    t3 = (1 - q.concentration) * common_term
    t4 = q.rate * p.alpha * p.scale / (p.alpha - 1)
    return where(p.alpha <= 1, math.inf, t1 + t2 + t3 + t4 - 1)


@register_kl(Pareto, Normal)
def _kl_pareto_normal(p: Pareto, q: Normal) -> Tensor:
    var_normal = 2 * q.scale.pow(2)
    common_term = p.scale / (p.alpha - 1)
    t1 = (math.sqrt(2 * math.pi) * q.scale * p.alpha / p.scale).log()
    t2 = p.alpha.reciprocal()
    t3 = p.alpha * common_term.pow(2) / (p.alpha - 2)
    t4 = (p.alpha * common_term - q.loc).pow(2)
    return where(p.alpha <= 2, math.inf, t1 - t2 + (t3 + t4) / var_normal - 1)


@register_kl(Uniform, Pareto)
def _kl_uniform_pareto(p: Uniform, q: Pareto) -> Tensor:
    support_uniform = p.high - p.low
    t1 = (q.alpha * q.scale.pow(q.alpha) * support_uniform).log()
    t2 = (_x_log_x(p.high) - _x_log_x(p.low) - support_uniform) / support_uniform
    return where(p.low < q.scale, math.inf, t2 * (q.alpha + 1) - t1)
