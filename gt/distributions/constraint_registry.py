"""From unconstrained space to a constraint (``torch.distributions.constraint_registry``).

``biject_to(constraint)`` is a bijective :class:`Transform` from the reals onto the constraint's
region (what HMC needs: it has a log-Jacobian); ``transform_to(constraint)`` may be any map onto
it (what optimization needs: ``SoftmaxTransform`` for the simplex). Pyro's param store keeps
``transform_to(c).inv(value)`` and optimizes that. Both look the constraint up by its class, so
every instance of a class shares one rule, exactly as in PyTorch: ``positive`` is a
``greater_than(0.0)`` and so maps through ``ComposeTransform([ExpTransform(),
AffineTransform(0.0, 1)])``. New rules are added with ``register``::

    @biject_to.register(MyConstraint)
    def _(constraint):
        return MyTransform()
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Number
from typing import Any

from gt.distributions import constraints
from gt.distributions import transforms as T

__all__ = ["ConstraintRegistry", "biject_to", "transform_to"]


class ConstraintRegistry:
    """Constraint classes to factories ``constraint -> Transform``."""

    def __init__(self) -> None:
        self._registry: dict[type, Callable] = {}

    def register(self, constraint: Any, factory: Callable | None = None) -> Any:
        """Register ``factory`` for a :class:`Constraint` subclass (or the class of a constraint
        instance); without ``factory``, a decorator."""
        if factory is None:
            return lambda factory: self.register(constraint, factory)
        if isinstance(constraint, constraints.Constraint):
            constraint = type(constraint)
        if not isinstance(constraint, type) or not issubclass(constraint, constraints.Constraint):
            raise TypeError(
                "Expected constraint to be either a Constraint subclass or instance, "
                f"but got {constraint}"
            )
        self._registry[constraint] = factory
        return factory

    def __call__(self, constraint: Any) -> T.Transform:
        """The transform onto ``constraint``'s region.

        Raises:
            NotImplementedError: nothing is registered for the constraint's class.
        """
        try:
            factory = self._registry[type(constraint)]
        except KeyError:
            raise NotImplementedError(
                f"Cannot transform {type(constraint).__name__} constraints"
            ) from None
        return factory(constraint)


biject_to = ConstraintRegistry()
transform_to = ConstraintRegistry()


def _both(*keys: Any) -> Callable[[Callable], Callable]:
    def decorator(factory: Callable) -> Callable:
        for key in keys:
            biject_to.register(key, factory)
            transform_to.register(key, factory)
        return factory

    return decorator


@_both(constraints.real)
def _transform_to_real(constraint: Any) -> T.Transform:
    return T.identity_transform


@biject_to.register(constraints.independent)
def _biject_to_independent(constraint: Any) -> T.Transform:
    base = biject_to(constraint.base_constraint)
    return T.IndependentTransform(base, constraint.reinterpreted_batch_ndims)


@transform_to.register(constraints.independent)
def _transform_to_independent(constraint: Any) -> T.Transform:
    base = transform_to(constraint.base_constraint)
    return T.IndependentTransform(base, constraint.reinterpreted_batch_ndims)


# registered first and then replaced by the greater_than rule below (the same classes), as in
# PyTorch: positive and nonnegative map through exp and a unit affine map
@_both(constraints.positive, constraints.nonnegative)
def _transform_to_positive(constraint: Any) -> T.Transform:
    return T.ExpTransform()


@_both(constraints.greater_than, constraints.greater_than_eq)
def _transform_to_greater_than(constraint: Any) -> T.Transform:
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(constraint.lower_bound, 1)])


@_both(constraints.less_than)
def _transform_to_less_than(constraint: Any) -> T.Transform:
    return T.ComposeTransform([T.ExpTransform(), T.AffineTransform(constraint.upper_bound, -1)])


@_both(constraints.interval, constraints.half_open_interval)
def _transform_to_interval(constraint: Any) -> T.Transform:
    low, high = constraint.lower_bound, constraint.upper_bound
    if isinstance(low, Number) and low == 0 and isinstance(high, Number) and high == 1:
        return T.SigmoidTransform()
    return T.ComposeTransform([T.SigmoidTransform(), T.AffineTransform(low, high - low)])


@biject_to.register(constraints.simplex)
def _biject_to_simplex(constraint: Any) -> T.Transform:
    return T.StickBreakingTransform()


@transform_to.register(constraints.simplex)
def _transform_to_simplex(constraint: Any) -> T.Transform:
    return T.SoftmaxTransform()


@transform_to.register(constraints.lower_cholesky)
def _transform_to_lower_cholesky(constraint: Any) -> T.Transform:
    return T.LowerCholeskyTransform()


@transform_to.register(constraints.positive_definite)
@transform_to.register(constraints.positive_semidefinite)
def _transform_to_positive_definite(constraint: Any) -> T.Transform:
    return T.PositiveDefiniteTransform()


@_both(constraints.corr_cholesky)
def _transform_to_corr_cholesky(constraint: Any) -> T.Transform:
    return T.CorrCholeskyTransform()


@biject_to.register(constraints.cat)
def _biject_to_cat(constraint: Any) -> T.Transform:
    return T.CatTransform([biject_to(c) for c in constraint.cseq], constraint.dim,
                          constraint.lengths)  # fmt: skip


@transform_to.register(constraints.cat)
def _transform_to_cat(constraint: Any) -> T.Transform:
    return T.CatTransform([transform_to(c) for c in constraint.cseq], constraint.dim,
                          constraint.lengths)  # fmt: skip


@biject_to.register(constraints.stack)
def _biject_to_stack(constraint: Any) -> T.Transform:
    return T.StackTransform([biject_to(c) for c in constraint.cseq], constraint.dim)


@transform_to.register(constraints.stack)
def _transform_to_stack(constraint: Any) -> T.Transform:
    return T.StackTransform([transform_to(c) for c in constraint.cseq], constraint.dim)
