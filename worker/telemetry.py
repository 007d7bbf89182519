"""Telemetry: a 1 Hz sampler of GPU and host state, per-job GPU-seconds and energy metering.

One thread reads NVML (utilisation, memory used, power, temperature, the energy counter where
the GPU has one) and /proc (CPU and RAM) once per interval; NVML's power figure is itself a
1 s average, so sampling faster adds nothing. Jobs are metered between `start_job` and
`stop_job`: GPU-seconds are allocation (wall time x GPUs assigned), energy is the difference
of the GPUs' hardware energy counters when every assigned GPU has one (Volta and later), else
the trapezoidal integral of the sampled power. Metrics are exposed on a registry of the
sampler's own (never the process-global one) and via `snapshot()` for reports to the API.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

log = logging.getLogger(__name__)

_NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED: the GPU lacks this sensor; not an error


class TelemetryError(Exception):
    """Metering was used wrongly (unknown job, unknown GPU) or NVML cannot be opened."""


@dataclass(frozen=True)
class GpuSample:
    index: int
    uuid: str
    utilization_pct: int | None
    memory_used_bytes: int | None
    power_w: float | None
    temperature_c: int | None
    energy_j: float | None  # the device's energy counter (since driver load), if it has one


@dataclass(frozen=True)
class HostSample:
    cpu_utilization: float | None  # 0..1 over the interval since the previous sample
    ram_used_bytes: int | None
    ram_total_bytes: int | None


@dataclass(frozen=True)
class Sample:
    monotonic_s: float
    wall_time: float
    gpus: tuple[GpuSample, ...]
    host: HostSample


EnergySource = Literal["counter", "power-integral", "none"]


@dataclass(frozen=True)
class JobUsage:
    job_id: str
    gpu_uuids: tuple[str, ...]
    started_at: float  # wall-clock seconds
    duration_s: float
    gpu_seconds: float  # allocation: duration x GPUs assigned
    gpu_busy_seconds: float  # utilisation-weighted, from samples
    energy_j: float | None
    energy_source: EnergySource
    samples: int
    running: bool


@dataclass(frozen=True)
class TelemetrySnapshot:
    taken_at: float
    latest: Sample | None
    active_jobs: tuple[JobUsage, ...]
    jobs_completed: int
    gpu_seconds_total: float  # completed jobs plus the running part of active ones
    energy_j_total: float
    sample_errors: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Job:
    job_id: str
    uuids: tuple[str, ...]
    start_mono: float
    start_wall: float
    start_counter_j: dict[str, float | None]
    last: dict[str, GpuSample] = field(default_factory=dict)
    last_mono: float = 0.0
    power_integral_j: float = 0.0
    power_covered: bool = True
    busy_s: float = 0.0
    samples: int = 0


@dataclass
class _GpuHandle:
    index: int
    uuid: str
    name: str
    handle: Any


class TelemetrySampler:
    """Samples at `interval_s` once `start()`ed; `sample_once()` drives it by hand."""

    def __init__(
        self,
        nvml: Any = None,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        proc: Path = Path("/proc"),
    ) -> None:
        if interval_s <= 0:
            raise TelemetryError("interval_s must be positive")
        self._nvml_arg = nvml
        self.interval_s = interval_s
        self._clock = clock
        self._wall = wall_clock
        self._proc = proc
        self._lock = threading.RLock()
        self._nvml: Any = None
        self._gpus: list[_GpuHandle] = []
        self._opened = False
        self.gpu_unavailable_reason: str | None = None
        self._jobs: dict[str, _Job] = {}
        self._latest: Sample | None = None
        self._cpu_prev: tuple[int, int] | None = None
        self._completed = 0
        self._gpu_seconds_done = 0.0
        self._energy_done = 0.0
        self._errors = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._registry: Any = None

    # --- lifecycle ----------------------------------------------------------------------

    def open(self) -> None:
        """Open NVML and enumerate GPUs. Without NVML the sampler still meters the host."""
        with self._lock:
            if self._opened:
                return
            nvml = self._nvml_arg
            if nvml is None:
                try:
                    import pynvml

                    nvml = pynvml
                except ImportError:
                    nvml = None
                    self.gpu_unavailable_reason = "nvidia-ml-py (pynvml) is not installed"
            if nvml is not None:
                try:
                    nvml.nvmlInit()
                except nvml.NVMLError as e:
                    self.gpu_unavailable_reason = f"NVML unavailable: {e}"
                    nvml = None
            if nvml is not None:
                try:
                    for i in range(nvml.nvmlDeviceGetCount()):
                        h = nvml.nvmlDeviceGetHandleByIndex(i)
                        uuid, name = nvml.nvmlDeviceGetUUID(h), nvml.nvmlDeviceGetName(h)
                        self._gpus.append(_GpuHandle(i, _text(uuid), _text(name), h))
                except nvml.NVMLError as e:
                    nvml.nvmlShutdown()
                    raise TelemetryError(f"NVML could not enumerate GPUs: {e}") from e
            self._nvml = nvml
            self._opened = True

    def close(self) -> None:
        self.stop()
        with self._lock:
            if self._nvml is not None:
                with contextlib.suppress(self._nvml.NVMLError):
                    self._nvml.nvmlShutdown()
            self._nvml = None
            self._gpus = []
            self._opened = False

    def start(self) -> None:
        """Sample in a daemon thread every `interval_s` until `stop()`."""
        self.open()
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="proofnet-telemetry", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=5 * self.interval_s + 5)
        self._thread = None

    def __enter__(self) -> TelemetrySampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self) -> None:
        while True:
            try:
                self.sample_once()
            except Exception:  # the sampler must outlive one bad reading
                log.exception("telemetry sample failed")
                with self._lock:
                    self._errors += 1
            if self._stop.wait(self.interval_s):
                return

    @property
    def gpu_uuids(self) -> tuple[str, ...]:
        self.open()
        return tuple(g.uuid for g in self._gpus)

    # --- sampling -------------------------------------------------------------------------

    def sample_once(self) -> Sample:
        self.open()
        with self._lock:
            sample = Sample(
                monotonic_s=self._clock(),
                wall_time=self._wall(),
                gpus=tuple(self._read_gpu(g) for g in self._gpus),
                host=self._read_host(),
            )
            for job in self._jobs.values():
                self._accumulate(job, sample)
            self._latest = sample
            return sample

    def _read_gpu(self, g: _GpuHandle) -> GpuSample:
        nvml = self._nvml

        def read(fn: Any, *args: Any) -> Any:
            try:
                return fn(g.handle, *args)
            except nvml.NVMLError as e:
                if getattr(e, "value", None) != _NOT_SUPPORTED:
                    self._errors += 1
                    log.warning("NVML %s failed for GPU %d: %s", fn.__name__, g.index, e)
                return None

        util = read(nvml.nvmlDeviceGetUtilizationRates)
        memory = read(nvml.nvmlDeviceGetMemoryInfo)
        power_mw = read(nvml.nvmlDeviceGetPowerUsage)
        energy_mj = read(nvml.nvmlDeviceGetTotalEnergyConsumption)
        return GpuSample(
            index=g.index,
            uuid=g.uuid,
            utilization_pct=None if util is None else int(util.gpu),
            memory_used_bytes=None if memory is None else int(memory.used),
            power_w=None if power_mw is None else power_mw / 1000,
            temperature_c=read(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
            energy_j=None if energy_mj is None else energy_mj / 1000,
        )

    def _read_host(self) -> HostSample:
        cpu: float | None = None
        try:
            fields = (self._proc / "stat").read_text().splitlines()[0].split()[1:]
            values = [int(v) for v in fields]
            idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
            total = sum(values[:8])  # guest time is already counted in user
            if self._cpu_prev is not None:
                d_total, d_idle = total - self._cpu_prev[0], idle - self._cpu_prev[1]
                cpu = (d_total - d_idle) / d_total if d_total > 0 else 0.0
            self._cpu_prev = (total, idle)
        except (OSError, ValueError, IndexError):
            pass
        ram_total = ram_used = None
        try:
            info = {}
            for line in (self._proc / "meminfo").read_text().splitlines():
                key, _, rest = line.partition(":")
                info[key] = int(rest.split()[0]) * 1024
            ram_total = info["MemTotal"]
            ram_used = ram_total - info.get("MemAvailable", info.get("MemFree", 0))
        except (OSError, ValueError, IndexError, KeyError):
            pass
        return HostSample(cpu_utilization=cpu, ram_used_bytes=ram_used, ram_total_bytes=ram_total)

    def _accumulate(self, job: _Job, sample: Sample) -> None:
        dt = sample.monotonic_s - job.last_mono
        for g in sample.gpus:
            if g.uuid not in job.uuids:
                continue
            prev = job.last.get(g.uuid)
            if prev is not None and dt > 0:
                if prev.power_w is not None and g.power_w is not None:
                    job.power_integral_j += (prev.power_w + g.power_w) / 2 * dt
                else:
                    job.power_covered = False
                if prev.utilization_pct is not None and g.utilization_pct is not None:
                    job.busy_s += (prev.utilization_pct + g.utilization_pct) / 200 * dt
            job.last[g.uuid] = g
        job.last_mono = sample.monotonic_s
        job.samples += 1

    # --- jobs -----------------------------------------------------------------------------

    def start_job(self, job_id: str, gpu_uuids: Sequence[str] | None = None) -> None:
        """Begin metering `job_id` on `gpu_uuids` (every GPU when None)."""
        self.open()
        with self._lock:
            if job_id in self._jobs:
                raise TelemetryError(f"job {job_id!r} is already being metered")
            known = [g.uuid for g in self._gpus]
            uuids = tuple(known if gpu_uuids is None else gpu_uuids)
            unknown = [u for u in uuids if u not in known]
            if unknown:
                raise TelemetryError(f"job {job_id!r} names GPUs this machine lacks: {unknown}")
            sample = self.sample_once()
            by_uuid = {g.uuid: g for g in sample.gpus}
            job = _Job(
                job_id=job_id,
                uuids=uuids,
                start_mono=sample.monotonic_s,
                start_wall=sample.wall_time,
                start_counter_j={u: by_uuid[u].energy_j for u in uuids},
                last={u: by_uuid[u] for u in uuids},
                last_mono=sample.monotonic_s,
                samples=1,
            )
            self._jobs[job_id] = job

    def stop_job(self, job_id: str) -> JobUsage:
        """Stop metering `job_id` (taking a final sample) and return its usage."""
        with self._lock:
            if job_id not in self._jobs:
                raise TelemetryError(f"job {job_id!r} is not being metered")
            sample = self.sample_once()
            job = self._jobs.pop(job_id)
            usage = self._usage(job, sample, running=False)
            self._completed += 1
            self._gpu_seconds_done += usage.gpu_seconds
            self._energy_done += usage.energy_j or 0.0
            return usage

    def job_usage(self, job_id: str) -> JobUsage:
        """Usage of a running job up to its latest sample."""
        with self._lock:
            if job_id not in self._jobs:
                raise TelemetryError(f"job {job_id!r} is not being metered")
            assert self._latest is not None  # start_job sampled
            return self._usage(self._jobs[job_id], self._latest, running=True)

    def _usage(self, job: _Job, sample: Sample, *, running: bool) -> JobUsage:
        duration = max(0.0, job.last_mono - job.start_mono)
        by_uuid = {g.uuid: g for g in sample.gpus}
        energy: float | None
        source: EnergySource
        end_counters = [by_uuid[u].energy_j if u in by_uuid else None for u in job.uuids]
        start_counters = [job.start_counter_j.get(u) for u in job.uuids]
        deltas = [
            e - s
            for s, e in zip(start_counters, end_counters, strict=True)
            if s is not None and e is not None
        ]
        if job.uuids and len(deltas) == len(job.uuids):
            energy = float(sum(deltas))
            source = "counter"
        elif job.uuids and job.power_covered and job.samples > 1:
            energy, source = job.power_integral_j, "power-integral"
        else:
            energy, source = None, "none"
        return JobUsage(
            job_id=job.job_id,
            gpu_uuids=job.uuids,
            started_at=job.start_wall,
            duration_s=duration,
            gpu_seconds=duration * len(job.uuids),
            gpu_busy_seconds=job.busy_s,
            energy_j=energy,
            energy_source=source,
            samples=job.samples,
            running=running,
        )

    # --- reporting ------------------------------------------------------------------------

    def snapshot(self) -> TelemetrySnapshot:
        with self._lock:
            active = (
                tuple(self._usage(j, self._latest, running=True) for j in self._jobs.values())
                if self._latest is not None
                else ()
            )
            return TelemetrySnapshot(
                taken_at=self._wall(),
                latest=self._latest,
                active_jobs=active,
                jobs_completed=self._completed,
                gpu_seconds_total=self._gpu_seconds_done + sum(u.gpu_seconds for u in active),
                energy_j_total=self._energy_done + sum(u.energy_j or 0.0 for u in active),
                sample_errors=self._errors,
            )

    @property
    def registry(self) -> Any:
        """A prometheus_client CollectorRegistry of this sampler's own."""
        with self._lock:
            if self._registry is None:
                # Imported here so the metering core runs where prometheus_client is absent
                # (e.g. a bare GPU box running scripts/device_check.sh).
                from prometheus_client import CollectorRegistry

                self._registry = CollectorRegistry(auto_describe=True)
                self._registry.register(_Collector(self))
            return self._registry

    def serve_metrics(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve /metrics on `addr:port` from a daemon thread; returns the HTTP server
        (call `.shutdown()` on it to stop). Binds loopback unless told otherwise."""
        from prometheus_client import start_http_server

        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server

    def gpu_names(self) -> dict[str, str]:
        return {g.uuid: g.name for g in self._gpus}


class _Collector:
    """Builds the metric families from the latest snapshot at scrape time."""

    def __init__(self, sampler: TelemetrySampler) -> None:
        self._sampler = sampler

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        snap = self._sampler.snapshot()
        names = self._sampler.gpu_names()
        labels = ["gpu", "uuid", "name"]
        util = GaugeMetricFamily(
            "proofnet_worker_gpu_utilization_ratio", "GPU busy fraction (NVML)", labels=labels
        )
        mem = GaugeMetricFamily(
            "proofnet_worker_gpu_memory_used_bytes", "GPU memory in use", labels=labels
        )
        power = GaugeMetricFamily(
            "proofnet_worker_gpu_power_watts", "GPU power draw, 1 s average", labels=labels
        )
        temp = GaugeMetricFamily(
            "proofnet_worker_gpu_temperature_celsius", "GPU core temperature", labels=labels
        )
        energy = CounterMetricFamily(
            "proofnet_worker_gpu_energy_joules",
            "GPU hardware energy counter since driver load",
            labels=labels,
        )
        if snap.latest is not None:
            for g in snap.latest.gpus:
                lv = [str(g.index), g.uuid, names.get(g.uuid, "")]
                if g.utilization_pct is not None:
                    util.add_metric(lv, g.utilization_pct / 100)
                if g.memory_used_bytes is not None:
                    mem.add_metric(lv, g.memory_used_bytes)
                if g.power_w is not None:
                    power.add_metric(lv, g.power_w)
                if g.temperature_c is not None:
                    temp.add_metric(lv, g.temperature_c)
                if g.energy_j is not None:
                    energy.add_metric(lv, g.energy_j)
        yield from (util, mem, power, temp, energy)
        host = snap.latest.host if snap.latest is not None else None
        cpu = GaugeMetricFamily("proofnet_worker_cpu_utilization_ratio", "Host CPU busy fraction")
        ram = GaugeMetricFamily("proofnet_worker_memory_used_bytes", "Host RAM in use")
        if host is not None and host.cpu_utilization is not None:
            cpu.add_metric([], host.cpu_utilization)
        if host is not None and host.ram_used_bytes is not None:
            ram.add_metric([], host.ram_used_bytes)
        yield from (cpu, ram)
        yield GaugeMetricFamily(
            "proofnet_worker_jobs_active", "Jobs being metered", value=len(snap.active_jobs)
        )
        yield CounterMetricFamily(
            "proofnet_worker_jobs_completed",
            "Jobs metered to completion",
            value=snap.jobs_completed,
        )
        yield CounterMetricFamily(
            "proofnet_worker_job_gpu_seconds",
            "GPU-seconds allocated to jobs (wall time x GPUs)",
            value=snap.gpu_seconds_total,
        )
        yield CounterMetricFamily(
            "proofnet_worker_job_energy_joules", "Energy used by jobs", value=snap.energy_j_total
        )
        yield CounterMetricFamily(
            "proofnet_worker_telemetry_sample_errors",
            "NVML or /proc readings that failed",
            value=snap.sample_errors,
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
