"""A worker's GPU, said as NVML says it, and NVML samples of that device only (found by UUID or bus
id, MIG included); NumPy workers sample nothing."""

from __future__ import annotations

import threading

import pytest
from helpers import wait_for

from gt.runtime.worker.device_monitor import DeviceMonitor, find_handle
from gt.runtime.worker.devices import (
    DeviceIdentity,
    device_for_slot,
    format_uuid,
    normalize_bus_id,
    visible_devices,
    visible_entry,
)

UUID = "8f3a1c22-0000-4000-8000-00000000aa01"
RAW = bytes.fromhex(UUID.replace("-", ""))


class FakeNVML:
    """Two GPUs in NVML's order (PCI order), the second split into MIG instances."""

    NVML_TEMPERATURE_GPU = 0

    def __init__(self):
        self.gpus = {"GPU-11111111-0000-0000-0000-000000000000": ("gpu0", "0000:1a:00.0"),
                     f"GPU-{UUID}": ("gpu1", "0000:3b:00.0")}  # fmt: skip
        self.migs = {"MIG-aaaaaaaa-0000-0000-0000-000000000001": ("mig1", "gpu1", 1, 0)}

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802 - NVML's names
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        if uuid in self.gpus:
            return self.gpus[uuid][0]
        if uuid in self.migs:
            return self.migs[uuid][0]
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceGetHandleByPciBusId(self, bus):  # noqa: N802
        for h, b in self.gpus.values():
            if normalize_bus_id(b) == normalize_bus_id(bus):
                return h
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceIsMigDeviceHandle(self, h):  # noqa: N802
        return h.startswith("mig")

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, h):  # noqa: N802
        return next(p for m, p, _, _ in self.migs.values() if m == h)

    def nvmlDeviceGetMigMode(self, h):  # noqa: N802 - [current, pending]
        return [1, 1] if h == "gpu1" else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, h):  # noqa: N802
        return 7 if h == "gpu1" else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):  # noqa: N802
        if h == "gpu1" and i == 0:
            return "mig1"
        raise RuntimeError("NVML_ERROR_NOT_FOUND")

    def nvmlDeviceGetGpuInstanceId(self, h):  # noqa: N802
        return 1

    def nvmlDeviceGetComputeInstanceId(self, h):  # noqa: N802
        return 0

    def nvmlDeviceGetMemoryInfo(self, h):  # noqa: N802
        return type("M", (), {"used": 5 if h.startswith("mig") else 50, "total": 100})()

    def nvmlDeviceGetUtilizationRates(self, h):  # noqa: N802
        if h.startswith("mig"):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return type("U", (), {"gpu": 77 if h == "gpu1" else 1})()

    def nvmlDeviceGetTemperature(self, h, sensor):  # noqa: N802
        if h.startswith("mig"):
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return {"gpu0": 30, "gpu1": 61}[h]

    def nvmlDeviceGetPowerUsage(self, h):  # noqa: N802
        return {"gpu0": 50_000, "gpu1": 412_500}[h]

    def nvmlDeviceGetName(self, h):  # noqa: N802
        return b"NVIDIA H200" if h.startswith("gpu") else b"NVIDIA H200 MIG 1g.18gb"

    def nvmlDeviceGetUUID(self, h):  # noqa: N802
        return next(u for u, v in {**self.gpus, **self.migs}.items() if v[0] == h)


class Collect:
    def __init__(self):
        self.events = []
        self.lock = threading.Lock()

    def emit(self, kind, fields, t_ns=None):
        with self.lock:
            self.events.append((kind, fields))


def test_identities_are_spelled_as_nvml_spells_them():
    assert (
        format_uuid(RAW) == UUID and format_uuid(b"\0" * 16) is None and format_uuid(b"x") is None
    )
    assert (
        normalize_bus_id("00000000:3B:00.0") == "0000:3b:00.0" == normalize_bus_id(b"0000:3b:00.0")
    )
    assert normalize_bus_id("garbage") is None
    ident = DeviceIdentity(1, "NVIDIA H200", UUID, "0000:3b:00.0")
    assert ident.describe() == f"cuda:1 NVIDIA H200 (0000:3b:00.0, GPU-{UUID})"
    assert DeviceIdentity(0, "X").describe() == "cuda:0 X"
    assert DeviceIdentity(0, "X", UUID, visible="MIG-abc").nvml_uuid == f"MIG-{UUID}"


def test_visible_devices_and_slots():
    env = {"CUDA_VISIBLE_DEVICES": "GPU-abc, MIG-def,3"}
    assert visible_devices(env) == ["GPU-abc", "MIG-def", "3"]
    assert visible_entry(1, env) == "MIG-def" and visible_entry(5, env) is None
    assert visible_devices({}) is None and visible_entry(0, {}) is None
    assert [device_for_slot(k, 2) for k in range(5)] == [0, 1, 0, 1, 0]
    with pytest.raises(ValueError):
        device_for_slot(0, 0)


@pytest.mark.parametrize(
    ("ident", "handle", "how"),
    [
        # CUDA's device 0 is NVML's device 1 (orders differ): found by UUID, not by index
        (DeviceIdentity(0, "H200", UUID, "0000:3b:00.0"), "gpu1", "uuid"),
        (DeviceIdentity(0, "H200", None, "00000000:3B:00.0"), "gpu1", "pci"),
        (DeviceIdentity(0, "H200", "aaaaaaaa-0000-0000-0000-000000000001", "0000:3b:00.0"), "mig1", "uuid"),
        (DeviceIdentity(0, "H200", None, None, visible="MIG-aaaaaaaa-0000-0000-0000-000000000001"), "mig1", "visible"),
        (DeviceIdentity(0, "H200", None, None, visible=f"MIG-GPU-{UUID}/1/0"), "mig1", "visible"),
        (DeviceIdentity(0, "H200", "ffffffff-0000-0000-0000-000000000000", "0000:99:00.0"), None, None),
    ],
)  # fmt: skip
def test_the_device_is_found_by_uuid_visible_entry_or_bus_id(ident, handle, how):
    h, found = find_handle(FakeNVML(), ident)
    assert h == handle
    if how is not None:
        assert found == how


def test_a_gpu_worker_samples_its_own_device():
    out = Collect()
    mon = DeviceMonitor(out, 3, DeviceIdentity(0, "H200", UUID, "0000:3b:00.0"), interval=0.05,
                        nvml=FakeNVML())  # fmt: skip
    try:
        wait_for(lambda: len(out.events) >= 2, timeout=5)
    finally:
        mon.stop()
    kind, s = out.events[0]
    assert kind == "device" and s["worker"] == 3
    assert (s["util"], s["mem_used"], s["mem_total"], s["temp"], s["power"]) == (
        77,
        50,
        100,
        61,
        412.5,
    )
    assert s["name"] == "NVIDIA H200" and s["uuid"] == f"GPU-{UUID}" and s["mig"] is False


def test_a_mig_instance_reports_its_memory_and_its_gpus_board_counters():
    ident = DeviceIdentity(
        0, "H200", None, None, visible="MIG-aaaaaaaa-0000-0000-0000-000000000001"
    )
    mon = DeviceMonitor(Collect(), 0, ident, nvml=FakeNVML())
    mon.stop()
    s = mon.sample()
    assert s["mig"] is True and s["mem_used"] == 5 and s["util"] is None
    assert s["temp"] == 61 and s["power"] == 412.5 and s["name"].endswith("MIG 1g.18gb")


def test_a_mig_instance_known_only_by_its_gpus_bus_id_does_not_report_the_whole_gpus_memory():
    # CUDA_VISIBLE_DEVICES unset and no UUID NVML knows: the bus id finds the parent GPU
    ident = DeviceIdentity(0, "NVIDIA H200 MIG 1g.18gb", None, "0000:3b:00.0")
    mon = DeviceMonitor(Collect(), 0, ident, nvml=FakeNVML())
    mon.stop()
    s = mon.sample()
    assert mon.found_by == "pci" and s["mig"] is True
    assert s["mem_used"] is None and s["mem_total"] is None and s["util"] is None  # not the GPU's
    assert s["temp"] == 61 and s["power"] == 412.5  # the board's, as for a named instance
    assert s["name"] == "NVIDIA H200 MIG 1g.18gb" and s["uuid"] is None
    whole = DeviceMonitor(Collect(), 0, DeviceIdentity(0, "H200", None, "0000:1a:00.0"),
                          nvml=FakeNVML())  # fmt: skip
    whole.stop()
    assert whole.sample()["mem_used"] == 50 and whole.sample()["mig"] is False  # (no MIG there)


def test_numpy_workers_and_unknown_devices_sample_nothing():
    assert not DeviceMonitor(Collect(), 0, None, nvml=FakeNVML()).active
    unknown = DeviceIdentity(0, "?", "ffffffff-0000-0000-0000-000000000000", None)
    assert not DeviceMonitor(Collect(), 0, unknown, nvml=FakeNVML()).active
    mon = DeviceMonitor(Collect(), 0, DeviceIdentity(0, "?", UUID), nvml=None)
    mon.stop()  # no pynvml here (or a real one that knows no such device): nothing runs
