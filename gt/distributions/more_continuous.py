"""Heavy-tailed and extreme-value distributions: :class:`Cauchy`, :class:`HalfNormal`,
:class:`HalfCauchy`, :class:`Gumbel` (``torch.distributions``' formulas).

The half distributions and :class:`Gumbel` are :class:`TransformedDistribution` subclasses, as in
PyTorch. Their ``cdf``/``icdf`` (and those of :mod:`gt.distributions.power_family`) follow
PyTorch's generic rule: invert the transforms, take the base distribution's CDF, and flip it where
the composed transform decreases.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.continuous import Normal, Uniform
from gt.distributions.distribution import Distribution
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    ComposeTransform,
    ExpTransform,
    Transform,
    _InverseTransform,
)
from gt.distributions.utils import broadcast_all
from gt.factories import full, full_like, rand, zeros_like
from gt.ops.functional import where
from gt.ops.typeinfo import finfo
from gt.tensor import Tensor

__all__ = ["Cauchy", "Gumbel", "HalfCauchy", "HalfNormal"]

#: The Euler-Mascheroni constant.
EULER_GAMMA = 0.57721566490153286060


def _scalar_shape(args: tuple, first: Tensor) -> tuple:
    return () if all(isinstance(a, Number) for a in args) else tuple(first.shape)


def transform_sign(t: Transform) -> Any:
    """``+1`` where ``t`` increases and ``-1`` where it decreases (a number or a tensor)."""
    if isinstance(t, AffineTransform):
        s = t.scale
        return ((s > 0) - (s < 0)) if isinstance(s, Number) else s.sign()
    if isinstance(t, ComposeTransform):
        sign: Any = 1
        for part in t.parts:
            sign = sign * transform_sign(part)
        return sign
    if isinstance(t, AbsTransform):
        raise NotImplementedError
    if isinstance(t, _InverseTransform):
        return transform_sign(t.inv)  # an inverse is monotone the same way
    return getattr(t, "sign", 1)  # exp, sigmoid, tanh: 1


def _monotonize(dist: TransformedDistribution, value: Tensor) -> Tensor:
    sign: Any = 1
    for t in dist.transforms:
        sign = sign * transform_sign(t)
    if isinstance(sign, int) and sign == 1:
        return value
    return sign * (value - 0.5) + 0.5


def transformed_cdf(dist: TransformedDistribution, value: Tensor) -> Tensor:
    """PyTorch's ``TransformedDistribution.cdf``: the base CDF of the inverted value, flipped
    where the transforms decrease (the inverted value is checked against the base's support)."""
    for t in reversed(dist.transforms):
        value = t.inv(value)
    if dist._validate_args:
        dist.base_dist._validate_sample(value)
    return _monotonize(dist, dist.base_dist.cdf(value))


def transformed_icdf(dist: TransformedDistribution, value: Tensor) -> Tensor:
    """PyTorch's ``TransformedDistribution.icdf``: the base ICDF pushed through the transforms."""
    value = dist.base_dist.icdf(_monotonize(dist, value))
    for t in dist.transforms:
        value = t(value)
    return value


class Cauchy(Distribution):
    """The Cauchy (Lorentz) distribution with median ``loc`` and half width ``scale``.

    Args:
        loc: the mode and median.
        scale: half width at half maximum, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(_scalar_shape((loc, scale), self.loc), validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.nan, dtype=self.loc.dtype)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.inf, dtype=self.loc.dtype)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        # the inverse CDF of a uniform draw
        eps = (math.pi * (rand(tuple(shape), dtype=self.loc.dtype) - 0.5)).tan()
        return self.loc + eps * self.scale

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        z = (value - self.loc) / self.scale
        return -math.log(math.pi) - self.scale.log() - (z**2).log1p()

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value: Tensor) -> Tensor:
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self) -> Tensor:
        return math.log(4 * math.pi) + self.scale.log()


class _Folded(TransformedDistribution):
    """``|X|`` for a ``X`` symmetric about 0 with a ``scale``: the half distributions."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def expand(self, batch_shape: Any, _instance: Any = None) -> _Folded:
        new = self.__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.scale)

    def log_prob(self, value: Any) -> Tensor:
        if isinstance(value, Number):
            value = self.scale.new_full((), float(value))
        if self._validate_args:
            self._validate_sample(value)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return where(value >= 0, log_prob, -math.inf)

    def cdf(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob: Tensor) -> Tensor:
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Folded):
    """``|X|`` for ``X ~ Normal(0, scale)``.

    Args:
        scale: the scale of the full normal distribution, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        base = Normal(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self) -> Tensor:
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Folded):
    """``|X|`` for ``X ~ Cauchy(0, scale)``: a common prior on scale parameters.

    Args:
        scale: the scale of the full Cauchy distribution, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    def __init__(self, scale: Any, validate_args: bool | None = None) -> None:
        base = Cauchy(0, scale, validate_args=False)
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.inf, dtype=self.scale.dtype)

    @property
    def variance(self) -> Tensor:
        return self.base_dist.variance


class Gumbel(TransformedDistribution):
    """The Gumbel (type-I extreme value) distribution with location ``loc`` and ``scale``:
    ``loc - scale * log(-log U)`` for ``U`` uniform on ``[tiny, 1 - eps]``.

    Args:
        loc: location (the mode).
        scale: scale, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = broadcast_all(loc, scale)
        info = finfo(self.loc.dtype)
        if isinstance(loc, Number) and isinstance(scale, Number):
            base = Uniform(info.tiny, 1 - info.eps, validate_args=False)
        else:
            base = Uniform(full_like(self.loc, info.tiny), full_like(self.loc, 1 - info.eps),
                           validate_args=False)  # fmt: skip
        transforms = [
            ExpTransform().inv,
            AffineTransform(loc=0, scale=full_like(self.scale, -1.0)),
            ExpTransform().inv,
            AffineTransform(loc=loc, scale=-self.scale),
        ]
        super().__init__(base, transforms, validate_args=validate_args)
        base._validate_args = self._validate_args  # its bounds hold: no check, same setting

    def expand(self, batch_shape: Any, _instance: Any = None) -> Gumbel:
        new = self.__new__(type(self)) if _instance is None else _instance
        new.loc = self.loc.expand(tuple(batch_shape))
        new.scale = self.scale.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return self.loc + self.scale * EULER_GAMMA

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def stddev(self) -> Tensor:
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self) -> Tensor:
        return self.stddev.pow(2)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    def cdf(self, value: Tensor) -> Tensor:
        return transformed_cdf(self, value)

    def icdf(self, value: Tensor) -> Tensor:
        return transformed_icdf(self, value)

    def entropy(self) -> Tensor:
        return self.scale.log() + (1 + EULER_GAMMA)

    def __repr__(self) -> str:
        return Distribution.__repr__(self)
