"""``gt.fft``: PyTorch's discrete Fourier transforms, on the workers (NumPy's or CuPy's FFTs).

Every transform is one primitive (``fft`` in the op registry) whose attributes say which kind --
complex-to-complex, real-to-complex (one-sided), complex-to-real -- over which dimensions, padded
or cut to which lengths, and scaled how (``norm``: ``"backward"``, the default, scales the inverse
by ``1/n``; ``"forward"`` the forward; ``"ortho"`` both by ``1/sqrt(n)``). Each is differentiable,
twice, with PyTorch's gradients.

Dtypes as in PyTorch: real inputs give ``complex64`` (``complex128`` from float64); integers
become float32 first. float16 and bfloat16 are computed in float32 (PyTorch computes them in half
precision on GPUs only, for powers of two).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gt import shapes as S
from gt.factories import arange
from gt.grad_graph import label
from gt.ops.autocast import mark_namespace
from gt.tensor import Tensor

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "hfft2", "hfftn", "ifft", "ifft2", "ifftn",
    "ifftshift", "ihfft", "ihfft2", "ihfftn", "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]  # fmt: skip

_NORMS = ("backward", "forward", "ortho")
_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _norm(norm: str | None, op: str) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise RuntimeError(
            f'{op}: Invalid normalization mode: "{norm}" (one of {", ".join(_NORMS)})'
        )
    return norm


def _real_input(x: Tensor, op: str) -> Tensor:
    if x.dtype in S.COMPLEX_DTYPES:
        raise RuntimeError(f"{op} expects a real input tensor, but got {x.dtype}")
    return x if x.dtype in ("float32", "float64") else x.to("float32")


def _complex_input(x: Tensor) -> Tensor:
    if x.dtype in S.COMPLEX_DTYPES:
        return x
    return x.to(S.complex_of(x.dtype if x.dtype == "float64" else "float32"))


def _axes_and_sizes(x: Tensor, s: Any, dim: Any, op: str) -> tuple[list[int], list[int]]:
    """The dimensions to transform and the signal length along each (``-1``: the input's)."""
    if isinstance(dim, int):
        dim = (dim,)
    if isinstance(s, int):
        s = (s,)
    if dim is None:
        dim = range(x.ndim) if s is None else range(x.ndim - len(s), x.ndim)
    axes = [S.normalize_axis(int(d), x.ndim, op) for d in dim]
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"{op}: FFT dims must be unique, got {list(dim)}")
    if s is None:
        sizes = [x.shape[a] for a in axes]
    else:
        if len(s) != len(axes):
            raise RuntimeError(
                f"{op}: When given, dim and shape arguments must have the same length (got s of "
                f"length {len(s)} for {len(axes)} dims)"
            )
        sizes = [x.shape[a] if int(n) == -1 else int(n) for n, a in zip(s, axes)]
    for n in sizes:
        if n < 1:
            raise RuntimeError(f"{op}: Invalid number of data points ({n}) specified")
    return axes, sizes


def _emit(x: Tensor, kind: str, axes: list, sizes: list, norm: str, inverse: bool, dtype: str,
          real: bool = False) -> Tensor:  # fmt: skip
    attrs = {"kind": kind, "axes": axes, "s": sizes, "norm": norm, "inverse": inverse,
             "dtype": dtype}  # fmt: skip
    if real:  # a real signal made complex: its self-conjugate bins are real (the kernel says so)
        attrs["real"] = True
    return x._apply("fft", [x], attrs)


def _c2c(x: Tensor, s: Any, dim: Any, norm: str | None, inverse: bool, op: str) -> Tensor:
    real = x.dtype not in S.COMPLEX_DTYPES
    x = _complex_input(x)
    axes, sizes = _axes_and_sizes(x, s, dim, op)
    out = _emit(x, "c2c", axes, sizes, _norm(norm, op), inverse, x.dtype, real)
    if not real or len(axes) > 1:
        return out
    # (PyTorch transforms a real input along one axis one-sided and fills in the rest, the
    # inverse as the conjugate of the forward: its nodes say so)
    return label(out, "ConjBackward0" if inverse else "FftR2CBackward0")


def _r2c(x: Tensor, s: Any, dim: Any, norm: str | None, op: str) -> Tensor:
    x = _real_input(x, op)
    axes, sizes = _axes_and_sizes(x, s, dim, op)
    return _emit(x, "r2c", axes, sizes, _norm(norm, op), False, S.complex_of(x.dtype))


def _c2r(x: Tensor, s: Any, dim: Any, norm: str | None, op: str) -> Tensor:
    x = _complex_input(x)
    axes, sizes = _axes_and_sizes(x, s, dim, op)
    if s is None or (isinstance(s, Sequence) and int(s[-1]) == -1):
        sizes[-1] = 2 * (x.shape[axes[-1]] - 1)  # the default: an even-length signal
        if sizes[-1] < 1:
            raise RuntimeError(f"{op}: Invalid number of data points ({sizes[-1]}) specified")
    return _emit(x, "c2r", axes, sizes, _norm(norm, op), True, S.REAL_OF[x.dtype])


# ----------------------------------------------------------------------------- the transforms
def fft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The 1-d discrete Fourier transform along ``dim`` (padded or cut to ``n`` first)."""
    return _c2c(input, n, dim, norm, False, "fft_fft")


def ifft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`fft`."""
    return _c2c(input, n, dim, norm, True, "fft_ifft")


def fft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """The 2-d transform over ``dim`` (the last two by default)."""
    return _c2c(input, s, dim, norm, False, "fft_fft2")


def ifft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`fft2`."""
    return _c2c(input, s, dim, norm, True, "fft_ifft2")


def fftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The n-d transform over ``dim`` (all dimensions, or the last ``len(s)``, by default)."""
    return _c2c(input, s, dim, norm, False, "fft_fftn")


def ifftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`fftn`."""
    return _c2c(input, s, dim, norm, True, "fft_ifftn")


def rfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The transform of a real signal: the ``n // 2 + 1`` non-negative frequencies."""
    return _r2c(input, n, dim, norm, "fft_rfft")


def irfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfft`: a real signal of length ``n`` (default ``2 * (m - 1)``)."""
    return _c2r(input, n, dim, norm, "fft_irfft")


def rfft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """:func:`rfftn` over two dimensions."""
    return _r2c(input, s, dim, norm, "fft_rfft2")


def irfft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfft2`."""
    return _c2r(input, s, dim, norm, "fft_irfft2")


def rfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The n-d transform of a real signal, one-sided in the last dimension."""
    return _r2c(input, s, dim, norm, "fft_rfftn")


def irfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`rfftn`."""
    return _c2r(input, s, dim, norm, "fft_irfftn")


def hfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The transform of a Hermitian-symmetric signal given by its one-sided half: real."""
    norm = _DUAL[_norm(norm, "fft_hfft")]
    return _c2r(_complex_input(input).conj(), n, dim, norm, "fft_hfft")


def ihfft(input: Tensor, n: int | None = None, dim: int = -1, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfft`: the one-sided half of a real signal's inverse transform."""
    norm = _DUAL[_norm(norm, "fft_ihfft")]
    return _r2c(input, n, dim, norm, "fft_ihfft").conj()


def _ihfft_input(x: Tensor, op: str) -> Tensor:
    if x.dtype in S.COMPLEX_DTYPES:
        name = {"complex64": "ComplexFloat", "complex128": "ComplexDouble"}.get(x.dtype, x.dtype)
        raise RuntimeError(f"{op}: Only supports floating-point dtypes, but found: {name}")
    return x


def hfft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """:func:`hfftn` over two dimensions (the last two by default)."""
    norm = _DUAL[_norm(norm, "fft_hfft2")]
    return _c2r(_complex_input(input).conj(), s, dim, norm, "fft_hfft2")


def hfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The n-d transform of a signal Hermitian-symmetric in the last of ``dim``, given by its
    one-sided half: real, of length ``2 * (m - 1)`` there by default (``irfftn`` of the conjugate,
    normalised the other way)."""
    norm = _DUAL[_norm(norm, "fft_hfftn")]
    return _c2r(_complex_input(input).conj(), s, dim, norm, "fft_hfftn")


def ihfft2(input: Tensor, s: Any = None, dim: Any = (-2, -1), norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfft2`."""
    norm = _DUAL[_norm(norm, "fft_ihfft2")]
    return _r2c(_ihfft_input(input, "fft_ihfft2"), s, dim, norm, "fft_ihfft2").conj()


def ihfftn(input: Tensor, s: Any = None, dim: Any = None, norm: str | None = None) -> Tensor:
    """The inverse of :func:`hfftn`: the one-sided half (in the last of ``dim``) of a real
    signal's n-d inverse transform (``rfftn``'s conjugate, normalised the other way)."""
    norm = _DUAL[_norm(norm, "fft_ihfftn")]
    return _r2c(_ihfft_input(input, "fft_ihfftn"), s, dim, norm, "fft_ihfftn").conj()


# ----------------------------------------------------------------------------- helpers
def fftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
            requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The sample frequencies of an ``n``-point transform with sample spacing ``d``:
    ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``."""
    k = arange(n, dtype="int64")
    k = k - (k >= (n + 1) // 2).to("int64") * n
    # (times the reciprocal, as PyTorch computes it: a division would round differently)
    out = (k.to(S.canonical_dtype(dtype)) * _reciprocal(d * n)).to(S.canonical_dtype(dtype))
    return out.requires_grad_(requires_grad) if requires_grad else out


def rfftfreq(n: int, d: float = 1.0, *, dtype: Any = None, device: Any = None,
             requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The sample frequencies of :func:`rfft` of an ``n``-point signal: ``[0, ..., n // 2] / (d * n)``."""
    out = (arange(n // 2 + 1, dtype=S.canonical_dtype(dtype)) * _reciprocal(d * n)).to(
        S.canonical_dtype(dtype)
    )
    return out.requires_grad_(requires_grad) if requires_grad else out


def _reciprocal(v: float) -> float:
    """``1 / v``, infinite for 0 (``fftfreq(4, d=0)``: PyTorch's NaN and infinities)."""
    return 1.0 / v if v else math.inf


def _dims(x: Tensor, dim: Any) -> list[int]:
    if dim is None:
        return list(range(x.ndim))
    return [int(dim)] if isinstance(dim, int) else [int(d) for d in dim]


def fftshift(input: Tensor, dim: Any = None) -> Tensor:
    """The zero frequency moved to the centre (a roll by ``n // 2`` along each of ``dim``)."""
    dims = _dims(input, dim)
    return input.roll([input.shape[d] // 2 for d in dims], dims)


def ifftshift(input: Tensor, dim: Any = None) -> Tensor:
    """The inverse of :func:`fftshift`."""
    dims = _dims(input, dim)
    return input.roll([-(input.shape[d] // 2) for d in dims], dims)


# PyTorch's CPU autocast computes every transform in float32 (not the frequency helpers)
mark_namespace(
    globals(), [n for n in __all__ if "freq" not in n and "shift" not in n], lambda n: "fft"
)
