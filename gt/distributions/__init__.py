"""Probability distributions, as ``torch.distributions``: sampling (from GT's seeded random
ops), differentiable ``log_prob``/``entropy``/KL, parameter validation with PyTorch's messages.

Provided: :class:`Normal`, :class:`Uniform`, :class:`Laplace`, :class:`Exponential`,
:class:`Bernoulli`, :class:`Categorical`, :class:`OneHotCategorical` (and
:class:`OneHotCategoricalStraightThrough`, its straight-through ``rsample``), :class:`Independent`,
:class:`TransformedDistribution` (with every transform of ``torch.distributions.transforms``,
and :func:`biject_to`/:func:`transform_to` onto constraints),
:class:`LogNormal`, :class:`MultivariateNormal` and :class:`LowRankMultivariateNormal` (on
:mod:`gt.linalg`), :class:`Gamma`, :class:`Chi2`, :class:`Beta`, :class:`Dirichlet`,
:class:`StudentT`, :class:`Poisson` (no sampler), :class:`Binomial` (sampled as a sum of coin
flips), :class:`Multinomial`, :class:`Geometric`, :class:`Cauchy`, :class:`HalfNormal`,
:class:`HalfCauchy`, :class:`Gumbel`, :class:`Weibull`, :class:`Pareto`, :class:`Kumaraswamy`,
:class:`LogitRelaxedBernoulli`, :class:`RelaxedBernoulli`, :class:`ExpRelaxedCategorical`,
:class:`RelaxedOneHotCategorical`, :class:`MixtureSameFamily`, :class:`NegativeBinomial`
(gamma-Poisson sampler), :class:`ContinuousBernoulli`, :class:`InverseGamma`,
:class:`FisherSnedecor`, :class:`GeneralizedPareto`, :class:`VonMises` (rejection sampler with a
bounded number of rounds), :class:`LogisticNormal` (with :class:`StickBreakingTransform`), and
:func:`kl_divergence` with :func:`register_kl`, :class:`Wishart`, :class:`LKJCholesky`, and the
:class:`ExponentialFamily` base (Bregman-divergence entropy and same-family KL).
"""

from __future__ import annotations

from gt.distributions import constraint_registry, constraints, transforms
from gt.distributions import kl_gamma as _kl_gamma  # noqa: F401 - registers the KL rules
from gt.distributions import kl_last as _kl_last  # noqa: F401 - registers the KL rules
from gt.distributions import kl_mixed as _kl_mixed  # noqa: F401 - registers the KL rules
from gt.distributions import kl_more as _kl_more  # noqa: F401 - registers the KL rules
from gt.distributions.constraint_registry import biject_to, transform_to
from gt.distributions.continuous import Exponential, Laplace, Normal, Uniform
from gt.distributions.discrete import (
    Bernoulli,
    Categorical,
    OneHotCategorical,
    OneHotCategoricalStraightThrough,
)
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.gamma_family import Beta, Chi2, Dirichlet, Gamma, Poisson, StudentT
from gt.distributions.independent import Independent
from gt.distributions.kl import kl_divergence, register_kl
from gt.distributions.last_continuous import (
    ContinuousBernoulli,
    FisherSnedecor,
    GeneralizedPareto,
    InverseGamma,
)
from gt.distributions.logistic_normal import LogisticNormal
from gt.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from gt.distributions.matrix_family import LKJCholesky, Wishart
from gt.distributions.mixture import MixtureSameFamily
from gt.distributions.more_continuous import Cauchy, Gumbel, HalfCauchy, HalfNormal
from gt.distributions.more_discrete import Binomial, Geometric, Multinomial
from gt.distributions.multivariate_normal import MultivariateNormal
from gt.distributions.negative_binomial import NegativeBinomial
from gt.distributions.power_family import Kumaraswamy, Pareto, Weibull
from gt.distributions.relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from gt.distributions.relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from gt.distributions.transformed_distribution import LogNormal, TransformedDistribution
from gt.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from gt.distributions.von_mises import VonMises

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "Bernoulli",
    "Beta",
    "Binomial",
    "CatTransform",
    "Categorical",
    "Cauchy",
    "Chi2",
    "ComposeTransform",
    "ContinuousBernoulli",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "Dirichlet",
    "Distribution",
    "ExpRelaxedCategorical",
    "ExpTransform",
    "Exponential",
    "ExponentialFamily",
    "FisherSnedecor",
    "Gamma",
    "GeneralizedPareto",
    "Geometric",
    "Gumbel",
    "HalfCauchy",
    "HalfNormal",
    "Independent",
    "IndependentTransform",
    "InverseGamma",
    "Kumaraswamy",
    "LKJCholesky",
    "Laplace",
    "LogNormal",
    "LogisticNormal",
    "LogitRelaxedBernoulli",
    "LowRankMultivariateNormal",
    "LowerCholeskyTransform",
    "MixtureSameFamily",
    "Multinomial",
    "MultivariateNormal",
    "NegativeBinomial",
    "Normal",
    "OneHotCategorical",
    "OneHotCategoricalStraightThrough",
    "Pareto",
    "Poisson",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "RelaxedBernoulli",
    "RelaxedOneHotCategorical",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "StudentT",
    "TanhTransform",
    "Transform",
    "TransformedDistribution",
    "Uniform",
    "VonMises",
    "Weibull",
    "Wishart",
    "biject_to",
    "constraint_registry",
    "constraints",
    "identity_transform",
    "kl_divergence",
    "register_kl",
    "transform_to",
    "transforms",
]


def _register_torch_module_names() -> None:
    """PyTorch's module per distribution (``torch.distributions.categorical`` ...), which scripts
    import from (``from torch.distributions.normal import Normal``): each a small module in
    ``sys.modules`` holding its class, so both the import and ``gt.distributions.normal`` work."""
    import sys  # noqa: PLC0415 - only here
    import types  # noqa: PLC0415

    names = {
        "bernoulli": ["Bernoulli"], "beta": ["Beta"], "binomial": ["Binomial"],
        "categorical": ["Categorical"], "cauchy": ["Cauchy"], "chi2": ["Chi2"],
        "continuous_bernoulli": ["ContinuousBernoulli"], "dirichlet": ["Dirichlet"],
        "exponential": ["Exponential"], "fishersnedecor": ["FisherSnedecor"], "gamma": ["Gamma"],
        "generalized_pareto": ["GeneralizedPareto"], "geometric": ["Geometric"],
        "gumbel": ["Gumbel"], "half_cauchy": ["HalfCauchy"], "half_normal": ["HalfNormal"],
        "inverse_gamma": ["InverseGamma"], "kumaraswamy": ["Kumaraswamy"], "laplace": ["Laplace"],
        "lkj_cholesky": ["LKJCholesky"], "log_normal": ["LogNormal"],
        "logistic_normal": ["LogisticNormal"], "mixture_same_family": ["MixtureSameFamily"],
        "multinomial": ["Multinomial"], "multivariate_normal": ["MultivariateNormal"],
        "normal": ["Normal"],
        "one_hot_categorical": ["OneHotCategorical", "OneHotCategoricalStraightThrough"],
        "pareto": ["Pareto"], "poisson": ["Poisson"],
        "relaxed_categorical": ["RelaxedOneHotCategorical", "ExpRelaxedCategorical"],
        "studentT": ["StudentT"], "uniform": ["Uniform"], "weibull": ["Weibull"],
        "wishart": ["Wishart"],
    }  # fmt: skip
    here = globals()
    for module, classes in names.items():
        full = f"{__name__}.{module}"
        if module in here or full in sys.modules:  # a real module of that name comes first
            continue
        alias = types.ModuleType(
            full, f"PyTorch's torch.distributions.{module}: {', '.join(classes)}."
        )
        for cls in classes:
            setattr(alias, cls, here[cls])
        alias.__all__ = list(classes)
        sys.modules[full] = alias
        here[module] = alias


_register_torch_module_names()
