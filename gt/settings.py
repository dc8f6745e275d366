"""PyTorch's process-wide settings, as a GT program meets them.

Some change what GT does: ``set_default_dtype`` (the dtype of float factories, Python floats and,
for complex numbers, its complex partner), ``set_printoptions`` (how tensors print),
``set_num_threads`` (the BLAS threads of the workers of a local cluster started afterwards: GT
computes on its workers, not in this process), ``get_rng_state``/``set_rng_state``/
``initial_seed`` (the position of ``gt.manual_seed``'s stream). Others are recorded and reported
back, because what they tune is not GT's to choose on a CPU worker: ``set_float32_matmul_precision``
(TF32 on GPUs), ``use_deterministic_algorithms`` (GT's kernels and seeds are deterministic on NumPy
workers already), ``set_flush_denormal``, ``set_warn_always``.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np

from gt import shapes as S
from gt.ops import format as _format
from gt.ops import random as _random

__all__ = [
    "are_deterministic_algorithms_enabled", "channels_last", "channels_last_3d",
    "contiguous_format", "get_default_device", "get_deterministic_debug_mode",
    "get_float32_matmul_precision", "get_num_interop_threads", "get_num_threads", "get_rng_state",
    "initial_seed", "is_deterministic_algorithms_warn_only_enabled", "is_warn_always_enabled",
    "layout", "legacy_contiguous_format", "memory_format", "preserve_format",
    "set_default_device", "set_default_dtype",
    "set_default_tensor_type", "set_deterministic_debug_mode", "set_float32_matmul_precision",
    "set_flush_denormal", "set_num_interop_threads", "set_num_threads", "set_printoptions",
    "set_rng_state", "set_warn_always", "strided", "use_deterministic_algorithms",
]  # fmt: skip

_state: dict[str, Any] = {
    "matmul_precision": "highest", "deterministic": False, "warn_only": False,
    "warn_always": False, "interop_threads": 1, "device": "cpu",
}  # fmt: skip


class memory_format(str):  # noqa: N801 - PyTorch's name
    """A memory layout name (``gt.channels_last`` ...): accepted by ``to``/``contiguous``; GT's
    workers choose their own layouts."""


class layout(str):  # noqa: N801 - PyTorch's name
    """A tensor layout name: GT's tensors are all ``gt.strided``."""


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
legacy_contiguous_format = contiguous_format  # (PyTorch's alias; F.gumbel_softmax's code uses it)
strided = layout("strided")


# ----------------------------------------------------------------------------- dtypes
def set_default_dtype(d: Any) -> None:
    """The dtype of float factories without ``dtype=`` and of Python floats (``float32`` at
    start; ``float64``, ``float16``, ``bfloat16`` allowed, as in PyTorch)."""
    name = S.canonical_dtype(d)
    if name not in S.FLOAT_DTYPES:
        raise TypeError(f"only floating-point types are supported as the default type, not {name}")
    S.DEFAULT_FLOAT = name


def set_default_tensor_type(t: Any) -> None:
    """The deprecated spelling: ``"torch.DoubleTensor"`` (or ``gt.DoubleTensor``) and friends."""
    name = t if isinstance(t, str) else getattr(t, "__name__", str(t))
    kinds = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
             "BFloat16Tensor": "bfloat16"}  # fmt: skip
    for suffix, dtype in kinds.items():
        if name.endswith(suffix):
            set_default_dtype(dtype)
            return
    raise TypeError(f"set_default_tensor_type: only floating-point types are supported, not {t!r}")


# ----------------------------------------------------------------------------- printing
def set_printoptions(precision: int | None = None, threshold: int | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:  # fmt: skip
    """How tensors print, with PyTorch's options and profiles (``"default"``, ``"short"``,
    ``"full"``); ``sci_mode`` forces (``True``/``False``) or leaves to the values (``None``)."""
    if profile is not None:
        presets = {"default": (4, 1000, 3, 80), "short": (2, 1000, 2, 80),
                   "full": (4, 2**63 - 1, 3, 80)}  # fmt: skip
        if profile in presets:  # (another name is ignored, as PyTorch ignores it)
            _format.PRECISION, _format.THRESHOLD, _format.EDGEITEMS, _format.LINEWIDTH = presets[
                profile
            ]
    for name, value in (("PRECISION", precision), ("THRESHOLD", threshold),
                        ("EDGEITEMS", edgeitems), ("LINEWIDTH", linewidth)):  # fmt: skip
        if value is not None:  # (``threshold=float("inf")``, a common idiom: never summarise)
            big = isinstance(value, float) and value == float("inf")
            setattr(_format, name, 2**63 - 1 if big else int(value))
    _format.SCI_MODE = sci_mode


# ----------------------------------------------------------------------------- threads
def set_num_threads(n: int) -> None:
    """The BLAS threads of each worker of a local cluster started from now on (the workers do
    the computing; ``$GT_BLAS_THREADS``)."""
    if int(n) < 1:
        raise RuntimeError("set_num_threads expects a positive integer")
    os.environ["GT_BLAS_THREADS"] = str(int(n))


def get_num_threads() -> int:
    """What :func:`set_num_threads` set (``$GT_BLAS_THREADS``), else this machine's usable cores."""
    env = os.environ.get("GT_BLAS_THREADS")
    if env:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def set_num_interop_threads(n: int) -> None:
    """Recorded (GT runs one op at a time per worker)."""
    _state["interop_threads"] = int(n)


def get_num_interop_threads() -> int:
    return _state["interop_threads"]


# ----------------------------------------------------------------------------- random state
def initial_seed() -> int:
    """The seed of ``gt.manual_seed``'s stream."""
    return _random._seed_base


def rng_bytes() -> np.ndarray:
    """Where ``gt.manual_seed``'s stream stands, as 16 bytes (a uint8 array; no tensor made)."""
    pos = next(_random._seed_counter)
    _random._seed_counter = itertools.count(pos)
    return _random.state_bytes(_random._seed_base, pos)


def get_rng_state() -> Any:
    """Where ``gt.manual_seed``'s stream stands, for :func:`set_rng_state`: a uint8 tensor, as
    PyTorch's ``ByteTensor`` (so a checkpoint holding it loads with ``weights_only``)."""
    return _random.make_tensor(rng_bytes())


def set_rng_state(new_state: Any) -> None:
    """Go back to a state from :func:`get_rng_state` (a uint8 tensor or array)."""
    base, pos = _random.state_pair(new_state)
    _random._seed_base, _random._seed_counter = base, itertools.count(pos)


# ----------------------------------------------------------------------------- recorded settings
def set_float32_matmul_precision(precision: str) -> None:
    """``"highest"``, ``"high"`` or ``"medium"``: recorded (TF32 matters on GPUs only)."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision!r}: expected highest, high or medium")
    _state["matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    return _state["matmul_precision"]


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Recorded: GT's kernels and its seeds per op are deterministic on NumPy workers."""
    _state["deterministic"], _state["warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled() -> bool:
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    return _state["warn_only"]


def set_deterministic_debug_mode(debug_mode: Any) -> None:
    modes = {"default": 0, "warn": 1, "error": 2}
    level = modes[debug_mode] if isinstance(debug_mode, str) else int(debug_mode)
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    if not _state["deterministic"]:
        return 0
    return 1 if _state["warn_only"] else 2


def set_warn_always(b: bool) -> None:
    _state["warn_always"] = bool(b)


def is_warn_always_enabled() -> bool:
    return _state["warn_always"]


def set_flush_denormal(mode: bool) -> bool:
    """False: GT does not change the workers' floating-point modes (as PyTorch on CPUs without
    SSE3)."""
    return False


def set_default_device(device: Any) -> None:
    """Recorded: GT places tensors on its workers itself."""
    _state["device"] = str(device) if device is not None else "cpu"


def get_default_device() -> Any:
    from gt.ops.device import ENTERED, device  # noqa: PLC0415 - (a leaf of gt.ops)

    return device(ENTERED[-1] if ENTERED else _state["device"])  # (inside ``with device(...)``)
