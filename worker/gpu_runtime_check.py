"""Onboarding check: do containers on this machine get the GPUs NVML reports?

"GPU not detected" is the commonest complaint in peer networks, and it is usually found at job
time. Here a throwaway container asks for every GPU (`device_requests`, as `docker run
--gpus all` does), runs `nvidia-smi -L`, and its UUIDs are compared with NVML's. Whatever goes
wrong becomes one problem code and a fix the provider can act on.

Uses the docker SDK directly, independent of `worker/runtime/` (the job runtime), so that
onboarding can diagnose an engine the job runtime cannot even start against.
"""

from __future__ import annotations

import contextlib
import re
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

_TOOLKIT_FIX = (
    "install the NVIDIA Container Toolkit, run `sudo nvidia-ctk runtime configure "
    "--runtime=docker` and restart Docker (`sudo systemctl restart docker`)"
)

# First match wins; matched against the engine's error text and the container's output.
_PATTERNS: tuple[tuple[re.Pattern[str], Problem, str, str], ...] = (
    (
        re.compile(
            r"could not select device driver|unknown or invalid runtime name: nvidia|"
            r"unresolvable CDI devices",
            re.I,
        ),
        "no-nvidia-runtime",
        "Docker has no NVIDIA runtime or CDI specs, so containers cannot get GPUs",
        _TOOLKIT_FIX,
    ),
    (
        re.compile(r"driver/library version mismatch", re.I),
        "driver-mismatch",
        "the loaded NVIDIA kernel module and the driver libraries are different versions",
        "reboot the machine (or reload the nvidia kernel modules) after the driver upgrade",
    ),
    (
        re.compile(r"unsatisfied condition: cuda\s*>=?\s*[0-9.]+", re.I),
        "driver-mismatch",
        "the NVIDIA driver is too old for the CUDA version of the check image",
        "upgrade the NVIDIA driver, or pass an image built for an older CUDA (--gpu-image)",
    ),
    (
        re.compile(
            r"couldn't communicate with the NVIDIA driver|driver not loaded|"
            r"libnvidia-ml\.so\.1: cannot open shared object file",
            re.I,
        ),
        "driver-not-loaded",
        "the NVIDIA driver is not usable from containers",
        "check `nvidia-smi` on the host; install or reload the driver, then reboot",
    ),
    (
        re.compile(r"executable file not found.*nvidia-smi|nvidia-smi.*not found", re.I),
        "no-nvidia-runtime",
        "the container got no NVIDIA utilities injected (nvidia-smi missing)",
        _TOOLKIT_FIX,
    ),
    (
        re.compile(r"Failed to initialize NVML: Unknown Error", re.I),
        "container-failed",
        "NVML fails inside containers: systemd reset the container's GPU cgroup rules",
        "set `no-cgroups = false` in /etc/nvidia-container-runtime/config.toml and restart "
        "Docker, or use the CDI mode of the NVIDIA Container Toolkit",
    ),
)

_SMI_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")


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


def parse_nvidia_smi_list(output: str) -> tuple[str, ...]:
    """UUIDs of the physical GPUs in `nvidia-smi -L` output (MIG lines are not GPUs)."""
    uuids = []
    for line in output.splitlines():
        m = _SMI_LINE.match(line.strip())
        if m:
            uuids.append(m.group(3))
    return tuple(uuids)


def diagnose(text: str) -> tuple[Problem, str, str] | None:
    """(problem, diagnosis, fix) for a recognised engine or container error text."""
    for pattern, problem, diagnosis, fix in _PATTERNS:
        if pattern.search(text):
            return problem, diagnosis, fix
    return None


def check_gpu_runtime(
    nvml_uuids: Sequence[str],
    *,
    image: str = DEFAULT_IMAGE,
    client: Any = None,
    pull: bool = True,
    timeout_s: float = 120.0,
) -> RuntimeCheck:
    """Run `nvidia-smi -L` in a container given every GPU and compare with `nvml_uuids`."""
    expected = tuple(nvml_uuids)
    if not expected:
        return RuntimeCheck("skipped", "skipped", "no GPUs in the inventory: nothing to check")

    def failed(problem: Problem, diagnosis: str, fix: str = "", **kw: Any) -> RuntimeCheck:
        return RuntimeCheck("failed", problem, diagnosis, fix, nvml_uuids=expected, **kw)

    try:
        import docker
        import docker.errors
        import requests
        from docker.types import DeviceRequest
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
        return failed("daemon-unreachable", f"the Docker engine failed: {e}", detail=str(e))

    container = None
    try:
        container = client.containers.create(
            image,
            ["nvidia-smi", "-L"],
            device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])],
            # "utility" makes the toolkit inject nvidia-smi whatever the image declares.
            environment={"NVIDIA_DRIVER_CAPABILITIES": "utility"},
            network_mode="none",
            labels={"proofnet.managed": "1", "proofnet.purpose": "onboarding-gpu-check"},
        )
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except requests.RequestException as e:
            return failed(
                "timeout",
                f"nvidia-smi did not finish within {timeout_s:g} s (a hung driver?)",
                "check `nvidia-smi` on the host; a reboot usually clears a hung GPU",
                detail=str(e),
            )
        output = container.logs(stdout=True, stderr=True).decode(errors="replace")
        code = int(status.get("StatusCode", -1))
    except docker.errors.DockerException as e:
        return _classified(failed, str(e), "the GPU check container could not run")
    except requests.RequestException as e:
        return failed("daemon-unreachable", f"lost the Docker engine: {e}", detail=str(e))
    finally:
        if container is not None:
            # Cleanup must not mask the diagnosis.
            with contextlib.suppress(Exception):
                container.remove(force=True)

    if code != 0:
        return _classified(failed, output, f"nvidia-smi exited with status {code} in the container")
    seen = parse_nvidia_smi_list(output)
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
            detail=output,
        )
    if set(seen) != set(expected):
        return failed(
            "uuid-mismatch",
            "containers see different GPUs from the ones NVML reports "
            f"(container: {', '.join(seen)}; NVML: {', '.join(expected)})",
            "the container runtime is pointed at another device set (CDI spec out of date?): "
            "regenerate it with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`",
            container_uuids=seen,
            detail=output,
        )
    return RuntimeCheck(
        "ok",
        "ok",
        f"containers see all {len(seen)} GPU(s) NVML reports",
        nvml_uuids=expected,
        container_uuids=seen,
        detail=output,
    )


def _classified(failed: Any, text: str, fallback: str) -> RuntimeCheck:
    known = diagnose(text)
    if known is None:
        return failed(
            "container-failed",
            fallback,
            "run `docker run --rm --gpus all <image> nvidia-smi -L` by hand to see the error",
            detail=text,
        )
    problem, diagnosis, fix = known
    return failed(problem, diagnosis, fix, detail=text)


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
