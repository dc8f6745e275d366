"""Discrete distributions: :class:`Bernoulli`, :class:`Categorical`, :class:`OneHotCategorical`
and :class:`OneHotCategoricalStraightThrough`.

Each takes ``probs`` or ``logits`` (exactly one); the other is derived lazily, as in PyTorch.
``log_prob`` and ``entropy`` are computed from the logits, so they stay differentiable and finite.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.utils import (
    BinaryParameters,
    bce_with_logits,
    broadcast_all,
    lazy_property,
    logits_to_probs,
    one_hot,
    one_of,
    probs_to_logits,
)
from gt.factories import arange, bernoulli, full
from gt.grad_mode import no_grad
from gt.ops.functional import broadcast_tensors, multinomial, where
from gt.ops.typeinfo import Size, finfo
from gt.tensor import Tensor

__all__ = ["Bernoulli", "Categorical", "OneHotCategorical", "OneHotCategoricalStraightThrough"]


class Bernoulli(BinaryParameters, ExponentialFamily):
    """A coin flip: 1 with probability ``probs`` (or ``sigmoid(logits)``), else 0.

    Args:
        probs: probability of a 1, in ``[0, 1]``.
        logits: log-odds of a 1.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        param = probs if probs is not None else logits
        (value,) = broadcast_all(param)
        if probs is not None:
            self.probs = value
        else:
            self.logits = value
        self._param = value
        shape = () if isinstance(param, Number) else tuple(value.shape)
        super().__init__(shape, validate_args=validate_args)

    @property
    def mean(self) -> Tensor:
        return self.probs

    @property
    def mode(self) -> Tensor:
        # a fair coin has no mode: NaN, as in PyTorch
        mode = (self.probs >= 0.5).type_as(self.probs)
        return where(self.probs == 0.5, math.nan, mode)

    @property
    def variance(self) -> Tensor:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(tuple(shape)))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value)
        return -bce_with_logits(logits, value)

    def entropy(self) -> Tensor:
        return bce_with_logits(self.logits, self.probs)

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple[Tensor]:
        return (self.probs.logit(),)

    def _log_normalizer(self, x: Tensor) -> Tensor:
        return x.exp().log1p()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = len(self._batch_shape)
        values = arange(2, dtype=self._param.dtype).view((-1,) + (1,) * n)
        return values.expand((-1, *self._batch_shape)) if expand else values


class Categorical(Distribution):
    """A choice among ``K`` categories (the last dim of ``probs`` or ``logits``).

    ``probs`` are normalized to sum to 1; ``logits`` are normalized log-probabilities
    (``logits - logsumexp(logits)``). Samples are int64 indices of shape ``sample_shape +
    batch_shape``.

    Args:
        probs: non-negative weights, at least one-dimensional.
        logits: unnormalized log-probabilities, at least one-dimensional.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    has_enumerate_support = True
    _param_event_dims = 1

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        self._num_events = self._param.shape[-1]
        batch = tuple(self._param.shape[:-1]) if self._param.dim() > 1 else ()
        super().__init__(batch, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> Categorical:
        new = super().expand(batch_shape, _instance)
        new._param = new.__dict__["probs" if "probs" in self.__dict__ else "logits"]
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self._num_events - 1)

    @lazy_property
    def logits(self) -> Tensor:
        """Normalized log-probabilities."""
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return logits_to_probs(self.logits)

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self._param.shape))

    @property
    def mean(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    @property
    def mode(self) -> Tensor:
        return self.probs.argmax(-1)

    @property
    def variance(self) -> Tensor:
        return full(tuple(self._extended_shape()), math.nan, dtype=self.probs.dtype)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        n = math.prod(shape[: len(shape) - len(self._batch_shape)])
        with no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            samples_2d = multinomial(probs_2d, n, True).T
            return samples_2d.reshape(tuple(shape))

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Tensor:
        # clamp so that 0 * log(0) is 0 rather than 0 * -inf = NaN
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        n = len(self._batch_shape)
        values = arange(self._num_events, dtype="int64").view((-1,) + (1,) * n)
        return values.expand((-1, *self._batch_shape)) if expand else values


class OneHotCategorical(Distribution):
    """A :class:`Categorical` whose samples are one-hot vectors of length ``K`` (the event)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}
    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        param = self._categorical._param
        # the inner Categorical has checked the parameters already: one sync point, not two
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]), validate_args=False)
        self._validate_args = self._categorical._validate_args

    def expand(self, batch_shape: Any, _instance: Any = None) -> OneHotCategorical:
        new = self.__new__(type(self)) if _instance is None else _instance
        new._categorical = self._categorical.expand(batch_shape)
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def _param(self) -> Tensor:
        return self._categorical._param

    @property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return self._categorical.probs

    @property
    def logits(self) -> Tensor:
        """Normalized log-probabilities."""
        return self._categorical.logits

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self._categorical.probs

    @property
    def mode(self) -> Tensor:
        probs = self._categorical.probs
        return one_hot(probs.argmax(-1), probs.shape[-1], probs)

    @property
    def variance(self) -> Tensor:
        return self._categorical.probs * (1 - self._categorical.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        probs = self._categorical.probs
        indices = self._categorical.sample(sample_shape)
        return one_hot(indices, self._categorical._num_events, probs)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        indices = value.max(-1)[1]
        return self._categorical.log_prob(indices)

    def entropy(self) -> Tensor:
        return self._categorical.entropy()

    def enumerate_support(self, expand: bool = True) -> Tensor:
        k = self._event_shape[0]
        values = one_hot(arange(k), k, self._categorical.probs)
        values = values.view((k,) + (1,) * len(self._batch_shape) + (k,))
        return values.expand((k, *self._batch_shape, k)) if expand else values

    def __repr__(self) -> str:
        return repr(self._categorical).replace("Categorical", type(self).__name__, 1)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """A :class:`OneHotCategorical` with a straight-through ``rsample``: the one-hot sample in the
    forward pass, the gradient of the probabilities in the backward pass (Bengio et al., 2013)."""

    has_rsample = True

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        samples = self.sample(sample_shape)
        probs = self._categorical.probs
        return samples + (probs - probs.detach())
