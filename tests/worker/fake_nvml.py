"""A pynvml-shaped stand-in replaying a recorded device, for machines without an NVIDIA GPU.

It answers the calls proofnet's worker makes with the values of a recording (the format
`worker.inventory.record_nvml()` writes), raises pynvml's own exception classes, and can be
driven over time (power, utilisation, energy counter) for telemetry tests. It is only ever
passed explicitly (`collect_inventory(nvml=fake)`); nothing patches the real module.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml

DATA = Path(__file__).parent / "data"


class FakeClock:
    """A monotonic clock that moves only when told to."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class FakeNvml:
    # pynvml's real error hierarchy, so `except nvml.NVMLError` and `.value` behave as on a GPU.
    NVMLError = pynvml.NVMLError
    NVML_SUCCESS = pynvml.NVML_SUCCESS
    NVML_ERROR_UNINITIALIZED = pynvml.NVML_ERROR_UNINITIALIZED
    NVML_ERROR_NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION
    NVML_ERROR_DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
    NVML_ERROR_LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH
    NVML_ERROR_INVALID_ARGUMENT = pynvml.NVML_ERROR_INVALID_ARGUMENT
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(
        self,
        recording: dict[str, Any],
        *,
        clock: FakeClock | None = None,
        init_error: int | None = None,
        failures: dict[str, int] | None = None,
    ) -> None:
        self.recording = copy.deepcopy(recording)
        self.devices: list[dict[str, Any]] = self.recording["devices"]
        self.clock = clock or FakeClock()
        self.init_error = init_error
        self.failures = dict(failures or {})
        self.init_count = 0
        self.shutdown_count = 0
        self.calls: list[str] = []

    @classmethod
    def from_recording(cls, name: str = "h200_nvml.json", **kwargs: Any) -> FakeNvml:
        return cls(json.loads((DATA / name).read_text()), **kwargs)

    # --- driving the device ---------------------------------------------------------------

    def set_load(
        self,
        index: int,
        *,
        power_w: float | None = None,
        util_pct: int | None = None,
        memory_used: int | None = None,
    ) -> None:
        dev = self.devices[index]
        if power_w is not None:
            dev["power_usage_mw"] = int(power_w * 1000)
        if util_pct is not None:
            dev["utilization"]["gpu"] = util_pct
        if memory_used is not None:
            total = dev["memory"]["total"]
            dev["memory"].update(used=memory_used, free=total - memory_used)

    def advance(self, seconds: float) -> None:
        """Let time pass at the current load: the energy counter integrates power."""
        self.clock.now += seconds
        for dev in self.devices:
            dev["total_energy_mj"] += int(dev["power_usage_mw"] * seconds)

    # --- pynvml's API ---------------------------------------------------------------------

    def _enter(self, name: str, handle: _Handle | None = None) -> dict[str, Any] | None:
        self.calls.append(name)
        if name not in ("nvmlInit", "nvmlShutdown") and self.init_count <= self.shutdown_count:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        if name in self.failures:
            raise pynvml.NVMLError(self.failures[name])
        if handle is None:
            return None
        dev = self.devices[handle.index]
        if name in dev.get("unsupported", ()):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return dev

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.shutdown_count += 1

    def nvmlSystemGetDriverVersion(self) -> str:
        self._enter("nvmlSystemGetDriverVersion")
        return str(self.recording["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return int(self.recording["cuda_driver_version"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        self._enter("nvmlSystemGetNVMLVersion")
        return str(self.recording["nvml_version"])

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.devices):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        return str(self._dev("nvmlDeviceGetName", handle)["name"])

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        return str(self._dev("nvmlDeviceGetUUID", handle)["uuid"])

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle) -> SimpleNamespace:
        return SimpleNamespace(**self._dev("nvmlDeviceGetMemoryInfo", handle)["memory"])

    def nvmlDeviceGetCudaComputeCapability(self, handle: _Handle) -> tuple[int, int]:
        major, minor = self._dev("nvmlDeviceGetCudaComputeCapability", handle)["compute_capability"]
        return int(major), int(minor)

    def nvmlDeviceGetPciInfo(self, handle: _Handle) -> SimpleNamespace:
        bus_id = self._dev("nvmlDeviceGetPciInfo", handle)["pci_bus_id"]
        return SimpleNamespace(busId=bus_id.encode())  # a c_char array: bytes, as in pynvml

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: _Handle) -> int:
        return int(self._dev("nvmlDeviceGetEnforcedPowerLimit", handle)["power_limit_mw"])

    def nvmlDeviceGetPowerUsage(self, handle: _Handle) -> int:
        return int(self._dev("nvmlDeviceGetPowerUsage", handle)["power_usage_mw"])

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: _Handle) -> int:
        return int(self._dev("nvmlDeviceGetTotalEnergyConsumption", handle)["total_energy_mj"])

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> SimpleNamespace:
        return SimpleNamespace(**self._dev("nvmlDeviceGetUtilizationRates", handle)["utilization"])

    def nvmlDeviceGetTemperature(self, handle: _Handle, sensor: int) -> int:
        dev = self._dev("nvmlDeviceGetTemperature", handle)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int(dev["temperature_c"])

    def _dev(self, name: str, handle: _Handle) -> dict[str, Any]:
        dev = self._enter(name, handle)
        assert dev is not None
        return dev
