"""``cupy.cuda`` of the CuPy test double: devices, streams, events, pinned memory, the runtime.

Devices are pretend: ``CUPY_DOUBLE_DEVICES`` of them (default 1), named "CuPy test double", each
with a fixed UUID and PCI bus id, so the code that maps CUDA devices to NVML can be exercised.
With ``CUPY_DOUBLE_DEVICES=0``, ``getDeviceCount`` raises, as real CuPy does without a device.
"""

from __future__ import annotations

import os
import threading
import types
from typing import Any

from . import _memory, _nccl, _streams
from ._memory import MemoryPointer, MemoryPool, PinnedMemoryPool
from ._streams import CUDARuntimeError as _CUDARuntimeError
from ._streams import Event, Stream, get_elapsed_time

_local = threading.local()
#: Devices this process has made a context on (the double's record, for tests: a worker of GPU k
#: should have one on k only).
_contexts: set[int] = set()


def _count() -> int:
    return int(os.environ.get("CUPY_DOUBLE_DEVICES", "1"))


def _check(index: int) -> None:
    n = _count()
    if not 0 <= index < n:
        raise _CUDARuntimeError(101)


class _Runtime(types.ModuleType):
    """``cupy.cuda.runtime``."""

    CUDARuntimeError = _CUDARuntimeError
    streamLegacy, streamPerThread = 1, 2  # (CuPy's handles of the default streams)

    def __init__(self) -> None:
        super().__init__("cupy_double.cuda.runtime")

    def getDeviceCount(self) -> int:  # noqa: N802 - CUDA's name
        n = _count()
        if n <= 0:
            raise _CUDARuntimeError(100)
        return n

    def getDeviceProperties(self, device: int) -> dict[str, Any]:  # noqa: N802
        _check(device)
        return {
            "name": b"CuPy test double",
            # CuPy reads CUDA's 16 UUID bytes as a C string: it ends before a zero byte (so
            # device 0's, d00b1e00-..., comes back as its first three bytes)
            "uuid": (bytes([0xD0, 0x0B, 0x1E, device]) + bytes(range(1, 13))).split(b"\0")[0],
            "pciBusID": 0x10 + device,
            "pciDeviceID": 0,
            "pciDomainID": 0,
            "totalGlobalMem": int(os.environ.get("CUPY_DOUBLE_MEMORY", 1 << 30)),
            "major": 9,
            "minor": 0,
            "multiProcessorCount": 1,
        }

    def deviceGetPCIBusId(self, device: int) -> str:  # noqa: N802
        _check(device)
        return f"0000:{0x10 + device:02X}:00.0"

    def getDevice(self) -> int:  # noqa: N802
        return getattr(_local, "device", 0)

    def setDevice(self, device: int) -> None:  # noqa: N802
        _check(device)
        _local.device = device
        _contexts.add(device)  # (CUDA 12 makes the device's primary context here)

    def deviceSynchronize(self) -> None:  # noqa: N802
        _streams.synchronize_all()

    def runtimeGetVersion(self) -> int:  # noqa: N802
        return 13000

    def driverGetVersion(self) -> int:  # noqa: N802
        return 13000


runtime = _Runtime()
#: ``cupy.cuda.memory`` (what GT may catch from it).
memory = types.ModuleType("cupy_double.cuda.memory")
memory.OutOfMemoryError = _memory.OutOfMemoryError  # type: ignore[attr-defined]
memory.MemoryPointer = MemoryPointer  # type: ignore[attr-defined]
memory.MemoryPool = MemoryPool  # type: ignore[attr-defined]


class Device:
    """A CUDA device of the double (``use()``, ``with Device(i):``, ``synchronize()``)."""

    def __init__(self, device: int | None = None):
        self.id = runtime.getDevice() if device is None else int(device)
        self._prev: list[int] = []

    def use(self) -> None:
        runtime.setDevice(self.id)

    def __enter__(self) -> Device:
        self._prev.append(runtime.getDevice())
        runtime.setDevice(self.id)
        return self

    def __exit__(self, *exc: Any) -> None:
        runtime.setDevice(self._prev.pop())

    def synchronize(self) -> None:
        _streams.synchronize_all()

    @property
    def mem_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes: the device's size less what the pool holds."""
        total = int(runtime.getDeviceProperties(self.id)["totalGlobalMem"])
        return max(0, total - _memory.DEFAULT_POOL.total_bytes()), total

    @property
    def pci_bus_id(self) -> str:
        return runtime.deviceGetPCIBusId(self.id)

    @property
    def compute_capability(self) -> str:
        return "90"

    def __repr__(self) -> str:
        return f"<CUDA Device {self.id} (double)>"


#: ``cupy.cuda.nccl`` (``CUPY_DOUBLE_NCCL=0``: a CuPy built without NCCL, whose import fails)
nccl = _nccl if os.environ.get("CUPY_DOUBLE_NCCL", "1") != "0" else None


def get_current_stream() -> Stream:
    """This thread's current stream."""
    return _streams.current_stream()


def get_device_id() -> int:
    return runtime.getDevice()


class PinnedMemoryPointer(bytearray):
    """Page-locked host memory (``numpy.frombuffer(mem, dtype, count)`` views it)."""

    @property
    def ptr(self) -> int:
        return id(self)

    def size(self) -> int:  # a method in CuPy, not a property
        return len(self)


def alloc_pinned_memory(size: int) -> PinnedMemoryPointer:
    """Host memory a device copy may read asynchronously (plain memory in the double)."""
    return PinnedMemoryPointer(int(size))


def is_available() -> bool:
    try:
        return runtime.getDeviceCount() > 0
    except _CUDARuntimeError:
        return False


__all__ = [
    "Device",
    "Event",
    "MemoryPointer",
    "MemoryPool",
    "PinnedMemoryPool",
    "PinnedMemoryPointer",
    "Stream",
    "alloc_pinned_memory",
    "get_current_stream",
    "get_elapsed_time",
    "runtime",
]
