"""``gt.xpu``: what ported code asks ``torch.xpu``, answered as a PyTorch build without XPU.

No Intel GPU belongs to the user's process (GT's workers choose their own devices), so
``is_available()`` is False and ``device_count()`` 0; the memory counters are 0, the seeding
functions are accepted, and what needs a device raises PyTorch's ``AssertionError("Torch not
compiled with XPU enabled")``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

_NOT_COMPILED = "Torch not compiled with XPU enabled"

#: One generator per XPU device: none.
default_generators: tuple = ()


def _missing() -> AssertionError:
    return AssertionError(_NOT_COMPILED)


def is_available() -> bool:
    """False (see the module's docstring)."""
    return False


def device_count() -> int:
    """0."""
    return 0


def is_initialized() -> bool:
    return False


def init() -> None:
    raise _missing()


def current_device() -> int:
    raise _missing()


def set_device(device: Any) -> None:
    raise _missing()


def get_device_name(device: Any = None) -> str:
    raise _missing()


def get_device_properties(device: Any = None) -> Any:
    raise _missing()


def get_device_capability(device: Any = None) -> dict:
    raise _missing()


def synchronize(device: Any = None) -> None:
    raise _missing()


def current_stream(device: Any = None) -> Any:
    raise _missing()


def mem_get_info(device: Any = None) -> tuple[int, int]:
    raise _missing()


def set_per_process_memory_fraction(fraction: float, device: Any = None) -> None:
    raise _missing()


def get_per_process_memory_fraction(device: Any = None) -> float:
    raise _missing()


def can_device_access_peer(device: Any, peer: Any) -> bool:
    raise _missing()


def empty_cache() -> None:
    """Nothing to free."""


def memory_allocated(device: Any = None) -> int:
    return 0


max_memory_allocated = memory_reserved = max_memory_reserved = memory_allocated


def memory_stats(device: Any = None) -> OrderedDict:
    return OrderedDict()


def memory_stats_as_nested_dict(device: Any = None) -> dict:
    return {}


def memory_snapshot(mempool_id: Any = None) -> list:
    return []


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return False


def is_tf32_supported() -> bool:
    return False


def get_arch_list() -> list[str]:
    return []


def get_gencode_flags() -> str:
    return ""


def manual_seed(seed: int) -> None:
    """Accepted and ignored, as PyTorch's without XPU."""


manual_seed_all = manual_seed


def seed() -> None:
    """Accepted and ignored."""


seed_all = seed


def initial_seed() -> int:
    raise _missing()


def get_rng_state(device: Any = "xpu") -> Any:
    raise _missing()


def set_rng_state(new_state: Any, device: Any = "xpu") -> None:
    """Accepted and ignored (PyTorch queues it until a device exists; none will)."""


def get_rng_state_all() -> list:
    return []


def set_rng_state_all(new_states: Any) -> None:
    """Accepted and ignored."""


__all__ = ["can_device_access_peer", "current_device", "current_stream", "default_generators",
           "device_count", "empty_cache", "get_arch_list", "get_device_capability",
           "get_device_name", "get_device_properties", "get_gencode_flags",
           "get_per_process_memory_fraction", "get_rng_state", "get_rng_state_all", "init",
           "initial_seed", "is_available", "is_bf16_supported", "is_initialized",
           "is_tf32_supported", "manual_seed", "manual_seed_all", "max_memory_allocated",
           "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_reserved",
           "memory_snapshot", "memory_stats", "memory_stats_as_nested_dict", "seed", "seed_all",
           "set_device", "set_per_process_memory_fraction", "set_rng_state",
           "set_rng_state_all", "synchronize"]  # fmt: skip
