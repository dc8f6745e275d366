"""Helpers shared by the distributions: parameter broadcasting, probs <-> logits, lazy
properties (``torch.distributions.utils``)."""

from __future__ import annotations

from numbers import Number
from typing import Any

from gt.factories import arange
from gt.factories import tensor as _tensor
from gt.ops.functional import broadcast_tensors
from gt.ops.shaping import cat
from gt.ops.typeinfo import Size, finfo, get_default_dtype
from gt.tensor import Tensor

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]


def one_of(probs: Any, logits: Any) -> None:
    """PyTorch's check that exactly one of ``probs`` and ``logits`` is given."""
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


def broadcast_all(*values: Any) -> tuple[Tensor, ...]:
    """Numbers become tensors (with the dtype of the first tensor argument, else the default
    dtype) and everything is broadcast to one shape, as PyTorch's distributions do."""
    if not all(isinstance(v, (Tensor, Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number, "
            "torch.Tensor or objects implementing __torch_function__."
        )
    if not any(isinstance(v, Tensor) for v in values):
        dtype = get_default_dtype()
        return tuple(_tensor(float(v), dtype=dtype) for v in values)
    dtype = next(v.dtype for v in values if isinstance(v, Tensor))
    tensors = [v if isinstance(v, Tensor) else _tensor(float(v), dtype=dtype) for v in values]
    return tuple(broadcast_tensors(*tensors))


def clamp_probs(probs: Tensor) -> Tensor:
    """``probs`` clamped to ``[eps, 1 - eps]`` so that their logs stay finite."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def logits_to_probs(logits: Tensor, is_binary: bool = False) -> Tensor:
    """Log-odds (binary) or unnormalized log-probabilities (last dim) to probabilities."""
    return logits.sigmoid() if is_binary else logits.softmax(-1)


def probs_to_logits(probs: Tensor, is_binary: bool = False) -> Tensor:
    """Probabilities to log-odds (binary) or log-probabilities."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p() if is_binary else p.log()


def sum_rightmost(value: Tensor, dim: int) -> Tensor:
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(tuple(value.shape[: value.dim() - dim]) + (-1,)).sum(-1)


def softplus(x: Tensor) -> Tensor:
    """``log(1 + exp(x))``, stable for large ``|x|`` (GT's ``softplus`` primitive, as
    ``F.softplus`` in PyTorch's distributions)."""
    return x.softplus()


def bce_with_logits(logits: Tensor, target: Tensor) -> Tensor:
    """Elementwise ``-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x)))``."""
    return softplus(logits) - logits * target


def one_hot(indices: Tensor, num_classes: int, like: Tensor) -> Tensor:
    """``indices`` as one-hot vectors (a new last dim) with ``like``'s dtype."""
    return (indices.unsqueeze(-1) == arange(num_classes)).to(like.dtype)


class lazy_property:  # noqa: N801 - PyTorch's name
    """A property computed on first use and then stored on the instance (so ``probs`` and
    ``logits`` are only derived from each other when asked for)."""

    def __init__(self, wrapped: Any):
        self.wrapped = wrapped
        self.__doc__ = wrapped.__doc__

    def __get__(self, instance: Any, obj_type: Any = None) -> Any:
        if instance is None:
            return self
        value = self.wrapped(instance)
        instance.__dict__[self.wrapped.__name__] = value
        return value


class BinaryParameters:
    """``probs``/``logits`` of a distribution over two outcomes given by either (Bernoulli,
    Binomial, Geometric, the relaxed Bernoulli): each derives the other lazily, and ``_param`` is
    the one given. A mixin before :class:`Distribution` in the bases."""

    def expand(self, batch_shape: Any, _instance: Any = None) -> Any:
        new = super().expand(batch_shape, _instance)  # type: ignore[misc]
        new._param = new.__dict__["probs" if "probs" in self.__dict__ else "logits"]
        return new

    @lazy_property
    def logits(self) -> Tensor:
        """Log-odds of a success (a 1)."""
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self) -> Tensor:
        """Probability of a success (a 1)."""
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self) -> Size:
        return Size(tuple(self._param.shape))


def _tril_positions(n: int, diag: int) -> list[int]:
    """Row-major flat positions of the entries of an ``n x n`` matrix with ``j <= i + diag``."""
    return [i * n + j for i in range(n) for j in range(n) if j < i + diag + 1]


def vec_to_tril_matrix(vec: Tensor, diag: int = 0) -> Tensor:
    """The lower-triangular matrices (below diagonal ``diag``) whose entries, row by row, are the
    last dim of ``vec``; the rest are zeros (``torch.distributions.utils``')."""
    size = vec.shape[-1]
    root = ((1 + 2 * diag) ** 2 + 8 * size + 4 * abs(diag) * (diag + 1)) ** 0.5
    n_float = (-(1 + 2 * diag) + root) / 2
    n = round(n_float)
    if abs(n - n_float) > finfo(vec.dtype).eps:
        raise ValueError(
            f"The size of last dimension is {size} which cannot be expressed as "
            "the lower triangular part of a square D x D matrix."
        )
    index = [0] * (n * n)
    for k, pos in enumerate(_tril_positions(n, diag)):
        index[pos] = k + 1  # entry 0 of the padded vector is the zero
    padded = vec.new_zeros(tuple(vec.shape[:-1]) + (1,))
    gathered = cat([padded, vec], -1).index_select(-1, _tensor(index))
    return gathered.reshape(tuple(vec.shape[:-1]) + (n, n))


def tril_matrix_to_vec(mat: Tensor, diag: int = 0) -> Tensor:
    """The entries of ``mat`` on and below diagonal ``diag``, row by row, as a last dim."""
    n = mat.shape[-1]
    flat = mat.reshape(tuple(mat.shape[:-2]) + (n * n,))
    return flat.index_select(-1, _tensor(_tril_positions(n, diag)))
