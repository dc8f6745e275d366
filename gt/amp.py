"""``gt.amp`` (also ``gt.cuda.amp``): automatic mixed precision, as no-ops.

GT computes in the dtypes of the tensors it is given; ``autocast`` does not change them, and
``GradScaler`` behaves as PyTorch's does when disabled (``scale(loss)`` is ``loss``, ``step``
calls the optimizer's). Ported training loops run unchanged, in full precision. (Casting a model
with ``model.half()`` does run in float16.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The autocast regions entered and not yet left, by device type (what the queries report).
_ACTIVE: dict[str, list[Any]] = {}
_DEFAULT_DTYPE = {"cuda": "float16", "cpu": "bfloat16"}


class autocast:  # noqa: N801 - PyTorch's name
    """A context manager (or decorator) that changes nothing: ops keep their inputs' dtypes.
    :func:`is_autocast_enabled` and :func:`get_autocast_dtype` report the region as PyTorch's do,
    for code that branches on them."""

    def __init__(self, device_type: str = "cuda", dtype: Any = None, enabled: bool = True,
                 cache_enabled: bool | None = None):  # fmt: skip
        self.device_type, self.dtype, self.enabled = device_type, dtype, enabled

    def __enter__(self) -> autocast:
        dtype = self.dtype or _DEFAULT_DTYPE.get(self.device_type, "float16")
        _ACTIVE.setdefault(self.device_type, []).append((self.enabled, dtype))
        return self

    def __exit__(self, *exc: Any) -> None:
        _ACTIVE.get(self.device_type, [None]).pop()

    def __call__(self, fn: Callable) -> Callable:
        return fn


class GradScaler:
    """PyTorch's loss scaler with scaling off: every method passes its argument through."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):  # fmt: skip
        self._enabled = False

    def scale(self, outputs: Any) -> Any:
        """``outputs`` unchanged."""
        return outputs

    def unscale_(self, optimizer: Any) -> None:
        """Nothing to undo."""

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step(*args, **kwargs)``."""
        return optimizer.step(*args, **kwargs)

    def update(self, new_scale: Any = None) -> None:
        """Nothing to update."""

    def get_scale(self) -> float:
        """1.0."""
        return 1.0

    def is_enabled(self) -> bool:
        """False: no scaling happens."""
        return False

    def state_dict(self) -> dict:
        """Empty, as PyTorch's for a disabled scaler."""
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Nothing to load."""


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    """Whether the innermost ``autocast`` region of ``device_type`` is enabled (GT computes in
    the tensors' own dtypes either way)."""
    regions = _ACTIVE.get(device_type)
    return bool(regions) and regions[-1][0]


def is_autocast_cpu_enabled() -> bool:
    """``is_autocast_enabled("cpu")``."""
    return is_autocast_enabled("cpu")


def get_autocast_dtype(device_type: str) -> Any:
    """The dtype the innermost ``autocast`` region of ``device_type`` names (PyTorch's default
    outside one)."""
    from gt._dtype import dtype  # noqa: PLC0415 - tiny, and only here

    regions = _ACTIVE.get(device_type)
    name = regions[-1][1] if regions else _DEFAULT_DTYPE.get(device_type, "float16")
    return dtype(str.__str__(name))


__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_cpu_enabled",
           "is_autocast_enabled"]  # fmt: skip
