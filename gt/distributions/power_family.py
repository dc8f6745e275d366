"""Distributions made of powers of simple ones: :class:`Weibull` (of an exponential),
:class:`Pareto` (the exponential of an exponential) and :class:`Kumaraswamy` (of a uniform), each a
:class:`TransformedDistribution` as in PyTorch, with PyTorch's closed-form moments and entropies.

``Kumaraswamy.mode`` reproduces PyTorch's formula, which gives NaN for every parameter except
``concentration0 == 1`` (where it gives 0).
"""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.continuous import Exponential, Uniform
from gt.distributions.distribution import Distribution
from gt.distributions.more_continuous import EULER_GAMMA, transformed_cdf, transformed_icdf
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import AffineTransform, ExpTransform, PowerTransform
from gt.distributions.utils import broadcast_all
from gt.factories import full_like, ones_like
from gt.ops.functional import where
from gt.tensor import Tensor

__all__ = ["Kumaraswamy", "Pareto", "Weibull"]


class _PowerFamily(TransformedDistribution):
    """cdf/icdf by PyTorch's generic rule, and the repr of a plain distribution."""

    def cdf(self, value: Tensor) -> Tensor:
        return transformed_cdf(self, value)

    def icdf(self, value: Tensor) -> Tensor:
        return transformed_icdf(self, value)

    def __repr__(self) -> str:
        return Distribution.__repr__(self)


class Weibull(_PowerFamily):
    """The two-parameter Weibull distribution: ``scale * E ** (1 / concentration)`` for
    ``E ~ Exponential(1)``.

    Args:
        scale: scale (lambda), positive.
        concentration: shape (k), positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive

    def __init__(self, scale: Any, concentration: Any, validate_args: bool | None = None) -> None:
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(ones_like(self.scale), validate_args=False)
        transforms = [
            PowerTransform(exponent=self.concentration_reciprocal),
            AffineTransform(loc=0, scale=self.scale),
        ]
        super().__init__(base, transforms, validate_args=validate_args)
        base._validate_args = self._validate_args  # its rate is 1: no check, same setting

    def expand(self, batch_shape: Any, _instance: Any = None) -> Weibull:
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = tuple(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        new.concentration = self.concentration.expand(batch_shape)
        new.concentration_reciprocal = new.concentration.reciprocal()
        base = self.base_dist.expand(batch_shape)
        transforms = [
            PowerTransform(exponent=new.concentration_reciprocal),
            AffineTransform(loc=0, scale=new.scale),
        ]
        TransformedDistribution.__init__(new, base, transforms, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mean(self) -> Tensor:
        return self.scale * (1 + self.concentration_reciprocal).lgamma().exp()

    @property
    def mode(self) -> Tensor:
        k = self.concentration
        return self.scale * ((k - 1) / k) ** k.reciprocal()

    @property
    def variance(self) -> Tensor:
        r = self.concentration_reciprocal
        return self.scale.pow(2) * ((1 + 2 * r).lgamma().exp() - (2 * (1 + r).lgamma()).exp())

    def entropy(self) -> Tensor:
        r = self.concentration_reciprocal
        return EULER_GAMMA * (1 - r) + (self.scale * r).log() + 1


class Pareto(_PowerFamily):
    """The Pareto type-I distribution: ``scale * exp(E)`` for ``E ~ Exponential(alpha)``.

    Args:
        scale: the minimum value, positive.
        alpha: the tail index, positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}

    def __init__(self, scale: Any, alpha: Any, validate_args: bool | None = None) -> None:
        self.scale, self.alpha = broadcast_all(scale, alpha)
        base = Exponential(self.alpha, validate_args=validate_args)
        transforms = [ExpTransform(), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Pareto:
        new = self.__new__(type(self)) if _instance is None else _instance
        new.scale = self.scale.expand(tuple(batch_shape))
        new.alpha = self.alpha.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @constraints.dependent_property(is_discrete=False, event_dim=0)
    def support(self) -> Any:
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self) -> Tensor:
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self) -> Tensor:
        return self.scale

    @property
    def variance(self) -> Tensor:
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self) -> Tensor:
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


def _moment(a: Tensor, b: Tensor, n: int) -> Tensor:
    """``E[X^n]`` of ``Kumaraswamy(a, b)``: ``b B(1 + n / a, b)``."""
    arg = 1 + n / a
    return b * (arg.lgamma() + b.lgamma() - (arg + b).lgamma()).exp()


class Kumaraswamy(_PowerFamily):
    """The Kumaraswamy distribution on ``[0, 1]``: ``(1 - U ** (1 / concentration0)) **
    (1 / concentration1)`` for ``U`` uniform; like a Beta, with a closed-form CDF.

    Args:
        concentration1: the first shape parameter (often alpha), positive.
        concentration0: the second shape parameter (often beta), positive.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        c0 = self.concentration0
        base = Uniform(full_like(c0, 0.0), full_like(c0, 1.0), validate_args=False)
        transforms = [
            PowerTransform(exponent=c0.reciprocal()),
            AffineTransform(loc=1.0, scale=-1.0),
            PowerTransform(exponent=self.concentration1.reciprocal()),
        ]
        super().__init__(base, transforms, validate_args=validate_args)
        base._validate_args = self._validate_args  # 0 < 1: no check, same setting

    def expand(self, batch_shape: Any, _instance: Any = None) -> Kumaraswamy:
        new = self.__new__(type(self)) if _instance is None else _instance
        new.concentration1 = self.concentration1.expand(tuple(batch_shape))
        new.concentration0 = self.concentration0.expand(tuple(batch_shape))
        return super().expand(batch_shape, _instance=new)

    @property
    def mean(self) -> Tensor:
        return _moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        # PyTorch's expression, kept as is (see the module's docstring)
        log_mode = b.reciprocal() * (-b).log1p() - (-b * a).log1p()
        return where((b < 1) | (a < 1), math.nan, log_mode).exp()

    @property
    def variance(self) -> Tensor:
        return _moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self) -> Tensor:
        a, b = self.concentration1, self.concentration0
        t1 = 1 - a.reciprocal()
        t0 = 1 - b.reciprocal()
        h0 = (b + 1).digamma() + EULER_GAMMA
        return t0 + t1 * h0 - a.log() - b.log()
