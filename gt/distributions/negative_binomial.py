""":class:`NegativeBinomial`: the number of successes before ``total_count`` failures
(``torch.distributions.NegativeBinomial``'s formulas, messages and edge cases).

``sample`` draws a gamma-Poisson mixture, as PyTorch: ``Poisson(Gamma(total_count, e^-logits))``
with GT's ``standard_gamma`` and ``poisson`` primitives.
"""

from __future__ import annotations

from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.gamma_family import Gamma
from gt.distributions.utils import BinaryParameters, broadcast_all, one_of, softplus
from gt.grad_mode import no_grad
from gt.ops.random import next_seed
from gt.tensor import Tensor

__all__ = ["NegativeBinomial"]


class NegativeBinomial(BinaryParameters, Distribution):
    """The number of successes in trials of success probability ``probs`` (or
    ``sigmoid(logits)``) before ``total_count`` failures; ``total_count`` may be any
    non-negative real.

    Args:
        total_count: number of failures to stop at (number or tensor), broadcast.
        probs: success probability, in ``[0, 1)``.
        logits: log-odds of success.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "total_count": constraints.greater_than_eq(0),
        "probs": constraints.half_open_interval(0.0, 1.0),
        "logits": constraints.real,
    }
    support = constraints.nonnegative_integer

    def __init__(self, total_count: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        if probs is not None:
            total, self.probs = broadcast_all(total_count, probs)
            self._param = self.probs
        else:
            total, self.logits = broadcast_all(total_count, logits)
            self._param = self.logits
        self.total_count = total.type_as(self._param)
        super().__init__(tuple(self._param.shape), validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.logits.exp()

    @property
    def mode(self) -> Tensor:
        return ((self.total_count - 1) * self.logits.exp()).floor().clamp(min=0.0)

    @property
    def variance(self) -> Tensor:
        return self.mean / (-self.logits).sigmoid()

    def _gamma(self) -> Gamma:
        return Gamma(self.total_count, (-self.logits).exp(), validate_args=False)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        with no_grad():
            rate = self._gamma().sample(sample_shape)
            return rate._apply("poisson", [rate], {"seed": next_seed()})

    def log_prob(self, value: Any) -> Tensor:
        if isinstance(value, Number):
            value = self._param.new_full((), float(value))
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        # log sigmoid(x) = -softplus(-x)
        log_unnormalized = -n * softplus(logits) - value * softplus(-logits)
        log_normalization = -(n + value).lgamma() + (1.0 + value).lgamma() + n.lgamma()
        log_normalization = log_normalization.masked_fill(n + value == 0.0, 0.0)
        return log_unnormalized - log_normalization
