"""Helpers the programs share: NumPy inputs from fixed seeds, and copying fixed weights into a model
(so results do not depend on either library's random initialization)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def arr(seed: int, *shape: int, scale: float = 1.0, dtype: Any = np.float32) -> np.ndarray:
    """Normal samples of ``shape`` times ``scale``."""
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(dtype)


def ints(seed: int, high: int, *shape: int) -> np.ndarray:
    """Integers in ``[0, high)`` (int64)."""
    return np.random.default_rng(seed).integers(0, high, shape).astype(np.int64)


def set_weights(torch: Any, model: Any, seed: int = 0, scale: float | None = None) -> Any:
    """Overwrite every floating parameter with uniform values in ``±1/sqrt(fan_in)`` (or
    ``±scale``), in registration order; returns the model."""
    g = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            shape = tuple(p.shape)
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
            bound = scale if scale is not None else 1.0 / math.sqrt(max(fan_in, 1))
            p.copy_(torch.tensor(g.uniform(-bound, bound, shape).astype(np.float32)))
    return model


def grads(model: Any) -> dict[str, Any]:
    """Every parameter's gradient by name (``None`` where there is none)."""
    return {name: p.grad for name, p in model.named_parameters()}


def params(model: Any) -> dict[str, Any]:
    """Every parameter by name."""
    return {name: p for name, p in model.named_parameters()}
