"""Which GPU a worker runs on, said the way NVML and ``nvidia-smi`` say it (pure: no CuPy, no NVML).

CUDA numbers the devices a process sees ``0..n-1`` (in its own order, after
``CUDA_VISIBLE_DEVICES``, which may hold indices, UUIDs or MIG names); NVML numbers every device
on the machine in PCI order. The two orders can differ, so a worker never passes an index from one
to the other: its backend reads its device's UUID and PCI bus id from CUDA, and the NVML sampler
(:mod:`gt.runtime.worker.device_monitor`) finds the same device by them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class DeviceIdentity:
    """One CUDA device as a worker sees it.

    Attributes:
        index: the CUDA device ordinal in the worker's process (``cupy.cuda.Device(index)``).
        name: the device's name (``"NVIDIA H200"``).
        uuid: its UUID without prefix (``"8f3a…-…"``, 36 characters), or ``None`` if CUDA gave none;
            NVML spells it ``GPU-<uuid>`` for a whole GPU and ``MIG-<uuid>`` for a MIG instance.
        pci_bus_id: ``"0000:3b:00.0"`` (lower case; a MIG instance has its parent GPU's), or ``None``.
        visible: the ``CUDA_VISIBLE_DEVICES`` entry that names this device, if one does (an index,
            ``GPU-…``, ``MIG-…`` or ``MIG-GPU-…/gi/ci``), else ``None``.
    """

    index: int
    name: str
    uuid: str | None = None
    pci_bus_id: str | None = None
    visible: str | None = None

    @property
    def mig(self) -> bool:
        """Whether ``CUDA_VISIBLE_DEVICES`` names this device as a MIG instance."""
        return bool(self.visible) and self.visible.upper().startswith("MIG-")

    @property
    def nvml_uuid(self) -> str | None:
        """The UUID as NVML and ``nvidia-smi -L`` print it (``GPU-…`` or ``MIG-…``)."""
        if not self.uuid:
            return None
        return ("MIG-" if self.mig else "GPU-") + self.uuid

    def describe(self) -> str:
        """One line for ``gt top``: ``cuda:0 NVIDIA H200 (0000:3b:00.0, GPU-8f3a…)``; the first
        word is what narrow tables show."""
        extra = [p for p in (self.pci_bus_id, self.nvml_uuid) if p]
        return f"cuda:{self.index} {self.name}" + (f" ({', '.join(extra)})" if extra else "")

    def as_dict(self) -> dict[str, Any]:
        """Plain data (what the worker's ``Register`` message carries)."""
        return {**asdict(self), "mig": self.mig, "nvml_uuid": self.nvml_uuid}


def format_uuid(raw: Any) -> str | None:
    """CUDA's 16 raw UUID bytes as NVML's text (``8-4-4-4-12`` hex digits, no prefix).

    Returns ``None`` for anything that is not 16 bytes, or all zeros (no UUID reported).
    """
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not isinstance(raw, (bytes, bytearray)) or len(raw) != 16 or not any(raw):
        return None
    h = bytes(raw).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def complete_uuid(raw: Any, candidates: Any) -> str | None:
    """The UUID whose start CUDA gave as ``raw`` when CuPy cut it short: CuPy reads the 16 raw
    bytes as a C string, so a UUID with a zero byte (about one GPU in 16) comes back ending just
    before it. Returns the first of ``candidates`` (NVML's ``GPU-…`` text, or a
    ``CUDA_VISIBLE_DEVICES`` entry) that begins with ``raw`` and then a zero byte, without its
    prefix; ``None`` if none does (the device is then matched by bus id)."""
    if isinstance(raw, str):
        raw = raw.encode("latin-1")
    if not isinstance(raw, (bytes, bytearray)) or not 0 < len(raw) < 16:
        return None
    for text in candidates:
        if not isinstance(text, str):
            continue
        bare = text.split("-", 1)[1] if text[:4].upper() in ("GPU-", "MIG-") else text
        try:
            full = bytes.fromhex(bare.replace("-", ""))
        except ValueError:
            continue
        if len(full) == 16 and full.startswith(bytes(raw) + b"\0"):
            return format_uuid(full)
    return None


def normalize_bus_id(bus_id: Any) -> str | None:
    """A PCI bus id as ``dddd:bb:dd.f`` in lower case (NVML pads the domain to 8 digits, CUDA to
    4; both name the same device), or ``None``."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", "replace")
    if not isinstance(bus_id, str) or bus_id.count(":") != 2:
        return None
    domain, bus, rest = bus_id.strip().lower().split(":")
    try:
        return f"{int(domain, 16):04x}:{bus}:{rest}"
    except ValueError:
        return None


def visible_devices(env: dict[str, str] | None = None) -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (``None`` when it is not set: every device).

    CUDA stops at the first entry it cannot use; this only splits and strips, so entry ``i`` names
    CUDA device ``i`` whenever that device exists.
    """
    value = (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return [e.strip() for e in value.split(",") if e.strip()]


def visible_entry(index: int, env: dict[str, str] | None = None) -> str | None:
    """The ``CUDA_VISIBLE_DEVICES`` entry that CUDA device ``index`` comes from, if it is set."""
    entries = visible_devices(env)
    if entries is None or not 0 <= index < len(entries):
        return None
    return entries[index]


def device_for_slot(slot: int, count: int) -> int:
    """The device of local worker ``slot`` when ``count`` devices are visible: round-robin, so
    ``--workers 4`` on two GPUs puts workers 0 and 2 on GPU 0, 1 and 3 on GPU 1."""
    if count < 1:
        raise ValueError("no CUDA device to place a worker on")
    return slot % count
