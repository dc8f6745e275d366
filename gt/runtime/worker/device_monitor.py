"""NVML samples of the worker's own GPU on a background thread (about 1 Hz).

The device is found by what CUDA says about it (:class:`~gt.runtime.worker.devices.DeviceIdentity`),
never by index: CUDA's device order can differ from NVML's, and ``CUDA_VISIBLE_DEVICES`` may hold
indices, UUIDs or MIG names. In order: the ``CUDA_VISIBLE_DEVICES`` entry itself when it is a UUID
(``GPU-…``, ``MIG-…``, or the older ``MIG-GPU-<uuid>/<gi>/<ci>``), then CUDA's UUID as a GPU and
as a MIG instance, then the PCI bus id (which names the whole GPU). A MIG instance reports its own
memory; utilization is not measured per instance (``None``), and temperature, power and PCIe
traffic are its parent GPU's.

``nvidia-ml-py`` (``import pynvml``) is optional: without it, without an NVIDIA driver, for a
device NVML cannot find, or for a NumPy worker (no identity), nothing is sampled and monitors show
N/A. Every counter a device does not offer is ``None``.
"""

from __future__ import annotations

import threading
from typing import Any

from gt.runtime.worker.devices import DeviceIdentity
from gt.trace import events as E


def _nvml() -> Any:
    try:
        import pynvml  # noqa: PLC0415 - optional, from the nvml extra

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _call(nv: Any, fn: str, *args: Any) -> Any:
    """``nv.fn(*args)``, or ``None`` when NVML lacks it or it fails (not supported, ...)."""
    f = getattr(nv, fn, None)
    if f is None:
        return None
    try:
        return f(*args)
    except Exception:
        return None


def nvml_uuid_at(bus_id: str | None) -> str | None:
    """NVML's UUID (``GPU-…``) of the GPU at PCI bus id ``bus_id``; ``None`` without NVML or
    such a GPU."""
    nv = _nvml() if bus_id else None
    if nv is None:
        return None
    h = _call(nv, "nvmlDeviceGetHandleByPciBusId", bus_id)
    uuid = _text(_call(nv, "nvmlDeviceGetUUID", h)) if h is not None else None
    return uuid if isinstance(uuid, str) else None


def _mig_enabled(nv: Any, h: Any) -> bool:
    """Whether the GPU at handle ``h`` is split into MIG instances now (its current mode)."""
    mode = _call(nv, "nvmlDeviceGetMigMode", h)
    try:
        return bool(mode[0])
    except (TypeError, IndexError):
        return False


def _legacy_mig(nv: Any, entry: str) -> Any:
    """The MIG device named ``MIG-GPU-<uuid>/<gi>/<ci>`` (CUDA 11.0-11.x's spelling)."""
    try:
        gpu, gi, ci = entry[len("MIG-") :].split("/")
        gi_id, ci_id = int(gi), int(ci)
    except ValueError:
        return None
    parent = _call(nv, "nvmlDeviceGetHandleByUUID", gpu)
    if parent is None:
        return None
    count = _call(nv, "nvmlDeviceGetMaxMigDeviceCount", parent) or 0
    for i in range(count):
        h = _call(nv, "nvmlDeviceGetMigDeviceHandleByIndex", parent, i)
        if h is None:
            continue
        if (_call(nv, "nvmlDeviceGetGpuInstanceId", h) == gi_id
                and _call(nv, "nvmlDeviceGetComputeInstanceId", h) == ci_id):  # fmt: skip
            return h
    return None


def find_handle(nv: Any, ident: DeviceIdentity) -> tuple[Any, str]:
    """NVML's handle for the CUDA device ``ident``, and how it was found (``"uuid"``,
    ``"visible"``, ``"pci"``); ``(None, why)`` when NVML does not know it."""
    entry = ident.visible or ""
    if entry.startswith("MIG-GPU-"):
        h = _legacy_mig(nv, entry)
        if h is not None:
            return h, "visible"
    elif entry.startswith(("GPU-", "MIG-")):
        h = _call(nv, "nvmlDeviceGetHandleByUUID", entry)
        if h is not None:
            return h, "visible"
    if ident.uuid:
        for prefix in ("MIG-", "GPU-") if ident.mig else ("GPU-", "MIG-"):
            h = _call(nv, "nvmlDeviceGetHandleByUUID", prefix + ident.uuid)
            if h is not None:
                return h, "uuid"
    if ident.pci_bus_id:
        h = _call(nv, "nvmlDeviceGetHandleByPciBusId", ident.pci_bus_id)
        if h is not None:
            return h, "pci"
    return None, f"NVML knows no device with UUID {ident.uuid} or bus id {ident.pci_bus_id}"


class DeviceMonitor:
    """Publishes ``device`` events for this worker's GPU once a second.

    Args:
        emitter: where the events go.
        worker_id: the worker's id (the events' ``worker`` field).
        identity: the worker's CUDA device, ``None`` for a NumPy worker (nothing is sampled).
        interval: seconds between samples.
        nvml: the NVML module (default: ``pynvml``, initialised; tests hand in a fake).
    """

    def __init__(
        self,
        emitter: Any,
        worker_id: int,
        identity: DeviceIdentity | None = None,
        interval: float = 1.0,
        nvml: Any = None,
    ):
        self.emitter = emitter
        self.worker_id = worker_id
        self.identity = identity
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.nvml = None
        self.handle = self.parent = None
        self.found_by = "none"
        self.instance_unknown = False  # a MIG instance known only by its GPU's bus id
        if identity is None:
            return
        self.nvml = nvml if nvml is not None else _nvml()
        if self.nvml is None:
            return
        self.handle, self.found_by = find_handle(self.nvml, identity)
        if self.handle is None:
            return
        if _call(self.nvml, "nvmlDeviceIsMigDeviceHandle", self.handle):
            self.parent = _call(self.nvml, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
                                self.handle)  # fmt: skip
        elif self.found_by == "pci" and _mig_enabled(self.nvml, self.handle):
            # a MIG instance NVML could not name (no UUID matched): the bus id names its whole
            # GPU, whose memory and utilization are not this worker's; only the board counters are
            self.parent, self.instance_unknown = self.handle, True
        self._thread = threading.Thread(target=self._loop, name="gt-nvml", daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        """Whether samples are being published."""
        return self._thread is not None

    def sample(self) -> dict:
        """One sample; each counter is ``None`` when the device does not report it."""
        nv, h = self.nvml, self.handle
        mig = self.parent is not None
        board = self.parent if mig else h  # board-wide counters of a MIG instance: its GPU's
        unknown = self.instance_unknown
        mem = None if unknown else _call(nv, "nvmlDeviceGetMemoryInfo", h)
        util = None if mig else _call(nv, "nvmlDeviceGetUtilizationRates", h)
        power = _call(nv, "nvmlDeviceGetPowerUsage", board)
        ident = self.identity
        return {
            "worker": self.worker_id,
            "util": getattr(util, "gpu", None),
            "mem_used": getattr(mem, "used", None),
            "mem_total": getattr(mem, "total", None),
            "temp": _call(
                nv, "nvmlDeviceGetTemperature", board, getattr(nv, "NVML_TEMPERATURE_GPU", 0)
            ),
            "power": power / 1000.0 if isinstance(power, (int, float)) else None,
            "pcie_tx": _call(
                nv, "nvmlDeviceGetPcieThroughput", board, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0)
            ),
            "pcie_rx": _call(
                nv, "nvmlDeviceGetPcieThroughput", board, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1)
            ),
            "name": (ident.name if ident is not None else None)
            if unknown
            else _text(_call(nv, "nvmlDeviceGetName", h)),
            "uuid": None if unknown else _text(_call(nv, "nvmlDeviceGetUUID", h)),
            "index": ident.index if ident is not None else None,
            "bus_id": ident.pci_bus_id if ident is not None else None,
            "mig": mig,
        }

    def _loop(self) -> None:
        while True:
            try:
                self.emitter.emit(E.DEVICE, self.sample())
            except Exception:
                return  # NVML went away: stop sampling rather than spam errors
            if self._stop.wait(self.interval):
                return

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
