"""PyTorch's legacy and pass-through modules: ``CrossMapLRN2d`` (Lua Torch's cross-channel LRN),
``NLLLoss2d`` and ``Container`` (deprecated, they warn as in PyTorch) and ``DataParallel``.

``DataParallel`` is a thin wrapper: GT's dispatcher already places work on the workers (signals and
the sharding config decide how), so it only holds ``module`` (state dict keys ``module.*``, as in
PyTorch) and calls it; ``device_ids``, ``output_device`` and ``dim`` are kept and not used.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from gt.nn.loss_layers import NLLLoss
from gt.nn.module import Module
from gt.tensor import Tensor

# ruff: noqa: A002 - PyTorch's parameter names (input, ...)


def _forward_window(channels: int, size: int) -> np.ndarray:
    """``[C, C]``: which channels' squares PyTorch's running sum adds into channel ``c``'s scale.

    PyTorch's recurrence (start with the first ``(size - 1) // 2 + 1`` channels, then per channel
    add the next one and drop one ``pre_pad`` behind once past it) is replayed here as it is,
    quirks included, so the forward values are PyTorch's."""
    pre = int((size - 1) / 2 + 1)
    rows = np.zeros((channels, channels))
    cur = np.zeros(channels)
    cur[: min(pre, channels)] = 1.0
    rows[0] = cur
    for c in range(1, channels):
        if c < channels - pre + 1:
            cur[c + pre - 1] += 1.0
        if c > pre:
            cur[c - pre] -= 1.0
        rows[c] = cur
    return rows


def _backward_window(channels: int, size: int) -> np.ndarray:
    """``[C, C]``: the window of ``size`` channels PyTorch's backward sums for channel ``c``
    (channels ``c - s`` to ``c - s + size - 1``, ``s = size - (size - 1) // 2``)."""
    shift = int(size - (size - 1) / 2)
    c = np.arange(channels)
    lo = (c - shift)[:, None]
    j = np.arange(channels)[None, :]
    return ((j >= lo) & (j <= lo + size - 1)).astype(np.float64)


def _mix(x: Tensor, window: np.ndarray, t: Tensor) -> Tensor:
    """``window @ t`` over the channels (dimension 1) of ``[N, C, H, W]``."""
    n, c, h, w = t.shape
    m = x._upload(np.ascontiguousarray(window, dtype=np.dtype(t.dtype)))
    return (m @ t.reshape(n, c, h * w)).reshape(n, c, h, w)


def cross_map_lrn2d(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                    k: float = 1.0) -> Tensor:  # fmt: skip
    """``x * (k + alpha / size * sum of x^2 over neighbouring channels)^-beta`` over ``[N, C, H,
    W]``, with PyTorch's ``CrossMapLRN2d`` windows in the forward and in the gradient (which are
    not each other's transpose in PyTorch; both are reproduced)."""
    if input.ndim != 4:
        raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
    c = input.shape[1]
    sq = input * input
    scale = (_mix(input, _forward_window(c, size), sq.detach()) * (alpha / size) + k).detach()
    out = input * scale ** (-beta)
    # A term worth 0 whose gradient is PyTorch's second gradient term:
    # -2 * alpha * beta / size * x * (B @ (grad * out / scale)).
    ratio = (out / scale).detach() * (-beta * alpha / size)
    term = ratio * _mix(input, _backward_window(c, size).T, sq)
    return out + (term - term.detach())


class CrossMapLRN2d(Module):
    """Local response normalization across channels of ``[N, C, H, W]`` (Lua Torch's variant)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input: Tensor) -> Tensor:
        return cross_map_lrn2d(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class NLLLoss2d(NLLLoss):
    """Deprecated: ``NLLLoss`` (which takes ``[N, C, H, W]`` inputs); warns as PyTorch does."""

    def __init__(self, weight: Tensor | None = None, size_average: Any = None,
                 ignore_index: int = -100, reduce: Any = None, reduction: str = "mean"):  # fmt: skip
        warnings.warn(
            "`NLLLoss2d` has been deprecated. Please use `NLLLoss` instead as a drop-in "
            "replacement and see https://pytorch.org/docs/main/nn.html#torch.nn.NLLLoss for more "
            "details.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__(weight, size_average, ignore_index, reduce, reduction)


class Container(Module):
    """Deprecated: a ``Module`` holding the submodules given by keyword; warns as PyTorch does."""

    def __init__(self, **kwargs: Module):
        warnings.warn(
            "`nn.Container` is deprecated. All of its functionality is now implemented in "
            "`nn.Module`. Subclass that instead.",
            FutureWarning,
            stacklevel=2,
        )
        super().__init__()
        for key, value in kwargs.items():
            self.add_module(key, value)


class DataParallel(Module):
    """Calls ``module``; GT spreads the work over the workers itself (see the module doc).

    Args:
        module: the wrapped module (``self.module``).
        device_ids, output_device, dim: PyTorch's arguments, kept and unused.
    """

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None,
                 dim: int = 0):  # fmt: skip
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device, self.dim = output_device, dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


__all__ = ["Container", "CrossMapLRN2d", "DataParallel", "NLLLoss2d", "cross_map_lrn2d"]
