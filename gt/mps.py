"""``gt.mps``: what ported code asks ``torch.mps``, answered as a PyTorch build without Metal.

No Apple GPU belongs to the user's process (GT's workers choose their own devices), so
``is_available()`` is False and ``device_count()`` 0, and the functions that need the backend raise
PyTorch's RuntimeError for a machine without one.
"""

from __future__ import annotations

from typing import Any


def _missing(call: str) -> RuntimeError:
    return RuntimeError(f"Cannot execute {call}() without MPS backend.")


def is_available() -> bool:
    """False (see the module's docstring)."""
    return False


def device_count() -> int:
    """0."""
    return 0


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch's without MPS."""


def seed() -> None:
    raise _missing("getDefaultGenerator")


def get_rng_state(device: Any = "mps") -> Any:
    raise _missing("getDefaultGenerator")


def set_rng_state(new_state: Any, device: Any = "mps") -> None:
    raise _missing("getDefaultGenerator")


def synchronize() -> None:
    raise _missing("deviceSynchronize")


def empty_cache() -> None:
    raise _missing("emptyCache")


def set_per_process_memory_fraction(fraction: float) -> None:
    raise _missing("setMemoryFraction")


def current_allocated_memory() -> int:
    raise _missing("getCurrentAllocatedMemory")


def driver_allocated_memory() -> int:
    raise _missing("getDriverAllocatedMemory")


def recommended_max_memory() -> int:
    raise _missing("getRecommendedMaxMemory")


class Event:
    """``torch.mps.Event``: needs the backend, so making one raises PyTorch's RuntimeError."""

    def __init__(self, enable_timing: bool = False) -> None:
        raise _missing("acquireEvent")


def compile_shader(source: str) -> Any:
    raise RuntimeError("MPS is not available")


def load_metallib(source: Any) -> Any:
    raise RuntimeError("MPS is not available")


__all__ = ["compile_shader", "load_metallib", "device_count", "get_rng_state", "manual_seed",
           "seed", "set_rng_state", "synchronize", "empty_cache",
           "set_per_process_memory_fraction", "current_allocated_memory",
           "driver_allocated_memory", "Event", "recommended_max_memory",
           "is_available"]  # fmt: skip
