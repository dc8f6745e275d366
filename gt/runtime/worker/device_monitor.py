"""NVML device sampling on a background thread (about 1 Hz), when NVML is present.

``nvidia-ml-py`` (``import pynvml``) is optional: without it, or without an NVIDIA driver, nothing
is sampled and monitors show N/A. Every counter a GPU does not offer is reported as ``None``.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from gt.trace import events as E


def _nvml() -> Any:
    try:
        import pynvml  # noqa: PLC0415 - optional, from the gpu extra

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


class DeviceMonitor:
    """Publishes ``device`` events for this worker's GPU once a second."""

    def __init__(self, emitter: Any, worker_id: int, interval: float = 1.0):
        self.emitter = emitter
        self.worker_id = worker_id
        self.interval = interval
        self._stop = threading.Event()
        self.nvml = _nvml()
        self._h = None
        self._thread = None
        if self.nvml is not None:
            self._thread = threading.Thread(target=self._loop, name="gt-nvml", daemon=True)
            self._thread.start()

    def _handle(self) -> Any:
        if self._h is None:
            # NVML numbers physical devices; CUDA_VISIBLE_DEVICES names the one CUDA calls 0.
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
            index = int(visible) if visible.isdigit() else 0
            self._h = self.nvml.nvmlDeviceGetHandleByIndex(index)
        return self._h

    def sample(self) -> dict:
        """One sample; each counter is ``None`` when the device does not report it."""
        nv = self.nvml
        h = self._handle()

        def get(fn: Any, *args: Any) -> Any:
            try:
                return fn(h, *args)
            except Exception:
                return None

        util = get(nv.nvmlDeviceGetUtilizationRates)
        mem = get(nv.nvmlDeviceGetMemoryInfo)
        power = get(nv.nvmlDeviceGetPowerUsage)
        name = get(nv.nvmlDeviceGetName)
        return {
            "worker": self.worker_id,
            "util": getattr(util, "gpu", None),
            "mem_used": getattr(mem, "used", None),
            "mem_total": getattr(mem, "total", None),
            "temp": get(nv.nvmlDeviceGetTemperature, getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
            "power": power / 1000.0 if power is not None else None,
            "pcie_tx": get(
                nv.nvmlDeviceGetPcieThroughput, getattr(nv, "NVML_PCIE_UTIL_TX_BYTES", 0)
            ),
            "pcie_rx": get(
                nv.nvmlDeviceGetPcieThroughput, getattr(nv, "NVML_PCIE_UTIL_RX_BYTES", 1)
            ),
            "name": name.decode() if isinstance(name, bytes) else name,
        }

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.emitter.emit(E.DEVICE, self.sample())
            except Exception:
                return  # NVML went away: stop sampling rather than spam errors

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
