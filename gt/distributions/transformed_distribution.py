""":class:`TransformedDistribution` (a base distribution pushed through transforms) and
:class:`LogNormal`."""

from __future__ import annotations

from typing import Any

from gt.distributions import constraints
from gt.distributions.continuous import Normal
from gt.distributions.distribution import Distribution
from gt.distributions.independent import Independent
from gt.distributions.transforms import ComposeTransform, ExpTransform, Transform
from gt.distributions.utils import sum_rightmost
from gt.grad_mode import no_grad
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

__all__ = ["LogNormal", "TransformedDistribution"]


class TransformedDistribution(Distribution):
    """``transforms`` applied to samples of ``base_distribution``; ``log_prob`` inverts them and
    subtracts each log-Jacobian (change of variables), summed over each event.

    The event shape is the larger of the base's and the transforms' (a transform on vectors makes
    the base's rightmost batch dim part of the event: the base is wrapped in
    :class:`Independent`), and a base whose shape the transforms broadcast (an
    ``AffineTransform`` with a larger ``loc``) is expanded first, as in PyTorch.

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
        elif not isinstance(transforms, list):
            raise ValueError(f"transforms must be a Transform or list, but was {transforms}")
        elif not all(isinstance(t, Transform) for t in transforms):
            raise ValueError("transforms must be a Transform or a list of Transforms")
        self.transforms = transforms
        base_shape = Size(
            tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        )
        base_event_dim = len(base_distribution.event_shape)
        transform = ComposeTransform(self.transforms)
        if len(base_shape) < transform.domain.event_dim:
            raise ValueError(
                f"base_distribution needs to have shape with size at least "
                f"{transform.domain.event_dim}, but got {base_shape}."
            )
        forward_shape = Size(tuple(transform.forward_shape(base_shape)))
        expanded_base_shape = Size(tuple(transform.inverse_shape(forward_shape)))
        if base_shape != expanded_base_shape:
            cut = len(expanded_base_shape) - base_event_dim
            base_distribution = base_distribution.expand(expanded_base_shape[:cut])
        reinterpreted_batch_ndims = transform.domain.event_dim - base_event_dim
        if reinterpreted_batch_ndims > 0:
            base_distribution = Independent(base_distribution, reinterpreted_batch_ndims)
        self.base_dist = base_distribution
        change = transform.codomain.event_dim - transform.domain.event_dim
        event_dim = max(transform.codomain.event_dim, base_event_dim + change)
        cut = len(forward_shape) - event_dim
        super().__init__(forward_shape[:cut], forward_shape[cut:], validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> TransformedDistribution:
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = Size(tuple(batch_shape))
        shape: Any = Size(tuple(batch_shape) + tuple(self._event_shape))
        for t in reversed(self.transforms):
            shape = t.inverse_shape(shape)
        base_batch_shape = tuple(shape)[: len(shape) - len(self.base_dist.event_shape)]
        new.base_dist = self.base_dist.expand(base_batch_shape)
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False)
    def support(self) -> Any:
        if not self.transforms:
            return self.base_dist.support
        support = self.transforms[-1].codomain
        if len(self._event_shape) > support.event_dim:
            support = constraints.independent(support, len(self._event_shape) - support.event_dim)
        return support

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
        event_dim = len(self._event_shape)
        log_prob: Any = 0.0
        y = value
        for t in reversed(self.transforms):
            x = t.inv(y)
            event_dim += t.domain.event_dim - t.codomain.event_dim
            ladj = t.log_abs_det_jacobian(x, y)
            log_prob = log_prob - sum_rightmost(ladj, event_dim - t.domain.event_dim)
            y = x
        base = self.base_dist.log_prob(y)
        return log_prob + sum_rightmost(base, event_dim - len(self.base_dist.event_shape))

    def _monotonize_cdf(self, value: Tensor) -> Tensor:
        """``value`` flipped to ``1 - value`` where the composed transform decreases."""
        sign: Any = 1
        for t in self.transforms:
            sign = sign * t.sign
        if isinstance(sign, int) and sign == 1:
            return value
        return sign * (value - 0.5) + 0.5

    def cdf(self, value: Tensor) -> Tensor:
        for t in reversed(self.transforms):
            value = t.inv(value)
        if self._validate_args:
            self.base_dist._validate_sample(value)
        return self._monotonize_cdf(self.base_dist.cdf(value))

    def icdf(self, value: Tensor) -> Tensor:
        value = self.base_dist.icdf(self._monotonize_cdf(value))
        for t in self.transforms:
            value = t(value)
        return value

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
