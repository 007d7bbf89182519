"""Onboarding check: do containers on this machine get the GPUs NVML reports?

A throwaway container asks for every GPU (as `docker run --gpus all` does) and lists them with
nvidia-smi; its UUIDs are compared with NVML's. Running that container and classifying what
goes wrong is `worker.runtime.gpu_diagnosis.run_gpu_check`, shared with the job runtime. This
layer adds what only onboarding needs: a missing docker SDK, an unreachable daemon with a fix
hint, pulling the check image, the NVML comparison, and the problem codes of the registration.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

DEFAULT_IMAGE = "nvidia/cuda:12.4.1-base-ubuntu22.04"

Problem = Literal[
    "ok",
    "skipped",
    "no-docker-sdk",
    "daemon-unreachable",
    "image-missing",
    "no-nvidia-runtime",
    "driver-mismatch",
    "driver-not-loaded",
    "gpu-count-mismatch",
    "uuid-mismatch",
    "timeout",
    "container-failed",
]

# gpu_diagnosis.GpuProblem value -> registration problem code (the ones not compared with NVML).
_PROBLEMS: dict[str, Problem] = {
    "engine_unavailable": "daemon-unreachable",
    "image_unavailable": "image-missing",
    "no_nvidia_runtime": "no-nvidia-runtime",
    "driver_mismatch": "driver-mismatch",
    "driver_not_loaded": "driver-not-loaded",
    "gpu_not_found": "uuid-mismatch",
    "timeout": "timeout",
    "unknown": "container-failed",
}


@dataclass(frozen=True)
class RuntimeCheck:
    status: Literal["ok", "failed", "skipped"]
    problem: Problem
    diagnosis: str
    fix: str = ""
    nvml_uuids: tuple[str, ...] = ()
    container_uuids: tuple[str, ...] = ()
    detail: str = ""  # raw engine or container text, for a bug report

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def check_gpu_runtime(
    nvml_uuids: Sequence[str],
    *,
    image: str = DEFAULT_IMAGE,
    client: Any = None,
    pull: bool = True,
    timeout_s: float = 120.0,
) -> RuntimeCheck:
    """Run nvidia-smi in a container given every GPU and compare with `nvml_uuids`."""
    expected = tuple(nvml_uuids)
    if not expected:
        return RuntimeCheck("skipped", "skipped", "no GPUs in the inventory: nothing to check")

    def failed(problem: Problem, diagnosis: str, fix: str = "", **kw: Any) -> RuntimeCheck:
        return RuntimeCheck("failed", problem, diagnosis, fix, nvml_uuids=expected, **kw)

    try:
        import docker
        import docker.errors
        import requests

        from worker.runtime.gpu_diagnosis import GpuProblem, run_gpu_check
    except ImportError as e:
        return failed(
            "no-docker-sdk", f"the docker Python SDK is missing: {e}", "pip install docker"
        )

    if client is None:
        try:
            client = docker.from_env(timeout=int(timeout_s))
        except docker.errors.DockerException as e:
            return failed("daemon-unreachable", *_unreachable(str(e)), detail=str(e))
    try:
        client.ping()
    except (docker.errors.DockerException, requests.RequestException) as e:
        return failed("daemon-unreachable", *_unreachable(str(e)), detail=str(e))

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        if not pull:
            return failed(
                "image-missing",
                f"the GPU check image {image} is not present",
                f"`docker pull {image}`, or pass a local CUDA image with --gpu-image",
            )
        try:
            client.images.pull(image)
        except (docker.errors.DockerException, requests.RequestException) as e:
            return failed(
                "image-missing",
                f"the GPU check image {image} is not present and could not be pulled",
                "pull it once with network access, or pass a local CUDA image with --gpu-image",
                detail=str(e),
            )
    except (docker.errors.DockerException, requests.RequestException) as e:
        return failed(
            "daemon-unreachable",
            f"the Docker engine failed: {e}",
            "check `docker info` and the engine's log (`journalctl -u docker`)",
            detail=str(e),
        )

    # driver "": let the engine pick the GPU driver, as `docker run --gpus all` does.
    run = run_gpu_check(
        client, image, -1, driver="", timeout_s=timeout_s, purpose="onboarding-gpu-check"
    )
    if run.problem not in (GpuProblem.OK, GpuProblem.NO_GPUS):
        return failed(_PROBLEMS[run.problem], run.diagnosis, run.fix, detail=run.detail)

    seen = tuple(g.uuid for g in run.gpus)
    if len(seen) != len(expected):
        missing = sorted(set(expected) - set(seen))
        return failed(
            "gpu-count-mismatch",
            f"containers see {len(seen)} GPU(s) but NVML reports {len(expected)}"
            + (f"; missing: {', '.join(missing)}" if missing else ""),
            "check NVIDIA_VISIBLE_DEVICES / the toolkit's device list and that no GPU is "
            "reserved by another runtime; `docker run --rm --gpus all "
            f"{image} nvidia-smi -L` should list them all",
            container_uuids=seen,
            detail=run.detail,
        )
    if set(seen) != set(expected):
        return failed(
            "uuid-mismatch",
            "containers see different GPUs from the ones NVML reports "
            f"(container: {', '.join(seen)}; NVML: {', '.join(expected)})",
            "the container runtime is pointed at another device set (CDI spec out of date?): "
            "regenerate it with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`",
            container_uuids=seen,
            detail=run.detail,
        )
    return RuntimeCheck(
        "ok",
        "ok",
        f"containers see all {len(seen)} GPU(s) NVML reports",
        nvml_uuids=expected,
        container_uuids=seen,
        detail=run.detail,
    )


def _unreachable(text: str) -> tuple[str, str]:
    if "Permission denied" in text:
        return (
            "this user may not use the Docker socket",
            "add the user to the docker group (`sudo usermod -aG docker $USER`) and log in again",
        )
    if "No such file" in text or "Connection refused" in text or "FileNotFound" in text:
        return (
            "the Docker engine is not running or not installed",
            "install Docker Engine and start it (`sudo systemctl enable --now docker`)",
        )
    return ("the Docker engine cannot be reached", "check `docker info` and DOCKER_HOST")
