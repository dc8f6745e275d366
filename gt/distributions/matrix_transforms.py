"""Transforms of vectors and matrices (``torch.distributions.transforms``'): onto the simplex
(:class:`StickBreakingTransform`, bijective; :class:`SoftmaxTransform`, not), to Cholesky factors
(:class:`LowerCholeskyTransform`, :class:`CorrCholeskyTransform`) and to positive-definite
matrices (:class:`PositiveDefiniteTransform`). These are what :func:`biject_to` and
:func:`transform_to` return for the matching constraints."""

from __future__ import annotations

import math
from typing import Any

from gt.distributions import constraints
from gt.distributions.transform_base import Transform
from gt.distributions.utils import softplus, tril_matrix_to_vec, vec_to_tril_matrix
from gt.factories import eye
from gt.ops.shaping import cat
from gt.ops.typeinfo import Size, finfo
from gt.tensor import Tensor

__all__ = [
    "CorrCholeskyTransform",
    "LowerCholeskyTransform",
    "PositiveDefiniteTransform",
    "SoftmaxTransform",
    "StickBreakingTransform",
]


def _clipped_sigmoid(x: Tensor) -> Tensor:
    info = finfo(x.dtype)
    return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)


def _pad_last(x: Tensor, before: int, after: int, value: float) -> Tensor:
    """``F.pad(x, [before, after], value=value)`` on the last dim."""
    parts = []
    if before:
        parts.append(x.new_full(tuple(x.shape[:-1]) + (before,), value))
    parts.append(x)
    if after:
        parts.append(x.new_full(tuple(x.shape[:-1]) + (after,), value))
    return cat(parts, -1)


def _at_least_one_dim(shape: Any) -> None:
    if len(shape) < 1:
        raise ValueError("Too few dimensions on input")


class StickBreakingTransform(Transform):
    """Unconstrained vectors of length ``K`` to the simplex of length ``K + 1``, by breaking a
    stick: the first logit's sigmoid (shifted so that zeros map to the uniform point) takes a
    share of the stick, the next a share of the rest, and so on. Bijective (fit for HMC)."""

    domain = constraints.real_vector
    codomain = constraints.simplex
    bijective = True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StickBreakingTransform)

    __hash__ = Transform.__hash__

    @staticmethod
    def _offset_log(x: Tensor, k: int) -> Tensor:
        # log(k - i) for i = 0 .. K-1, PyTorch's shift
        return (k - x.new_ones((x.shape[-1],)).cumsum(-1)).log()

    def _call(self, x: Tensor) -> Tensor:
        z = _clipped_sigmoid(x - self._offset_log(x, x.shape[-1] + 1))
        z_cumprod = (1 - z).cumprod(-1)
        return _pad_last(z, 0, 1, 1.0) * _pad_last(z_cumprod, 1, 0, 1.0)

    def _inverse(self, y: Tensor) -> Tensor:
        y_crop = y[..., :-1]
        offset = y.shape[-1] - y.new_ones((y_crop.shape[-1],)).cumsum(-1)
        sf = (1 - y_crop.cumsum(-1)).clamp(min=finfo(y.dtype).tiny)
        return y_crop.log() - sf.log() + offset.log()

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor) -> Tensor:
        """``log |det dy[:-1]/dx|``, one value per vector."""
        x = x - self._offset_log(x, x.shape[-1] + 1)
        return (-x - softplus(-x) + y[..., :-1].log()).sum(-1)

    def forward_shape(self, shape: Any) -> Size:
        _at_least_one_dim(shape)
        return Size(tuple(shape[:-1]) + (shape[-1] + 1,))

    def inverse_shape(self, shape: Any) -> Size:
        _at_least_one_dim(shape)
        return Size(tuple(shape[:-1]) + (shape[-1] - 1,))


class SoftmaxTransform(Transform):
    """Unconstrained vectors to the simplex by ``exp`` and normalizing. Not bijective (its
    inverse is ``log``), so fit for optimization, not for HMC."""

    domain = constraints.real_vector
    codomain = constraints.simplex

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SoftmaxTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        probs = (x - x.max(-1, True)[0]).exp()
        return probs / probs.sum(-1, True)

    def _inverse(self, y: Tensor) -> Tensor:
        return y.log()

    def forward_shape(self, shape: Any) -> Any:
        _at_least_one_dim(shape)
        return shape

    inverse_shape = forward_shape


class LowerCholeskyTransform(Transform):
    """Unconstrained square matrices to lower-triangular ones with a positive diagonal: the
    strict lower triangle is kept, the diagonal exponentiated."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.lower_cholesky

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LowerCholeskyTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        return x.tril(-1) + x.diagonal(dim1=-2, dim2=-1).exp().diag_embed()

    def _inverse(self, y: Tensor) -> Tensor:
        return y.tril(-1) + y.diagonal(dim1=-2, dim2=-1).log().diag_embed()


class PositiveDefiniteTransform(Transform):
    """Unconstrained square matrices to positive-definite ones: ``L L^T`` for ``L`` from
    :class:`LowerCholeskyTransform`."""

    domain = constraints.independent(constraints.real, 2)
    codomain = constraints.positive_definite

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PositiveDefiniteTransform)

    __hash__ = Transform.__hash__

    def _call(self, x: Tensor) -> Tensor:
        lower = LowerCholeskyTransform()(x)
        return lower @ lower.mT

    def _inverse(self, y: Tensor) -> Tensor:
        import gt.linalg  # noqa: PLC0415 - only this transform needs it

        return LowerCholeskyTransform().inv(gt.linalg.cholesky(y))


class CorrCholeskyTransform(Transform):
    """Unconstrained vectors of length ``D(D-1)/2`` to Cholesky factors of ``D x D``
    correlation matrices (Stan's and LKJ's map): the vector fills the strict lower triangle row
    by row, ``tanh`` takes each entry into ``(-1, 1)``, and a signed stick-breaking gives each
    row unit length. Its log-Jacobian is that of ``x`` and the strict lower triangle of ``y``."""

    domain = constraints.real_vector
    codomain = constraints.corr_cholesky
    bijective = True

    def _call(self, x: Tensor) -> Tensor:
        x = x.tanh()
        eps = finfo(x.dtype).eps
        x = x.clamp(min=-1 + eps, max=1 - eps)
        r = vec_to_tril_matrix(x, diag=-1)
        z1m_cumprod_sqrt = (1 - r**2).sqrt().cumprod(-1)
        r = r + eye(r.shape[-1], dtype=r.dtype)
        return r * _pad_last(z1m_cumprod_sqrt[..., :-1], 1, 0, 1.0)

    def _inverse(self, y: Tensor) -> Tensor:
        y_cumsum = 1 - (y * y).cumsum(-1)
        y_cumsum_shifted = _pad_last(y_cumsum[..., :-1], 1, 0, 1.0)
        y_vec = tril_matrix_to_vec(y, diag=-1)
        y_cumsum_vec = tril_matrix_to_vec(y_cumsum_shifted, diag=-1)
        t = y_vec / y_cumsum_vec.sqrt()
        return (t.log1p() - t.neg().log1p()) / 2

    def log_abs_det_jacobian(self, x: Tensor, y: Tensor, intermediates: Any = None) -> Tensor:
        y1m_cumsum = 1 - (y * y).cumsum(-1)
        y1m_cumsum_tril = tril_matrix_to_vec(y1m_cumsum, diag=-2)
        stick_breaking_logdet = 0.5 * y1m_cumsum_tril.log().sum(-1)
        tanh_logdet = -2 * (x + softplus(-2 * x) - math.log(2.0)).sum(-1)
        return stick_breaking_logdet + tanh_logdet

    def forward_shape(self, shape: Any) -> Size:
        _at_least_one_dim(shape)
        n = shape[-1]
        d = round((0.25 + 2 * n) ** 0.5 + 0.5)
        if d * (d - 1) // 2 != n:
            raise ValueError("Input is not a flattened lower-diagonal number")
        return Size(tuple(shape[:-1]) + (d, d))

    def inverse_shape(self, shape: Any) -> Size:
        if len(shape) < 2:
            raise ValueError("Too few dimensions on input")
        if shape[-2] != shape[-1]:
            raise ValueError("Input is not square")
        d = shape[-1]
        return Size(tuple(shape[:-2]) + (d * (d - 1) // 2,))
