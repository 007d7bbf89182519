"""The Docker runtime against a ROOTLESS daemon reached through DOCKER_HOST.

CI starts one with scripts/ci/start-rootless-dockerd.sh and exports its socket as
PROOFNET_TEST_ROOTLESS_DOCKER_HOST; without it these tests skip saying so, unless
PROOFNET_REQUIRE_DOCKER=1, where a missing rootless engine is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from worker.runtime.base import Resources, RunReason, RunSpec
from worker.runtime.docker_runtime import DockerRuntime, connect

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def rootless(monkeypatch_module: pytest.MonkeyPatch) -> Iterator[DockerRuntime]:
    host = os.environ.get("PROOFNET_TEST_ROOTLESS_DOCKER_HOST")
    if not host:
        reason = "no rootless engine: run scripts/ci/start-rootless-dockerd.sh"
        if os.environ.get("PROOFNET_REQUIRE_DOCKER") == "1":
            pytest.fail(f"PROOFNET_REQUIRE_DOCKER=1 but {reason}", pytrace=False)
        pytest.skip(f"{reason} and export PROOFNET_TEST_ROOTLESS_DOCKER_HOST")
    # The worker finds the engine the way a provider configures it: DOCKER_HOST.
    monkeypatch_module.setenv("DOCKER_HOST", host)
    client = connect(timeout_s=60)
    yield DockerRuntime(client, pull_missing=False)
    client.close()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


@pytest.fixture
def work_dir() -> Iterator[Path]:
    """A work dir owned by the rootless daemon's user, as on a provider's machine where the
    worker and the daemon run as that user (pytest's tmp dirs are private to root)."""
    import pwd
    import shutil
    import tempfile

    owner = pwd.getpwnam(os.environ.get("PROOFNET_ROOTLESS_USER", "proofnet-rootless"))
    path = Path(tempfile.mkdtemp(prefix="proofnet-rootless-job-"))
    os.chown(path, owner.pw_uid, owner.pw_gid)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _image(runtime: DockerRuntime) -> str:
    return str(runtime.client.images.get("proofnet/test-numpy:local").id)


def test_the_engine_is_rootless(rootless: DockerRuntime) -> None:
    options = rootless.client.info().get("SecurityOptions") or []
    assert any("name=rootless" in o for o in options)


def test_a_job_runs_hardened_and_writes_its_work_dir(
    rootless: DockerRuntime, work_dir: Path
) -> None:
    script = (
        "import os, socket, numpy\n"
        "w = numpy.arange(6).reshape(2, 3) @ numpy.ones(3)\n"
        "open('/work/result.txt', 'w').write(f'{os.getuid()} {w.tolist()}')\n"
        "try:\n    open('/etc/x', 'w')\nexcept OSError as e:\n    print('ro', e.errno)\n"
        "print('ifaces', sorted(n for _, n in socket.if_nameindex()))\n"
    )
    lines: list[str] = []
    spec = RunSpec(
        image=_image(rootless),
        argv=("python3", "-c", script),
        work_dir=work_dir,
        wall_clock_limit_s=60,
    )
    result = rootless.execute(spec, on_log=lambda line: lines.append(line.text))
    assert result.reason is RunReason.COMPLETED, result.message
    assert (work_dir / "result.txt").read_text() == "1000 [3.0, 12.0]"  # non-root inside
    assert "ro 30" in lines  # EROFS: read-only root
    assert "ifaces ['lo']" in lines  # no network unless the spec allows egress


def test_limits_are_enforced_or_the_job_is_refused(rootless: DockerRuntime, work_dir: Path) -> None:
    info = rootless.client.info()
    spec = RunSpec(
        image=_image(rootless),
        argv=("python3", "-c", "b = bytearray(400 * 1024 * 1024); print(len(b))"),
        work_dir=work_dir,
        resources=Resources(memory_bytes=128 * 1024 * 1024, pids_limit=64),
        wall_clock_limit_s=60,
    )
    result = rootless.execute(spec)
    if info.get("MemoryLimit") and info.get("PidsLimit"):
        # cgroup v2 with delegation: the limit holds.
        assert result.reason is RunReason.KILLED_OOM, result.message
    else:
        # Rootless on cgroup v1: the engine would ignore the limits; the job must not run.
        assert result.reason is RunReason.RUNTIME_ERROR
        assert "cannot enforce memory, pids limits" in result.message
        assert not list(work_dir.iterdir())


def test_unknown_engine_socket_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    from worker.runtime.base import EngineUnavailable

    with pytest.raises(EngineUnavailable):
        connect(timeout_s=2)
    assert docker  # the SDK is what connect() wraps
