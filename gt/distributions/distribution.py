"""The :class:`Distribution` base class (``torch.distributions.Distribution``)."""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.utils import lazy_property
from gt.grad_mode import no_grad
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

__all__ = ["Distribution"]


class Distribution:
    """A parameterized probability distribution.

    ``batch_shape`` is the shape of independent distributions held at once (one per parameter
    entry); ``event_shape`` the shape of one draw. ``sample(sample_shape)`` returns
    ``sample_shape + batch_shape + event_shape`` values; ``log_prob`` reduces the event dims.

    With validation on (the default, as in PyTorch; see :meth:`set_default_validate_args`), the
    constructor checks every parameter against ``arg_constraints`` and ``log_prob`` checks its
    value against ``support``, raising PyTorch's ``ValueError``. Each check is one sync point.
    """

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Turn argument validation on or off for distributions created from now on."""
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init__(self, batch_shape: Any = (), event_shape: Any = (),
                 validate_args: bool | None = None) -> None:  # fmt: skip
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = validate_args
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(
                    getattr(type(self), param, None), lazy_property
                ):
                    continue  # derived lazily from a parameter that is checked
                value = getattr(self, param)
                if not bool(constraint.check(value).all()):
                    raise ValueError(
                        f"Expected parameter {param} "
                        f"({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} "
                        f"to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}"
                    )

    # -- shapes ---------------------------------------------------------------------------------

    @property
    def batch_shape(self) -> Size:
        """The shape over which parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample (without batching)."""
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> Size:
        if isinstance(sample_shape, int):
            sample_shape = (sample_shape,)
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def expand(self, batch_shape: Any, _instance: Any = None) -> Distribution:
        """A new distribution whose parameters are expanded to ``batch_shape`` (no copies, no
        re-validation)."""
        batch_shape = Size(tuple(batch_shape))
        new = self.__new__(type(self)) if _instance is None else _instance
        for name in self._param_names():
            if name in self.__dict__:
                value = self.__dict__[name]
                extra = tuple(value.shape[value.dim() - self._param_event_dims :])
                new.__dict__[name] = value.expand(tuple(batch_shape) + extra)
        for name, value in self.__dict__.items():
            if name not in new.__dict__ and name not in ("_batch_shape", "_validate_args"):
                new.__dict__[name] = value
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    #: Trailing dims of each parameter beyond the batch shape (1 for Categorical's probs).
    _param_event_dims = 0

    def _param_names(self) -> list[str]:
        return list(self.arg_constraints)

    # -- constraints ----------------------------------------------------------------------------

    @property
    def arg_constraints(self) -> dict[str, constraints.Constraint]:
        """The constraint each parameter must satisfy, by name."""
        raise NotImplementedError

    @property
    def support(self) -> Any:
        """The constraint the values of this distribution satisfy."""
        raise NotImplementedError

    # -- moments --------------------------------------------------------------------------------

    @property
    def mean(self) -> Tensor:
        """The mean of the distribution."""
        raise NotImplementedError

    @property
    def mode(self) -> Tensor:
        """The mode of the distribution."""
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self) -> Tensor:
        """The variance of the distribution."""
        raise NotImplementedError

    @property
    def stddev(self) -> Tensor:
        """The standard deviation of the distribution."""
        return self.variance.sqrt()

    # -- sampling and densities -----------------------------------------------------------------

    def sample(self, sample_shape: Any = ()) -> Tensor:
        """Draw ``sample_shape`` batches of samples (outside autograd)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        """A reparameterized sample: differentiable w.r.t. the parameters."""
        raise NotImplementedError

    def sample_n(self, n: int) -> Tensor:
        """``n`` samples (PyTorch's deprecated spelling of ``sample((n,))``)."""
        return self.sample(Size((n,)))

    def log_prob(self, value: Tensor) -> Tensor:
        """The log of the density or mass at ``value``."""
        raise NotImplementedError

    def cdf(self, value: Tensor) -> Tensor:
        """The cumulative distribution function at ``value``."""
        raise NotImplementedError

    def icdf(self, value: Tensor) -> Tensor:
        """The inverse of the cumulative distribution function."""
        raise NotImplementedError

    def enumerate_support(self, expand: bool = True) -> Tensor:
        """Every value of a discrete distribution's support, along a new leading dim."""
        raise NotImplementedError

    def entropy(self) -> Tensor:
        """The entropy, one value per batch entry."""
        raise NotImplementedError

    def perplexity(self) -> Tensor:
        """``exp(entropy)``."""
        return self.entropy().exp()

    def _validate_sample(self, value: Any) -> None:
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        shape = tuple(value.shape)
        event = tuple(self._event_shape)
        if shape[len(shape) - len(event) :] != event:
            raise ValueError(
                f"The right-most size of value must match event_shape: "
                f"{Size(shape)} vs {self._event_shape}."
            )
        expected = tuple(self._batch_shape) + event
        for i, j in zip(reversed(shape), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(
                    f"Value is not broadcastable with batch_shape+event_shape: "
                    f"{Size(shape)} vs {Size(expected)}."
                )
        support = self.support
        if not bool(support.check(value).all()):
            raise ValueError(
                "Expected value argument "
                f"({type(value).__name__} of shape {shape}) "
                f"to be within the support ({support!r}) "
                f"of the distribution {self!r}, "
                f"but found invalid values:\n{value}"
            )

    def __repr__(self) -> str:
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(
            f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
            for p in names
        )
        return f"{self.__class__.__name__}({args})"


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
