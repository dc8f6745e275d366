"""Distributions built on the gamma function: :class:`Gamma`, :class:`Chi2`, :class:`Beta`,
:class:`Dirichlet`, :class:`StudentT` and :class:`Poisson` (``torch.distributions``' formulas).

Samples come from GT's ``standard_gamma`` primitive (Philox, the same numbers on every worker),
and ``rsample`` is differentiable with respect to the concentrations through its implicit
derivative (see :mod:`gt.runtime.ops.gammafn`). PyTorch's own Dirichlet derivative is a different
estimator of the same gradient, so single samples' gradients differ from PyTorch's while their
expectations agree. ``Poisson.sample`` draws with GT's ``poisson`` primitive.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.utils import broadcast_all
from gt.factories import randn
from gt.grad_mode import no_grad
from gt.ops.functional import stack, where
from gt.ops.random import next_seed
from gt.ops.typeinfo import finfo
from gt.special import xlogy
from gt.tensor import Tensor

__all__ = ["Beta", "Chi2", "Dirichlet", "Gamma", "Poisson", "StudentT"]


def _shape_of(args: tuple, first: Tensor) -> tuple:
    return () if all(isinstance(a, Number) for a in args) else tuple(first.shape)


def standard_gamma(concentration: Tensor) -> Tensor:
    """``Gamma(concentration, 1)`` samples, one per element, clamped to the dtype's smallest
    normal number (as PyTorch); differentiable with respect to ``concentration``."""
    return concentration._apply("standard_gamma", [concentration], {"seed": next_seed()})


class Gamma(ExponentialFamily):
    """The gamma distribution with shape ``concentration`` and inverse scale ``rate``."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration: Any, rate: Any, validate_args: bool | None = None) -> None:
        self.concentration, self.rate = broadcast_all(concentration, rate)
        shape = _shape_of((concentration, rate), self.concentration)
        super().__init__(shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.rate

    @property
    def mode(self) -> Tensor:
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self) -> Tensor:
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        value = standard_gamma(self.concentration.expand(shape)) / self.rate.expand(shape)
        return value.clamp(min=finfo(value.dtype).tiny)

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.rate)
        if getattr(value, "dtype", None) != self.rate.dtype and hasattr(value, "to"):
            # (PyTorch's Gamma casts the value to its own dtype)
            value = value.to(self.rate.dtype)
        if self._validate_args:
            self._validate_sample(value)
        c, r = self.concentration, self.rate
        return xlogy(c, r) + xlogy(c - 1, value) - r * value - c.lgamma()

    def entropy(self) -> Tensor:
        c = self.concentration
        return c - self.rate.log() + c.lgamma() + (1.0 - c) * c.digamma()

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration - 1, -self.rate)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return (x + 1).lgamma() + (x + 1) * (-y.reciprocal()).log()

    def cdf(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.rate)
        if self._validate_args:
            self._validate_sample(value)
        from gt.special import gammainc  # noqa: PLC0415 - (gt.special imports gt.ops.functional)

        return gammainc(self.concentration, self.rate * value)


class Chi2(Gamma):
    """The chi-squared distribution with ``df`` degrees of freedom (``Gamma(df / 2, 1 / 2)``)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df: Any, validate_args: bool | None = None) -> None:
        (df_t,) = broadcast_all(df)
        super().__init__(0.5 * df_t, 0.5, validate_args=validate_args)

    @property
    def df(self) -> Tensor:
        return self.concentration * 2

    def _param_names(self) -> list[str]:
        return ["concentration", "rate"]


class Dirichlet(ExponentialFamily):
    """The Dirichlet distribution over the simplex of the last dimension of ``concentration``."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True
    _param_event_dims = 1

    def __init__(self, concentration: Tensor, validate_args: bool | None = None) -> None:
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        shape = tuple(concentration.shape)
        super().__init__(shape[:-1], shape[-1:], validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self) -> Tensor:
        c = self.concentration
        mode = (c - 1).clamp(min=0.0)
        mode = mode / mode.sum(-1, keepdim=True)
        # Where every concentration is below 1, the mode is the corner of the largest (what
        # PyTorch's code means; its argmax of a NaN row picks the first); where every one is 1,
        # NaN (0 / 0: no single mode), as PyTorch's

        below = (c < 1).all(-1, keepdim=True)
        corner = (c == c.max(-1, keepdim=True).values).to(c.dtype)
        return where(below, corner, mode)

    @property
    def variance(self) -> Tensor:
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0.pow(2) * (c0 + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        g = standard_gamma(self.concentration.expand(shape))
        return g / g.sum(-1, keepdim=True)

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.concentration)
        if self._validate_args:
            self._validate_sample(value)
        c = self.concentration
        return xlogy(c - 1.0, value).sum(-1) + c.sum(-1).lgamma() - c.lgamma().sum(-1)

    def entropy(self) -> Tensor:
        c = self.concentration
        k = c.shape[-1]
        c0 = c.sum(-1)
        return (
            c.lgamma().sum(-1)
            - c0.lgamma()
            - (k - c0) * c0.digamma()
            - ((c - 1.0) * c.digamma()).sum(-1)
        )

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.concentration,)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.lgamma().sum(-1) - x.sum(-1).lgamma()


class Beta(ExponentialFamily):
    """The beta distribution on ``[0, 1]`` with concentrations ``concentration1`` (of 1) and
    ``concentration0`` (of 0); a two-class :class:`Dirichlet`."""

    arg_constraints = {
        "concentration1": constraints.positive,
        "concentration0": constraints.positive,
    }
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1: Any, concentration0: Any,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        c1, c0 = broadcast_all(concentration1, concentration0)
        self._dirichlet = Dirichlet(stack([c1, c0], -1), validate_args=validate_args)
        shape = _shape_of((concentration1, concentration0), c1)
        super().__init__(shape, validate_args=validate_args)

    @property
    def concentration1(self) -> Tensor:
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self) -> Tensor:
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self) -> Tensor:
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self) -> Tensor:
        return self._dirichlet.mode[..., 0]

    @property
    def variance(self) -> Tensor:
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self._dirichlet.rsample(sample_shape)[..., 0]

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.concentration1)
        if self._validate_args:
            self._validate_sample(value)
        return self._dirichlet.log_prob(stack([value, 1.0 - value], -1))

    def entropy(self) -> Tensor:
        return self._dirichlet.entropy()

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return (self.concentration1, self.concentration0)

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        return x.lgamma() + y.lgamma() - (x + y).lgamma()

    def expand(self, batch_shape: Any, _instance: Any = None) -> Beta:
        new = Beta.__new__(Beta)
        new._dirichlet = self._dirichlet.expand(batch_shape)
        Distribution.__init__(new, tuple(batch_shape), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _param_names(self) -> list[str]:
        return []


class StudentT(Distribution):
    """Student's t distribution with ``df`` degrees of freedom, location ``loc`` and ``scale``."""

    arg_constraints = {
        "df": constraints.positive,
        "loc": constraints.real,
        "scale": constraints.positive,
    }
    support = constraints.real
    has_rsample = True

    def __init__(self, df: Any, loc: Any = 0.0, scale: Any = 1.0,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df, validate_args=False)
        super().__init__(_shape_of((df, loc, scale), self.df), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> StudentT:
        new = super().expand(batch_shape, _instance)
        new._chi2 = self._chi2.expand(batch_shape)
        return new

    @property
    def mean(self) -> Tensor:
        return where(self.df > 1, self.loc, math.nan)

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        return where(df > 2, finite, where(df > 1, math.inf, math.nan))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        x = randn(shape, dtype=self.df.dtype)
        z = self._chi2.rsample(sample_shape)
        y = x * (z / self.df).rsqrt()
        return self.loc + self.scale * y

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.df)
        if self._validate_args:
            self._validate_sample(value)
        df = self.df
        y = (value - self.loc) / self.scale
        z = (
            self.scale.log()
            + 0.5 * df.log()
            + 0.5 * math.log(math.pi)
            + (0.5 * df).lgamma()
            - (0.5 * (df + 1.0)).lgamma()
        )
        return -0.5 * (df + 1.0) * (y.pow(2) / df).log1p() - z

    def entropy(self) -> Tensor:
        df = self.df
        lbeta = (0.5 * df).lgamma() + math.lgamma(0.5) - (0.5 * (df + 1)).lgamma()
        return (
            self.scale.log()
            + 0.5 * (df + 1) * ((0.5 * (df + 1)).digamma() - (0.5 * df).digamma())
            + 0.5 * df.log()
            + lbeta
        )


class Poisson(ExponentialFamily):
    """The Poisson distribution with mean ``rate`` (counts as floats, as PyTorch's)."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate: Any, validate_args: bool | None = None) -> None:
        (self.rate,) = broadcast_all(rate)
        super().__init__(_shape_of((rate,), self.rate), validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.rate

    @property
    def mode(self) -> Tensor:
        return self.rate.floor()

    @property
    def variance(self) -> Tensor:
        return self.rate

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            rate = self.rate.expand(shape)
            return rate._apply("poisson", [rate], {"seed": next_seed()})

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.rate)
        if self._validate_args:
            self._validate_sample(value)
        return xlogy(value, self.rate) - self.rate - (value + 1).lgamma()

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.rate.log(),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.exp()


def _as_tensor(value: Any, like: Tensor) -> Any:
    """A number becomes a tensor like the parameters (PyTorch's distributions accept both)."""
    return like.new_full((), float(value)) if isinstance(value, Number) else value
