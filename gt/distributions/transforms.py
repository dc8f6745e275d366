"""Invertible transforms for :class:`TransformedDistribution` and :func:`biject_to`
(``torch.distributions.transforms``): the elementwise ones here (exp, affine, sigmoid, softplus,
tanh, power, abs), the base class and its combinators in :mod:`gt.distributions.transform_base`,
and the vector and matrix ones (stick-breaking, softmax, Cholesky factors) in
:mod:`gt.distributions.matrix_transforms`; every one is importable from this module.
"""

from __future__ import annotations

import math
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions.matrix_transforms import (
    CorrCholeskyTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    SoftmaxTransform,
    StickBreakingTransform,
)
from gt.distributions.transform_base import (
    ComposeTransform,
    IndependentTransform,
    ReshapeTransform,
    Transform,
    _InverseTransform,  # noqa: F401 - re-exported: more_continuous tests for inverses
    identity_transform,
)
from gt.distributions.utils import softplus
from gt.factories import full_like
from gt.ops.functional import broadcast_shapes
from gt.ops.typeinfo import finfo
from gt.tensor import Tensor

__all__ = [
    "AbsTransform",
    "AffineTransform",
    "CatTransform",
    "ComposeTransform",
    "CorrCholeskyTransform",
    "CumulativeDistributionTransform",
    "ExpTransform",
    "IndependentTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "PowerTransform",
    "ReshapeTransform",
    "SigmoidTransform",
    "SoftmaxTransform",
    "SoftplusTransform",
    "StackTransform",
    "StickBreakingTransform",
    "TanhTransform",
    "Transform",
    "identity_transform",
]


class ExpTransform(Transform):
    """``y = exp(x)``."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExpTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.exp()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x


def _param_shape(value: Any) -> tuple:
    return tuple(value.shape) if isinstance(value, Tensor) else ()


class AffineTransform(Transform):
    """``y = loc + scale * x`` (numbers or tensors, broadcast); with ``event_dim`` > 0 the
    log-Jacobian is summed over that many rightmost dims (an affine map of vectors or matrices).

    Args:
        loc: the shift.
        scale: the (elementwise) scale.
        event_dim: 0 for scalars, 1 for vectors, 2 for matrices ...
        cache_size: 0 or 1.
    """

    bijective = True

    def __init__(self, loc: Any, scale: Any, event_dim: int = 0, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.loc, self.scale = loc, scale
        self._event_dim = event_dim

    @property
    def event_dim(self) -> int:
        return self._event_dim

    @property
    def domain(self) -> Any:  # type: ignore[override]
        if self._event_dim == 0:
            return constraints.real
        return constraints.independent(constraints.real, self._event_dim)

    codomain = domain

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return AffineTransform(self.loc, self.scale, self._event_dim, cache_size=cache_size)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AffineTransform):
            return False
        for a, b in ((self.loc, other.loc), (self.scale, other.scale)):
            if a is b:
                continue
            if isinstance(a, Number) and isinstance(b, Number):
                if a != b:
                    return False
            elif not bool((a == b).all()):  # a sync point, as in PyTorch
                return False
        return True

    __hash__ = Transform.__hash__

    @property
    def sign(self) -> Any:
        if isinstance(self.scale, Number):
            return 1 if float(self.scale) > 0 else -1 if float(self.scale) < 0 else 0
        return self.scale.sign()

    def _call(self, x: Tensor) -> Tensor:
        return self.loc + self.scale * x

    def _inverse(self, y: Tensor) -> Tensor:
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        shape = tuple(x.shape)
        if isinstance(self.scale, Number):
            result = full_like(x, math.log(abs(self.scale)))
        else:
            result = self.scale.abs().log()
        if self._event_dim:
            keep = result.dim() - self._event_dim
            result = result.reshape(tuple(result.shape[:keep]) + (-1,)).sum(-1)
            shape = shape[: len(shape) - self._event_dim]
        return result.expand(shape)

    def forward_shape(self, shape: Any) -> Any:
        return broadcast_shapes(tuple(shape), _param_shape(self.loc), _param_shape(self.scale))

    inverse_shape = forward_shape


class SigmoidTransform(Transform):
    """``y = sigmoid(x)``, clipped into ``[tiny, 1 - eps]`` as in PyTorch."""

    domain = constraints.real
    codomain = constraints.unit_interval
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigmoidTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        info = finfo(x.dtype)
        return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)

    def _inverse(self, y: Tensor) -> Tensor:
        info = finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x) - softplus(x)


class SoftplusTransform(Transform):
    """``y = log(1 + exp(x))`` (linear past ``x > 20``): GPyTorch's and Pyro's positivity map."""

    domain = constraints.real
    codomain = constraints.positive
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftplusTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return softplus(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -softplus(-x)


class TanhTransform(Transform):
    """``y = tanh(x)``: squashes a Gaussian policy into ``(-1, 1)`` (as in SAC)."""

    domain = constraints.real
    codomain = constraints.interval(-1.0, 1.0)
    bijective = True
    sign = +1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TanhTransform)

    __hash__ = Transform.__hash__

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
    bijective = True

    def __init__(self, exponent: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return PowerTransform(self.exponent, cache_size=cache_size)

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

    __hash__ = Transform.__hash__

    def forward_shape(self, shape: Any) -> Any:
        return broadcast_shapes(tuple(shape), _param_shape(self.exponent))

    inverse_shape = forward_shape


class AbsTransform(Transform):
    """``y = |x|``. Not bijective: its "inverse" returns ``y`` itself (the non-negative
    preimage), as in PyTorch, and it has no log-Jacobian."""

    domain = constraints.real
    codomain = constraints.positive

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AbsTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.abs()

    def _inverse(self, y: Tensor) -> Tensor:
        return y


def _each_cached(owner: str, tseq: Any, cache_size: int) -> list:
    """The transforms of a ``CatTransform``/``StackTransform``, each with the owner's cache."""
    tseq = list(tseq)
    if not all(isinstance(t, Transform) for t in tseq):
        raise TypeError(f"{owner} takes a sequence of Transforms")
    return [t.with_cache(cache_size) for t in tseq] if cache_size else tseq


class CatTransform(Transform):
    """``transforms[i]`` applied to the ``lengths[i]`` entries of ``x`` along ``dim`` that it
    owns, the results concatenated back (``torch.distributions.CatTransform``): one flow output
    mapped onto a mixed support, e.g. exp for the positive entries and sigmoid for the unit ones.

    Args:
        tseq: the transforms, in order along ``dim``.
        dim: the dimension the slices are taken along.
        lengths: how many entries each transform owns (1 each by default).
        cache_size: 0 or 1.
    """

    def __init__(self, tseq: Any, dim: int = 0, lengths: Any = None, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.transforms = _each_cached("CatTransform", tseq, cache_size)
        self.lengths = [1] * len(tseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.transforms):
            raise ValueError("CatTransform: lengths and transforms differ in number")
        self.dim = dim

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(t.event_dim for t in self.transforms)

    @property
    def length(self) -> int:
        return sum(self.lengths)

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CatTransform(self.transforms, self.dim, self.lengths, cache_size)

    def _pieces(self, x: Tensor, fns: list) -> Tensor:
        from gt.ops.functional import cat  # noqa: PLC0415

        if not -x.dim() <= self.dim < x.dim() or x.size(self.dim) != self.length:
            raise ValueError(f"CatTransform expects {self.length} entries along dim {self.dim}, "
                             f"got shape {tuple(x.shape)}")  # fmt: skip
        out, start = [], 0
        for fn, length in zip(fns, self.lengths):
            out.append(fn(x.narrow(self.dim, start, length)))
            start = start + length
        return cat(out, dim=self.dim)

    def _call(self, x: Tensor) -> Tensor:
        return self._pieces(x, self.transforms)

    def _inverse(self, y: Tensor) -> Tensor:
        return self._pieces(y, [t.inv for t in self.transforms])

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        from gt.distributions.utils import sum_rightmost  # noqa: PLC0415
        from gt.ops.functional import cat  # noqa: PLC0415

        parts, start = [], 0
        for t, length in zip(self.transforms, self.lengths):
            ld = t.log_abs_det_jacobian(x.narrow(self.dim, start, length),
                                        y.narrow(self.dim, start, length))  # fmt: skip
            if t.event_dim < self.event_dim:
                ld = sum_rightmost(ld, self.event_dim - t.event_dim)
            parts.append(ld)
            start = start + length
        dim = self.dim - x.dim() if self.dim >= 0 else self.dim
        dim = dim + self.event_dim
        if dim < 0:  # the cat dim is a batch dim of the Jacobian: concatenate
            return cat(parts, dim=dim)
        return sum(parts)  # the cat dim is inside the event: add up

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return constraints.cat([t.domain for t in self.transforms], self.dim, self.lengths)

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        return constraints.cat([t.codomain for t in self.transforms], self.dim, self.lengths)


class StackTransform(Transform):
    """``transforms[i]`` applied to ``x.select(dim, i)``, the results stacked back along ``dim``
    (``torch.distributions.StackTransform``).

    Args:
        tseq: one transform per index along ``dim``.
        dim: the dimension.
        cache_size: 0 or 1.
    """

    def __init__(self, tseq: Any, dim: int = 0, cache_size: int = 0):
        super().__init__(cache_size=cache_size)
        self.transforms = _each_cached("StackTransform", tseq, cache_size)
        self.dim = dim

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return StackTransform(self.transforms, self.dim, cache_size)

    def _slice(self, z: Tensor) -> list:
        return [z.select(self.dim, i) for i in range(z.size(self.dim))]

    def _apply(self, fns: list, z: Tensor) -> Tensor:
        from gt.ops.functional import stack  # noqa: PLC0415

        if not -z.dim() <= self.dim < z.dim() or z.size(self.dim) != len(self.transforms):
            raise ValueError(f"StackTransform expects {len(self.transforms)} entries along dim "
                             f"{self.dim}, got shape {tuple(z.shape)}")  # fmt: skip
        return stack([fn(s) for s, fn in zip(self._slice(z), fns)], dim=self.dim)

    def _call(self, x: Tensor) -> Tensor:
        return self._apply(self.transforms, x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self._apply([t.inv for t in self.transforms], y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        from gt.ops.functional import stack  # noqa: PLC0415

        parts = [t.log_abs_det_jacobian(xs, ys)
                 for xs, ys, t in zip(self._slice(x), self._slice(y), self.transforms)]  # fmt: skip
        return stack(parts, dim=self.dim)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(t.bijective for t in self.transforms)

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return constraints.stack([t.domain for t in self.transforms], self.dim)

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        return constraints.stack([t.codomain for t in self.transforms], self.dim)


class CumulativeDistributionTransform(Transform):
    """``y = distribution.cdf(x)``: a univariate distribution's CDF onto ``[0, 1]``, inverted by
    its ``icdf``, with ``log |dy/dx| = distribution.log_prob(x)``
    (``torch.distributions.CumulativeDistributionTransform``; Gaussian copulas and flows with a
    uniform base use it)."""

    bijective = True
    codomain = constraints.unit_interval
    sign = +1

    def __init__(self, distribution: Any, cache_size: int = 0) -> None:
        super().__init__(cache_size=cache_size)
        self.distribution = distribution

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return self.distribution.support

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return CumulativeDistributionTransform(self.distribution, cache_size=cache_size)

    def _call(self, x: Tensor) -> Tensor:
        return self.distribution.cdf(x)

    def _inverse(self, y: Tensor) -> Tensor:
        return self.distribution.icdf(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return self.distribution.log_prob(x)
