"""Does the container engine hand NVIDIA GPUs to containers?

"GPU not detected" is the commonest complaint in peer networks, usually found at job time.
This module holds the one table of engine / nvidia-smi error texts, each with a diagnosis and
a fix (`explain_gpu_error`; `diagnose_gpu_error` for a job that failed to start), the one
`nvidia-smi -L` parser and the one routine that runs nvidia-smi in a throwaway container with
a GPU device request (`run_gpu_check`). `validate_gpu_runtime` wraps that routine for the job
runtime; `worker.gpu_runtime_check` wraps it for onboarding.
"""

from __future__ import annotations

import contextlib
import enum
import re
from dataclasses import dataclass

import requests
from docker import DockerClient
from docker.errors import DockerException, ImageNotFound
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
    TIMEOUT = "timeout"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class GpuSeen:
    index: int
    uuid: str
    name: str


@dataclass(frozen=True)
class GpuDiagnosis:
    problem: GpuProblem
    diagnosis: str  # what is wrong, for a person
    fix: str = ""  # what to do about it
    gpus: tuple[GpuSeen, ...] = ()  # what nvidia-smi listed in the container
    detail: str = ""  # raw engine / nvidia-smi text, for a bug report

    @property
    def ok(self) -> bool:
        return self.problem is GpuProblem.OK

    @property
    def message(self) -> str:
        return f"{self.diagnosis}; {self.fix}" if self.fix else self.diagnosis


_FIX_TOOLKIT = (
    "install the NVIDIA Container Toolkit, run `sudo nvidia-ctk runtime configure "
    "--runtime=docker` (for rootless Docker: `nvidia-ctk runtime configure --runtime=docker "
    "--config=$HOME/.config/docker/daemon.json`) and restart Docker "
    "(`sudo systemctl restart docker`)"
)
_FIX_ENGINE = "check that the Docker engine is running and reachable (`docker info`, DOCKER_HOST)"
_NO_SMI = "nvidia-smi was not injected into the container: the NVIDIA runtime hook did not run"

# Ordered: the first pattern that matches the engine's or nvidia-smi's text wins.
_PATTERNS: tuple[tuple[re.Pattern[str], GpuProblem, str, str], ...] = (
    (
        re.compile(r'could not select device driver "[^"]*" with capabilities', re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        "Docker has no NVIDIA runtime or CDI specs, so containers cannot get GPUs",
        _FIX_TOOLKIT,
    ),
    (
        re.compile(r"unknown or invalid runtime name: nvidia", re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        "no NVIDIA runtime is registered with Docker (the daemon does not know `nvidia`)",
        _FIX_TOOLKIT,
    ),
    (
        re.compile(r"unresolvable CDI devices", re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        "no NVIDIA runtime can resolve the requested GPUs: Docker has no CDI spec for them",
        "generate the spec with `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`; "
        f"if the toolkit is missing, {_FIX_TOOLKIT}",
    ),
    (
        re.compile(r"driver/library version mismatch", re.I),
        GpuProblem.DRIVER_MISMATCH,
        "NVIDIA driver mismatch: the loaded kernel module and the user-space driver libraries "
        "are different versions (usually after a driver upgrade)",
        "reboot the machine (or reload the nvidia kernel modules) after the driver upgrade",
    ),
    (
        re.compile(r"unsatisfied condition: cuda\s*>=?\s*[0-9.]+", re.I),
        GpuProblem.DRIVER_MISMATCH,
        "the NVIDIA driver is too old for the CUDA version of the image",
        "upgrade the host NVIDIA driver, or use an image built for an older CUDA "
        "(for the onboarding check: --gpu-image)",
    ),
    (
        re.compile(
            r"driver not loaded|couldn't communicate with the NVIDIA driver|"
            r"libnvidia-ml\.so\.1: cannot open shared object file",
            re.I,
        ),
        GpuProblem.DRIVER_NOT_LOADED,
        "the NVIDIA driver is not installed or not loaded on the host, so containers cannot use it",
        "check `nvidia-smi` on the host; install or reload the driver, then reboot",
    ),
    (
        re.compile(r"executable file not found.*nvidia-smi|nvidia-smi.*not found", re.I),
        GpuProblem.NO_NVIDIA_RUNTIME,
        _NO_SMI,
        _FIX_TOOLKIT,
    ),
    (
        re.compile(r"unknown device", re.I),
        GpuProblem.GPU_NOT_FOUND,
        "a requested GPU is not on this host",
        "check the UUIDs with `nvidia-smi -L` on the host",
    ),
    (
        re.compile(r"no devices were found|no CUDA-capable device", re.I),
        GpuProblem.NO_GPUS,
        "the NVIDIA driver sees no GPUs",
        "check `nvidia-smi -L` on the host, and that the GPUs are not hidden by passthrough "
        "or MIG settings",
    ),
    (
        re.compile(r"Failed to initialize NVML: Unknown Error", re.I),
        GpuProblem.UNKNOWN,
        "NVML fails inside containers: on systemd hosts this is usually the container's GPU "
        "cgroup device rules being reset",
        "set `no-cgroups = false` in /etc/nvidia-container-runtime/config.toml and restart "
        "Docker, or use the CDI mode of the NVIDIA Container Toolkit",
    ),
)


def explain_gpu_error(text: str) -> tuple[GpuProblem, str, str] | None:
    """(problem, diagnosis, fix) for a recognised engine or nvidia-smi error text."""
    for pattern, problem, diagnosis, fix in _PATTERNS:
        if pattern.search(text):
            return problem, diagnosis, fix
    return None


def diagnose_gpu_error(text: str) -> tuple[GpuProblem, str] | None:
    """(problem, advice: diagnosis and fix in one line) for an error text; None if unrecognised."""
    found = explain_gpu_error(text)
    return None if found is None else (found[0], f"{found[1]}; {found[2]}")


_SMI_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$")


def parse_nvidia_smi(output: str) -> tuple[GpuSeen, ...]:
    """The physical GPUs in `nvidia-smi -L` output (MIG lines and other noise are skipped)."""
    seen = []
    for line in output.splitlines():
        m = _SMI_LINE.match(line.strip())
        if m:
            seen.append(GpuSeen(index=int(m.group(1)), uuid=m.group(3), name=m.group(2)))
    return tuple(seen)


def run_gpu_check(
    client: DockerClient,
    image: str,
    gpus: int | tuple[str, ...] = -1,
    *,
    driver: str = "nvidia",
    timeout_s: float = 120.0,
    purpose: str = "gpu-check",
) -> GpuDiagnosis:
    """Run `nvidia-smi -L` in a throwaway container with a GPU device request; classify it.

    The caller has checked that the engine answers and that `image` (any glibc-based image)
    is present. `gpus`: -1 for all, a count, or NVML UUIDs. `driver` "" lets the engine pick
    one, as `docker run --gpus` does. OK and NO_GPUS carry what nvidia-smi listed.
    """
    if isinstance(gpus, tuple):
        request = DeviceRequest(driver=driver, device_ids=list(gpus), capabilities=[["gpu"]])
    else:
        request = DeviceRequest(driver=driver, count=gpus, capabilities=[["gpu"]])
    by_hand = f"run `docker run --rm --gpus all {image} nvidia-smi -L` by hand to see the error"
    container = None
    try:
        container = client.containers.create(
            image=image,
            command=["nvidia-smi", "-L"],
            device_requests=[request],
            # "utility" makes the toolkit inject nvidia-smi whatever the image declares.
            environment={"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"},
            user="65534:65534",
            network_mode="none",
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            labels={"proofnet.managed": "1", "proofnet.purpose": purpose},
        )
        container.start()
        try:
            status = container.wait(timeout=timeout_s)
        except requests.RequestException as exc:
            return GpuDiagnosis(
                GpuProblem.TIMEOUT,
                f"nvidia-smi did not finish within {timeout_s:g} s (a hung driver?)",
                "check `nvidia-smi` on the host; a reboot usually clears a hung GPU",
                detail=str(exc),
            )
        output = container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
        code = int(status.get("StatusCode", -1))
    except DockerException as exc:
        return _classified(str(exc), "the GPU check container could not run", by_hand)
    except requests.RequestException as exc:
        return GpuDiagnosis(
            GpuProblem.ENGINE_UNAVAILABLE,
            f"lost the Docker engine during the GPU check: {exc}",
            _FIX_ENGINE,
            detail=str(exc),
        )
    finally:
        if container is not None:
            # Cleanup must not mask the diagnosis.
            with contextlib.suppress(DockerException, requests.RequestException):
                container.remove(force=True)

    if code != 0:
        fallback = f"nvidia-smi exited with status {code} in the container"
        # 127: the shell found no nvidia-smi, i.e. nothing injected it.
        return _classified(output, fallback, by_hand, no_smi=code == 127)
    seen = parse_nvidia_smi(output)
    if not seen:
        return GpuDiagnosis(
            GpuProblem.NO_GPUS,
            "nvidia-smi in the container listed no GPUs",
            "check `nvidia-smi -L` on the host and the toolkit's device list "
            "(NVIDIA_VISIBLE_DEVICES, CDI spec)",
            detail=output,
        )
    names = ", ".join(f"{g.name} ({g.uuid})" for g in seen)
    return GpuDiagnosis(
        GpuProblem.OK, f"{len(seen)} GPU(s) usable in containers: {names}", gpus=seen, detail=output
    )


def _classified(text: str, fallback: str, fallback_fix: str, no_smi: bool = False) -> GpuDiagnosis:
    found = explain_gpu_error(text)
    if found is not None:
        return GpuDiagnosis(*found, detail=text)
    if no_smi:
        return GpuDiagnosis(GpuProblem.NO_NVIDIA_RUNTIME, _NO_SMI, _FIX_TOOLKIT, detail=text)
    excerpt = text.strip()[:500]
    return GpuDiagnosis(
        GpuProblem.UNKNOWN,
        f"{fallback}: {excerpt}" if excerpt else fallback,
        fallback_fix,
        detail=text,
    )


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
    """Check that containers get GPUs the way the job runtime asks for them.

    `image`: any local glibc-based image (None picks the smallest local one).
    `gpus`: -1 for all, a count, or NVML UUIDs that must all be visible.
    """
    try:
        client.ping()
    except (DockerException, requests.RequestException) as exc:
        return GpuDiagnosis(
            GpuProblem.ENGINE_UNAVAILABLE,
            f"Docker engine unreachable: {exc}",
            _FIX_ENGINE,
            detail=str(exc),
        )
    try:
        image = image or _pick_image(client)
        if image is None:
            return GpuDiagnosis(
                GpuProblem.IMAGE_UNAVAILABLE,
                "no local image to run the GPU check in",
                "pull or load the job image first",
            )
        client.images.get(image)
    except ImageNotFound:
        return GpuDiagnosis(
            GpuProblem.IMAGE_UNAVAILABLE,
            f"image {image} is not present",
            f"`docker pull {image}`, or pass any local glibc-based image",
        )
    except (DockerException, requests.RequestException) as exc:
        return GpuDiagnosis(
            GpuProblem.ENGINE_UNAVAILABLE, f"engine error: {exc}", _FIX_ENGINE, detail=str(exc)
        )

    result = run_gpu_check(client, image, gpus, driver=driver, timeout_s=timeout_s)
    if result.ok and isinstance(gpus, tuple):
        missing = sorted(set(gpus) - {g.uuid for g in result.gpus})
        if missing:
            return GpuDiagnosis(
                GpuProblem.GPU_NOT_FOUND,
                f"GPUs not visible in containers: {', '.join(missing)}",
                "check the UUIDs with `nvidia-smi -L` on the host and the toolkit's device list",
                result.gpus,
                result.detail,
            )
    return result
