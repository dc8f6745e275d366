"""The :class:`Transform` base class and the transforms built from others: inverses,
:class:`ComposeTransform`, :class:`IndependentTransform` and :class:`ReshapeTransform`
(``torch.distributions.transforms``' semantics).

A transform maps ``x -> y``, inverts ``y -> x`` and gives ``log |dy/dx|``. Its ``domain`` and
``codomain`` are constraints whose ``event_dim`` says how many rightmost dims form one event: an
elementwise transform has 0, :class:`StickBreakingTransform` 1, a matrix transform 2. A
transform's ``log_abs_det_jacobian`` has the shape of ``x`` without the domain's event dims.
Users subclass :class:`Transform` as in PyTorch: set ``domain``, ``codomain`` and ``bijective``,
write ``_call``, ``_inverse`` and ``log_abs_det_jacobian``.

With ``cache_size=1`` the last ``(x, y)`` pair is remembered, so ``log_prob`` of a value just
sampled inverts it exactly: ``atanh(tanh(x))`` loses ``x`` once ``tanh(x)`` rounds to 1 (SAC code
passes ``TanhTransform(cache_size=1)`` for that reason). The default is 0, as in PyTorch.
"""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.utils import sum_rightmost
from gt.factories import zeros_like
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

__all__ = [
    "ComposeTransform",
    "IndependentTransform",
    "ReshapeTransform",
    "Transform",
    "identity_transform",
]


class Transform:
    """An invertible map with a tractable log-Jacobian: ``t(x)``, ``t.inv(y)``,
    ``t.log_abs_det_jacobian(x, y)``; ``t.inv.inv is t``.

    Args:
        cache_size: 0 (no caching) or 1 (remember the last ``(x, y)`` pair).
    """

    bijective = False
    domain: constraints.Constraint = constraints.real
    codomain: constraints.Constraint = constraints.real

    def __init__(self, cache_size: int = 0) -> None:
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._inv: Transform | None = None
        self._cached_x_y: tuple[Any, Any] = (None, None)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_inv"] = None
        return state

    @property
    def event_dim(self) -> int:
        """The number of rightmost dims forming one event (domain and codomain agree)."""
        if self.domain.event_dim == self.codomain.event_dim:
            return self.domain.event_dim
        raise ValueError("Please use either .domain.event_dim or .codomain.event_dim")

    @property
    def inv(self) -> Transform:
        """The inverse transform (made once, so ``t.inv.inv is t``)."""
        if self._inv is None:
            self._inv = _InverseTransform(self)
        return self._inv

    @property
    def sign(self) -> Any:
        """``+1`` or ``-1``: whether the (univariate, bijective) transform increases."""
        raise NotImplementedError

    def with_cache(self, cache_size: int = 1) -> Transform:
        """This transform with ``cache_size`` (itself when it already has it)."""
        if self._cache_size == cache_size:
            return self
        if type(self).__init__ is Transform.__init__:
            return type(self)(cache_size=cache_size)
        raise NotImplementedError(f"{type(self)}.with_cache is not implemented")

    def __eq__(self, other: object) -> bool:
        return self is other

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = object.__hash__

    def __call__(self, x: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = (x, y)
        return y

    def _inv_call(self, y: Tensor) -> Tensor:
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = (x, y)
        return x

    def _call(self, x: Tensor) -> Tensor:
        raise NotImplementedError

    def _inverse(self, y: Tensor) -> Tensor:
        raise NotImplementedError

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """``log |dy/dx|``, one value per event."""
        raise NotImplementedError

    def forward_shape(self, shape: Any) -> Any:
        """The shape of ``t(x)`` for an ``x`` of ``shape`` (unchanged by default)."""
        return shape

    def inverse_shape(self, shape: Any) -> Any:
        """The shape of ``t.inv(y)`` for a ``y`` of ``shape`` (unchanged by default)."""
        return shape

    def __repr__(self) -> str:
        return self.__class__.__name__ + "()"


class _InverseTransform(Transform):
    """The inverse of one transform (reached through ``Transform.inv``)."""

    def __init__(self, transform: Transform) -> None:
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return self._inv.codomain

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        return self._inv.domain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self._inv.bijective

    @property
    def sign(self) -> Any:
        return self._inv.sign

    @property
    def inv(self) -> Transform:
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        return self.inv.with_cache(cache_size).inv

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _InverseTransform) and self._inv == other._inv

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({self._inv!r})"

    def __call__(self, x: Tensor) -> Tensor:
        return self._inv._inv_call(x)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return -self._inv.log_abs_det_jacobian(y, x)

    def forward_shape(self, shape: Any) -> Any:
        return self._inv.inverse_shape(shape)

    def inverse_shape(self, shape: Any) -> Any:
        return self._inv.forward_shape(shape)


class ComposeTransform(Transform):
    """``parts`` applied in order; its event dim is the largest any part needs.

    Args:
        parts: the transforms, first applied first.
        cache_size: given to every part.
    """

    def __init__(self, parts: list[Transform], cache_size: int = 0) -> None:
        if cache_size:
            parts = [part.with_cache(cache_size) for part in parts]
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ComposeTransform) and self.parts == other.parts

    __hash__ = object.__hash__

    @property
    def domain(self) -> Any:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        domain = self.parts[0].domain
        event_dim = self.parts[-1].codomain.event_dim
        for part in reversed(self.parts):
            event_dim += part.domain.event_dim - part.codomain.event_dim
            event_dim = max(event_dim, part.domain.event_dim)
        if event_dim > domain.event_dim:
            domain = constraints.independent(domain, event_dim - domain.event_dim)
        return domain

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        if not self.parts:
            return constraints.real
        codomain = self.parts[-1].codomain
        event_dim = self.parts[0].domain.event_dim
        for part in self.parts:
            event_dim += part.codomain.event_dim - part.domain.event_dim
            event_dim = max(event_dim, part.codomain.event_dim)
        if event_dim > codomain.event_dim:
            codomain = constraints.independent(codomain, event_dim - codomain.event_dim)
        return codomain

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return all(p.bijective for p in self.parts)

    @property
    def sign(self) -> Any:
        sign: Any = 1
        for p in self.parts:
            sign = sign * p.sign
        return sign

    @property
    def inv(self) -> Transform:
        if self._inv is None:
            inv = ComposeTransform([p.inv for p in reversed(self.parts)])
            self._inv = inv
            inv._inv = self
        return self._inv

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ComposeTransform(self.parts, cache_size=cache_size)

    def __call__(self, x: Tensor) -> Tensor:
        for part in self.parts:
            x = part(x)
        return x

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        if not self.parts:
            return zeros_like(x)
        xs = [x]
        for part in self.parts[:-1]:
            xs.append(part(xs[-1]))
        xs.append(y)
        total: Any = None
        event_dim = self.domain.event_dim
        for part, a, b in zip(self.parts, xs[:-1], xs[1:]):
            term = sum_rightmost(part.log_abs_det_jacobian(a, b), event_dim - part.domain.event_dim)
            total = term if total is None else total + term
            event_dim += part.codomain.event_dim - part.domain.event_dim
        return total

    def forward_shape(self, shape: Any) -> Any:
        for part in self.parts:
            shape = part.forward_shape(shape)
        return shape

    def inverse_shape(self, shape: Any) -> Any:
        for part in reversed(self.parts):
            shape = part.inverse_shape(shape)
        return shape

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(p) for p in self.parts)
        return f"{self.__class__.__name__}(\n    {inner}\n)"


identity_transform = ComposeTransform([])


class IndependentTransform(Transform):
    """``base_transform`` with ``reinterpreted_batch_ndims`` more rightmost dims in each event:
    the values are unchanged, the log-Jacobian is summed over those dims.

    Args:
        base_transform: the transform to wrap.
        reinterpreted_batch_ndims: how many extra rightmost dims form the event.
        cache_size: 0 or 1.
    """

    def __init__(self, base_transform: Transform, reinterpreted_batch_ndims: int,
                 cache_size: int = 0) -> None:  # fmt: skip
        super().__init__(cache_size=cache_size)
        self.base_transform = base_transform.with_cache(cache_size)
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return IndependentTransform(self.base_transform, self.reinterpreted_batch_ndims,
                                    cache_size=cache_size)  # fmt: skip

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return constraints.independent(self.base_transform.domain, self.reinterpreted_batch_ndims)

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        return constraints.independent(self.base_transform.codomain, self.reinterpreted_batch_ndims)

    @property
    def bijective(self) -> bool:  # type: ignore[override]
        return self.base_transform.bijective

    @property
    def sign(self) -> Any:
        return self.base_transform.sign

    def _call(self, x: Tensor) -> Tensor:
        if x.dim() < self.domain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform(x)

    def _inverse(self, y: Tensor) -> Tensor:
        if y.dim() < self.codomain.event_dim:
            raise ValueError("Too few dimensions on input")
        return self.base_transform.inv(y)

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        result = self.base_transform.log_abs_det_jacobian(x, y)
        return sum_rightmost(result, self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.base_transform!r}, {self.reinterpreted_batch_ndims})"
        )

    def forward_shape(self, shape: Any) -> Any:
        return self.base_transform.forward_shape(shape)

    def inverse_shape(self, shape: Any) -> Any:
        return self.base_transform.inverse_shape(shape)


class ReshapeTransform(Transform):
    """Reshapes the rightmost ``in_shape`` dims to ``out_shape`` (a unit Jacobian).

    Args:
        in_shape: the event shape of inputs.
        out_shape: the event shape of outputs (as many elements).
        cache_size: 0 or 1.
    """

    bijective = True

    def __init__(self, in_shape: Any, out_shape: Any, cache_size: int = 0) -> None:
        self.in_shape = Size(tuple(in_shape))
        self.out_shape = Size(tuple(out_shape))
        if math.prod(self.in_shape) != math.prod(self.out_shape):
            raise ValueError("in_shape, out_shape have different numbers of elements")
        super().__init__(cache_size=cache_size)

    @property
    def domain(self) -> Any:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.in_shape))

    @property
    def codomain(self) -> Any:  # type: ignore[override]
        return constraints.independent(constraints.real, len(self.out_shape))

    def with_cache(self, cache_size: int = 1) -> Transform:
        if self._cache_size == cache_size:
            return self
        return ReshapeTransform(self.in_shape, self.out_shape, cache_size=cache_size)

    def _call(self, x: Tensor) -> Tensor:
        batch = tuple(x.shape[: x.dim() - len(self.in_shape)])
        return x.reshape(batch + tuple(self.out_shape))

    def _inverse(self, y: Tensor) -> Tensor:
        batch = tuple(y.shape[: y.dim() - len(self.out_shape)])
        return y.reshape(batch + tuple(self.in_shape))

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        return x.new_zeros(tuple(x.shape[: x.dim() - len(self.in_shape)]))

    def forward_shape(self, shape: Any) -> Any:
        return _reshaped(shape, self.in_shape, self.out_shape)

    def inverse_shape(self, shape: Any) -> Any:
        return _reshaped(shape, self.out_shape, self.in_shape)


def _reshaped(shape: Any, old: Size, new: Size) -> Size:
    if len(shape) < len(old):
        raise ValueError("Too few dimensions on input")
    cut = len(shape) - len(old)
    if tuple(shape[cut:]) != tuple(old):
        raise ValueError(f"Shape mismatch: expected {Size(tuple(shape[cut:]))} but got {old}")
    return Size(tuple(shape[:cut]) + tuple(new))
