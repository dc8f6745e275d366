"""Relaxed coin flips (the binary Concrete distribution): :class:`LogitRelaxedBernoulli` and
:class:`RelaxedBernoulli`, with PyTorch's densities. ``rsample`` is differentiable with respect to
the logits or probabilities and the temperature (``torch.distributions.relaxed_bernoulli``).
"""

from __future__ import annotations

from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import SigmoidTransform
from gt.distributions.utils import (
    BinaryParameters,
    broadcast_all,
    clamp_probs,
    one_of,
)
from gt.factories import rand
from gt.factories import tensor as _tensor
from gt.ops.functional import broadcast_tensors
from gt.tensor import Tensor

__all__ = ["LogitRelaxedBernoulli", "RelaxedBernoulli"]


def _temperature(temperature: Any, like: Any) -> Any:
    # PyTorch requires a tensor; a number is accepted here and given the parameters' dtype
    if isinstance(temperature, Number):
        dtype = like.dtype if isinstance(like, Tensor) else None
        return _tensor(float(temperature), dtype=dtype)
    return temperature


class LogitRelaxedBernoulli(BinaryParameters, Distribution):
    """The logit of a :class:`RelaxedBernoulli` sample: ``(logit(U) + logits) / temperature``
    for ``U`` uniform.

    Args:
        temperature: relaxation temperature (a positive tensor).
        probs: probability of a 1.
        logits: log-odds of a 1.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.real  # has_rsample stays False, as in PyTorch (rsample works)

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        param = probs if probs is not None else logits
        (value,) = broadcast_all(param)
        if probs is not None:
            self.probs = value
        else:
            self.logits = value
        self._param = value
        self.temperature = _temperature(temperature, value)
        shape = () if isinstance(param, Number) else tuple(value.shape)
        super().__init__(shape, validate_args=validate_args)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        u = clamp_probs(rand(shape, dtype=probs.dtype))
        return (u.log() - (-u).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value)
        diff = logits - value * self.temperature
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class RelaxedBernoulli(TransformedDistribution):
    """A relaxed coin flip in ``(0, 1)``: ``sigmoid`` of a :class:`LogitRelaxedBernoulli`.
    Low temperatures give values near 0 and 1.

    Args:
        temperature: relaxation temperature (a positive tensor).
        probs: probability of a 1.
        logits: log-odds of a 1.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        base = LogitRelaxedBernoulli(temperature, probs, logits)
        super().__init__(base, SigmoidTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> RelaxedBernoulli:
        new = self.__new__(type(self)) if _instance is None else _instance
        return super().expand(batch_shape, _instance=new)

    @property
    def temperature(self) -> Tensor:
        return self.base_dist.temperature

    @property
    def logits(self) -> Tensor:
        return self.base_dist.logits

    @property
    def probs(self) -> Tensor:
        return self.base_dist.probs
