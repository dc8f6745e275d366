""":class:`TransformedDistribution` (a base distribution pushed through transforms) and
:class:`LogNormal`."""

from __future__ import annotations

from typing import Any

from gt.distributions import constraints
from gt.distributions.continuous import Normal
from gt.distributions.distribution import Distribution
from gt.distributions.transforms import AffineTransform, ExpTransform, Transform
from gt.grad_mode import no_grad
from gt.tensor import Tensor

__all__ = ["LogNormal", "TransformedDistribution"]


class TransformedDistribution(Distribution):
    """``transforms`` applied to samples of ``base_distribution``; ``log_prob`` inverts them and
    subtracts each log-Jacobian (change of variables). The transforms must be elementwise.

    Args:
        base_distribution: the distribution whose samples are transformed.
        transforms: a :class:`Transform` or a list of them, applied in order.
        validate_args: check values given to ``log_prob`` (``None``: the default setting).
    """

    arg_constraints: dict = {}

    def __init__(self, base_distribution: Distribution, transforms: Any,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        if isinstance(transforms, Transform):
            transforms = [transforms]
        elif not all(isinstance(t, Transform) for t in transforms):
            raise ValueError(
                f"transforms must be a Transform or a list of Transforms, but was {transforms}"
            )
        self.transforms = list(transforms)
        self.base_dist = base_distribution
        super().__init__(base_distribution.batch_shape, base_distribution.event_shape,
                         validate_args=validate_args)  # fmt: skip

    def expand(self, batch_shape: Any, _instance: Any = None) -> TransformedDistribution:
        new = self.__new__(type(self)) if _instance is None else _instance
        new.base_dist = self.base_dist.expand(batch_shape)
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self) -> Any:
        return self.transforms[-1].codomain if self.transforms else self.base_dist.support

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            x = self.base_dist.sample(sample_shape)
            for t in self.transforms:
                x = t(x)
            return x

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        x = self.base_dist.rsample(sample_shape)
        for t in self.transforms:
            x = t(x)
        return x

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        log_prob: Any = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            log_prob = log_prob - self._sum_event(t.log_abs_det_jacobian(x, y))
            y = x
        return log_prob + self.base_dist.log_prob(y)

    def _sum_event(self, value: Tensor) -> Tensor:
        n = len(self._event_shape)
        return (
            value
            if n == 0
            else value.reshape(tuple(value.shape[: value.dim() - n]) + (-1,)).sum(-1)
        )

    def cdf(self, value: Tensor) -> Tensor:
        decreasing: Any = False  # a decreasing transform turns P(X <= x) into P(X >= x)
        for t in reversed(self.transforms):
            value = t.inv(value)
            if isinstance(t, AffineTransform):
                decreasing = decreasing ^ (t.scale < 0)
        cdf = self.base_dist.cdf(value)
        if isinstance(decreasing, bool):
            return 1 - cdf if decreasing else cdf
        return decreasing * (1 - cdf) + (~decreasing) * cdf

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"


class LogNormal(TransformedDistribution):
    """``exp(X)`` for ``X ~ Normal(loc, scale)``."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        base = Normal(loc, scale, validate_args=validate_args)
        # Normal has checked loc and scale already: one sync point, not two
        super().__init__(base, ExpTransform(), validate_args=False)
        self._validate_args = base._validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> LogNormal:
        new = self.__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)

    @property
    def loc(self) -> Tensor:
        return self.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.scale

    @property
    def mean(self) -> Tensor:
        return (self.loc + self.scale.pow(2) / 2).exp()

    @property
    def mode(self) -> Tensor:
        return (self.loc - self.scale.pow(2)).exp()

    @property
    def variance(self) -> Tensor:
        s2 = self.scale.pow(2)
        return s2.expm1() * (2 * self.loc + s2).exp()

    def entropy(self) -> Tensor:
        return self.base_dist.entropy() + self.loc

    def __repr__(self) -> str:
        return repr(self.base_dist).replace("Normal", "LogNormal", 1)
