import time

import httpx
import pynvml
import pytest
from fake_nvml import FakeNvml
from prometheus_client import generate_latest

from worker.telemetry import TelemetryError, TelemetrySampler

UUID = "GPU-5f3b1c2e-8d4a-4e7b-9c61-2a0f7e9d4b38"


def _sampler(fake, **kw):
    return TelemetrySampler(fake, clock=fake.clock, wall_clock=lambda: 1_700_000_000.0, **kw)


def _run_job(fake, sampler, seconds, job="job-1"):
    sampler.start_job(job)
    for _ in range(seconds):
        fake.advance(1.0)
        sampler.sample_once()
    return sampler.stop_job(job)


def test_gpu_seconds_and_energy_from_the_energy_counter():
    fake = FakeNvml.from_recording()
    fake.set_load(0, power_w=500, util_pct=100, memory_used=40 * 2**30)
    sampler = _sampler(fake)
    usage = _run_job(fake, sampler, 10)
    assert usage.gpu_uuids == (UUID,)
    assert usage.duration_s == pytest.approx(10.0)
    assert usage.gpu_seconds == pytest.approx(10.0)
    assert usage.gpu_busy_seconds == pytest.approx(10.0)
    assert usage.energy_source == "counter"
    assert usage.energy_j == pytest.approx(5000.0)  # 500 W for 10 s
    assert usage.samples == 12 and not usage.running


def test_energy_integrates_power_without_a_counter():
    fake = FakeNvml.from_recording()
    fake.devices[0]["unsupported"] = ["nvmlDeviceGetTotalEnergyConsumption"]
    fake.set_load(0, power_w=100, util_pct=50)
    sampler = _sampler(fake)
    sampler.start_job("ramp")
    for watts in (100, 300, 300, 100):  # samples 1 s apart
        fake.set_load(0, power_w=watts)
        fake.advance(1.0)
        sampler.sample_once()
    usage = sampler.stop_job("ramp")
    assert usage.energy_source == "power-integral"
    # Trapezoids over 100,100,300,300,100,100 W (start, 4 samples, stop at the same instant).
    assert usage.energy_j == pytest.approx(100 + 200 + 300 + 200)
    assert usage.gpu_busy_seconds == pytest.approx(2.0)
    assert usage.gpu_seconds == pytest.approx(4.0)


def test_running_job_usage_and_snapshot_totals():
    fake = FakeNvml.from_recording()
    fake.set_load(0, power_w=200, util_pct=80)
    sampler = _sampler(fake)
    sampler.start_job("a")
    fake.advance(3.0)
    sampler.sample_once()
    running = sampler.job_usage("a")
    assert running.running and running.gpu_seconds == pytest.approx(3.0)
    assert running.energy_j == pytest.approx(600.0)
    snap = sampler.snapshot()
    assert [u.job_id for u in snap.active_jobs] == ["a"]
    assert snap.gpu_seconds_total == pytest.approx(3.0)
    fake.advance(2.0)
    sampler.stop_job("a")
    snap = sampler.snapshot()
    assert snap.active_jobs == () and snap.jobs_completed == 1
    assert snap.gpu_seconds_total == pytest.approx(5.0)
    assert snap.energy_j_total == pytest.approx(1000.0)
    d = snap.to_dict()
    assert d["latest"]["gpus"][0]["power_w"] == pytest.approx(200.0)
    assert d["latest"]["gpus"][0]["temperature_c"] == 29


def test_metering_misuse_is_an_error():
    fake = FakeNvml.from_recording()
    sampler = _sampler(fake)
    with pytest.raises(TelemetryError, match="not being metered"):
        sampler.stop_job("nope")
    sampler.start_job("x")
    with pytest.raises(TelemetryError, match="already"):
        sampler.start_job("x")
    with pytest.raises(TelemetryError, match="lacks"):
        sampler.start_job("y", ["GPU-does-not-exist"])


def test_prometheus_exposition_has_the_metrics():
    fake = FakeNvml.from_recording()
    fake.set_load(0, power_w=450, util_pct=75, memory_used=2**30)
    sampler = _sampler(fake)
    _run_job(fake, sampler, 4)
    text = generate_latest(sampler.registry).decode()
    labels = f'gpu="0",name="NVIDIA H200",uuid="{UUID}"'
    assert f"proofnet_worker_gpu_utilization_ratio{{{labels}}} 0.75" in text
    assert f"proofnet_worker_gpu_power_watts{{{labels}}} 450.0" in text
    assert f"proofnet_worker_gpu_memory_used_bytes{{{labels}}} 1.073741824e+09" in text
    assert f"proofnet_worker_gpu_temperature_celsius{{{labels}}} 29.0" in text
    assert f"proofnet_worker_gpu_energy_joules_total{{{labels}}}" in text
    assert "proofnet_worker_job_gpu_seconds_total 4.0" in text
    assert "proofnet_worker_job_energy_joules_total 1800.0" in text
    assert "proofnet_worker_jobs_completed_total 1.0" in text
    assert "proofnet_worker_jobs_active 0.0" in text
    assert "proofnet_worker_memory_used_bytes" in text
    # Its own registry: nothing from the process-global default one.
    assert "python_gc_objects_collected_total" not in text


def test_metrics_endpoint_serves_the_registry():
    fake = FakeNvml.from_recording()
    sampler = _sampler(fake)
    sampler.sample_once()
    server = sampler.serve_metrics(0)
    try:
        body = httpx.get(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).text
    finally:
        server.shutdown()
    assert "proofnet_worker_gpu_power_watts" in body


def test_without_nvml_the_host_is_still_sampled(tmp_path):
    fake = FakeNvml.from_recording(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "meminfo").write_text("MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 400 kB\n")
    (proc / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    sampler = _sampler(fake, proc=proc)
    first = sampler.sample_once()
    assert first.gpus == () and "Shared Library Not Found" in sampler.gpu_unavailable_reason
    assert first.host.ram_total_bytes == 1000 * 1024
    assert first.host.ram_used_bytes == 600 * 1024
    assert first.host.cpu_utilization is None  # needs two readings
    (proc / "stat").write_text("cpu  175 0 100 825 0 0 0 0 0 0\n")
    assert sampler.sample_once().host.cpu_utilization == pytest.approx(0.75)
    sampler.start_job("cpu-job")
    usage = sampler.stop_job("cpu-job")
    assert usage.gpu_seconds == 0 and usage.energy_source == "none" and usage.energy_j is None


def test_background_thread_samples_until_stopped():
    fake = FakeNvml.from_recording()
    sampler = TelemetrySampler(fake, interval_s=0.02)
    with sampler:
        deadline = time.monotonic() + 60  # a hang bound
        while sampler.snapshot().latest is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sampler.snapshot().latest is not None
    calls = len(fake.calls)
    time.sleep(0.1)
    assert len(fake.calls) == calls  # stopped, and NVML shut down
    assert fake.shutdown_count == fake.init_count == 1


def test_sensor_failures_are_counted_not_fatal():
    fake = FakeNvml.from_recording(
        failures={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_GPU_IS_LOST}
    )
    sampler = _sampler(fake)
    sample = sampler.sample_once()
    assert sample.gpus[0].power_w is None and sample.gpus[0].temperature_c == 29
    assert sampler.snapshot().sample_errors == 1
