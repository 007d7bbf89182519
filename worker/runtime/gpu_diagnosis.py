"""Does the container engine hand NVIDIA GPUs to containers? Checked at onboarding.

"GPU not detected" is the commonest complaint in peer networks, usually found at job
time. `validate_gpu_runtime` runs a tiny container with a GPU device request and turns
whatever goes wrong into a diagnosis the provider can act on.
"""

from __future__ import annotations

import contextlib
import enum
import re
from dataclasses import dataclass
from typing import Any

import requests
from docker import DockerClient
from docker.errors import APIError, DockerException, ImageNotFound
from docker.types import DeviceRequest


class GpuProblem(enum.StrEnum):
    OK = "ok"
    ENGINE_UNAVAILABLE = "engine_unavailable"
    NO_NVIDIA_RUNTIME = "no_nvidia_runtime"
    DRIVER_NOT_LOADED = "driver_not_loaded"
    DRIVER_MISMATCH = "driver_mismatch"
    NO_GPUS = "no_gpus"
    GPU_NOT_FOUND = "gpu_not_found"
    IMAGE_UNAVAILABLE = "image_unavailable"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class GpuSeen:
    uuid: str
    name: str
    driver_version: str


@dataclass(frozen=True)
class GpuDiagnosis:
    problem: GpuProblem
    message: str
    gpus: tuple[GpuSeen, ...] = ()
    # Raw engine / nvidia-smi text, for a bug report.
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.problem is GpuProblem.OK


_FIX_TOOLKIT = (
    "install the NVIDIA Container Toolkit, run `nvidia-ctk runtime configure --runtime=docker` "
    "(for rootless Docker add `--config=$HOME/.config/docker/daemon.json`) and restart Docker"
)

# Ordered: the first pattern that matches the engine's or nvidia-smi's text wins.
_PATTERNS: tuple[tuple[re.Pattern[str], GpuProblem, str], ...] = (
    (
        re.compile(r'could not select device driver "[^"]*" with capabilities', re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        f"no NVIDIA runtime: Docker cannot pass GPUs to containers; {_FIX_TOOLKIT}",
    ),
    (
        re.compile(r"unknown or invalid runtime name: nvidia|unresolvable CDI devices", re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        f"no NVIDIA runtime registered with Docker; {_FIX_TOOLKIT}",
    ),
    (
        re.compile(r"driver/library version mismatch", re.I),
        GpuProblem.DRIVER_MISMATCH,
        "NVIDIA driver mismatch: the loaded kernel module and the user-space driver "
        "libraries differ (usually after a driver upgrade); reboot the host or reload "
        "the nvidia kernel modules",
    ),
    (
        re.compile(r"unsatisfied condition: cuda\s*>=\s*([0-9.]+)", re.I),
        GpuProblem.DRIVER_MISMATCH,
        "NVIDIA driver too old for the image's CUDA version; upgrade the host driver "
        "or use an image built for an older CUDA",
    ),
    (
        re.compile(
            r"driver not loaded|couldn't communicate with the NVIDIA driver|"
            r"libnvidia-ml\.so\.1: cannot open shared object file",
            re.I,
        ),
        GpuProblem.DRIVER_NOT_LOADED,
        "the NVIDIA driver is not installed or not loaded on the host; install the "
        "driver (check with `nvidia-smi` on the host) and reboot",
    ),
    (
        re.compile(r"unknown device", re.I),
        GpuProblem.GPU_NOT_FOUND,
        "a requested GPU is not on this host (check the UUIDs with `nvidia-smi -L`)",
    ),
    (
        re.compile(r"no devices were found|no CUDA-capable device", re.I),
        GpuProblem.NO_GPUS,
        "the NVIDIA driver sees no GPUs (check `nvidia-smi -L` on the host, "
        "and that the GPUs are not hidden by passthrough or MIG settings)",
    ),
    (
        re.compile(r"Failed to initialize NVML: Unknown Error", re.I),
        GpuProblem.UNKNOWN,
        "NVML fails inside containers; on systemd hosts this is often the cgroup device "
        "rules being reset: set `no-cgroups = false` in the toolkit config and restart "
        "Docker",
    ),
)


def diagnose_gpu_error(text: str) -> tuple[GpuProblem, str] | None:
    """Map an engine or nvidia-smi error text to (problem, advice); None if unrecognised."""
    for pattern, problem, advice in _PATTERNS:
        if pattern.search(text):
            return problem, advice
    return None


def _parse_smi(output: str) -> tuple[GpuSeen, ...]:
    gpus = []
    for line in output.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0].startswith(("GPU-", "MIG-")):
            gpus.append(GpuSeen(uuid=parts[0], name=parts[1], driver_version=parts[2]))
    return tuple(gpus)


def _pick_image(client: DockerClient) -> str | None:
    # nvidia-smi is injected by the toolkit and needs glibc, so prefer images that
    # a job would use anyway; any glibc-based image works.
    images = [i for i in client.images.list() if i.attrs.get("Os", "linux") == "linux"]
    if not images:
        return None
    images.sort(key=lambda i: int(i.attrs.get("Size") or 0))
    return str(images[0].id)


def validate_gpu_runtime(
    client: DockerClient,
    image: str | None = None,
    gpus: int | tuple[str, ...] = -1,
    driver: str = "nvidia",
    timeout_s: float = 120.0,
) -> GpuDiagnosis:
    """Run `nvidia-smi` in a throwaway container with a GPU device request.

    `image`: any local glibc-based image (None picks the smallest local one).
    `gpus`: -1 for all, a count, or NVML UUIDs that must all be visible.
    """
    try:
        client.ping()
    except (DockerException, requests.RequestException) as exc:
        return GpuDiagnosis(GpuProblem.ENGINE_UNAVAILABLE, f"Docker engine unreachable: {exc}")
    try:
        image = image or _pick_image(client)
        if image is None:
            return GpuDiagnosis(
                GpuProblem.IMAGE_UNAVAILABLE,
                "no local image to run the GPU check in; pull or load the job image first",
            )
        client.images.get(image)
    except ImageNotFound:
        return GpuDiagnosis(GpuProblem.IMAGE_UNAVAILABLE, f"image {image} is not present")
    except (APIError, requests.RequestException) as exc:
        return GpuDiagnosis(GpuProblem.ENGINE_UNAVAILABLE, f"engine error: {exc}")

    if isinstance(gpus, tuple):
        request = DeviceRequest(driver=driver, device_ids=list(gpus), capabilities=[["gpu"]])
    else:
        request = DeviceRequest(driver=driver, count=gpus, capabilities=[["gpu"]])
    kwargs: dict[str, Any] = {
        "image": image,
        "command": ["nvidia-smi", "--query-gpu=uuid,name,driver_version", "--format=csv,noheader"],
        "device_requests": [request],
        # utility makes the toolkit inject nvidia-smi even if the image narrows it.
        "environment": {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
        "user": "65534:65534",
        "network_mode": "none",
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "labels": {"proofnet.managed": "1", "proofnet.purpose": "gpu-check"},
        "detach": True,
    }
    container = None
    try:
        container = client.containers.create(**kwargs)
        try:
            container.start()
        except APIError as exc:
            return _from_text(str(exc), GpuProblem.UNKNOWN, "the GPU check container did not start")
        try:
            status = container.wait(timeout=timeout_s)
        except requests.RequestException:
            return GpuDiagnosis(
                GpuProblem.UNKNOWN,
                f"nvidia-smi did not finish within {timeout_s:g}s (hung driver?)",
            )
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        code = int(status.get("StatusCode", -1))
    except (APIError, requests.RequestException) as exc:
        return _from_text(str(exc), GpuProblem.UNKNOWN, "engine error during the GPU check")
    finally:
        if container is not None:
            with contextlib.suppress(APIError, requests.RequestException):
                container.remove(force=True)

    if code != 0:
        if code == 127 or "executable file not found" in output:
            return GpuDiagnosis(
                GpuProblem.NO_NVIDIA_RUNTIME,
                "nvidia-smi was not injected into the container: the NVIDIA runtime hook "
                f"did not run; {_FIX_TOOLKIT}",
                detail=output,
            )
        return _from_text(output, GpuProblem.UNKNOWN, f"nvidia-smi failed (exit {code})")
    seen = _parse_smi(output)
    if not seen:
        return GpuDiagnosis(GpuProblem.NO_GPUS, "nvidia-smi listed no GPUs", detail=output)
    if isinstance(gpus, tuple):
        missing = sorted(set(gpus) - {g.uuid for g in seen})
        if missing:
            return GpuDiagnosis(
                GpuProblem.GPU_NOT_FOUND, f"GPUs not visible: {missing}", seen, output
            )
    names = ", ".join(f"{g.name} ({g.uuid})" for g in seen)
    return GpuDiagnosis(
        GpuProblem.OK, f"{len(seen)} GPU(s) usable in containers: {names}", seen, output
    )


def _from_text(text: str, fallback: GpuProblem, fallback_message: str) -> GpuDiagnosis:
    found = diagnose_gpu_error(text)
    if found is None:
        return GpuDiagnosis(fallback, f"{fallback_message}: {text.strip()[:500]}", detail=text)
    return GpuDiagnosis(found[0], found[1], detail=text)
