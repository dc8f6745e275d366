"""More continuous families of ``torch.distributions``, with PyTorch's formulas, attributes and
edge cases: :class:`ContinuousBernoulli`, :class:`InverseGamma`, :class:`FisherSnedecor` and
:class:`GeneralizedPareto`.

:class:`ContinuousBernoulli` derives from :class:`ExponentialFamily`, as in PyTorch (its closed
forms are here; the Bregman-divergence ones of the base agree).
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.gamma_family import Gamma
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import PowerTransform
from gt.distributions.utils import (
    BinaryParameters,
    bce_with_logits,
    broadcast_all,
    clamp_probs,
    lazy_property,
    logits_to_probs,
    one_of,
)
from gt.factories import ones_like, rand
from gt.grad_mode import no_grad
from gt.ops.functional import broadcast_tensors, where
from gt.ops.typeinfo import finfo
from gt.tensor import Tensor

__all__ = ["ContinuousBernoulli", "FisherSnedecor", "GeneralizedPareto", "InverseGamma"]


def _as_tensor(value: Any, like: Tensor) -> Any:
    return like.new_full((), float(value)) if isinstance(value, Number) else value


def _shape_of(args: tuple, first: Tensor) -> tuple:
    return () if all(isinstance(a, Number) for a in args) else tuple(first.shape)


class ContinuousBernoulli(BinaryParameters, ExponentialFamily):
    """The continuous Bernoulli distribution on ``[0, 1]`` (Loaiza-Ganem and Cunningham, 2019):
    density ``C(p) p^x (1 - p)^(1 - x)``. ``probs`` is not a probability nor ``logits`` log-odds;
    near ``p = 1/2`` (inside ``lims``) Taylor expansions replace the unstable closed forms.

    Args:
        probs: parameters in ``(0, 1)`` (clamped away from 0 and 1).
        logits: real parameters whose sigmoid is ``probs``.
        lims: the unstable region around ``1/2``.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True
    _mean_carrier_measure = 0

    def __init__(self, probs: Any = None, logits: Any = None,
                 lims: tuple[float, float] = (0.499, 0.501),
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        if probs is not None:
            is_scalar = isinstance(probs, Number)
            (self.probs,) = broadcast_all(probs)
            if validate_args is not None and not bool(
                self.arg_constraints["probs"].check(self.probs).all()
            ):
                raise ValueError("The parameter probs has invalid values")
            self.probs = clamp_probs(self.probs)
            self._param = self.probs
        else:
            is_scalar = isinstance(logits, Number)
            (self.logits,) = broadcast_all(logits)
            self._param = self.logits
        self._lims = lims
        shape = () if is_scalar else tuple(self._param.shape)
        super().__init__(shape, validate_args=validate_args)

    @lazy_property
    def probs(self) -> Tensor:
        """The parameter in ``(0, 1)``."""
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _outside_unstable_region(self) -> Tensor:
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut_probs(self) -> Tensor:
        return where(self._outside_unstable_region(), self.probs, self._lims[0])

    def _cont_bern_log_norm(self) -> Tensor:
        """The log normalizing constant ``log C(p)``."""
        cut = self._cut_probs()
        below = where(cut <= 0.5, cut, 0.0)
        above = where(cut >= 0.5, cut, 1.0)
        log_norm = ((-cut).log1p() - cut.log()).abs().log() - where(
            cut <= 0.5, (-2.0 * below).log1p(), (2.0 * above - 1.0).log()
        )
        x = (self.probs - 0.5).pow(2)
        taylor = math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x
        return where(self._outside_unstable_region(), log_norm, taylor)

    @property
    def mean(self) -> Tensor:
        cut = self._cut_probs()
        mus = cut / (2.0 * cut - 1.0) + 1.0 / ((-cut).log1p() - cut.log())
        x = self.probs - 0.5
        taylor = 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x.pow(2)) * x
        return where(self._outside_unstable_region(), mus, taylor)

    @property
    def variance(self) -> Tensor:
        cut = self._cut_probs()
        variances = cut * (cut - 1.0) / (1.0 - 2.0 * cut).pow(2) + 1.0 / (
            (-cut).log1p() - cut.log()
        ).pow(2)
        x = (self.probs - 0.5).pow(2)
        taylor = 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x
        return where(self._outside_unstable_region(), variances, taylor)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.icdf(rand(tuple(shape), dtype=self.probs.dtype))

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self._param)
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value)
        return -bce_with_logits(logits, value) + self._cont_bern_log_norm()

    def cdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self._param)
        if self._validate_args:
            self._validate_sample(value)
        cut = self._cut_probs()
        cdfs = (cut.pow(value) * (1.0 - cut).pow(1.0 - value) + cut - 1.0) / (2.0 * cut - 1.0)
        unbounded = where(self._outside_unstable_region(), cdfs, value)
        return where(value <= 0.0, 0.0, where(value >= 1.0, 1.0, unbounded))

    def icdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self._param)
        cut = self._cut_probs()
        inverted = ((-cut + value * (2.0 * cut - 1.0)).log1p() - (-cut).log1p()) / (
            cut.log() - (-cut).log1p()
        )
        return where(self._outside_unstable_region(), inverted, value)

    def entropy(self) -> Tensor:
        log_probs0 = (-self.probs).log1p()
        log_probs1 = self.probs.log()
        return self.mean * (log_probs0 - log_probs1) - self._cont_bern_log_norm() - log_probs0

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.logits,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        """The log normalizing constant as a function of the natural parameter."""
        outside = (x <= self._lims[0] - 0.5) | (x > self._lims[1] - 0.5)
        cut = where(outside, x, self._lims[0] - 0.5)
        log_norm = cut.expm1().abs().log() - cut.abs().log()
        taylor = 0.5 * x + x.pow(2) / 24.0 - x.pow(4) / 2880.0
        return where(outside, log_norm, taylor)


class InverseGamma(TransformedDistribution):
    """``1 / X`` for ``X ~ Gamma(concentration, rate)``.

    Args:
        concentration: shape ``alpha > 0``.
        rate: ``beta > 0`` (the scale of ``1 / X``).
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        base = Gamma(concentration, rate, validate_args=validate_args)
        # Gamma has checked the parameters already: one sync point, not two
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args=False)
        self._validate_args = base._validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> InverseGamma:
        new = self.__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)

    @property
    def concentration(self) -> Tensor:
        return self.base_dist.concentration

    @property
    def rate(self) -> Tensor:
        return self.base_dist.rate

    @property
    def mean(self) -> Tensor:
        return where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def mode(self) -> Tensor:
        return self.rate / (self.concentration + 1)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        result = self.rate.square() / ((c - 1).square() * (c - 2))
        return where(c > 2, result, math.inf)

    def cdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.rate)
        if self._validate_args:
            self._validate_sample(value)
        from gt.special import gammaincc  # noqa: PLC0415 - as Gamma.cdf

        return gammaincc(self.concentration, self.rate / value)

    def entropy(self) -> Tensor:
        c = self.concentration
        return c + self.rate.log() + c.lgamma() - (1 + c) * c.digamma()


class FisherSnedecor(Distribution):
    """The F distribution with ``df1`` and ``df2`` degrees of freedom.

    Args:
        df1: numerator degrees of freedom, positive.
        df2: denominator degrees of freedom, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1: Any, df2: Any, validate_args: bool | None = None) -> None:
        self.df1, self.df2 = broadcast_all(df1, df2)
        # as PyTorch: the gammas validate with the default setting
        self._gamma1 = Gamma(self.df1 * 0.5, self.df1)
        self._gamma2 = Gamma(self.df2 * 0.5, self.df2)
        super().__init__(_shape_of((df1, df2), self.df1), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> FisherSnedecor:
        new = super().expand(batch_shape, _instance)
        new._gamma1 = self._gamma1.expand(batch_shape)
        new._gamma2 = self._gamma2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        df2 = where(self.df2 <= 2, math.nan, self.df2)
        return df2 / (df2 - 2)

    @property
    def mode(self) -> Tensor:
        mode = (self.df1 - 2) / self.df1 * self.df2 / (self.df2 + 2)
        return where(self.df1 <= 2, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        df1 = self.df1
        df2 = where(self.df2 <= 4, math.nan, self.df2)
        return 2 * df2.pow(2) * (df1 + df2 - 2) / (df1 * (df2 - 2).pow(2) * (df2 - 4))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        x1 = self._gamma1.rsample(sample_shape).view(shape)
        x2 = self._gamma2.rsample(sample_shape).view(shape)
        tiny = finfo(x2.dtype).tiny
        return (x1 / x2.clamp(min=tiny)).clamp(min=tiny)

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.df1)
        if self._validate_args:
            self._validate_sample(value)
        ct1, ct2 = self.df1 * 0.5, self.df2 * 0.5
        ct3 = self.df1 / self.df2
        t1 = (ct1 + ct2).lgamma() - ct1.lgamma() - ct2.lgamma()
        t2 = ct1 * ct3.log() + (ct1 - 1) * value.log()
        t3 = (ct1 + ct2) * (ct3 * value).log1p()
        return t1 + t2 - t3


class GeneralizedPareto(Distribution):
    """The generalized Pareto distribution with ``loc``, ``scale`` and shape ``concentration``
    (``xi``): exponential at ``xi = 0``, Pareto for ``xi > 0``, bounded above by
    ``loc - scale / xi`` for ``xi < 0`` (uniform at ``xi = -1``).

    Args:
        loc: location.
        scale: scale, positive.
        concentration: shape, real.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "loc": constraints.real,
        "scale": constraints.positive,
        "concentration": constraints.real,
    }
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, concentration: Any,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self.loc, self.scale, self.concentration = broadcast_all(loc, scale, concentration)
        shape = _shape_of((loc, scale, concentration), self.loc)
        super().__init__(shape, validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        lower = self.loc
        upper = where(self.concentration < 0, lower - self.scale / self.concentration, math.inf)
        return constraints.interval(lower, upper)

    def _safe_concentration(self) -> tuple[Tensor, Tensor]:
        c = self.concentration
        eq_zero = c.abs() <= 1e-8  # isclose(c, 0) with PyTorch's default tolerances
        return eq_zero, where(eq_zero, 1.0, c)

    def _z(self, x: Tensor) -> Tensor:
        return (x - self.loc) / self.scale

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        return self.icdf(rand(tuple(shape), dtype=self.loc.dtype))

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.loc)
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._safe_concentration()
        y = 1 / safe + ones_like(z)
        nonzero = where(y == 0, y, y * (safe * z).log1p())
        return -self.scale.log() - where(eq_zero, z, nonzero)

    def log_survival_function(self, value: Any) -> Tensor:
        """``log P(X > value)``."""
        value = _as_tensor(value, self.loc)
        if self._validate_args:
            self._validate_sample(value)
        z = self._z(value)
        eq_zero, safe = self._safe_concentration()
        return where(eq_zero, -z, -(safe * z).log1p() / safe)

    def log_cdf(self, value: Any) -> Tensor:
        """``log P(X <= value)``."""
        return (-self.log_survival_function(value).exp()).log1p()

    def cdf(self, value: Any) -> Tensor:
        return self.log_cdf(value).exp()

    def icdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.loc)
        eq_zero, safe = self._safe_concentration()
        logu = (-value).log1p()
        nonzero = self.loc + self.scale / safe * (-safe * logu).expm1()
        return where(eq_zero, self.loc - self.scale * logu, nonzero)

    @property
    def mean(self) -> Tensor:
        valid = self.concentration < 1
        safe = where(valid, self.concentration, 0.5)
        return where(valid, self.loc + self.scale / (1 - safe), math.nan)

    @property
    def variance(self) -> Tensor:
        valid = self.concentration < 0.5
        safe = where(valid, self.concentration, 0.25)
        return where(valid, self.scale.pow(2) / ((1 - safe).pow(2) * (1 - 2 * safe)), math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    def entropy(self) -> Tensor:
        return (self.scale.log() + self.concentration + 1).expand(tuple(self._batch_shape))
