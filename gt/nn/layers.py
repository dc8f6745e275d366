"""Layers: ``Linear``, ``LayerNorm``, ``Embedding``, ``Dropout``, ``Flatten``, ``Identity`` ...

Activations are in :mod:`gt.nn.activation_layers`, losses in :mod:`gt.nn.loss_layers`,
convolutions and pooling in :mod:`gt.nn.conv_layers`, other normalizations in
:mod:`gt.nn.norm_layers`. Every ``repr`` shows the arguments PyTorch's shows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import functional as fn
from gt.nn.module import Module, Parameter
from gt.nn.resetting import redraw, redraw_rows, refill
from gt.tensor import Tensor

__all__ = [
    "Dropout",
    "Dropout1d",
    "Dropout2d",
    "Embedding",
    "Flatten",
    "Identity",
    "LayerNorm",
    "Linear",
    "Unflatten",
]


def _uniform(shape: tuple[int, ...], bound: float, dtype: Any) -> Parameter:
    with no_grad():
        return Parameter(F.rand(*shape, dtype=dtype) * (2.0 * bound) - bound)


class Linear(Module):
    """``y = x @ weight.T + bias`` with PyTorch's default initialization.

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: whether to learn an additive bias.
        dtype: parameter dtype (float32 by default).

    Attributes:
        weight: ``[out_features, in_features]``, uniform in ``±1/sqrt(in_features)`` (what
            ``kaiming_uniform_(a=sqrt(5))`` gives).
        bias: ``[out_features]``, uniform in ``±1/sqrt(in_features)``.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        bound = fn.kaiming_bound(in_features)
        self.weight = _uniform((out_features, in_features), bound, dtype)
        if bias:
            self.bias = _uniform((out_features,), bound, dtype)
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """Draw ``weight`` and ``bias`` again, as the constructor did."""
        redraw(self, ("weight", "bias"), fn.kaiming_bound(self.in_features))

    def forward(self, input: Tensor) -> Tensor:
        return fn.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def forward(self, input: Any) -> Any:
        return input


class Flatten(Module):
    """Flatten dimensions ``start_dim..end_dim`` (by default all but the batch dimension)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input: Tensor) -> Tensor:
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dimension ``dim`` into ``unflattened_size``."""

    def __init__(self, dim: int, unflattened_size: Sequence[int]):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input: Tensor) -> Tensor:
        return input.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _DropoutNd(Module):
    """What every dropout layer shares: ``p`` and ``inplace`` (the base PyTorch's have)."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zero elements with probability ``p`` while training; the identity in eval mode
    (``inplace``: the input itself is changed, as PyTorch's)."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.dropout(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of ``[N, C, L]`` with probability ``p`` while training."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.dropout1d(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zero whole channels of ``[N, C, H, W]`` with probability ``p`` while training."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.dropout2d(input, self.p, self.training, self.inplace)


class LayerNorm(Module):
    """Normalize over the last dimensions, then apply a learned scale and shift.

    Args:
        normalized_shape: the trailing shape to normalize over.
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros).
        bias: learn the shift (with ``elementwise_affine``).
    """

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        shape = (
            (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        )
        self.normalized_shape = shape
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(F.ones(shape, dtype=dtype))
            if bias:
                self.bias = Parameter(F.zeros(shape, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self) -> None:
        """``weight`` back to ones, ``bias`` to zeros."""
        refill(self, ones=("weight",), zeros=("bias",))

    def forward(self, input: Tensor) -> Tensor:
        return fn.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, "
            f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}"
        )


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim`` (initialized N(0, 1)).

    Args:
        padding_idx: a row that starts at zeros and never receives a gradient.
        _weight: an initial table (``Embedding.from_pretrained`` uses it).
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight: Tensor | None = None, _freeze: bool = False, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(F.randn(num_embeddings, embedding_dim, dtype=dtype))
            if padding_idx is not None:
                with no_grad():
                    self.weight[padding_idx] = 0.0
        else:
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings: Tensor, freeze: bool = True,
                        padding_idx: int | None = None, **kwargs: Any) -> Embedding:  # fmt: skip
        """An embedding whose table is a copy of ``embeddings`` (frozen by default)."""
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx, _weight=embeddings, _freeze=freeze, **kwargs)

    def reset_parameters(self) -> None:
        """Draw the table again (standard normal, the ``padding_idx`` row zero)."""
        redraw_rows(self)

    def forward(self, input: Tensor) -> Tensor:
        return fn.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                            self.scale_grad_by_freq, self.sparse)  # fmt: skip

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            text += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            text += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            text += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        if self.sparse is not False:
            text += ", sparse=True"
        return text
