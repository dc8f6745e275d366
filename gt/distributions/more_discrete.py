"""Counting distributions: :class:`Binomial`, :class:`Multinomial`, :class:`Geometric`
(``torch.distributions``' formulas, messages and edge cases).

GT has no binomial sampler, so ``Binomial.sample`` sums Bernoulli draws: one sync point reads
``max(total_count)``, then ``max(total_count)`` coin flips per entry are drawn at once (the cost
grows with the largest count). ``Multinomial.sample`` draws ``total_count`` categories per entry
and counts them with ``scatter_add``.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.discrete import Categorical
from gt.distributions.distribution import Distribution
from gt.distributions.utils import (
    BinaryParameters,
    bce_with_logits,
    broadcast_all,
    one_of,
)
from gt.factories import arange, bernoulli, rand, zeros, zeros_like
from gt.grad_mode import no_grad
from gt.ops.functional import broadcast_tensors, where
from gt.ops.typeinfo import Size, finfo
from gt.tensor import Tensor

__all__ = ["Binomial", "Geometric", "Multinomial"]


def _clamp_by_zero(x: Tensor) -> Tensor:
    # clamp(x, min=0) whose gradient at 0 is 1/2 (PyTorch's choice)
    return (x.clamp(min=0) + x - x.clamp(max=0)) / 2


def _as_tensor(value: Any, like: Tensor) -> Any:
    return like.new_full((), float(value)) if isinstance(value, Number) else value


class _MultinomialConstraint(constraints.Constraint):
    """Non-negative counts summing to at most ``upper_bound`` (PyTorch checks ``<=``, not ``==``)."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: Any):
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & (value.sum(-1) <= self.upper_bound)

    def __repr__(self) -> str:
        return "Multinomial()"


class Binomial(BinaryParameters, Distribution):
    """The number of successes in ``total_count`` independent trials of probability ``probs``
    (or ``sigmoid(logits)``).

    Args:
        total_count: number of trials, a non-negative integer (number or tensor), broadcast
            against the probabilities.
        probs: success probability of each trial, in ``[0, 1]``.
        logits: log-odds of success.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "total_count": constraints.nonnegative_integer,
        "probs": constraints.unit_interval,
        "logits": constraints.real,
    }
    has_enumerate_support = True

    def __init__(self, total_count: Any = 1, probs: Any = None, logits: Any = None,
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

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> Any:
        return constraints.integer_interval(0, self.total_count)

    @property
    def mean(self) -> Tensor:
        return self.total_count * self.probs

    @property
    def mode(self) -> Tensor:
        return ((self.total_count + 1) * self.probs).floor().clamp(max=self.total_count)

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            n_max = int(self.total_count.max().item()) if self.total_count.numel() else 0
            if n_max <= 0:
                return zeros(shape, dtype=self._param.dtype)
            probs = self.probs.expand(shape)
            flips = bernoulli(probs.unsqueeze(0).expand((n_max, *shape)))
            # trial i counts only where i < total_count
            trial = arange(n_max, dtype=self._param.dtype).view((n_max,) + (1,) * len(shape))
            counted = (trial < self.total_count.expand(shape)).type_as(flips)
            return (flips * counted).sum(0)

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self._param)
        if self._validate_args:
            self._validate_sample(value)
        n, logits = self.total_count, self.logits
        log_factorial_n = (n + 1).lgamma()
        log_factorial_k = (value + 1).lgamma()
        log_factorial_nmk = (n - value + 1).lgamma()
        # n log(1 + e^logit), stable for either sign of the logit
        normalize = n * _clamp_by_zero(logits) + n * (-logits.abs()).exp().log1p() - log_factorial_n
        return value * logits - log_factorial_k - log_factorial_nmk - normalize

    def _homogeneous_count(self, what: str) -> int:
        total = int(self.total_count.max().item())
        if int(self.total_count.min().item()) != total:
            raise NotImplementedError(f"Inhomogeneous total count not supported by `{what}`.")
        return total

    def entropy(self) -> Tensor:
        self._homogeneous_count("entropy")
        log_prob = self.log_prob(self.enumerate_support(False))
        return -(log_prob.exp() * log_prob).sum(0)

    def enumerate_support(self, expand: bool = True) -> Tensor:
        total = self._homogeneous_count("enumerate_support")
        values = arange(1 + total, dtype=self._param.dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1, *self._batch_shape)) if expand else values


class Multinomial(Distribution):
    """Counts of ``total_count`` draws among ``K`` categories (the last dim of ``probs`` or
    ``logits``, normalized as in :class:`Categorical`). ``log_prob`` accepts any total; only
    ``sample`` and the support use ``total_count``.

    Args:
        total_count: number of draws (a Python int: one count shared by the whole batch).
        probs: non-negative category weights.
        logits: unnormalized log-probabilities.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.real_vector}

    def __init__(self, total_count: int = 1, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        # the probabilities are checked already; a negative count is Binomial's error
        self._binomial = Binomial(total_count, probs=self.probs,
                                  validate_args=None if total_count < 0 else False)  # fmt: skip
        param = self._categorical._param
        super().__init__(tuple(param.shape[:-1]), tuple(param.shape[-1:]),
                         validate_args=validate_args)  # fmt: skip

    def expand(self, batch_shape: Any, _instance: Any = None) -> Multinomial:
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = tuple(batch_shape)
        new.total_count = self.total_count
        new._categorical = self._categorical.expand(batch_shape)
        new._binomial = self._binomial.expand(batch_shape + tuple(self._event_shape))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=True, event_dim=1)
    def support(self) -> Any:
        return _MultinomialConstraint(self.total_count)

    @property
    def logits(self) -> Tensor:
        """Normalized log-probabilities."""
        return self._categorical.logits

    @property
    def probs(self) -> Tensor:
        """Normalized probabilities."""
        return self._categorical.probs

    @property
    def param_shape(self) -> Size:
        return self._categorical.param_shape

    @property
    def mean(self) -> Tensor:
        return self.probs * self.total_count

    @property
    def variance(self) -> Tensor:
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = (sample_shape,) if isinstance(sample_shape, int) else tuple(sample_shape)
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            if self.total_count == 0:
                return zeros(shape, dtype=self.probs.dtype)
            draws = self._categorical.sample((self.total_count, *sample_shape))
            order = list(range(1, draws.dim())) + [0]  # the draws go last
            draws = draws.permute(*order)
            counts = zeros(shape, dtype="int64").scatter_add(-1, draws, draws.new_ones(draws.shape))
            return counts.type_as(self.probs)

    def entropy(self) -> Tensor:
        n = self.total_count
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        support = self._binomial.enumerate_support(expand=False)[1:]
        binomial_probs = self._binomial.log_prob(support).exp()
        weights = (support + 1).lgamma()
        term2 = (binomial_probs * weights).sum(0).sum(-1)
        return term1 + term2

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_tensors(self.logits, value.type_as(self.logits))
        log_factorial_n = (value.sum(-1) + 1).lgamma()
        log_factorial_xs = (value + 1).lgamma().sum(-1)
        # a category of probability 0 drawn 0 times contributes 0 * log 0 = 0
        logits = where((value == 0) & (logits == -math.inf), 0.0, logits)
        return log_factorial_n - log_factorial_xs + (logits * value).sum(-1)


class Geometric(BinaryParameters, Distribution):
    """The number of failures before the first success in trials of probability ``probs``
    (or ``sigmoid(logits)``): ``P(k) = (1 - p)^k p`` for ``k = 0, 1, ...``.

    Args:
        probs: success probability, in ``(0, 1]``.
        logits: log-odds of success.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs: Any = None, logits: Any = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        one_of(probs, logits)
        param = probs if probs is not None else logits
        (value,) = broadcast_all(param)
        if probs is not None:
            self.probs = value
        else:
            self.logits = value
        shape = () if isinstance(param, Number) else tuple(param.shape)
        super().__init__(shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            valid = self.probs > 0
            if not bool(valid.all()):
                raise ValueError(
                    "Expected parameter probs "
                    f"({type(value).__name__} of shape {tuple(value.shape)}) "
                    f"of distribution {self!r} "
                    f"to be positive but found invalid values:\n{value.detach()[~valid]}"
                )

    @property
    def mean(self) -> Tensor:
        return 1.0 / self.probs - 1.0

    @property
    def mode(self) -> Tensor:
        return zeros_like(self.probs)

    @property
    def variance(self) -> Tensor:
        return (1.0 / self.probs - 1.0) / self.probs

    def sample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        with no_grad():
            u = rand(shape, dtype=self.probs.dtype).clamp(min=finfo(self.probs.dtype).tiny)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value: Any) -> Tensor:
        value = _as_tensor(value, self.probs)
        if self._validate_args:
            self._validate_sample(value)
        value, probs = broadcast_tensors(value, self.probs)
        # P(0) = 1 when p = 1: 0 * log(0) must read 0
        probs = where((probs == 1) & (value == 0), 0.0, probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self) -> Tensor:
        return bce_with_logits(self.logits, self.probs) / self.probs
