"""Constraints: the region a parameter or a sample must lie in (``torch.distributions.constraints``).

A constraint's ``check(value)`` returns a boolean tensor (one entry per event); distributions use
them to validate their parameters and the values given to ``log_prob``. The ``repr`` of each one
is PyTorch's (``GreaterThan(lower_bound=0.0)``), because validation errors quote it.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Constraint",
    "boolean",
    "cat",
    "dependent",
    "dependent_property",
    "greater_than",
    "greater_than_eq",
    "half_open_interval",
    "independent",
    "integer_interval",
    "interval",
    "is_dependent",
    "less_than",
    "nonnegative",
    "nonnegative_integer",
    "one_hot",
    "positive",
    "real",
    "real_vector",
    "simplex",
    "stack",
    "unit_interval",
]


class Constraint:
    """A region of values. ``is_discrete`` says whether it is countable; ``event_dim`` how many
    rightmost dimensions make up one event (``check`` reduces over them)."""

    is_discrete = False
    event_dim = 0

    def check(self, value: Any) -> Any:
        """A boolean tensor: whether each event of ``value`` satisfies the constraint."""
        raise NotImplementedError

    def __repr__(self) -> str:
        # PyTorch's classes are private (``_Real``); their repr drops the underscore.
        return self.__class__.__name__[1:] + "()"


class _Dependent(Constraint):
    """A placeholder for a constraint that depends on other parameters; never checked."""

    def __init__(self, *, is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented):
        self._is_discrete = is_discrete
        self._event_dim = event_dim

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        if self._is_discrete is NotImplemented:
            raise NotImplementedError(".is_discrete cannot be determined statically")
        return self._is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        if self._event_dim is NotImplemented:
            raise NotImplementedError(".event_dim cannot be determined statically")
        return self._event_dim

    def __call__(self, *, is_discrete: Any = NotImplemented, event_dim: Any = NotImplemented):
        return _Dependent(is_discrete=is_discrete, event_dim=event_dim)

    def check(self, value: Any) -> Any:
        raise ValueError("Cannot determine validity of dependent constraint")


def is_dependent(constraint: Any) -> bool:
    """Whether ``constraint`` is a dependent (uncheckable) one."""
    return isinstance(constraint, _Dependent)


class _DependentProperty(property, _Dependent):
    """A property that is a dependent constraint on the class and a computed constraint on an
    instance (``Uniform.support`` is ``interval(low, high)``)."""

    def __init__(self, fn: Any = None, *, is_discrete: Any = NotImplemented,
                 event_dim: Any = NotImplemented):  # fmt: skip
        property.__init__(self, fn)
        _Dependent.__init__(self, is_discrete=is_discrete, event_dim=event_dim)

    def __call__(self, fn: Any) -> _DependentProperty:  # type: ignore[override]
        return _DependentProperty(fn, is_discrete=self._is_discrete, event_dim=self._event_dim)


def dependent_property(fn: Any = None, *, is_discrete: Any = NotImplemented,
                       event_dim: Any = NotImplemented) -> Any:  # fmt: skip
    """Decorator: a support that depends on the instance's parameters."""
    if fn is None:
        return _DependentProperty(is_discrete=is_discrete, event_dim=event_dim)
    return _DependentProperty(fn, is_discrete=is_discrete, event_dim=event_dim)


class _IndependentConstraint(Constraint):
    """``base_constraint`` with ``reinterpreted_batch_ndims`` more dimensions forming the event."""

    def __init__(self, base_constraint: Constraint, reinterpreted_batch_ndims: int):
        self.base_constraint = base_constraint
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return self.base_constraint.is_discrete

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return self.base_constraint.event_dim + self.reinterpreted_batch_ndims

    def check(self, value: Any) -> Any:
        result = self.base_constraint.check(value)
        if result.dim() < self.reinterpreted_batch_ndims:
            expected = self.base_constraint.event_dim + self.reinterpreted_batch_ndims
            raise ValueError(f"Expected value.dim() >= {expected} but got {value.dim()}")
        for _ in range(self.reinterpreted_batch_ndims):
            result = result.all(-1)
        return result

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}({self.base_constraint!r}, {self.reinterpreted_batch_ndims})"


class _Boolean(Constraint):
    is_discrete = True

    def check(self, value: Any) -> Any:
        return (value == 0) | (value == 1)


class _OneHot(Constraint):
    is_discrete = True
    event_dim = 1

    def check(self, value: Any) -> Any:
        is_boolean = ((value == 0) | (value == 1)).all(-1)
        return is_boolean & (value.sum(-1) == 1)


class _IntegerInterval(Constraint):
    is_discrete = True

    def __init__(self, lower_bound: Any, upper_bound: Any):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= self.lower_bound) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        name = self.__class__.__name__[1:]
        return f"{name}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _IntegerGreaterThan(Constraint):
    is_discrete = True

    def __init__(self, lower_bound: Any):
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return (value % 1 == 0) & (value >= self.lower_bound)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _Real(Constraint):
    def check(self, value: Any) -> Any:
        return value == value  # False only for NaN


class _GreaterThan(Constraint):
    def __init__(self, lower_bound: Any):
        self.lower_bound = lower_bound

    def check(self, value: Any) -> Any:
        return self.lower_bound < value

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(lower_bound={self.lower_bound})"


class _GreaterThanEq(_GreaterThan):
    def check(self, value: Any) -> Any:
        return self.lower_bound <= value


class _LessThan(Constraint):
    def __init__(self, upper_bound: Any):
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return value < self.upper_bound

    def __repr__(self) -> str:
        return f"{self.__class__.__name__[1:]}(upper_bound={self.upper_bound})"


class _Interval(Constraint):
    def __init__(self, lower_bound: Any, upper_bound: Any):
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound

    def check(self, value: Any) -> Any:
        return (self.lower_bound <= value) & (value <= self.upper_bound)

    def __repr__(self) -> str:
        name = self.__class__.__name__[1:]
        return f"{name}(lower_bound={self.lower_bound}, upper_bound={self.upper_bound})"


class _HalfOpenInterval(_Interval):
    def check(self, value: Any) -> Any:
        return (self.lower_bound <= value) & (value < self.upper_bound)


class _Joined(Constraint):
    """Constraints on the parts of a tensor along ``dim`` (discrete if any part is)."""

    cseq: list
    dim: int

    @property
    def is_discrete(self) -> bool:  # type: ignore[override]
        return any(c.is_discrete for c in self.cseq)


class _Cat(_Joined):
    """Constraint ``cseq[i]`` on the slice of ``lengths[i]`` entries along ``dim`` (the domain
    of :class:`~gt.distributions.transforms.CatTransform`)."""

    def __init__(self, cseq: Any, dim: int = 0, lengths: Any = None):
        self.cseq = list(cseq)
        self.lengths = [1] * len(self.cseq) if lengths is None else list(lengths)
        if len(self.lengths) != len(self.cseq):
            raise ValueError("cat: lengths and constraints differ in number")
        self.dim = dim

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        return max(c.event_dim for c in self.cseq)

    def check(self, value: Any) -> Any:
        from gt.ops.functional import cat as _cat  # noqa: PLC0415 - constraints is a leaf

        checks, start = [], 0
        for constr, length in zip(self.cseq, self.lengths):
            checks.append(constr.check(value.narrow(self.dim, start, length)))
            start = start + length
        return _cat(checks, self.dim)


class _Stack(_Joined):
    """Constraint ``cseq[i]`` on ``value.select(dim, i)`` (the domain of
    :class:`~gt.distributions.transforms.StackTransform`)."""

    def __init__(self, cseq: Any, dim: int = 0):
        self.cseq = list(cseq)
        self.dim = dim

    @property
    def event_dim(self) -> int:  # type: ignore[override]
        event_dim = max(c.event_dim for c in self.cseq)
        if self.dim + event_dim < 0:
            event_dim += 1
        return event_dim

    def check(self, value: Any) -> Any:
        from gt.ops.functional import stack as _stack  # noqa: PLC0415 - constraints is a leaf

        vs = [value.select(self.dim, i) for i in range(value.size(self.dim))]
        return _stack([c.check(v) for v, c in zip(vs, self.cseq)], self.dim)


class _Simplex(Constraint):
    event_dim = 1

    def check(self, value: Any) -> Any:
        return (value >= 0).all(-1) & ((value.sum(-1) - 1).abs() < 1e-6)


dependent = _Dependent()
boolean = _Boolean()
one_hot = _OneHot()
nonnegative_integer = _IntegerGreaterThan(0)
integer_interval = _IntegerInterval
real = _Real()
real_vector = _IndependentConstraint(real, 1)
positive = _GreaterThan(0.0)
nonnegative = _GreaterThanEq(0.0)
greater_than = _GreaterThan
greater_than_eq = _GreaterThanEq
less_than = _LessThan
unit_interval = _Interval(0.0, 1.0)
interval = _Interval
half_open_interval = _HalfOpenInterval
simplex = _Simplex()
independent = _IndependentConstraint
cat = _Cat
stack = _Stack


class _LowerCholesky(Constraint):
    event_dim = 2

    def check(self, value: Any) -> Any:
        lower = (value.tril() == value).flatten(-2).all(-1)
        positive_diagonal = (value.diagonal(dim1=-2, dim2=-1) > 0).all(-1)
        return lower & positive_diagonal


class _PositiveDefinite(Constraint):
    event_dim = 2

    def check(self, value: Any) -> Any:
        from gt.linalg import eigvalsh  # noqa: PLC0415 - only matrix constraints need it

        symmetric = (value - value.mT).abs().le(1e-6).flatten(-2).all(-1)
        if not bool(symmetric.all()):
            return symmetric
        return eigvalsh(value).gt(0).all(-1)


class _PositiveSemidefinite(Constraint):
    event_dim = 2

    def check(self, value: Any) -> Any:
        from gt.linalg import eigvalsh  # noqa: PLC0415 - only matrix constraints need it

        symmetric = (value - value.mT).abs().le(1e-6).flatten(-2).all(-1)
        if not bool(symmetric.all()):
            return symmetric
        return eigvalsh(value).ge(0).all(-1)


class _CorrCholesky(Constraint):
    """Lower-triangular with a positive diagonal and rows of unit length (the Cholesky factor of a
    correlation matrix)."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        tol = 1e-6 if value.dtype == "float32" else 1e-10
        unit_rows = (value.norm(dim=-1) - 1).abs().le(tol * value.shape[-1]).all(-1)
        return _LowerCholesky().check(value) & unit_rows


lower_cholesky = _LowerCholesky()
positive_definite = _PositiveDefinite()
positive_semidefinite = _PositiveSemidefinite()
corr_cholesky = _CorrCholesky()
__all__ += ["corr_cholesky", "lower_cholesky", "positive_definite", "positive_semidefinite"]


class _LowerTriangular(Constraint):
    """Lower-triangular square matrices."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        return (value.tril() == value).flatten(-2).all(-1)


class _Square(Constraint):
    """Square matrices (of any values)."""

    event_dim = 2

    def check(self, value: Any) -> Any:
        same = value.shape[-2] == value.shape[-1]
        return value.new_full(tuple(value.shape[:-2]), same, dtype="bool")


class _Symmetric(_Square):
    """Symmetric square matrices (to within 1e-6)."""

    def check(self, value: Any) -> Any:
        square = super().check(value)
        if not square.all():
            return square
        return value.isclose(value.mT, atol=1e-6).all(-2).all(-1)


class _Multinomial(Constraint):
    """Non-negative integer counts along the last dimension summing to at most ``upper_bound``."""

    is_discrete = True
    event_dim = 1

    def __init__(self, upper_bound: Any):
        self.upper_bound = upper_bound

    def check(self, x: Any) -> Any:
        return (x >= 0).all(dim=-1) & (x.sum(dim=-1) <= self.upper_bound)


lower_triangular = _LowerTriangular()
multinomial = _Multinomial
positive_integer = _IntegerGreaterThan(1)
square = _Square()
symmetric = _Symmetric()
__all__ += ["lower_triangular", "multinomial", "positive_integer", "square", "symmetric"]
