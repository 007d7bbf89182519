import sys

import docker.errors
import pytest
import requests

from worker.gpu_runtime_check import _PROBLEMS, check_gpu_runtime
from worker.runtime.gpu_diagnosis import GpuProblem, parse_nvidia_smi

U0 = "GPU-5f3b1c2e-8d4a-4e7b-9c61-2a0f7e9d4b38"
U1 = "GPU-00000000-0000-0000-0000-000000000001"
SMI_ONE = f"GPU 0: NVIDIA H200 (UUID: {U0})\n"
SMI_TWO = SMI_ONE + f"GPU 1: NVIDIA H200 (UUID: {U1})\n  MIG 1g.18gb Device 0: (UUID: MIG-abc)\n"


class FakeContainer:
    def __init__(self, code, output, start_error=None, hang=False):
        self.code, self.output, self.start_error, self.hang = code, output, start_error, hang
        self.removed = False

    def start(self):
        if self.start_error:
            raise self.start_error

    def wait(self, timeout):
        if self.hang:
            raise requests.exceptions.ReadTimeout("read timed out")
        return {"StatusCode": self.code}

    def logs(self, stdout, stderr):
        return self.output.encode()

    def remove(self, force):
        self.removed = True


class FakeClient:
    def __init__(self, container=None, ping_error=None, images=("img",), pull_error=None):
        self.container = container
        self.ping_error = ping_error
        self.local_images = set(images)
        self.pull_error = pull_error
        self.created = []
        client = self

        class Images:
            def get(self, name):
                if name not in client.local_images:
                    raise docker.errors.ImageNotFound(f"No such image: {name}")

            def pull(self, name):
                if client.pull_error:
                    raise client.pull_error
                client.local_images.add(name)

        class Containers:
            def create(self, image, command, **kwargs):
                client.created.append((image, command, kwargs))
                return client.container

        self.images, self.containers = Images(), Containers()

    def ping(self):
        if self.ping_error:
            raise self.ping_error


def test_all_gpus_visible_is_ok():
    client = FakeClient(FakeContainer(0, SMI_TWO))
    check = check_gpu_runtime([U0, U1], image="img", client=client)
    assert check.ok and check.problem == "ok" and check.container_uuids == (U0, U1)
    image, command, kwargs = client.created[0]
    assert command == ["nvidia-smi", "-L"]
    (request,) = kwargs["device_requests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert client.container.removed


def test_parse_ignores_mig_and_noise():
    assert tuple(g.uuid for g in parse_nvidia_smi("Some banner\n" + SMI_TWO)) == (U0, U1)


def test_every_runtime_problem_has_a_registration_code():
    assert set(_PROBLEMS) == set(GpuProblem) - {GpuProblem.OK, GpuProblem.NO_GPUS}


def test_no_gpus_skips():
    check = check_gpu_runtime([], client=FakeClient())
    assert check.status == "skipped" and not check.ok


def test_gpu_count_mismatch_names_the_missing_gpu():
    check = check_gpu_runtime([U0, U1], image="img", client=FakeClient(FakeContainer(0, SMI_ONE)))
    assert check.problem == "gpu-count-mismatch" and U1 in check.diagnosis


def test_uuid_mismatch():
    other = SMI_ONE.replace(U0, U1)
    check = check_gpu_runtime([U0], image="img", client=FakeClient(FakeContainer(0, other)))
    assert check.problem == "uuid-mismatch" and "cdi generate" in check.fix


def test_missing_nvidia_runtime_is_diagnosed():
    err = docker.errors.APIError(
        "500 Server Error",
        explanation='could not select device driver "" with capabilities: [[gpu]]',
    )
    client = FakeClient(FakeContainer(0, "", start_error=err))
    check = check_gpu_runtime([U0], image="img", client=client)
    assert check.problem == "no-nvidia-runtime" and "nvidia-ctk runtime configure" in check.fix
    assert client.container.removed


def test_driver_mismatch_from_container_output():
    out = "Failed to initialize NVML: Driver/library version mismatch\n"
    check = check_gpu_runtime([U0], image="img", client=FakeClient(FakeContainer(9, out)))
    assert check.problem == "driver-mismatch" and "reboot" in check.fix


def test_unknown_failure_keeps_the_raw_text():
    check = check_gpu_runtime([U0], image="img", client=FakeClient(FakeContainer(3, "weird")))
    assert check.problem == "container-failed" and check.detail == "weird"
    assert "status 3" in check.diagnosis


def test_hung_nvidia_smi_times_out():
    check = check_gpu_runtime(
        [U0], image="img", client=FakeClient(FakeContainer(0, "", hang=True)), timeout_s=1
    )
    assert check.problem == "timeout"


def test_unreachable_daemon_with_permission_hint():
    err = docker.errors.DockerException(
        "Error while fetching server API version: Permission denied"
    )
    check = check_gpu_runtime([U0], image="img", client=FakeClient(ping_error=err))
    assert check.problem == "daemon-unreachable" and "docker group" in check.fix


def test_missing_image_is_pulled_or_reported():
    pulled = FakeClient(FakeContainer(0, SMI_ONE), images=())
    assert check_gpu_runtime([U0], image="img", client=pulled).ok
    offline = FakeClient(
        FakeContainer(0, SMI_ONE), images=(), pull_error=docker.errors.APIError("no network")
    )
    check = check_gpu_runtime([U0], image="img", client=offline)
    assert check.problem == "image-missing" and "--gpu-image" in check.fix
    no_pull = check_gpu_runtime([U0], image="img", client=FakeClient(images=()), pull=False)
    assert no_pull.problem == "image-missing"


def test_without_docker_sdk(monkeypatch):
    monkeypatch.setitem(sys.modules, "docker", None)
    check = check_gpu_runtime([U0])
    assert check.problem == "no-docker-sdk"


@pytest.mark.parametrize(
    ("message", "words"),
    [
        (
            "Error while fetching server API version: ('Connection aborted.', "
            "FileNotFoundError(2, 'No such file or directory'))",
            "not running",
        ),
        ("something else", "DOCKER_HOST"),
    ],
)
def test_unreachable_daemon_messages(message, words):
    client = FakeClient(ping_error=docker.errors.DockerException(message))
    check = check_gpu_runtime([U0], image="img", client=client)
    assert words in check.diagnosis + check.fix


@pytest.mark.parametrize(
    ("code", "output", "problem", "fix_words"),
    [
        (127, "", "no-nvidia-runtime", "nvidia-ctk runtime configure"),
        (0, "", "gpu-count-mismatch", "NVIDIA_VISIBLE_DEVICES"),
        (6, "No devices were found\n", "gpu-count-mismatch", "NVIDIA_VISIBLE_DEVICES"),
        (255, "Failed to initialize NVML: Unknown Error\n", "container-failed", "no-cgroups"),
    ],
)
def test_container_outcomes_share_the_runtime_diagnosis(code, output, problem, fix_words):
    check = check_gpu_runtime([U0], image="img", client=FakeClient(FakeContainer(code, output)))
    assert check.problem == problem and fix_words in check.fix and check.diagnosis
