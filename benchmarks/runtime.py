"""How much a hardened container adds to starting a job, versus a bare process.

Used by `proofnet bench worker`. Both sides run the same short command end to end:
the process side with subprocess, the container side through `DockerRuntime.execute`
(create with every limit and hardening option, start, wait, remove).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from docker.errors import ImageNotFound

from worker.runtime.base import ImageUnavailable, InvalidRunSpec, Resources, RunReason, RunSpec
from worker.runtime.docker_runtime import DockerRuntime, connect

DEFAULT_IMAGE = "proofnet/test-numpy:local"
DEFAULT_ARGV = ("python3", "-c", "pass")


@dataclass(frozen=True)
class StartOverhead:
    argv: tuple[str, ...]
    image_id: str
    storage_driver: str
    process_samples_s: tuple[float, ...]
    container_samples_s: tuple[float, ...]

    @property
    def process_median_s(self) -> float:
        return statistics.median(self.process_samples_s)

    @property
    def container_median_s(self) -> float:
        return statistics.median(self.container_samples_s)

    @property
    def overhead_s(self) -> float:
        return self.container_median_s - self.process_median_s

    def summary(self) -> str:
        return (
            f"start overhead ({' '.join(self.argv)}, median of {len(self.container_samples_s)}): "
            f"process {self.process_median_s * 1000:.1f} ms, "
            f"container {self.container_median_s * 1000:.1f} ms "
            f"(+{self.overhead_s * 1000:.1f} ms; storage driver {self.storage_driver})"
        )


def measure_start_overhead(
    runtime: DockerRuntime,
    image: str,
    runs: int = 10,
    argv: tuple[str, ...] = DEFAULT_ARGV,
) -> StartOverhead:
    """Median wall time of `runs` starts each way, after one unmeasured warm-up each.

    `image` must be pinned (name@sha256:... or an image ID) and contain argv[0].
    """
    if runs < 1:
        raise InvalidRunSpec(f"runs must be >= 1, got {runs}")
    host_cmd = shutil.which(argv[0])
    if host_cmd is None:
        raise InvalidRunSpec(f"{argv[0]!r} is not on this host's PATH")
    image_id = runtime.prepare(image)

    def bare() -> float:
        t = time.perf_counter()
        subprocess.run([host_cmd, *argv[1:]], check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t

    with tempfile.TemporaryDirectory(prefix="proofnet-bench-") as tmp:
        job = RunSpec(
            image=image_id,
            argv=argv,
            work_dir=Path(tmp),
            resources=Resources(cpus=1.0, memory_bytes=256 * 1024 * 1024, pids_limit=64),
            wall_clock_limit_s=60.0,
            job_id="bench",
        )

        def contained() -> float:
            t = time.perf_counter()
            result = runtime.execute(job)
            elapsed = time.perf_counter() - t
            if result.reason is not RunReason.COMPLETED:
                raise ImageUnavailable(f"benchmark container did not complete: {result.message}")
            return elapsed

        bare()
        contained()
        process = tuple(bare() for _ in range(runs))
        container = tuple(contained() for _ in range(runs))
    driver = str(runtime.client.info().get("Driver", "unknown"))
    return StartOverhead(argv, image_id, driver, process, container)


def bench_worker(runs: int = 10, image: str = DEFAULT_IMAGE) -> StartOverhead:
    """Connect via DOCKER_HOST and measure with a local image (a tag is resolved to its ID)."""
    client = connect()
    try:
        if "@" not in image and not image.startswith("sha256:"):
            try:
                image = str(client.images.get(image).id)
            except ImageNotFound as exc:
                raise ImageUnavailable(
                    f"benchmark image {image} is not present (scripts/ci/build-test-image.sh "
                    f"builds the default one)"
                ) from exc
        return measure_start_overhead(DockerRuntime(client, pull_missing=False), image, runs)
    finally:
        client.close()
