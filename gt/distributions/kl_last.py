"""Closed-form KL divergences that involve :class:`ContinuousBernoulli` (PyTorch's formulas and
its infinite pairs), registered with :func:`gt.distributions.kl.register_kl` when
:mod:`gt.distributions` is imported."""

from __future__ import annotations

import math

from gt.distributions.continuous import Exponential, Laplace, Normal, Uniform
from gt.distributions.gamma_family import Beta, Gamma
from gt.distributions.kl import register_kl
from gt.distributions.last_continuous import ContinuousBernoulli
from gt.distributions.more_continuous import Gumbel
from gt.distributions.power_family import Pareto
from gt.factories import full_like
from gt.ops.functional import where
from gt.tensor import Tensor


def _infinite_like(t: Tensor) -> Tensor:
    return full_like(t, math.inf)


@register_kl(ContinuousBernoulli, ContinuousBernoulli)
def _kl_cb_cb(p: ContinuousBernoulli, q: ContinuousBernoulli) -> Tensor:
    t1 = p.mean * (p.logits - q.logits)
    t2 = p._cont_bern_log_norm() + (-p.probs).log1p()
    t3 = -q._cont_bern_log_norm() - (-q.probs).log1p()
    return t1 + t2 + t3


@register_kl(Beta, ContinuousBernoulli)
def _kl_beta_cb(p: Beta, q: ContinuousBernoulli) -> Tensor:
    return -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()


@register_kl(ContinuousBernoulli, Pareto)
def _kl_cb_infinity(p: ContinuousBernoulli, q: Pareto) -> Tensor:
    return _infinite_like(p.probs)


@register_kl(ContinuousBernoulli, Exponential)
def _kl_cb_exponential(p: ContinuousBernoulli, q: Exponential) -> Tensor:
    return -p.entropy() - q.rate.log() + q.rate * p.mean


@register_kl(ContinuousBernoulli, Normal)
def _kl_cb_normal(p: ContinuousBernoulli, q: Normal) -> Tensor:
    t1 = -p.entropy()
    t2 = 0.5 * (math.log(2.0 * math.pi) + (q.loc / q.scale).square()) + q.scale.log()
    t3 = (p.variance + p.mean.square() - 2.0 * q.loc * p.mean) / (2.0 * q.scale.square())
    return t1 + t2 + t3


@register_kl(ContinuousBernoulli, Uniform)
def _kl_cb_uniform(p: ContinuousBernoulli, q: Uniform) -> Tensor:
    result = -p.entropy() + (q.high - q.low).log()
    outside = (q.low >= p.support.lower_bound) | (q.high <= p.support.upper_bound)
    return where(outside, math.inf, result)


@register_kl(Uniform, ContinuousBernoulli)
def _kl_uniform_cb(p: Uniform, q: ContinuousBernoulli) -> Tensor:
    result = -p.entropy() - p.mean * q.logits - (-q.probs).log1p() - q._cont_bern_log_norm()
    outside = (p.high >= q.support.upper_bound) | (p.low <= q.support.lower_bound)
    return where(outside, math.inf, result)


@register_kl(Exponential, ContinuousBernoulli)
def _kl_exponential_infinity(p: Exponential, q: ContinuousBernoulli) -> Tensor:
    return _infinite_like(p.rate)


@register_kl(Gamma, ContinuousBernoulli)
def _kl_gamma_infinity(p: Gamma, q: ContinuousBernoulli) -> Tensor:
    return _infinite_like(p.concentration)


@register_kl(Gumbel, ContinuousBernoulli)
@register_kl(Laplace, ContinuousBernoulli)
@register_kl(Normal, ContinuousBernoulli)
def _kl_loc_infinity(p: Gumbel | Laplace | Normal, q: ContinuousBernoulli) -> Tensor:
    return _infinite_like(p.loc)


@register_kl(Pareto, ContinuousBernoulli)
def _kl_pareto_infinity(p: Pareto, q: ContinuousBernoulli) -> Tensor:
    return _infinite_like(p.scale)
