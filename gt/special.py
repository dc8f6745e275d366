"""``gt.special``: the functions of ``torch.special`` that ported code reaches for, composed from GT's
differentiable ops (so each works on every worker and has gradients).

The orthogonal polynomials are in :mod:`gt.ops.polynomials`.
"""

from __future__ import annotations

import math
from typing import Any

from gt import shapes as S
from gt.custom_function import Function
from gt.grad_graph import label
from gt.ops import functional as _functional
from gt.ops.arith import where
from gt.ops.polynomials import *  # noqa: F403 - the orthogonal polynomials
from gt.ops.polynomials import __all__ as _polynomials
from gt.runtime.ops import special_more as _special_more
from gt.runtime.ops.base import sum_to
from gt.tensor import Tensor

__all__ = [
    "airy_ai",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfcx",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammainc",
    "gammaincc",
    "gammaln",
    "i0",
    "i0e",
    "i1",
    "i1e",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "modified_bessel_i0",
    "modified_bessel_i1",
    "multigammaln",
    "ndtr",
    "ndtri",
    "polygamma",
    "psi",
    "round",
    "sinc",
    "softmax",
    "spherical_bessel_j0",
    "xlog1py",
    "xlogy",
    "zeta",
    *_polynomials,
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
    """``1 - erf(x)``, accurate in the upper tail (see :meth:`gt.Tensor.erfc`)."""
    return input.erfc()


def ndtr(input: Tensor) -> Tensor:
    """The standard normal's cumulative distribution function."""
    return label(0.5 * (1.0 + (input * _SQRT1_2).erf()), "MulBackward1")


def _log_ndtr_value(x: Tensor) -> Tensor:
    """``log(ndtr(x))`` as PyTorch computes it: ``log(erfcx(-x/sqrt2) / 2) - x^2/2`` below -1,
    ``log1p(-erfc(x/sqrt2) / 2)`` above (``erfc`` as ``erfcx(t) exp(-t^2)``, exact in the upper
    tail where ``1 - erf`` is not); each branch on its own clamped half, so both stay finite."""
    t = x * _SQRT1_2
    low, high = t.clamp(max=-_SQRT1_2), t.clamp(min=-_SQRT1_2)
    tail = (erfcx(-low) * 0.5).log() - low * low
    body = (erfcx(high) * (-(high * high)).exp() * -0.5).log1p()
    return where(x < -1.0, tail, body)


class _LogNdtr(Function):
    """``log_ndtr`` with PyTorch's derivative ``exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi)``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        out = _log_ndtr_value(x)
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        x, out = ctx.saved_tensors
        return g * (-0.5 * x * x - out).exp() * (1.0 / math.sqrt(2.0 * math.pi))


def log_ndtr(input: Tensor) -> Tensor:
    """``log(ndtr(x))``, accurate in both tails (see :func:`_log_ndtr_value`)."""
    return label(_LogNdtr.apply(_float(input)), "SpecialLogNdtrBackward0")


class _Ndtri(Function):
    """``ndtri`` with PyTorch's derivative ``sqrt(2 pi) exp(ndtri(p)^2 / 2)``."""

    @staticmethod
    def forward(ctx: Any, p: Tensor) -> Tensor:
        wide = p if p.dtype == "float64" else p.to("float64")
        central = (2.0 * wide - 1.0).erfinv() * math.sqrt(2.0)
        # The tails, where 2p - 1 rounds to -1 or 1: Newton's method on log(ndtr(x)) = log(q),
        # q the smaller of p and 1 - p, from -sqrt(-2 log q) (left of the root, where the
        # concave log(ndtr) makes every step stay left of it and converge).
        q = where(wide > 0.5, 1.0 - wide, wide)
        tail = (q > 0.0) & (q < 0.05)
        log_q = where(tail, q, 0.01).log()
        x = -((-2.0 * log_q).sqrt())
        for _ in range(5):
            lnd = _log_ndtr_value(x)
            x = x - (lnd - log_q) * (0.5 * x * x + lnd).exp() * math.sqrt(2.0 * math.pi)
        out = where(tail, where(wide > 0.5, -x, x), central).to(p.dtype)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (out,) = ctx.saved_tensors
        return g * (0.5 * out * out).exp() * math.sqrt(2.0 * math.pi)


def ndtri(input: Tensor) -> Tensor:
    """The standard normal's quantile function (the inverse of :func:`ndtr`), accurate in the
    tails (down to the smallest ``p``, where ``sqrt(2) erfinv(2p - 1)`` gives -inf)."""
    return _Ndtri.apply(_float(input))


def gammaln(input: Tensor) -> Tensor:
    """``log|Gamma(x)|``."""
    return input.lgamma()


def digamma(input: Tensor) -> Tensor:
    """``psi(x)``, the derivative of :func:`gammaln`."""
    return input.digamma()


psi = digamma


def polygamma(n: int, input: Tensor) -> Tensor:
    """The ``n``-th derivative of :func:`digamma`."""
    return input.polygamma(n)


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension ``p`` (``torch.mvlgamma``)."""
    return _functional.mvlgamma(input, p)


def _float(x: Tensor) -> Tensor:
    if x.is_complex():
        raise TypeError("gt.special's functions take real tensors, not complex ones")
    return x if x.is_floating_point() else x.float()


def i0(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 0."""
    return input.i0()


def i0e(input: Tensor) -> Tensor:
    """``exp(-|x|) * i0(x)`` (no overflow for large ``|x|``)."""
    x = _float(input)
    return x._apply("i0e", [x])


def i1(input: Tensor) -> Tensor:
    """The modified Bessel function of the first kind, order 1."""
    x = _float(input)
    return x._apply("i1", [x])


def i1e(input: Tensor) -> Tensor:
    """``exp(-|x|) * i1(x)``."""
    x = _float(input)
    return x._apply("i1e", [x])


def modified_bessel_i0(input: Tensor) -> Tensor:
    """``I0(x)`` (the same as :func:`i0`)."""
    return i0(input)


def modified_bessel_i1(input: Tensor) -> Tensor:
    """``I1(x)`` (the same as :func:`i1`)."""
    return i1(input)


def spherical_bessel_j0(input: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, ``sin(x) / x`` (1 at 0)."""
    x = _float(input)
    safe = where(x == 0, x * 0 + 1, x)  # (no 0/0 in the branch not taken)
    return where(x == 0, x * 0 + 1, safe.sin() / safe)


def _bessel(name: str, doc: str) -> Any:
    def fn(input: Tensor) -> Tensor:
        x = _float(input)
        return x._apply(name, [x], grad=False)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc + " (no derivative, as in PyTorch)."
    return fn


bessel_j0 = _bessel("bessel_j0", "The Bessel function of the first kind of order 0")
bessel_j1 = _bessel("bessel_j1", "The Bessel function of the first kind of order 1")
bessel_y0 = _bessel("bessel_y0", "The Bessel function of the second kind of order 0")
bessel_y1 = _bessel("bessel_y1", "The Bessel function of the second kind of order 1")
modified_bessel_k0 = _bessel(
    "bessel_k0", "The modified Bessel function of the second kind, order 0"
)
modified_bessel_k1 = _bessel(
    "bessel_k1", "The modified Bessel function of the second kind, order 1"
)
scaled_modified_bessel_k0 = _bessel("bessel_k0e", "``exp(x) * modified_bessel_k0(x)``")
scaled_modified_bessel_k1 = _bessel("bessel_k1e", "``exp(x) * modified_bessel_k1(x)``")


def airy_ai(input: Tensor) -> Tensor:
    """The Airy function ``Ai(x)``, the solution of ``y'' = x y`` that decays as ``x -> inf``.

    Computed in float64 on the workers and rounded to the input's dtype (integers give float32):
    within a few ulps of the exact value on ``[-30, 30]`` (relative to ``|Ai|``, or to its
    envelope where it oscillates, for ``x < 0``); see :mod:`gt.runtime.ops.airy`. NaN at
    ``+-inf`` and 0 past ``x = 103.892``, as PyTorch. Like PyTorch's, it has no derivative: the
    result does not require grad.

    Raises:
        TypeError: a complex or half-precision tensor (PyTorch has no kernel for those).
    """
    x = _float(input)
    if x.dtype not in ("float32", "float64"):
        raise TypeError(f'"airy_ai" not implemented for {x.dtype!r} (float32 and float64 only)')
    return x._apply("airy_ai", [x], grad=False)


def erfcx(input: Tensor) -> Tensor:
    """The scaled complementary error function ``exp(x^2) * erfc(x)``."""
    x = _float(input)
    return x._apply("erfcx", [x])


def zeta(input: Any, other: Any) -> Tensor:
    """The Hurwitz zeta function ``sum_k (k + other) ** -input`` (either may be a number)."""
    return _special_more.binary_api("zeta")(input, other)


def gammainc(input: Any, other: Any) -> Tensor:
    """The regularised lower incomplete gamma function ``P(input, other)``."""
    return _special_more.binary_api("gammainc")(input, other)


def gammaincc(input: Any, other: Any) -> Tensor:
    """The regularised upper incomplete gamma function ``Q(input, other) = 1 - P``."""
    return _special_more.binary_api("gammaincc")(input, other)


def erfinv(input: Tensor) -> Tensor:
    """The inverse error function on ``[-1, 1]``."""
    return input.erfinv()


def exp2(input: Tensor) -> Tensor:
    """``2 ** x``."""
    return input.exp2()


def expm1(input: Tensor) -> Tensor:
    """``exp(x) - 1``, exact for tiny ``x``."""
    return input.expm1()


def log1p(input: Tensor) -> Tensor:
    """``log(1 + x)``, exact for tiny ``x``."""
    return input.log1p()


class _XLogY(Function):
    """``x * log(y)`` (``log1p`` with ``one_plus``) with PyTorch's derivatives: ``log(y)`` for
    ``x`` even where ``x`` is 0 (0 only where also ``y <= 0``), and ``x / y`` for ``y``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, y: Tensor, one_plus: bool) -> Tensor:
        ctx.save_for_backward(x, y)
        ctx.one_plus = one_plus
        # where x is 0 the result is 0 (+0, and 0 for y = inf too), unless y is NaN
        safe = where(x == 0, 0.0 if one_plus else 1.0, y)
        value = where(x == 0, 0.0, x * (safe.log1p() if one_plus else safe.log()))
        return where(y != y, y, value)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple:
        x, y = ctx.saved_tensors
        gx = gy = None
        if ctx.needs_input_grad[0]:
            edge = -1.0 if ctx.one_plus else 0.0
            off = (x == 0) & (y <= edge)  # PyTorch's derivative is 0 there
            safe = where(off, y * 0 + edge + 1.0, y)
            gx = sum_to(
                where(off, g * 0, g * (safe.log1p() if ctx.one_plus else safe.log())), x.shape
            )
        if ctx.needs_input_grad[1]:
            gy = sum_to(g * x / ((y + 1.0) if ctx.one_plus else y), y.shape)
        return gx, gy, None


def xlogy(input: Any, other: Any) -> Tensor:
    """``x * log(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN), as PyTorch."""
    x, y = _pair(input, other)
    return _XLogY.apply(x, y, False)


def xlog1py(input: Any, other: Any) -> Tensor:
    """``x * log1p(y)``, 0 where ``x == 0`` (NaN where ``y`` is NaN), as PyTorch."""
    x, y = _pair(input, other)
    return label(_XLogY.apply(x, y, True), "SpecialXlog1PyBackward0")


class _Entr(Function):
    """``entr`` with PyTorch's derivative ``-(1 + log x)``: ``+inf`` at 0 (a composition of
    ``where``s would give 0 there, and NaN from the branch not taken)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor) -> Tensor:
        ctx.save_for_backward(x)
        positive = x > 0
        safe = where(positive, x, x * 0 + 1)  # (-1 log 1 = 0 where the value is not used)
        # 0 (not -0.0) at 0, -inf below (-inf too), NaN for NaN
        below = where(x != x, x, math.inf * -1.0)
        return where(positive, -safe * safe.log(), where(x == 0, 0.0, below))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> Tensor:
        (x,) = ctx.saved_tensors
        return g * -(1.0 + x.log())


def entr(input: Tensor) -> Tensor:
    """Elementwise entropy: ``-x log x`` for ``x > 0``, 0 at 0, ``-inf`` below."""
    return label(_Entr.apply(input), "SpecialEntrBackward0")


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
    """Both operands as tensors of one connection and of their common floating dtype (a Python
    number becomes a 0-d one; integers become float32), as PyTorch promotes them."""
    if isinstance(input, Tensor) and isinstance(other, Tensor):
        dtype = S.promote_operands(input.dtype, input.ndim, other.dtype, other.ndim)
    else:
        t, number = (input, other) if isinstance(input, Tensor) else (other, input)
        dtype = S.promote_scalar(t.dtype, number)
    if dtype not in S.FLOAT_DTYPES:
        dtype = S.DEFAULT_FLOAT
    if not isinstance(input, Tensor):
        input = other.new_full((), float(input), dtype)
    if not isinstance(other, Tensor):
        other = input.new_full((), float(other), dtype)
    return input.to(dtype), other.to(dtype)
