"""Relaxed one-hot vectors (the Concrete / Gumbel-softmax distribution):
:class:`ExpRelaxedCategorical` and :class:`RelaxedOneHotCategorical`, with PyTorch's densities.
``rsample`` is differentiable with respect to the logits or probabilities and the temperature
(``torch.distributions.relaxed_categorical``).
"""

from __future__ import annotations

from typing import Any

from gt.distributions import constraints
from gt.distributions.discrete import Categorical
from gt.distributions.distribution import Distribution
from gt.distributions.relaxed_bernoulli import _temperature
from gt.distributions.transformed_distribution import TransformedDistribution
from gt.distributions.transforms import ExpTransform
from gt.distributions.utils import clamp_probs
from gt.factories import full_like, rand
from gt.ops.functional import broadcast_tensors
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

__all__ = ["ExpRelaxedCategorical", "RelaxedOneHotCategorical"]


class ExpRelaxedCategorical(Distribution):
    """The log of a :class:`RelaxedOneHotCategorical` sample: ``log_softmax((logits + G) /
    temperature)`` for Gumbel noise ``G``. Values are real vectors of length ``K`` (the event).

    Args:
        temperature: relaxation temperature (a positive tensor).
        probs: category weights (normalized over the last dim).
        logits: unnormalized log-probabilities.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.real_vector  # in truth a submanifold of it
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self._categorical = Categorical(probs, logits)
        param = self._categorical._param
        self.temperature = _temperature(temperature, param)
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]),
                         validate_args=validate_args)  # fmt: skip

    def expand(self, batch_shape: Any, _instance: Any = None) -> ExpRelaxedCategorical:
        new = self.__new__(type(self)) if _instance is None else _instance
        new.temperature = self.temperature
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, tuple(batch_shape), self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def logits(self) -> Tensor:
        """Normalized log-probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return self._categorical.probs

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        u = clamp_probs(rand(shape, dtype=self.logits.dtype))
        gumbels = -((-(u.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value: Tensor) -> Tensor:
        k = self._categorical._num_events
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value)
        t = self.temperature
        log_scale = full_like(t, float(k)).lgamma() + t.log() * (k - 1)
        score = logits - value * t
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(TransformedDistribution):
    """A relaxed one-hot vector on the simplex (Gumbel-softmax): ``exp`` of an
    :class:`ExpRelaxedCategorical`. Low temperatures give nearly one-hot values.

    Args:
        temperature: relaxation temperature (a positive tensor).
        probs: category weights (normalized over the last dim).
        logits: unnormalized log-probabilities.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature: Any, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        base = ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args)
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> RelaxedOneHotCategorical:
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
