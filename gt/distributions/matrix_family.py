"""Distributions over matrices: :class:`Wishart` (positive-definite matrices) and
:class:`LKJCholesky` (Cholesky factors of correlation matrices).

Samples come from GT's seeded streams, so they are not PyTorch's numbers; densities, entropies
and moments are PyTorch's formulas. ``Wishart.rsample`` is Bartlett's decomposition (chi-squared
diagonal, normal lower triangle) and differentiable in ``df`` (through the gamma samples'
implicit derivative) and the scale; PyTorch retries a sample that came out singular, which a
float64 run practically never meets, and GT does not. ``LKJCholesky`` samples by the onion method
(Beta-distributed squared radii, uniform directions) with the method's own parameters, where
PyTorch's are off for rows past the second (see :class:`LKJCholesky`).
"""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.distribution import Distribution
from gt.distributions.exp_family import ExponentialFamily
from gt.distributions.gamma_family import Beta, Chi2
from gt.distributions.multivariate_normal import ScaleTrilMatrices, _linalg, scale_tril_of
from gt.factories import arange, randn, tensor
from gt.ops.functional import broadcast_shapes
from gt.ops.shaping import cat
from gt.tensor import Tensor

__all__ = ["LKJCholesky", "Wishart"]

_LOG_2 = math.log(2.0)


def _mvdigamma(x: Tensor, p: int) -> Tensor:
    """The multivariate digamma function: ``sum_i digamma(x - i / 2)``, ``i < p``."""
    return (x.unsqueeze(-1) - arange(p, dtype=x.dtype) / 2).digamma().sum(-1)


class Wishart(ScaleTrilMatrices, ExponentialFamily):
    """The Wishart distribution of ``df`` degrees of freedom and one of ``covariance_matrix``,
    ``precision_matrix`` or ``scale_tril`` (its lower Cholesky factor): the distribution of
    ``sum_k x_k x_k^T`` for ``df`` draws of a zero-mean normal with that covariance.

    Args:
        df: degrees of freedom, greater than ``p - 1`` (``p``: the matrices' size).
        covariance_matrix, precision_matrix, scale_tril: exactly one of them, ``(*batch, p, p)``.
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {
        "covariance_matrix": constraints.positive_definite,
        "precision_matrix": constraints.positive_definite,
        "scale_tril": constraints.lower_cholesky,
        "df": constraints.greater_than(0),
    }
    support = constraints.positive_definite
    has_rsample = True

    def __init__(self, df: Any, covariance_matrix: Tensor | None = None,
                 precision_matrix: Tensor | None = None, scale_tril: Tensor | None = None,
                 validate_args: bool | None = None) -> None:  # fmt: skip
        given = [(n, m) for n, m in (("scale_tril", scale_tril), ("covariance_matrix", covariance_matrix),
                                      ("precision_matrix", precision_matrix)) if m is not None]  # fmt: skip
        if len(given) != 1:
            raise ValueError(
                "Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified."
            )
        name, matrix = given[0]
        if matrix.dim() < 2:
            raise ValueError(
                "scale_tril must be at least two-dimensional, with optional leading batch dimensions"
            )
        p = matrix.shape[-1]
        if not isinstance(df, Tensor):
            df = tensor(float(df), dtype=matrix.dtype)
        batch = broadcast_shapes(tuple(matrix.shape[:-2]), tuple(df.shape))
        self.df = df.expand(batch)
        setattr(self, name, matrix.expand((*batch, p, p)))
        self.arg_constraints = {**type(self).arg_constraints, "df": constraints.greater_than(p - 1)}
        super().__init__(batch, (p, p), validate_args=validate_args)
        self._unbroadcasted_scale_tril = scale_tril_of(
            scale_tril, covariance_matrix, precision_matrix
        )
        # the squared diagonal of Bartlett's factor: chi-squared with df - i degrees of freedom
        self._dist_chi2 = Chi2(self.df.unsqueeze(-1) - arange(p, dtype=self.df.dtype))

    def expand(self, batch_shape: Any, _instance: Any = None) -> Wishart:
        """``df`` and the matrix given expanded to ``batch_shape`` (the matrices keep their
        event dimensions)."""
        new = self.__new__(type(self)) if _instance is None else _instance
        batch_shape = tuple(batch_shape)
        p = self._event_shape[-1]
        new.df = self.df.expand(batch_shape)
        new._unbroadcasted_scale_tril = self._unbroadcasted_scale_tril
        for name in ("covariance_matrix", "scale_tril", "precision_matrix"):
            if name in self.__dict__:
                new.__dict__[name] = self.__dict__[name].expand((*batch_shape, p, p))
        new.arg_constraints = self.arg_constraints
        new._dist_chi2 = Chi2(new.df.unsqueeze(-1) - arange(p, dtype=new.df.dtype))
        Distribution.__init__(new, batch_shape, self._event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _matrix_shape(self) -> tuple:
        return (*self._batch_shape, *self._event_shape)

    @property
    def mean(self) -> Tensor:
        return self.df.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def mode(self) -> Tensor:
        factor = self.df - self._event_shape[-1] - 1
        factor = factor.masked_fill(factor <= 0, float("nan"))
        return factor.unsqueeze(-1).unsqueeze(-1) * self.covariance_matrix

    @property
    def variance(self) -> Tensor:
        v = self.covariance_matrix
        d = v.diagonal(dim1=-2, dim2=-1)
        return self.df.unsqueeze(-1).unsqueeze(-1) * (v.pow(2) + d.unsqueeze(-1) * d.unsqueeze(-2))

    def rsample(self, sample_shape: Any = ()) -> Tensor:
        sample_shape = tuple(sample_shape)
        p = self._event_shape[-1]
        chi = self._dist_chi2.rsample(sample_shape).sqrt()
        tiny = 1e-30 if chi.dtype == "float64" else 1e-12  # (a zero diagonal would be singular)
        shape = (*sample_shape, *self._batch_shape, p, p)
        noise = chi.clamp(min=tiny).diag_embed() + randn(shape, dtype=chi.dtype).tril(-1)
        chol = self._unbroadcasted_scale_tril @ noise
        return chol @ chol.mT

    def _half_log_det(self) -> Tensor:
        return self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        nu, p = self.df, self._event_shape[-1]
        from gt.linalg.more import cholesky_solve  # noqa: PLC0415 - (as _linalg: on use)

        solved = cholesky_solve(value, self._unbroadcasted_scale_tril)
        return (
            -nu * (p * _LOG_2 / 2 + self._half_log_det())
            - (nu / 2).mvlgamma(p)
            + (nu - p - 1) / 2 * _linalg().slogdet(value).logabsdet
            - solved.diagonal(dim1=-2, dim2=-1).sum(-1) / 2
        )

    def entropy(self) -> Tensor:
        nu, p = self.df, self._event_shape[-1]
        return (
            (p + 1) * (p * _LOG_2 / 2 + self._half_log_det())
            + (nu / 2).mvlgamma(p)
            - (nu - p - 1) / 2 * _mvdigamma(nu / 2, p)
            + nu * p / 2
        )

    # (exponential family: natural parameters, log normalizer, expected carrier measure)
    _mean_carrier_measure = 0

    @property
    def _natural_params(self) -> tuple[Tensor, Tensor]:
        return -self.precision_matrix / 2, (self.df - self._event_shape[-1] - 1) / 2

    def _log_normalizer(self, x: Tensor, y: Tensor) -> Tensor:
        p = self._event_shape[-1]
        half = y + (p + 1) / 2
        return half * (-_linalg().slogdet(-2 * x).logabsdet + _LOG_2 * p) + half.mvlgamma(p)


class LKJCholesky(Distribution):
    """The LKJ distribution of correlation matrices, as the distribution of their lower Cholesky
    factors: density proportional to ``det(C) ** (concentration - 1)``.

    Args:
        dim: the matrices' size (at least 2).
        concentration: ``eta > 0`` (1: uniform over correlation matrices; larger: closer to I).
        validate_args: check the parameters (``None``: the default setting).
    """

    arg_constraints = {"concentration": constraints.positive}
    support = constraints.corr_cholesky

    def __init__(
        self, dim: int, concentration: Any = 1.0, validate_args: bool | None = None
    ) -> None:
        if dim < 2:
            raise ValueError(
                f"Expected dim to be an integer greater than or equal to 2. Found dim={dim}."
            )
        self.dim = dim
        if not isinstance(concentration, Tensor):
            concentration = tensor(float(concentration))
        self.concentration = concentration
        batch = tuple(concentration.shape)
        # The onion method (Lewandowski, Kurowicka and Joe 2009, section 3.2): row k (k >= 1) of
        # the factor is sqrt(y) u, u uniform on the k-sphere, y ~ Beta(k / 2, beta - (k - 1) / 2)
        # with beta = eta + (d - 2) / 2. (PyTorch 2.13 draws y ~ Beta(k - 1/2, ...) for k >= 2, so
        # its samples' correlations past the first row are too spread: rows 3 and on have
        # variance 0.188 where the LKJ distribution has 1 / (2 eta + d - 1) = 0.143 at d=4,
        # eta=2. Its log_prob is the LKJ density, and so is GT's.) Row 0 has no entries.
        marginal = concentration + 0.5 * (dim - 2)
        offset = cat([concentration.new_zeros((1,)), arange(dim - 1, dtype=concentration.dtype)])
        rows = arange(dim, dtype=concentration.dtype).clamp(min=1)
        self._beta = Beta(rows / 2, marginal.unsqueeze(-1) - 0.5 * offset)
        super().__init__(batch, (dim, dim), validate_args=validate_args)

    def sample(self, sample_shape: Any = ()) -> Tensor:
        from gt.autograd import no_grad  # noqa: PLC0415 - (no gradient through the onion method)

        with no_grad():
            y = self._beta.sample(tuple(sample_shape)).unsqueeze(-1)
            shape = self._extended_shape(sample_shape)
            u = randn(tuple(shape), dtype=self.concentration.dtype).tril(-1)
            norm = u.norm(dim=-1, keepdim=True)
            # the first row has no free entries (its norm is 0): its direction stays 0
            u = u / norm.masked_fill(norm == 0, 1.0)
            w = y.sqrt() * u
            tiny = 1e-300 if w.dtype == "float64" else 1e-38
            diag = (1 - w.pow(2).sum(-1)).clamp(min=tiny).sqrt()
            return w + diag.diag_embed()

    def log_prob(self, value: Tensor) -> Tensor:
        if self._validate_args:
            self._validate_sample(value)
        diag = value.diagonal(dim1=-2, dim2=-1)[..., 1:]
        order = arange(2, self.dim + 1, dtype=diag.dtype)
        order = 2 * (self.concentration - 1).unsqueeze(-1) + self.dim - order
        unnormalized = (order * diag.log()).sum(-1)
        dm1 = self.dim - 1
        alpha = self.concentration + 0.5 * dm1
        denominator = alpha.lgamma() * dm1
        numerator = (alpha - 0.5).mvlgamma(dm1)
        pi_constant = 0.5 * dm1 * math.log(math.pi)  # (mvlgamma's constant is (D-1)(D-2)/4 log pi)
        return unnormalized - (pi_constant + numerator - denominator)
