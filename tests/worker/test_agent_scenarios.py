"""Longer agent scenarios: a job in Docker, and a worker killed mid-job whose job moves on."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    NETWORK,
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    check_attested_job,
    job_path,
    job_spec,
    make_api_server,
    model_repo,
    oracle,
    register_worker,
)

from worker.oracle_client import Outbox
from worker.runtime.docker_runtime import DockerRuntime
from worker.runtime.process_runtime import ProcessRuntime

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    # A short lease, so a dead worker's job is handed on within seconds.
    yield from make_api_server(tmp_path, lease_ttl_s=3)


@pytest.mark.docker
@pytest.mark.slow
def test_docker_runtime_job_is_attested_with_what_the_api_stored(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    docker_runtime: DockerRuntime,
    test_image_id: str,
) -> None:
    harness = AgentHarness(tmp_path, api_server, oracle, model_repo, docker_runtime)
    try:
        spec = job_spec(model_repo, image=f"proofnet/test-numpy@{test_image_id}")
        job_id = api_server.submit(spec)
        stats = harness.agent.run(once=True)
        check_attested_job(stats.outcomes[0], api_server, oracle, harness, job_id, spec)
        texts = [line["text"] for line in api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
        assert any(f"ready as {test_image_id}" in t for t in texts)  # image preparation logged
        assert not any("NOT isolated" in t for t in texts)
    finally:
        harness.close()


def _kill_jobs_waiting_on(marker: Path) -> None:
    """The killed worker's job process outlives it (own session); end it by its argv."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(marker).encode() in argv and b"wait.py" in argv:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(entry.name), signal.SIGKILL)


@pytest.mark.slow
def test_killed_worker_lease_expires_and_job_completes_on_another_worker(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    go = tmp_path / "go"
    spec = job_spec(
        model_repo,
        commands=[["python3", "wait.py", str(go)]],  # then the harness trains
    )
    job_id = api_server.submit(spec)

    first = register_worker(api_server, tmp_path / "first.skey")
    first_dir = tmp_path / "first-work"
    ((prefix, replacement),) = model_repo.rewrites.items()
    cmd = [
        sys.executable,
        "-c",
        "import sys; from worker.cli import app; sys.exit(app(prog_name='proofnet worker'))",
        "run",
        "--api-url", api_server.url,
        "--oracle-url", oracle.url,
        "--runtime", "process",
        "--once",
        "--key-file", str(first.key_file),
        "--work-dir", str(first_dir),
        "--network", NETWORK,
        "--payout-address", first.payout_address,
        "--repo-rewrite", f"{prefix}={replacement}",
        "--poll-interval", "0.2",
    ]  # fmt: skip
    worker = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            logs = api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
            if any(line["text"].startswith("waiting for") for line in logs):
                break
            assert worker.poll() is None, worker.communicate()[0].decode()[-3000:]
            assert time.monotonic() < deadline, "the first worker never started the job"
            time.sleep(0.1)
        assert api_server.job(job_id)["status"] == "leased"
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait(10)
        _kill_jobs_waiting_on(go)
    go.touch()

    second = AgentHarness(tmp_path / "second", api_server, oracle, model_repo, ProcessRuntime())
    watchdog = threading.Timer(120, second.agent.stop_now)
    watchdog.start()
    try:
        # Polls until the first lease has expired and the job is claimable again.
        stats = second.agent.run(max_jobs=1)
    finally:
        watchdog.cancel()
        second.close()
    outcome = stats.outcomes[0]
    assert outcome.attempt == 2
    check_attested_job(outcome, api_server, oracle, second, job_id, spec)
    assert len(oracle.all()) == 1  # exactly one attestation for the job, from the survivor
    assert oracle.all()[0].worker_key == second.worker.key.public_key_hex
    status = api_server.get(f"/api/v1/jobs/{job_id}/status")
    assert status["attempts"] == 2 and status["failures"] == 1
    assert "stopped heartbeating" in api_server.job(job_id)["last_error"]
    assert Outbox(first_dir / "outbox").pending() == []
