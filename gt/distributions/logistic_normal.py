""":class:`LogisticNormal`: a normal vector pushed onto the simplex by
:class:`~gt.distributions.transforms.StickBreakingTransform` (``torch.distributions``')."""

from __future__ import annotations

from typing import Any

from gt.distributions import constraints
from gt.distributions.continuous import Normal
from gt.distributions.distribution import Distribution
from gt.distributions.independent import Independent
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import StickBreakingTransform
from gt.grad_mode import no_grad
from gt.tensor import Tensor

__all__ = ["LogisticNormal"]


class LogisticNormal(TransformedDistribution):
    """``StickBreakingTransform()(X)`` for ``X ~ Normal(loc, scale)`` along the last dim: a draw
    has one more entry than ``loc`` and lies on the simplex. ``base_dist`` is
    ``Independent(Normal(loc, scale), 1)``; a scalar ``loc`` and ``scale`` give a 2-simplex.

    Args:
        loc: mean of the base normal.
        scale: standard deviation of the base normal, positive.
        validate_args: check the parameters and values (``None``: the default setting).
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        normal = Normal(loc, scale, validate_args=validate_args)
        if not normal.batch_shape:
            normal = normal.expand([1])
        self.base_dist = Independent(normal, 1, validate_args=False)
        self.transforms = [StickBreakingTransform()]
        shape = tuple(normal.batch_shape)
        # Normal has checked loc and scale already
        Distribution.__init__(self, shape[:-1], (shape[-1] + 1,), validate_args=False)
        self._validate_args = normal._validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> LogisticNormal:
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = tuple(batch_shape)
        new.base_dist = self.base_dist.expand(batch_shape)
        new.transforms = self.transforms
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def loc(self) -> Tensor:
        return self.base_dist.base_dist.loc

    @property
    def scale(self) -> Tensor:
        return self.base_dist.base_dist.scale

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            return self.transforms[0](self.base_dist.sample(sample_shape))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        return self.transforms[0](self.base_dist.rsample(sample_shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        t = self.transforms[0]
        x = t.inv(value)
        return self.base_dist.log_prob(x) - t.log_abs_det_jacobian(x, value)

    def cdf(self, value: Tensor) -> Tensor:
        raise NotImplementedError
