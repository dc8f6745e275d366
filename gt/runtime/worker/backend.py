"""The worker's array backend: NumPy, or CuPy on a GPU (the only module that imports CuPy).

The kernels themselves are in the op registry (:mod:`gt.runtime.ops`), written once against
``xp``; :class:`Backend` binds them to one array module and moves arrays to and from the host.
"""

from __future__ import annotations

import math
import os
import platform
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from gt.runtime import ops as O
from gt.runtime.ops.base import Handler


def _erf(xp: ModuleType) -> Callable[[Any], Any]:
    """The error function on ``xp``: SciPy's or CuPy's, else the exact (slow) ``math.erf``."""
    if xp is np:
        try:
            from scipy.special import erf  # noqa: PLC0415 - optional dependency

            return erf
        except ImportError:
            vec = np.vectorize(math.erf, otypes=[np.float64])
            return lambda x: vec(x).astype(x.dtype, copy=False)
    from cupyx.scipy.special import erf as cupy_erf  # noqa: PLC0415 - CuPy workers only

    return cupy_erf


def _scatter_add(xp: ModuleType) -> Callable[[Any, Any, Any], None]:
    """``a[key] += v`` where repeated indices accumulate (``np.add.at`` / ``cupyx.scatter_add``)."""
    if xp is np:
        return np.add.at
    import cupyx  # noqa: PLC0415 - CuPy workers only

    return cupyx.scatter_add


class Backend:
    """An array module plus the handler table that executes primitives on it (a
    :class:`~gt.runtime.ops.base.KernelEnv` for the registry's kernels).

    Attributes:
        xp: ``numpy`` or ``cupy``.
        name: ``"numpy"`` or ``"cupy"``.
        device: a human-readable device description.
        handlers: ``handlers[opcode]`` runs one compute or create primitive (``None`` for the ops
            the worker handles itself: uploads, fetches, frees, transfers ...).
    """

    def __init__(self, xp: ModuleType, device: str):
        self.xp = xp
        self.name = xp.__name__
        self.device = device
        self.erf = _erf(xp)
        self.scatter_add = _scatter_add(xp)
        self.handlers: list[Handler | None] = [
            op.kernel(self) if op.kernel is not None else None for op in O.REGISTRY
        ]

    def to_host(self, arr: Any) -> np.ndarray:
        """Return a C-contiguous NumPy array with the same contents (a copy only where needed)."""
        if self.name == "cupy":
            return self.xp.asnumpy(arr)
        return np.asarray(arr, order="C")

    def from_host(self, arr: np.ndarray) -> Any:
        """Move a host array to the device (no copy on NumPy)."""
        if self.name == "cupy":
            return self.xp.asarray(arr)
        return arr

    def from_frame(self, frame: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """An array of ``dtype`` and ``shape`` over a received frame's bytes (no copy on NumPy).

        Raises:
            ValueError: the frame holds another number of elements than ``shape`` needs.
        """
        arr = np.frombuffer(frame.buffer if hasattr(frame, "buffer") else frame, dtype=dtype)
        expect = 1
        for d in shape:
            expect *= d
        if arr.size != expect:
            raise ValueError(
                f"upload carries {arr.size} elements, shape {list(shape)} needs {expect}"
            )
        return self.from_host(arr.reshape(shape))

    def reserved_bytes(self, used: int) -> int:
        """Bytes the allocator holds (CuPy's memory pool); equal to ``used`` on NumPy."""
        if self.name == "cupy":
            return int(self.xp.get_default_memory_pool().total_bytes())
        return used

    def synchronize(self) -> None:
        """Wait for queued device work (a no-op on NumPy)."""
        if self.name == "cupy":
            self.xp.cuda.get_current_stream().synchronize()


def load_backend(prefer: str | None = None) -> Backend:
    """Pick CuPy when a GPU and CuPy are present, else NumPy.

    Args:
        prefer: ``"numpy"``, ``"cupy"`` or ``"auto"`` (default: ``$GT_BACKEND`` or ``auto``).
            ``"cupy"`` raises if CuPy or a GPU is missing; ``"auto"`` falls back quietly.
    """
    prefer = prefer or os.environ.get("GT_BACKEND", "auto")
    if prefer not in ("auto", "numpy", "cupy"):
        raise ValueError(f"GT_BACKEND must be auto, numpy or cupy, not {prefer!r}")
    if prefer in ("auto", "cupy"):
        try:
            import cupy  # noqa: PLC0415 - lazy: the gpu extra is optional

            n = cupy.cuda.runtime.getDeviceCount()
            if n > 0:
                dev = cupy.cuda.Device()
                props = cupy.cuda.runtime.getDeviceProperties(dev.id)
                name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
                return Backend(cupy, f"{name} (cuda:{dev.id})")
            if prefer == "cupy":
                raise RuntimeError("GT_BACKEND=cupy but no CUDA device is visible")
        except ImportError:
            if prefer == "cupy":
                raise RuntimeError(
                    "GT_BACKEND=cupy but CuPy is not installed (pip install 'gt-multiplex[gpu]')"
                ) from None
        except Exception:
            if prefer == "cupy":
                raise
    return Backend(np, f"cpu ({platform.processor() or platform.machine()})")
