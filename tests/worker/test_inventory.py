import copy
import sys

import pynvml
import pytest
from fake_nvml import FakeNvml

from worker.inventory import InventoryError, collect_inventory, record_nvml


def test_recorded_h200_gives_its_inventory(tmp_path):
    fake = FakeNvml.from_recording()
    inv = collect_inventory(fake, work_dir=tmp_path / "work")
    assert not inv.cpu_only and inv.cpu_only_reason is None
    assert inv.driver_version == "550.90.07"
    assert inv.cuda_version == "12.4"
    (gpu,) = inv.gpus
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H200"
    assert gpu.uuid == "GPU-5f3b1c2e-8d4a-4e7b-9c61-2a0f7e9d4b38"
    assert gpu.memory_total_bytes == 150754820096
    assert gpu.compute_capability == (9, 0)
    assert gpu.pci_bus_id == "00000000:19:00.0"  # decoded from pynvml's bytes
    assert gpu.power_limit_w == 700.0
    assert fake.init_count == fake.shutdown_count == 1


def test_host_part_describes_this_machine(tmp_path):
    inv = collect_inventory(FakeNvml.from_recording(), work_dir=tmp_path / "not" / "yet")
    host = inv.host
    assert host.cpu_count >= 1
    assert host.ram_total_bytes > 0
    assert host.disk_free_bytes > 0  # measured on the nearest existing parent
    assert host.work_dir == str(tmp_path / "not" / "yet")
    assert host.cpu_model and host.os and host.python.startswith("3.")
    assert inv.to_dict()["gpus"][0]["uuid"].startswith("GPU-")


def test_two_gpus_are_listed_in_nvml_order(tmp_path):
    fake = FakeNvml.from_recording()
    second = copy.deepcopy(fake.devices[0])
    second.update(index=1, uuid="GPU-00000000-0000-0000-0000-000000000001")
    second["pci_bus_id"] = "00000000:3B:00.0"
    fake.devices.append(second)
    inv = collect_inventory(fake, work_dir=tmp_path)
    assert [g.index for g in inv.gpus] == [0, 1]
    assert inv.gpus[1].uuid.endswith("0001") and inv.gpus[1].pci_bus_id == "00000000:3B:00.0"


def test_unsupported_power_limit_is_none_not_an_error(tmp_path):
    fake = FakeNvml.from_recording()
    fake.devices[0]["unsupported"] = ["nvmlDeviceGetEnforcedPowerLimit"]
    (gpu,) = collect_inventory(fake, work_dir=tmp_path).gpus
    assert gpu.power_limit_w is None


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver is not loaded"),
    ],
)
def test_no_nvidia_stack_is_cpu_only_with_reason(tmp_path, code, words):
    inv = collect_inventory(FakeNvml.from_recording(init_error=code), work_dir=tmp_path)
    assert inv.cpu_only and inv.gpus == ()
    assert words in inv.cpu_only_reason
    assert inv.driver_version is None and inv.cuda_version is None


def test_missing_nvidia_ml_py_is_cpu_only(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    inv = collect_inventory(work_dir=tmp_path)
    assert inv.cpu_only
    assert "nvidia-ml-py" in inv.cpu_only_reason


def test_zero_gpus_is_cpu_only(tmp_path):
    fake = FakeNvml.from_recording()
    fake.devices.clear()
    inv = collect_inventory(fake, work_dir=tmp_path)
    assert inv.cpu_only and "no GPUs" in inv.cpu_only_reason
    assert inv.driver_version == "550.90.07"


def test_nvml_error_midway_raises_with_cause(tmp_path):
    fake = FakeNvml.from_recording(failures={"nvmlDeviceGetUUID": pynvml.NVML_ERROR_GPU_IS_LOST})
    with pytest.raises(InventoryError, match=r"UUID for GPU 0: GPU is lost") as info:
        collect_inventory(fake, work_dir=tmp_path)
    assert isinstance(info.value.__cause__, pynvml.NVMLError_GpuIsLost)
    assert fake.shutdown_count == 1  # NVML released even on failure


def test_broken_driver_is_an_error_not_cpu_only(tmp_path):
    fake = FakeNvml.from_recording(init_error=pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH)
    with pytest.raises(InventoryError, match="reboot") as info:
        collect_inventory(fake, work_dir=tmp_path)
    assert info.value.__cause__.value == pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH


def test_recording_replays_to_the_same_inventory(tmp_path):
    fake = FakeNvml.from_recording()
    recording = record_nvml(fake)
    assert recording["devices"][0]["unsupported"] == []
    replayed = collect_inventory(FakeNvml(recording), work_dir=tmp_path)
    assert replayed.gpus == collect_inventory(fake, work_dir=tmp_path).gpus
