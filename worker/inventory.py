"""What this machine offers: its GPUs as NVML reports them, and the host around them.

NVML (nvidia-ml-py, `import pynvml`) is the source of truth for GPUs, read once at onboarding.
Its errors are translated here, at the boundary: a machine without the NVIDIA driver is a
CPU-only worker with the reason stated, while a driver that is present but broken (version
mismatch, GPU lost) is an `InventoryError`, because onboarding it as CPU-only would hide the
very fault providers most often need to see.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# NVML error codes (stable across NVML versions) meaning "no usable NVIDIA stack here".
_NO_DRIVER_CODES = {
    9: "the NVIDIA kernel driver is not loaded",  # NVML_ERROR_DRIVER_NOT_LOADED
    12: "the NVML library (libnvidia-ml.so.1) was not found: no NVIDIA driver installed",
}
_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
_INIT_HINTS = {
    4: "NVML needs more permissions: check /dev/nvidia* access for this user",
    18: "the NVML library and kernel driver versions differ: reboot or reinstall the driver",
}


class InventoryError(Exception):
    """NVML is present but failed; the message names the call and the GPU."""


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    uuid: str
    memory_total_bytes: int
    compute_capability: tuple[int, int]
    pci_bus_id: str
    power_limit_w: float | None  # None where NVML does not support reading it


@dataclass(frozen=True)
class HostInfo:
    os: str
    kernel: str
    arch: str
    cpu_model: str
    cpu_count: int
    ram_total_bytes: int
    work_dir: str
    disk_free_bytes: int
    python: str


@dataclass(frozen=True)
class Inventory:
    host: HostInfo
    gpus: tuple[GpuInfo, ...]
    driver_version: str | None  # system-wide in NVML, the same for every GPU
    cuda_version: str | None  # highest CUDA version the driver supports, e.g. "12.4"
    cpu_only_reason: str | None

    @property
    def cpu_only(self) -> bool:
        return not self.gpus

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def collect_inventory(nvml: Any = None, *, work_dir: Path) -> Inventory:
    """Read GPUs through `nvml` (the pynvml module unless one is given) and the host, with
    the free disk of `work_dir` (or of its nearest existing parent)."""
    host = collect_host(work_dir)
    if nvml is None:
        try:
            import pynvml

            nvml = pynvml
        except ImportError:
            return Inventory(host, (), None, None, "nvidia-ml-py (pynvml) is not installed")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        code = int(getattr(e, "value", -1))
        if code in _NO_DRIVER_CODES:
            return Inventory(host, (), None, None, _NO_DRIVER_CODES[code])
        hint = _INIT_HINTS.get(code, "see `nvidia-smi` for the driver's own diagnosis")
        raise InventoryError(f"NVML initialisation failed: {e} ({hint})") from e
    try:
        driver = _text(_call(nvml, "driver version", nvml.nvmlSystemGetDriverVersion))
        cuda = _cuda_version(
            _call(nvml, "CUDA driver version", nvml.nvmlSystemGetCudaDriverVersion)
        )
        count = _call(nvml, "GPU count", nvml.nvmlDeviceGetCount)
        gpus = tuple(_gpu(nvml, i) for i in range(count))
    finally:
        # Shutdown failing cannot change what was read.
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    reason = None if gpus else "NVML is working but reports no GPUs"
    return Inventory(host, gpus, driver, cuda, reason)


def _call(nvml: Any, what: str, fn: Any, *args: Any, gpu: int | None = None) -> Any:
    try:
        return fn(*args)
    except nvml.NVMLError as e:
        where = f" for GPU {gpu}" if gpu is not None else ""
        raise InventoryError(f"NVML could not read the {what}{where}: {e}") from e


def _optional(nvml: Any, fn: Any, *args: Any) -> Any:
    """A value some GPUs do not report (NVML_ERROR_NOT_SUPPORTED -> None)."""
    try:
        return fn(*args)
    except nvml.NVMLError as e:
        if getattr(e, "value", None) == _NOT_SUPPORTED:
            return None
        raise


def _gpu(nvml: Any, index: int) -> GpuInfo:
    h = _call(nvml, "device handle", nvml.nvmlDeviceGetHandleByIndex, index, gpu=index)
    name = _text(_call(nvml, "name", nvml.nvmlDeviceGetName, h, gpu=index))
    uuid = _text(_call(nvml, "UUID", nvml.nvmlDeviceGetUUID, h, gpu=index))
    memory = _call(nvml, "memory info", nvml.nvmlDeviceGetMemoryInfo, h, gpu=index)
    major, minor = _call(
        nvml, "compute capability", nvml.nvmlDeviceGetCudaComputeCapability, h, gpu=index
    )
    pci = _call(nvml, "PCI info", nvml.nvmlDeviceGetPciInfo, h, gpu=index)
    limit_mw = _call(
        nvml, "power limit", _optional, nvml, nvml.nvmlDeviceGetEnforcedPowerLimit, h, gpu=index
    )
    return GpuInfo(
        index=index,
        name=name,
        uuid=uuid,
        memory_total_bytes=int(memory.total),
        compute_capability=(int(major), int(minor)),
        pci_bus_id=_text(pci.busId),
        power_limit_w=None if limit_mw is None else limit_mw / 1000,
    )


def _text(value: Any) -> str:
    # pynvml returns str for most strings but bytes for c_char fields such as PciInfo.busId.
    return value.decode() if isinstance(value, bytes) else str(value)


def _cuda_version(raw: int) -> str:
    """NVML encodes CUDA versions as 1000 * major + 10 * minor (12040 -> "12.4")."""
    return f"{raw // 1000}.{(raw % 1000) // 10}"


# --- host ------------------------------------------------------------------------------------


def collect_host(work_dir: Path, proc: Path = Path("/proc")) -> HostInfo:
    existing = _nearest_existing(Path(work_dir).absolute())
    return HostInfo(
        os=_os_name(),
        kernel=platform.release(),
        arch=platform.machine(),
        cpu_model=_cpu_model(proc) or platform.processor() or "unknown",
        cpu_count=len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1),
        ram_total_bytes=_ram_total(proc),
        work_dir=str(Path(work_dir).absolute()),
        disk_free_bytes=shutil.disk_usage(existing).free,
        python=platform.python_version(),
    )


def _nearest_existing(path: Path) -> Path:
    # The work dir may not exist before the first onboarding; its filesystem does.
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path("/")


def _os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return platform.platform()


def _cpu_model(proc: Path) -> str | None:
    try:
        for line in (proc / "cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def _ram_total(proc: Path) -> int:
    try:
        for line in (proc / "meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))


# --- recording -------------------------------------------------------------------------------


def record_nvml(nvml: Any = None) -> dict[str, Any]:
    """Everything the worker reads from NVML, in the recording format that the test suite's
    fake device replays (tests/worker/fake_nvml.py). For support tickets about wrong
    inventory, and to record new device models. Unsupported readings are listed, not fatal."""
    if nvml is None:
        import pynvml

        nvml = pynvml
    nvml.nvmlInit()
    try:
        devices = []
        for i in range(nvml.nvmlDeviceGetCount()):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            unsupported: list[str] = []

            def read(fn: Any, *args: Any, _h: Any = h, _u: list[str] = unsupported) -> Any:
                try:
                    return fn(_h, *args)
                except nvml.NVMLError:
                    _u.append(fn.__name__)
                    return None

            memory = read(nvml.nvmlDeviceGetMemoryInfo)
            util = read(nvml.nvmlDeviceGetUtilizationRates)
            pci = read(nvml.nvmlDeviceGetPciInfo)
            devices.append(
                {
                    "index": i,
                    "name": _text(nvml.nvmlDeviceGetName(h)),
                    "uuid": _text(nvml.nvmlDeviceGetUUID(h)),
                    "memory": None
                    if memory is None
                    else {"total": memory.total, "free": memory.free, "used": memory.used},
                    "compute_capability": list(nvml.nvmlDeviceGetCudaComputeCapability(h)),
                    "pci_bus_id": None if pci is None else _text(pci.busId),
                    "power_limit_mw": read(nvml.nvmlDeviceGetEnforcedPowerLimit),
                    "power_usage_mw": read(nvml.nvmlDeviceGetPowerUsage),
                    "total_energy_mj": read(nvml.nvmlDeviceGetTotalEnergyConsumption),
                    "utilization": None
                    if util is None
                    else {"gpu": util.gpu, "memory": util.memory},
                    "temperature_c": read(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
                    "unsupported": unsupported,
                }
            )
        return {
            "recorded": {"format": "proofnet-nvml-recording/v1", "source": "record_nvml()"},
            "driver_version": _text(nvml.nvmlSystemGetDriverVersion()),
            "cuda_driver_version": nvml.nvmlSystemGetCudaDriverVersion(),
            "nvml_version": _text(nvml.nvmlSystemGetNVMLVersion()),
            "devices": devices,
        }
    finally:
        nvml.nvmlShutdown()
