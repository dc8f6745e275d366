"""Invertible elementwise transforms for :class:`TransformedDistribution`
(``torch.distributions.transforms``): exp, affine, sigmoid, tanh, power, abs (not invertible),
and their composition.

Each transform maps ``x -> y``, inverts ``y -> x`` and gives ``log |dy/dx|``. With ``cache_size=1``
the last ``(x, y)`` pair is remembered, so ``log_prob`` of a value just sampled inverts it
exactly: ``atanh(tanh(x))`` loses ``x`` once ``tanh(x)`` rounds to 1 (SAC code passes
``TanhTransform(cache_size=1)`` for that reason). The default is 0, as in PyTorch.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.utils import clamp_probs, softplus
from gt.factories import full_like
from gt.ops.shaping import cat
from gt.ops.typeinfo import finfo
from gt.tensor import Tensor

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "ComposeTransform",
    "ExpTransform",
    "PowerTransform",
    "SigmoidTransform",
    "TanhTransform",
    "Transform",
]


class Transform:
    """An invertible map with a tractable log-Jacobian; ``t(x)``, ``t.inv(y)``,
    ``t.log_abs_det_jacobian(x, y)``. These are elementwise (``event_dim`` 0)."""

    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real
    bijective = True
    event_dim = 0

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached: tuple[Any, Any] | None = None

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[0] is x:
            return self._cached[1]
        y = self._call(x)
        if self._cache_size:
            self._cached = (x, y)
        return y

    @property
    def inv(self) -> _InverseTransform:
        """The inverse transform."""
        return _InverseTransform(self)

    def _inverse_of(self, y: Tensor) -> Tensor:
        if self._cache_size and self._cached is not None and self._cached[1] is y:
            return self._cached[0]
        x = self._inverse(y)
        if self._cache_size:
            self._cached = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """``log |dy/dx|``, elementwise."""
        raise NotImplementedError

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __hash__(self) -> int:
        return hash(type(self))

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=0)
        self._inv = transform
        self.domain, self.codomain = transform.codomain, transform.domain

    @property
    def inv(self) -> Transform:  # type: ignore[override]
        return self._inv

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inverse_of(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    def __hash__(self) -> int:
        return hash(("inv", self._inv))


class ComposeTransform(Transform):
    """``parts`` applied in order."""

    def __init__(self, parts: list[Transform], cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def _call(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def _inverse(self, y: Tensor) -> Tensor:
        for part in reversed(self.parts):
            y = part.inv(y)
        return y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return x * 0
        total = 0
        for part in self.parts:
            y_part = part(x)
            total = total + part.log_abs_det_jacobian(x, y_part)
            x = y_part
        return total

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(tuple(self.parts))


class ExpTransform(Transform):
    """``y = exp(x)``."""

    codomain = constraints.positive

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


class AffineTransform(Transform):
    """``y = loc + scale * x`` (numbers or tensors, broadcast)."""

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        if event_dim != 0:
            raise NotImplementedError("AffineTransform supports event_dim=0 only")
        super().__init__(cache_size=cache_size)
        self.loc, self.scale = loc, scale

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if isinstance(self.scale, Number):
            return full_like(x, math.log(abs(self.scale)))
        return self.scale.abs().log() + x * 0  # broadcast to x's shape

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        same = [
            a is b or (isinstance(a, Number) and isinstance(b, Number) and a == b)
            for a, b in ((self.loc, other.loc), (self.scale, other.scale))
        ]
        return all(same)

    def __hash__(self) -> int:
        return id(self)


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``."""

    codomain = constraints.unit_interval

    def _call(self, x: Tensor) -> Tensor:
        return clamp_probs(x.sigmoid())

    def _inverse(self, y: Tensor) -> Tensor:
        y = clamp_probs(y)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x) - softplus(x)


class TanhTransform(Transform):
    """``y = tanh(x)``: squashes a Gaussian policy into ``(-1, 1)`` (as in SAC)."""

    codomain = constraints.interval(-1.0, 1.0)

    def _call(self, x: Tensor) -> Tensor:
        return x.tanh()

    def _inverse(self, y: Tensor) -> Tensor:
        return 0.5 * ((y).log1p() - (-y).log1p())  # atanh

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        # log(1 - tanh(x)^2), written so that it stays finite for large |x|
        return 2.0 * (math.log(2.0) - x - softplus(-2.0 * x))


class PowerTransform(Transform):
    """``y = x ** exponent`` on the positive reals (``exponent`` a number or tensor, broadcast).
    ``sign`` is the sign of ``exponent``: whether the map increases."""

    domain = constraints.positive
    codomain = constraints.positive

    def __init__(self, exponent: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    @property
    def sign(self) -> Any:
        """``+1`` (increasing) or ``-1`` (decreasing), elementwise."""
        if isinstance(self.exponent, Number):
            return (self.exponent > 0) - (self.exponent < 0)
        return self.exponent.sign()

    def _call(self, x: Tensor) -> Tensor:
        return x.pow(self.exponent)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return (self.exponent * y / x).abs().log()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PowerTransform):
            return False
        if isinstance(self.exponent, Number) and isinstance(other.exponent, Number):
            return self.exponent == other.exponent
        return bool((self.exponent == other.exponent).all())  # a sync point, as in PyTorch

    def __hash__(self) -> int:
        return id(self)


class AbsTransform(Transform):
    """``y = |x|``. Not bijective: its "inverse" returns ``y`` itself (the non-negative
    preimage), as in PyTorch, and it has no log-Jacobian."""

    codomain = constraints.positive
    bijective = False

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


def _clipped_sigmoid(x: Tensor) -> Tensor:
    info = finfo(x.dtype)
    return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)


class StickBreakingTransform(Transform):
    """Unconstrained vectors of length ``K`` to the simplex of length ``K + 1``, by breaking a
    stick: the first logit's sigmoid (shifted so that zeros map to the uniform point) takes a
    share of the stick, the next a share of the rest, and so on. Acts on the last dimension
    (``event_dim`` 1)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    event_dim = 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StickBreakingTransform)

    def __hash__(self) -> int:
        return hash(type(self))

    @staticmethod
    def _offset_log(x: Tensor, k: int) -> Tensor:
        # log(k - i) for i = 0 .. K-1, PyTorch's shift
        return (k - x.new_ones((x.shape[-1],)).cumsum(-1)).log()

    def _call(self, x: Tensor) -> Tensor:
        z = _clipped_sigmoid(x - self._offset_log(x, x.shape[-1] + 1))
        z_cumprod = (1 - z).cumprod(-1)
        ones = x.new_ones(tuple(x.shape[:-1]) + (1,))
        return cat([z, ones], -1) * cat([ones, z_cumprod], -1)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones((y_crop.shape[-1],)).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """``log |det dy[:-1]/dx|``, one value per vector."""
        x = x - self._offset_log(x, x.shape[-1] + 1)
        return (-x - softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: Any) -> tuple:
        """The shape of ``t(x)`` for an ``x`` of ``shape``."""
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] + 1,)

    def inverse_shape(self, shape: Any) -> tuple:
        """The shape of ``t.inv(y)`` for a ``y`` of ``shape``."""
        if len(shape) < 1:
            raise ValueError("Too few dimensions on input")
        return tuple(shape[:-1]) + (shape[-1] - 1,)


__all__ += ["StickBreakingTransform"]
