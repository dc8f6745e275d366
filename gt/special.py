"""``gt.special``: the functions of ``torch.special`` that ported code reaches for, composed from GT's
differentiable ops (so each works on every worker and has gradients).

Not here: the gamma family (``gammaln``, ``digamma``, ``polygamma``), ``erfinv``, Bessel
functions and ``zeta``; GT has no kernels for them yet.
"""

from __future__ import annotations

import math
from typing import Any

from gt.custom_function import Function
from gt.ops.arith import where
from gt.tensor import Tensor

__all__ = [
    "entr",
    "erf",
    "erfc",
    "exp2",
    "expit",
    "expm1",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]

_SQRT1_2 = 1.0 / math.sqrt(2.0)


def expit(input: Tensor) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))``."""
    return input.sigmoid()


def logit(input: Tensor, eps: float | None = None) -> Tensor:
    """``log(p / (1 - p))``, with ``p`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return input.logit(eps)


def erf(input: Tensor) -> Tensor:
    """The error function."""
    return input.erf()


def erfc(input: Tensor) -> Tensor:
    """``1 - erf(x)``."""
    return 1.0 - input.erf()


def ndtr(input: Tensor) -> Tensor:
    """The standard normal's cumulative distribution function."""
    return 0.5 * (1.0 + (input * _SQRT1_2).erf())


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``. For ``x < -5``, where ``ndtr`` underflows, the asymptotic series
    ``-x^2/2 - log(-x) - log(2 pi)/2 + log(1 - 1/x^2 + 3/x^4)`` (error below 1e-6 relative)."""
    safe = input.clamp(max=-5.0)  # (the tail branch must stay finite where it is not used)
    x2 = safe * safe
    tail = -0.5 * x2 - (-safe).log() - 0.5 * math.log(2 * math.pi)
    tail = tail + (1.0 - 1.0 / x2 + 3.0 / (x2 * x2)).log()
    body = ndtr(input.clamp(min=-5.0)).log()
    return where(input < -5.0, tail, body)


def exp2(input: Tensor) -> Tensor:
    """``2 ** x``."""
    return input.exp2()


def expm1(input: Tensor) -> Tensor:
    """``exp(x) - 1``, exact for tiny ``x``."""
    return input.expm1()


def log1p(input: Tensor) -> Tensor:
    """``log(1 + x)``, exact for tiny ``x``."""
    return input.log1p()


def xlogy(input: Any, other: Any) -> Tensor:
    """``x * log(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN), as PyTorch."""
    x, y = _pair(input, other)
    value = x * where(x == 0, y * 0 + 1, y).log()  # (log(1) = 0 where x is 0: no 0 * -inf)
    return where(y != y, y, value)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``x * log1p(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN), as PyTorch."""
    x, y = _pair(input, other)
    value = x * where(x == 0, y * 0, y).log1p()
    return where(y != y, y, value)


class _Entr(Function):
    """``entr`` with PyTorch's derivative ``-(1 + log x)``: ``+inf`` at 0 (a composition of
    ``where``s would give 0 there, and NaN from the branch not taken)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        positive = x > 0
        safe = where(positive, x, x * 0 + 1)  # (-1 log 1 = 0 where the value is not used)
        return where(positive | (x == 0), -safe * safe.log(), x * 0 - math.inf)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * -(1.0 + x.log())


def entr(input: Tensor) -> Tensor:
    """Elementwise entropy: ``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` below."""
    return _Entr.apply(input)


def sinc(input: Tensor) -> Tensor:
    """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0."""
    px = input * math.pi
    nonzero = where(input == 0, input * 0 + 1, px)  # (no 0/0 in the branch not taken)
    return where(input == 0, input * 0 + 1, nonzero.sin() / nonzero)


def round(input: Tensor, decimals: int = 0) -> Tensor:  # noqa: A001 - PyTorch's name
    """Round half to even, to ``decimals`` places."""
    return input.round(decimals=decimals) if decimals else input.round()


def logsumexp(input: Tensor, dim: Any, keepdim: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` along ``dim``, stable."""
    return input.logsumexp(dim, keepdim=keepdim)


def softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Softmax along ``dim`` (in ``dtype`` if given)."""
    return (input if dtype is None else input.to(dtype)).softmax(dim)


def log_softmax(input: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """Log-softmax along ``dim`` (in ``dtype`` if given)."""
    return (input if dtype is None else input.to(dtype)).log_softmax(dim)


def _pair(input: Any, other: Any) -> tuple[Any, Any]:
    """Both operands as tensors of one connection (a Python number becomes one like the other)."""
    if not isinstance(input, Tensor):
        input = other.new_full((), float(input))
    if not isinstance(other, Tensor):
        other = input.new_full((), float(other))
    return input, other
