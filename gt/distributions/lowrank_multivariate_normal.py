""":class:`LowRankMultivariateNormal`: a multivariate normal whose covariance is
``cov_factor @ cov_factor.T + diag(cov_diag)``. Densities use the Woodbury identity and the matrix
determinant lemma, so only the small ``rank x rank`` "capacitance" matrix is factorized."""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.multivariate_normal import _linalg, batch_mahalanobis
from gt.distributions.utils import lazy_property
from gt.factories import eye, randn
from gt.ops.functional import broadcast_shapes, broadcast_tensors
from gt.ops.typeinfo import Size
from gt.tensor import Tensor

__all__ = ["LowRankMultivariateNormal"]


def batch_mv(matrix: Tensor, vector: Tensor) -> Tensor:
    """Matrix times vector over broadcast batch dims."""
    return (matrix @ vector.unsqueeze(-1)).squeeze(-1)


def batch_trace_xxt(x: Tensor) -> Tensor:
    """``trace(X X^T)`` of each matrix: the sum of its squared entries."""
    return x.pow(2).sum(-1).sum(-1)


def capacitance_tril(w: Tensor, d: Tensor) -> Tensor:
    """The Cholesky factor of ``I + W^T D^-1 W``."""
    wt_dinv = w.mT / d.unsqueeze(-2)
    k = wt_dinv @ w + eye(w.shape[-1], dtype=w.dtype)
    return _linalg().cholesky(k)


def lowrank_logdet(w: Tensor, d: Tensor, cap_tril: Tensor) -> Tensor:
    """``log |W W^T + D| = log |C| + log |D|`` (the matrix determinant lemma)."""
    return 2 * cap_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + d.log().sum(-1)


def lowrank_mahalanobis(w: Tensor, d: Tensor, x: Tensor, cap_tril: Tensor) -> Tensor:
    """``x^T (W W^T + D)^-1 x`` by the Woodbury identity."""
    wt_dinv_x = batch_mv(w.mT / d.unsqueeze(-2), x)
    return (x.pow(2) / d).sum(-1) - batch_mahalanobis(cap_tril, wt_dinv_x)


class LowRankMultivariateNormal(Distribution):
    """The multivariate normal with mean ``loc`` and covariance ``cov_factor @ cov_factor.T +
    diag(cov_diag)`` (a factor-analysis style covariance).

    Args:
        loc: mean, ``(*batch, n)``.
        cov_factor: the low-rank factor, ``(*batch, n, rank)``.
        cov_diag: the diagonal part, positive, ``(*batch, n)``.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "loc": constraints.real_vector,
        "cov_factor": constraints.independent(constraints.real, 2),
        "cov_diag": constraints.independent(constraints.positive, 1),
    }
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, loc: Tensor, cov_factor: Tensor, cov_diag: Tensor,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = Size(tuple(loc.shape[-1:]))
        if cov_factor.dim() < 2:
            raise ValueError(
                "cov_factor must be at least two-dimensional, "
                "with optional leading batch dimensions"
            )
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(
                f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m"
            )
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            loc_, self.cov_factor, cov_diag_ = broadcast_tensors(
                loc.unsqueeze(-1), cov_factor, cov_diag.unsqueeze(-1)
            )
        except (RuntimeError, ValueError) as e:
            raise ValueError(
                f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                f"cov_diag {cov_diag.shape}"
            ) from e
        self.loc = loc_[..., 0]
        self.cov_diag = cov_diag_[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = capacitance_tril(cov_factor, cov_diag)
        super().__init__(tuple(self.loc.shape[:-1]), event_shape, validate_args=validate_args)

    def expand(self, batch_shape: Any, _instance: Any = None) -> LowRankMultivariateNormal:
        new = self.__new__(type(self)) if _instance is None else _instance
        loc_shape = tuple(batch_shape) + tuple(self._event_shape)
        new.loc = self.loc.expand(loc_shape)
        new.cov_diag = self.cov_diag.expand(loc_shape)
        new.cov_factor = self.cov_factor.expand(loc_shape + tuple(self.cov_factor.shape[-1:]))
        new._unbroadcasted_cov_factor = self._unbroadcasted_cov_factor
        new._unbroadcasted_cov_diag = self._unbroadcasted_cov_diag
        new._capacitance_tril = self._capacitance_tril
        Distribution.__init__(new, tuple(batch_shape), self._event_shape, validate_args=False)
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

    @lazy_property
    def variance(self) -> Tensor:  # type: ignore[override]
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (w.pow(2).sum(-1) + d).expand((*self._batch_shape, *self._event_shape))

    @lazy_property
    def scale_tril(self) -> Tensor:
        """A lower Cholesky factor of the covariance, from the well-conditioned
        ``D^1/2 (I + D^-1/2 W W^T D^-1/2) D^1/2``."""
        n = self._event_shape[0]
        d_sqrt = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        dinvsqrt_w = self._unbroadcasted_cov_factor / d_sqrt
        k = dinvsqrt_w @ dinvsqrt_w.mT + eye(n, dtype=d_sqrt.dtype)
        return (d_sqrt * _linalg().cholesky(k)).expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self) -> Tensor:
        """``W W^T + diag(D)``."""
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        return (w @ w.mT + d.diag_embed()).expand(self._matrix_shape())

    @lazy_property
    def precision_matrix(self) -> Tensor:
        """``D^-1 - D^-1 W C^-1 W^T D^-1`` (Woodbury)."""
        w, d = self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag
        wt_dinv = w.mT / d.unsqueeze(-2)
        cap = self._capacitance_tril
        cap, wt_dinv = _broadcast_batch(cap, wt_dinv)
        a = _linalg().solve_triangular(cap, wt_dinv, upper=False)
        return (d.reciprocal().diag_embed() - a.mT @ a).expand(self._matrix_shape())

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        shape = tuple(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + tuple(self.cov_factor.shape[-1:])
        eps_w = randn(w_shape, dtype=self.loc.dtype)
        eps_d = randn(shape, dtype=self.loc.dtype)
        return (
            self.loc
            + batch_mv(self._unbroadcasted_cov_factor, eps_w)
            + self._unbroadcasted_cov_diag.sqrt() * eps_d
        )

    def _log_det(self) -> Tensor:
        return lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                              self._capacitance_tril)  # fmt: skip

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        m = lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                value - self.loc, self._capacitance_tril)  # fmt: skip
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + self._log_det() + m)

    def entropy(self) -> Tensor:
        h = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + self._log_det())
        return h.expand(tuple(self._batch_shape)) if len(self._batch_shape) else h


def _broadcast_batch(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``a`` and ``b`` (matrices) expanded to one batch shape."""
    batch = tuple(broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    return a.expand(batch + tuple(a.shape[-2:])), b.expand(batch + tuple(b.shape[-2:]))
