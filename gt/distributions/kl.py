"""``kl_divergence(p, q)`` and :func:`register_kl`: closed-form KL divergences, looked up by the
pair of distribution types (the most specific registered pair wins, as in PyTorch)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gt.distributions.continuous import Exponential, Laplace, Normal, Uniform
from gt.distributions.discrete import Bernoulli, Categorical, OneHotCategorical
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.independent import Independent
from gt.distributions.multivariate_normal import MultivariateNormal, _linalg, batch_mahalanobis
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.utils import softplus, sum_rightmost
from gt.ops.functional import broadcast_shapes, where
from gt.tensor import Tensor

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict[tuple[type, type], Callable] = {}
_KL_MEMOIZE: dict[tuple[type, type], Any] = {}


def register_kl(type_p: type, type_q: type) -> Callable[[Callable], Callable]:
    """Decorator: register ``fn(p, q)`` as the KL divergence for ``type_p`` and ``type_q``."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn: Callable) -> Callable:
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()  # a new rule may be more specific than a memoized one
        return fn

    return decorator


def _dispatch_kl(type_p: type, type_q: type) -> Any:
    matches = [
        (sp, sq) for sp, sq in _KL_REGISTRY if issubclass(type_p, sp) and issubclass(type_q, sq)
    ]
    if not matches:
        return NotImplemented
    # the closest pair in both MROs (p's first, as PyTorch orders its matches)
    best = min(matches, key=lambda m: (type_p.__mro__.index(m[0]), type_q.__mro__.index(m[1])))
    return _KL_REGISTRY[best]


def kl_divergence(p: Distribution, q: Distribution) -> Tensor:
    """``KL(p || q)``, one value per batch entry (differentiable w.r.t. both parameters).

    Raises:
        NotImplementedError: no rule is registered for the pair of types.
    """
    key = (type(p), type(q))
    if key not in _KL_MEMOIZE:
        _KL_MEMOIZE[key] = _dispatch_kl(*key)
    fn = _KL_MEMOIZE[key]
    if fn is NotImplemented:
        raise NotImplementedError(
            f"No KL(p || q) is implemented for p type {p.__class__.__name__} "
            f"and q type {q.__class__.__name__}"
        )
    return fn(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p: Normal, q: Normal) -> Tensor:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p: Categorical, q: Categorical) -> Tensor:
    t = p.probs * (p.logits - q.logits)
    # q(x) = 0 where p(x) > 0: infinite; p(x) = 0: contributes nothing (0 * log 0 = 0)
    t = where(q.probs == 0, math.inf, t)
    t = where(p.probs == 0, 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehotcategorical(p: OneHotCategorical, q: OneHotCategorical) -> Tensor:
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p: Bernoulli, q: Bernoulli) -> Tensor:
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(q.probs == 0, math.inf, t1)
    t1 = where(p.probs == 0, 0.0, t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(q.probs == 1, math.inf, t2)
    t2 = where(p.probs == 1, 0.0, t2)
    return t1 + t2


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p: Uniform, q: Uniform) -> Tensor:
    result = ((q.high - q.low) / (p.high - p.low)).log()
    # p's support is not inside q's: infinite
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p: Laplace, q: Laplace) -> Tensor:
    scale_ratio = p.scale / q.scale
    loc_abs_diff = (p.loc - q.loc).abs()
    t1 = -scale_ratio.log()
    t2 = loc_abs_diff / q.scale
    t3 = scale_ratio * (-loc_abs_diff / p.scale).exp()
    return t1 + t2 + t3 - 1


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p: Exponential, q: Exponential) -> Tensor:
    rate_ratio = q.rate / p.rate
    return rate_ratio - 1 - rate_ratio.log()


@register_kl(Independent, Independent)
def _kl_independent_independent(p: Independent, q: Independent) -> Tensor:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    result = kl_divergence(p.base_dist, q.base_dist)
    return sum_rightmost(result, p.reinterpreted_batch_ndims)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p: TransformedDistribution, q: TransformedDistribution) -> Tensor:
    # KL is invariant under the same bijection applied to both
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError
    return kl_divergence(p.base_dist, q.base_dist)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p: MultivariateNormal, q: MultivariateNormal) -> Tensor:
    if p.event_shape != q.event_shape:
        raise ValueError(
            "KL-divergence between two Multivariate Normals with different event shapes "
            "cannot be computed"
        )
    p_l, q_l = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = q._half_log_det() - p._half_log_det()
    n = p.event_shape[0]
    batch = tuple(broadcast_shapes(tuple(p_l.shape[:-2]), tuple(q_l.shape[:-2])))
    # tr(Sq^-1 Sp) = ||Lq^-1 Lp||_F^2
    term2 = _linalg().solve_triangular(
        q_l.expand((*batch, n, n)), p_l.expand((*batch, n, n)), upper=False
    )
    term2 = term2.pow(2).flatten(-2).sum(-1)
    term3 = batch_mahalanobis(q_l, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(ExponentialFamily, ExponentialFamily)
def _kl_expfamily_expfamily(p: ExponentialFamily, q: ExponentialFamily) -> Tensor:
    """Two members of one exponential family without a closed form: the Bregman divergence of
    the log normalizer ``F`` between the natural parameters, ``F(tq) - F(tp) - <tq - tp, grad
    F(tp)>`` (its gradient by autograd, as PyTorch's fallback)."""
    if type(p) is not type(q):
        raise NotImplementedError(
            "The cross KL-divergence between different exponential families cannot be computed "
            "using Bregman divergences"
        )
    from gt.backprop import grad  # noqa: PLC0415 - only here
    from gt.grad_mode import enable_grad  # noqa: PLC0415

    with enable_grad():
        p_nparams = [param.detach().requires_grad_() for param in p._natural_params]
        lg_normal = p._log_normalizer(*p_nparams)
        gradients = grad(lg_normal.sum(), p_nparams, create_graph=True)
    result = q._log_normalizer(*q._natural_params) - lg_normal
    for pnp, qnp, g in zip(p_nparams, q._natural_params, gradients):
        result = result - sum_rightmost((qnp - pnp) * g, len(q.event_shape))
    return result
