"""``torch.signal.windows``, reached as ``gt.signal.windows`` (``gt.signal`` is GT's module for
naming parts of a program; it hands this one out under PyTorch's name).

Each window is computed on the host in float64 from its definition (SciPy's and PyTorch's:
``sym=True`` gives the symmetric window of ``M`` points, ``sym=False`` the periodic one, the
first ``M`` points of ``M + 1``) and uploaded in ``dtype`` (the default float dtype).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt.factories import tensor


def _out(values: np.ndarray, dtype: Any, requires_grad: bool) -> Any:
    from gt.ops.typeinfo import get_default_dtype  # noqa: PLC0415 - set_default_dtype moves it

    return tensor(values, dtype=dtype or get_default_dtype(), requires_grad=requires_grad)


def _check(name: str, m: int) -> None:
    if m < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={m}")


def _span(m: int, sym: bool) -> int:
    """The denominator of the window's positions: ``M - 1`` (symmetric) or ``M`` (periodic)."""
    return m if not sym and m > 1 else m - 1


def general_cosine(M: int, *, a: Any, sym: bool = True, dtype: Any = None, layout: Any = None,
                   device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``sum_i (-1)^i a[i] cos(2 pi i n / span)``."""
    _check("general_cosine", M)
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    k = np.arange(M) * (2.0 * math.pi / _span(M, sym))
    w = sum((-1) ** i * float(c) * np.cos(i * k) for i, c in enumerate(a))
    return _out(np.asarray(w, dtype=np.float64), dtype, requires_grad)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, dtype: Any = None,
                    layout: Any = None, device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``alpha - (1 - alpha) cos(2 pi n / span)``."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, dtype=dtype,
                          requires_grad=requires_grad)  # fmt: skip


def hann(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None, device: Any = None,
         requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """The Hann window."""
    return general_hamming(M, alpha=0.5, sym=sym, dtype=dtype, requires_grad=requires_grad)


def hamming(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
            device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """The Hamming window."""
    return general_hamming(M, sym=sym, dtype=dtype, requires_grad=requires_grad)


def blackman(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """The Blackman window."""
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, dtype=dtype,
                          requires_grad=requires_grad)  # fmt: skip


def nuttall(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
            device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """Nuttall's minimum 4-term Blackman-Harris window."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym,
                          dtype=dtype, requires_grad=requires_grad)  # fmt: skip


def bartlett(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
             device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """The triangular window reaching zero at both ends."""
    _check("bartlett", M)
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    k = np.arange(M) * (2.0 / _span(M, sym))
    return _out(1.0 - np.abs(k - 1.0), dtype, requires_grad)


def cosine(M: int, *, sym: bool = True, dtype: Any = None, layout: Any = None,
           device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``sin(pi (n + 1/2) / (span + 1))``: the sine window."""
    _check("cosine", M)
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    return _out(np.sin((np.arange(M) + 0.5) * c), dtype, requires_grad)


def exponential(M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True,
                dtype: Any = None, layout: Any = None, device: Any = None,
                requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``exp(-|n - center| / tau)``."""
    _check("exponential", M)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    mid = _span(M, sym) / 2.0 if center is None else float(center)
    return _out(np.exp(-np.abs(np.arange(M) - mid) / tau), dtype, requires_grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, dtype: Any = None,
             layout: Any = None, device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``exp(-(n - mid)^2 / (2 std^2))``."""
    _check("gaussian", M)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    k = (np.arange(M) - _span(M, sym) / 2.0) / (std * math.sqrt(2.0))
    return _out(np.exp(-(k**2)), dtype, requires_grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, dtype: Any = None,
           layout: Any = None, device: Any = None, requires_grad: bool = False) -> Any:  # noqa: N803  # fmt: skip
    """``I0(beta sqrt(1 - (2n/span - 1)^2)) / I0(beta)``."""
    _check("kaiser", M)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _out(np.ones(M), dtype, requires_grad)
    k = np.minimum(-beta + np.arange(M) * (2.0 * beta / _span(M, sym)), beta)
    return _out(np.i0(np.sqrt(np.maximum(beta * beta - k * k, 0.0))) / np.i0(beta), dtype,
                requires_grad)  # fmt: skip


__all__ = ["bartlett", "blackman", "cosine", "exponential", "gaussian", "general_cosine",
           "general_hamming", "hamming", "hann", "kaiser", "nuttall"]  # fmt: skip
