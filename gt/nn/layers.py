"""Layers and loss modules: ``Linear``, ``LayerNorm``, ``Embedding``, ``Dropout``, activations, losses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import functional as fn
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor


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

    def forward(self, x: Tensor) -> Tensor:
        return fn.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Identity(Module):
    """Returns its input."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def forward(self, x: Any) -> Any:
        return x


class _Activation(Module):
    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()


class ReLU(_Activation):
    """``max(x, 0)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.relu()


class GELU(Module):
    """Gaussian error linear unit (``approximate="tanh"`` for the tanh form)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return x.gelu(self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Tanh(_Activation):
    """Hyperbolic tangent."""

    def forward(self, x: Tensor) -> Tensor:
        return x.tanh()


class Sigmoid(_Activation):
    """Logistic sigmoid."""

    def forward(self, x: Tensor) -> Tensor:
        return x.sigmoid()


class SiLU(_Activation):
    """``x * sigmoid(x)``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.silu()


class Softmax(Module):
    """Softmax over ``dim``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return x.softmax(self.dim)


class LogSoftmax(Softmax):
    """Log-softmax over ``dim``."""

    def forward(self, x: Tensor) -> Tensor:
        return x.log_softmax(self.dim)


class Flatten(Module):
    """Flatten dimensions ``start_dim..end_dim`` (by default all but the batch dimension)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)


class Dropout(Module):
    """Zero elements with probability ``p`` while training; the identity in eval mode."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return fn.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


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

    def forward(self, x: Tensor) -> Tensor:
        return fn.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (
            f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"
        )


class Embedding(Module):
    """A lookup table of ``num_embeddings`` vectors of size ``embedding_dim`` (initialized N(0, 1))."""

    def __init__(
        self, num_embeddings: int, embedding_dim: int, device: Any = None, dtype: Any = None
    ):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(F.randn(num_embeddings, embedding_dim, dtype=dtype))

    def forward(self, idx: Tensor) -> Tensor:
        return fn.embedding(idx, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction


class MSELoss(_Loss):
    """Mean squared error."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.mse_loss(input, target, self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.l1_loss(input, target, self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits and class targets (see :func:`gt.nn.functional.cross_entropy`)."""

    def __init__(
        self,
        weight: Tensor | None = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ):
        super().__init__(reduction)
        self.weight, self.ignore_index, self.label_smoothing = weight, ignore_index, label_smoothing

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.cross_entropy(
            input, target, self.weight, self.ignore_index, self.reduction, self.label_smoothing
        )


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities and class targets."""

    def __init__(
        self, weight: Tensor | None = None, ignore_index: int = -100, reduction: str = "mean"
    ):
        super().__init__(reduction)
        self.weight, self.ignore_index = weight, ignore_index

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities."""

    def __init__(self, weight: Tensor | None = None, reduction: str = "mean"):
        super().__init__(reduction)
        self.weight = weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.binary_cross_entropy(input, target, self.weight, self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of logits."""

    def __init__(
        self,
        weight: Tensor | None = None,
        reduction: str = "mean",
        pos_weight: Tensor | None = None,
    ):
        super().__init__(reduction)
        self.weight, self.pos_weight = weight, pos_weight

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return fn.binary_cross_entropy_with_logits(
            input, target, self.weight, self.reduction, self.pos_weight
        )
