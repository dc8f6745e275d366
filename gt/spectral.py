"""``gt.stft`` and ``gt.istft``: the short-time Fourier transform and its inverse, as PyTorch
computes them, composed from framing (``unfold``), a window, ``gt.fft`` and overlap-add (``fold``).

The frames are cut on the workers, so a spectrogram is a few instructions whatever its length,
and both directions are differentiable through their parts.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from gt import fft as _fft
from gt import shapes as S
from gt.factories import tensor
from gt.grad_graph import label
from gt.nn.convolution import fold, pad
from gt.ops.autocast import autocast_op
from gt.tensor import Tensor

__all__ = ["bartlett_window", "blackman_window", "hamming_window", "hann_window", "istft",
           "kaiser_window", "stft"]  # fmt: skip


# ----------------------------------------------------------------------------- windows
def _make_window(name: str, length: int, periodic: bool, dtype: Any, requires_grad: bool,
                 formula: Any) -> Tensor:  # fmt: skip
    """A window of ``length`` from ``formula(n, m)`` (``n = 0..m``) on the host, in float64 and
    then ``dtype``; a periodic window is the symmetric one of ``length + 1`` without its last."""
    if length < 0:
        raise RuntimeError(
            f"{name} requires non-negative window_length, got window_length={length}"
        )
    dtype = S.canonical_dtype(dtype)
    if dtype not in S.FLOAT_DTYPES:
        raise RuntimeError(f"{name} expects floating point dtypes, got: {dtype}")
    if length <= 1:
        values = np.ones(length)
    else:
        m = length if periodic else length - 1
        values = formula(np.arange(length, dtype=np.float64), m)
    return tensor(values, dtype=dtype, requires_grad=requires_grad)


def hann_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The Hann window: ``0.5 - 0.5 cos(2 pi n / M)``."""
    return _make_window("hann_window", window_length, periodic, dtype, requires_grad,
                        lambda n, m: 0.5 - 0.5 * np.cos(2 * np.pi * n / m))  # fmt: skip


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype: Any = None, requires_grad: bool = False,
                   **_: Any) -> Tensor:  # fmt: skip
    """The Hamming window: ``alpha - beta cos(2 pi n / M)``."""
    return _make_window("hamming_window", window_length, periodic, dtype, requires_grad,
                        lambda n, m: alpha - beta * np.cos(2 * np.pi * n / m))  # fmt: skip


def blackman_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The Blackman window: ``0.42 - 0.5 cos(2 pi n / M) + 0.08 cos(4 pi n / M)``."""
    return _make_window("blackman_window", window_length, periodic, dtype, requires_grad,
                        lambda n, m: 0.42 - 0.5 * np.cos(2 * np.pi * n / m)
                        + 0.08 * np.cos(4 * np.pi * n / m))  # fmt: skip


def bartlett_window(window_length: int, periodic: bool = True, *, dtype: Any = None,
                    requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The Bartlett (triangular) window: ``1 - |2 n / M - 1|``."""
    return _make_window("bartlett_window", window_length, periodic, dtype, requires_grad,
                        lambda n, m: 1 - np.abs(2 * n / m - 1))  # fmt: skip


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype: Any = None, requires_grad: bool = False, **_: Any) -> Tensor:  # fmt: skip
    """The Kaiser window: ``I0(beta sqrt(1 - (2 n / M - 1)^2)) / I0(beta)``."""
    return _make_window("kaiser_window", window_length, periodic, dtype, requires_grad,
                        lambda n, m: np.i0(beta * np.sqrt(np.clip(1 - (2 * n / m - 1) ** 2, 0, None)))
                        / np.i0(beta))  # fmt: skip


def _window(window: Tensor | None, win_length: int, n_fft: int, like: Tensor, op: str) -> Tensor:
    """The window, zero-padded on both sides to ``n_fft`` (ones when none is given)."""
    if window is None:
        real = S.REAL_OF.get(like.dtype, like.dtype)
        window = like.new_ones((win_length,), dtype=real if real in S.FLOAT_DTYPES else "float32")
    if window.ndim != 1 or window.shape[0] != win_length:
        raise RuntimeError(
            f"{op}: expected a 1D window tensor of size equal to win_length={win_length}, but got "
            f"window with size {list(window.shape)}"
        )
    left = (n_fft - win_length) // 2
    if left or n_fft - win_length - left:
        window = pad(window, (left, n_fft - win_length - left))
    return window


def _frame(x: Tensor, n_fft: int, hop: int) -> Tensor:
    """``(batch, 1, length)`` -> ``(batch, n_fft, frames)``: every ``hop``-th window as a column."""
    if x.is_complex():  # (im2col moves real numbers: the two parts, framed alike)
        re, im = _frame(x.real, n_fft, hop), _frame(x.imag, n_fft, hop)
        return re._apply("complex", [re, im])
    return x._apply("im2col", [x], {"kernel": [n_fft], "dilation": [1], "padding": [0],
                                    "stride": [hop]})  # fmt: skip


def _lengths(
    n_fft: int, hop_length: int | None, win_length: int | None, op: str
) -> tuple[int, int]:
    hop = n_fft // 4 if hop_length is None else int(hop_length)
    win = n_fft if win_length is None else int(win_length)
    if n_fft <= 0 or hop <= 0 or not 0 < win <= n_fft:
        raise RuntimeError(
            f"{op}: expected 0 < n_fft, 0 < hop_length and 0 < win_length <= n_fft, but got "
            f"n_fft={n_fft}, hop_length={hop}, win_length={win}"
        )
    return hop, win


@autocast_op("stft")
def stft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
         window: Tensor | None = None, center: bool = True, pad_mode: str = "reflect",
         normalized: bool = False, onesided: bool | None = None,
         return_complex: bool | None = None) -> Tensor:  # fmt: skip
    """The short-time Fourier transform of a 1-d signal or a batch of them: a complex tensor of
    shape ``(batch?, n_fft // 2 + 1 (onesided) or n_fft, frames)``.

    Args:
        n_fft: the frame length of the transform.
        hop_length: the step between frames (``n_fft // 4``).
        win_length, window: a window of that length (ones), zero-padded to ``n_fft``.
        center: pad ``n_fft // 2`` on both sides first, with ``pad_mode`` (``"reflect"``).
        normalized: scale by ``n_fft ** -0.5``.
        onesided: keep the non-negative frequencies only (default for real input and window).
        return_complex: must be given for real inputs (as in PyTorch); ``False`` returns the
            real pairs of ``view_as_real`` (deprecated in PyTorch).
    """
    if return_complex is None:
        if not input.is_complex() and (window is None or not window.is_complex()):
            raise RuntimeError(
                "stft requires the return_complex parameter be given for real inputs, and will "
                "further require that return_complex=True in a future PyTorch release."
            )
        return_complex = True
    if window is None:
        warnings.warn(
            "A window was not provided. A rectangular window will be applied, which is known to "
            "cause spectral leakage. Other windows such as torch.hann_window or "
            "torch.hamming_window are recommended to reduce spectral leakage.",
            stacklevel=2,
        )
    if input.ndim not in (1, 2):
        raise RuntimeError(f"stft: expected a 1D or 2D tensor, but got {input.ndim}D")
    hop, win = _lengths(n_fft, hop_length, win_length, "stft")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    if center:
        half = n_fft // 2
        x = pad(x.reshape(x.shape[0], 1, x.shape[1]), (half, half), mode=pad_mode)
        x = x.reshape(x.shape[0], x.shape[2])
    if x.shape[-1] < n_fft:
        raise RuntimeError(
            f"stft: n_fft={n_fft} is longer than the (padded) signal ({x.shape[-1]})"
        )
    # frames as columns (batch, n_fft, frames): im2col's adjoint (an overlap-add) is its gradient
    cols = _frame(x.reshape(x.shape[0], 1, x.shape[1]), n_fft, hop)
    frames = cols * _window(window, win, n_fft, x, "stft").reshape(n_fft, 1)
    complex_in = frames.is_complex()
    if onesided is None:
        onesided = not complex_in
    if onesided and complex_in:
        raise RuntimeError("Cannot have onesided output if window or input is complex")
    norm = "ortho" if normalized else "backward"
    spec = _fft.rfft(frames, dim=1, norm=norm) if onesided else _fft.fft(frames, dim=1, norm=norm)
    # PyTorch's last op: a squeeze of the batch of one (1-d input), else a transpose
    if input.ndim == 1:
        spec = label(spec.reshape(spec.shape[1:]), "SqueezeBackward4")
    else:
        spec = label(spec, "TransposeBackward1")
    return spec if return_complex else spec._apply("view_as_real", [spec])


def istft(input: Tensor, n_fft: int, hop_length: int | None = None, win_length: int | None = None,
          window: Tensor | None = None, center: bool = True, normalized: bool = False,
          onesided: bool | None = None, length: int | None = None,
          return_complex: bool = False) -> Tensor:  # fmt: skip
    """The inverse of :func:`stft` by windowed overlap-add: the signal (``(batch?, length)``).

    Raises:
        RuntimeError: the window's overlap-add is zero somewhere (it cannot be inverted there).
    """
    if not input.is_complex():
        raise RuntimeError("istft requires a complex-valued input tensor")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"istft: expected a tensor of 2 or 3 dimensions, got {input.ndim}")
    hop, win = _lengths(n_fft, hop_length, win_length, "istft")
    spec = input if input.ndim == 3 else input.reshape(1, *input.shape)
    batch, n_freq, n_frames = spec.shape
    if onesided is None:
        onesided = n_freq != n_fft
    if onesided and n_freq != n_fft // 2 + 1:
        raise RuntimeError(
            f"istft: expected {n_fft // 2 + 1} frequencies of a onesided transform, got {n_freq}"
        )
    norm = "ortho" if normalized else "backward"
    if onesided:  # frames as columns: (batch, n_fft, frames)
        frames = _fft.irfft(spec, n=n_fft, dim=1, norm=norm)
    else:
        frames = _fft.ifft(spec, n=n_fft, dim=1, norm=norm)
        frames = frames if return_complex else frames.real
    w = _window(window, win, n_fft, frames, "istft")
    frames = frames * w.reshape(n_fft, 1)
    total = n_fft + hop * (n_frames - 1)

    def overlap_add(cols: Tensor) -> Tensor:  # (batch, n_fft, frames) -> (batch, total)
        out = fold(cols, output_size=(1, total), kernel_size=(1, n_fft), stride=(1, hop))
        return out.reshape(cols.shape[0], total)

    if frames.is_complex():
        re, im = overlap_add(frames.real), overlap_add(frames.imag)
        y = re._apply("complex", [re, im])
    else:
        y = overlap_add(frames)
    envelope = overlap_add((w * w).reshape(1, n_fft, 1).expand(1, n_fft, n_frames))
    start = n_fft // 2 if center else 0
    end = total - (n_fft // 2 if center else 0)
    if length is not None:
        end = start + int(length)
    stop = min(end, total)
    y, envelope = y.narrow(-1, start, stop - start), envelope.narrow(-1, start, stop - start)
    if float(envelope.abs().min().item()) < 1e-11:
        raise RuntimeError(
            "istft: window overlap add min: the window's overlap-add is zero somewhere"
        )
    y = y / envelope
    if end > total:
        y = pad(y, (0, end - total))
    return y.reshape(y.shape[1:]) if input.ndim == 2 else y


# ``x.stft(...)`` and ``x.istft(...)``, as PyTorch's tensors have them: this module builds on
# gt.nn, above the tensor class, so it brings its methods itself (as registry entries do).
for _fn in (stft, istft):
    if _fn.__name__ in Tensor.__dict__:
        raise TypeError(f"gt.spectral would replace Tensor.{_fn.__name__}")
    setattr(Tensor, _fn.__name__, _fn)
