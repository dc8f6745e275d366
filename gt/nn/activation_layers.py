"""Activation modules (``ReLU``, ``GELU``, ``LeakyReLU`` ...), printed with PyTorch's arguments."""

from __future__ import annotations

import warnings
from typing import Any

from gt import factories as F
from gt.autograd import no_grad
from gt.nn import functional as fn
from gt.nn.module import Module, Parameter
from gt.tensor import Tensor


class _Activation(Module):
    """An activation without arguments (``inplace`` is accepted, as in PyTorch)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace


class ReLU(_Activation):
    """``max(x, 0)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.relu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Tanh(_Activation):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return input.tanh()


class Sigmoid(_Activation):
    """Logistic sigmoid."""

    def forward(self, input: Tensor) -> Tensor:
        return input.sigmoid()


class SiLU(_Activation):
    """``x * sigmoid(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.silu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Mish(_Activation):
    """``x * tanh(softplus(x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.mish(input, self.inplace)


class Hardswish(_Activation):
    """``x * relu6(x + 3) / 6``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.hardswish(input, self.inplace)


class Hardsigmoid(_Activation):
    """``relu6(x + 3) / 6``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.hardsigmoid(input, self.inplace)


class Softsign(_Activation):
    """``x / (1 + |x|)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.softsign(input)


class LogSigmoid(_Activation):
    """``log(sigmoid(x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.logsigmoid(input)


class Tanhshrink(_Activation):
    """``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.tanhshrink(input)


class SELU(_Activation):
    """Scaled ELU."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.selu(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class GELU(Module):
    """Gaussian error linear unit (``approximate="tanh"`` for the tanh form)."""

    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return input.gelu(self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    """``x`` for positive ``x``, else ``negative_slope * x``."""

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input: Tensor) -> Tensor:
        return fn.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class _WithAlpha(Module):
    """What ``ELU`` and ``CELU`` share (PyTorch's two are unrelated classes)."""

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class ELU(_WithAlpha):
    """``x`` for positive ``x``, else ``alpha * (exp(x) - 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.elu(input, self.alpha, self.inplace)


class CELU(_WithAlpha):
    """``x`` for positive ``x``, else ``alpha * (exp(x / alpha) - 1)``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.celu(input, self.alpha, self.inplace)


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None):  # fmt: skip
        super().__init__()
        if min_value is not None:
            warnings.warn("keyword argument `min_value` is deprecated and renamed to `min_val`",
                          FutureWarning, stacklevel=2)  # fmt: skip
            min_val = min_value
        if max_value is not None:
            warnings.warn("keyword argument `max_value` is deprecated and renamed to `max_val`",
                          FutureWarning, stacklevel=2)  # fmt: skip
            max_val = max_value
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input: Tensor) -> Tensor:
        return fn.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else ""
        )


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``: a :class:`Hardtanh` from 0 to 6, as PyTorch's."""

    def __init__(self, inplace: bool = False):
        super().__init__(0.0, 6.0, inplace)

    def forward(self, input: Tensor) -> Tensor:
        if self.min_val == 0.0 and self.max_val == 6.0:  # (its own kernel: integers stay so)
            return fn.relu6(input, self.inplace)
        return super().forward(input)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input: Tensor) -> Tensor:
        return fn.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={float(self.beta)}, threshold={float(self.threshold)}"


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input: Tensor) -> Tensor:
        return fn.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}" + (
            ", inplace=True" if self.inplace else ""
        )


class PReLU(Module):
    """Leaky ReLU with a learned slope (one, or one per channel)."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device: Any = None,
                 dtype: Any = None):  # fmt: skip
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(F.full((num_parameters,), init, dtype=dtype or "float32"))

    def reset_parameters(self) -> None:
        """The slope back to ``init``."""
        with no_grad():
            self.weight.fill_(self.init)

    def forward(self, input: Tensor) -> Tensor:
        return fn.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class GLU(Module):
    """``a * sigmoid(b)`` for the two halves of ``dim``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return fn.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


def _implicit_dim(x: Tensor, dim: int | None) -> int:
    """PyTorch's legacy choice when no ``dim`` is given: 0 for 0-, 1- and 3-d inputs, else 1."""
    if dim is not None:
        return dim
    return 0 if x.ndim in (0, 1, 3) else 1


class _OverDim(Module):
    """What ``Softmax``, ``LogSoftmax`` and ``Softmin`` share (unrelated classes in PyTorch)."""

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_OverDim):
    """Softmax over ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return input.softmax(_implicit_dim(input, self.dim))


class LogSoftmax(_OverDim):
    """Log-softmax over ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return input.log_softmax(_implicit_dim(input, self.dim))


class Softmin(_OverDim):
    """Softmax of ``-x`` over ``dim``."""

    def forward(self, input: Tensor) -> Tensor:
        return fn.softmin(input, _implicit_dim(input, self.dim))
