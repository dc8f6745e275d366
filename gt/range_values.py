"""The values of ``linspace`` and ``logspace`` ranges as PyTorch's CPU kernels compute them, to the
last bit: real ranges from both ends, complex ones part by part, complex ``logspace`` through its
exponents. Pure NumPy on the client (the values are uploaded), used by :mod:`gt.factories` and
:mod:`gt.torch_functions`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from gt import shapes as S


def complex_linspace_values(start: complex, end: complex, steps: int, dtype: str) -> np.ndarray:
    """PyTorch's CPU ``linspace`` of a complex dtype: its step is the real and imaginary parts'
    steps, so each part is the real ``linspace`` of the parts (:func:`linspace_values`), to the
    last bit (checked against PyTorch 2.13 on random ends and lengths)."""
    real = S.REAL_OF[dtype]
    t = np.dtype(real).type
    with np.errstate(over="ignore", invalid="ignore"):
        re = linspace_values(float(t(start.real)), float(t(end.real)), steps, real)
        im = linspace_values(float(t(start.imag)), float(t(end.imag)), steps, real)
    out = np.empty(steps, dtype)
    out.real, out.imag = re, im
    return out


def linspace_values(start: float, end: float, steps: int, dtype: str) -> np.ndarray:
    """PyTorch's CPU ``linspace`` to the last bit: ``step = (end - start) / (steps - 1)`` in the
    dtype, then ``start + step * i`` on the first half and ``end - step * (steps - 1 - i)`` on the
    second, each rounded once (the kernel is compiled with fused multiply-adds), so worked out in
    extended precision. Sampling grids built with ``linspace`` (``meshgrid`` + ``grid_sample``
    warps) put points on pixel centres, where a last-bit difference moves the gradient."""
    t = np.dtype(dtype).type
    if steps == 1:
        return np.array([start], dtype)
    first, last = t(start), t(end)
    step = np.longdouble(t(t(last - first) / t(steps - 1)))
    i = np.arange(steps)
    lo = np.longdouble(first) + step * i
    hi = np.longdouble(last) - step * (steps - 1 - i)
    return np.where(i < steps // 2, lo, hi).astype(dtype)


def complex_logspace_values(start: Any, end: Any, steps: int, base: float,
                             dtype: str) -> np.ndarray:  # fmt: skip
    """PyTorch's CPU ``logspace`` of a complex dtype, to the last bit (checked against PyTorch
    2.13 on random ends, lengths and bases): the exponents ``start + step * i`` (first half) and
    ``end - step * (steps - 1 - i)`` (second half) in the dtype, the step being the difference
    times ``1 / (steps - 1)`` (its complex division by a real number), then
    ``exp(exponent * log(base))``; a single value is ``base ** start`` worked out in double."""
    c = np.dtype(dtype).type
    r = np.dtype(S.REAL_OF[dtype]).type
    if steps == 1:
        one = np.empty(1, np.complex128)  # (``complex`` here is PyTorch's function)
        if base > 0:
            rho, theta = math.pow(base, start.real), start.imag * math.log(base)
            one.real, one.imag = rho * math.cos(theta), rho * math.sin(theta)
        else:
            one[0] = np.exp(np.complex128(start) * np.log(np.complex128(base)))
        return one.astype(dtype)
    with np.errstate(all="ignore"):
        s, e = c(start), c(end)
        inv = r(1) / r(max(steps - 1, 1))
        d = e - s
        step_re, step_im = r(d.real) * inv, r(d.imag) * inv
        i = np.arange(steps)
        k = (steps - 1 - i).astype(r)
        low = i < steps // 2
        exps = np.empty(steps, dtype)
        exps.real = np.where(low, s.real + step_re * i.astype(r), e.real - step_re * k)
        exps.imag = np.where(low, s.imag + step_im * i.astype(r), e.imag - step_im * k)
        return np.exp(exps * np.log(c(base)))
