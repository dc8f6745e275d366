"""Probability distributions, as ``torch.distributions``: sampling (from GT's seeded random
ops), differentiable ``log_prob``/``entropy``/KL, parameter validation with PyTorch's messages.

Provided: :class:`Normal`, :class:`Uniform`, :class:`Laplace`, :class:`Exponential`,
:class:`Bernoulli`, :class:`Categorical`, :class:`OneHotCategorical`, :class:`Independent`,
:class:`TransformedDistribution` (exp, affine, sigmoid, tanh transforms), :class:`LogNormal`,
:class:`MultivariateNormal` (on :mod:`gt.linalg`), :class:`Gamma`, :class:`Chi2`, :class:`Beta`,
:class:`Dirichlet`, :class:`StudentT`, :class:`Poisson` (no sampler), and :func:`kl_divergence`
with :func:`register_kl`. Not provided: the rest of PyTorch's families (Binomial, Multinomial,
Geometric, Cauchy, Gumbel, Weibull, von Mises, the relaxed and mixture distributions ...).
"""

from __future__ import annotations

from gt.distributions import constraints, transforms
from gt.distributions import kl_gamma as _kl_gamma  # noqa: F401 - registers the KL rules
from gt.distributions.continuous import Exponential, Laplace, Normal, Uniform
from gt.distributions.discrete import Bernoulli, Categorical, OneHotCategorical
from gt.distributions.distribution import Distribution
from gt.distributions.gamma_family import Beta, Chi2, Dirichlet, Gamma, Poisson, StudentT
from gt.distributions.independent import Independent
from gt.distributions.kl import kl_divergence, register_kl
from gt.distributions.multivariate_normal import MultivariateNormal
from gt.distributions.transformed_distribution import LogNormal, TransformedDistribution
from gt.distributions.transforms import (
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    SigmoidTransform,
    TanhTransform,
    Transform,
)

__all__ = [
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Categorical",
    "Chi2",
    "ComposeTransform",
    "Dirichlet",
    "Distribution",
    "ExpTransform",
    "Exponential",
    "Gamma",
    "Independent",
    "Laplace",
    "MultivariateNormal",
    "LogNormal",
    "Normal",
    "OneHotCategorical",
    "Poisson",
    "SigmoidTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "constraints",
    "kl_divergence",
    "register_kl",
    "transforms",
]
