""":class:`MultivariateNormal`, built on :mod:`gt.linalg`'s Cholesky factorization and
triangular solve (both differentiable)."""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.utils import lazy_property
from gt.factories import randn
from gt.ops.functional import broadcast_shapes
from gt.tensor import Tensor

__all__ = ["MultivariateNormal"]


def _linalg() -> Any:
    # imported on use, so the rest of gt.distributions does not depend on gt.linalg
    import gt.linalg  # noqa: PLC0415

    return gt.linalg


def batch_mahalanobis(scale_tril: Tensor, x: Tensor) -> Tensor:
    """``x^T (L L^T)^{-1} x`` over the last dim, broadcasting ``L``'s batch against ``x``'s."""
    batch = broadcast_shapes(tuple(scale_tril.shape[:-2]), tuple(x.shape[:-1]))
    n = x.shape[-1]
    lower = scale_tril.expand((*batch, n, n))
    y = _linalg().solve_triangular(lower, x.expand((*batch, n)).unsqueeze(-1), upper=False)
    return y.squeeze(-1).pow(2).sum(-1)


def scale_tril_of(scale_tril: Tensor | None, covariance_matrix: Tensor | None,
                  precision_matrix: Tensor | None) -> Tensor:  # fmt: skip
    """The covariance's lower factor from whichever of the three was given."""
    if scale_tril is not None:
        return scale_tril
    if covariance_matrix is not None:
        return _linalg().cholesky(covariance_matrix)
    # through the covariance (PyTorch avoids the inverse by flipping the matrix; this is simpler
    # and fine for well-conditioned precisions)
    return _linalg().cholesky(_linalg().inv(precision_matrix))


class ScaleTrilMatrices:
    """``scale_tril``, ``covariance_matrix`` (``L L^T``) and ``precision_matrix`` of a
    distribution that keeps the lower factor ``_unbroadcasted_scale_tril`` and says its matrices'
    shape (``_matrix_shape``)."""

    _unbroadcasted_scale_tril: Tensor

    def _matrix_shape(self) -> tuple:
        raise NotImplementedError

    @lazy_property
    def scale_tril(self) -> Tensor:
        """The lower Cholesky factor of the covariance."""
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """``L L^T``."""
        lower = self._unbroadcasted_scale_tril
        return (lower @ lower.mT).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """The inverse covariance."""
        lower = self._unbroadcasted_scale_tril
        return _linalg().inv(lower @ lower.mT).expand(self._matrix_shape())


class MultivariateNormal(ScaleTrilMatrices, Distribution):
    """The multivariate normal with mean ``loc`` and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (a lower Cholesky factor of the covariance).

    Args:
        loc: mean, ``(*batch, k)``.
        covariance_matrix: positive-definite ``(*batch, k, k)``.
        precision_matrix: positive-definite inverse covariance.
        scale_tril: lower-triangular factor with a positive diagonal.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        given = [m is not None for m in (covariance_matrix, precision_matrix, scale_tril)]
        if sum(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
            )
        name, matrix = next(
            (n, m)
            for n, m in zip(
                ("scale_tril", "covariance_matrix", "precision_matrix"),
                (scale_tril, covariance_matrix, precision_matrix),
            )  # fmt: skip
            if m is not None
        )
        if matrix.dim() < 2:
            raise ValueError(
                f"{name} matrix must be at least two-dimensional, "
                "with optional leading batch dimensions"
            )
        batch = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        setattr(self, name, matrix.expand((*batch, -1, -1)))
        self.loc = loc.expand((*batch, -1))
        super().__init__(batch, tuple(loc.shape[-1:]), validate_args=validate_args)
        self._unbroadcasted_scale_tril = scale_tril_of(
            scale_tril, covariance_matrix, precision_matrix
        )

    def expand(self, batch_shape: Any, _instance: Any = None) -> MultivariateNormal:
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = tuple(batch_shape)
        n = self._event_shape[0]
        new.loc = self.loc.expand((*batch_shape, n))
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand((*batch_shape, n, n))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return (*self._batch_shape, *self._event_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.loc

    @property
    def mode(self) -> Tensor:
        return self.loc

    @property
    def variance(self) -> Tensor:
        shape = (*self._batch_shape, *self._event_shape)
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(shape)

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = self._extended_shape(sample_shape)
        eps = randn(tuple(shape), dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = batch_mahalanobis(self._unbroadcasted_scale_tril, value - self.loc)
        k = self._event_shape[0]
        return -0.5 * (k * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self) -> Tensor:
        k = self._event_shape[0]
        h = 0.5 * k * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h.expand(tuple(self._batch_shape)) if len(self._batch_shape) else h
