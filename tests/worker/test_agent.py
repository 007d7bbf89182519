"""The worker agent end to end: a real API over HTTP, a recording oracle, real jobs."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    api_server,
    check_attested_job,
    harness,
    job_path,
    job_spec,
    model_repo,
    oracle,
)


def test_process_runtime_job_is_attested_with_what_the_api_stored(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    spec = job_spec(model_repo)
    job_id = api_server.submit(spec)
    stats = harness.agent.run(once=True)
    assert stats.jobs == 1
    check_attested_job(stats.outcomes[0], api_server, oracle, harness, job_id, spec)
    assert harness.agent.outbox.pending() == []
    # Nothing else queued: --once returns without a job.
    assert harness.agent.run(once=True).jobs == 0


def test_job_over_its_time_limit_is_killed_failed_and_not_attested(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    spec = job_spec(
        model_repo,
        commands=[["python3", "-c", "import time; print('sleeping', flush=True); time.sleep(60)"]],
        max_duration_s=2,
    )
    job_id = api_server.submit(spec)
    outcome = harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "failed"
    assert "killed_timeout" in outcome.reason
    assert oracle.requests == 0 and oracle.all() == []
    status = api_server.get(f"/api/v1/jobs/{job_id}/status")
    assert status["failures"] == 1 and status["status"] == "queued"
    job = api_server.job(job_id)
    assert "killed_timeout" in job["last_error"] and "2s limit" in job["last_error"]
    texts = [line["text"] for line in api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
    assert "sleeping" in texts


def test_failing_command_is_reported_and_later_commands_do_not_run(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    spec = job_spec(
        model_repo,
        # The harness (training) would run after it.
        commands=[
            ["python3", "-c", "import sys; print('bad input', file=sys.stderr); sys.exit(3)"],
        ],
    )
    job_id = api_server.submit(spec)
    outcome = harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "failed" and "exited with code 3" in outcome.reason
    assert "bad input" in outcome.reason
    assert oracle.all() == []
    job_dir = harness.config.jobs_dir / f"{job_id}-a1"
    assert not (job_dir / "pot").exists()  # the training command never ran
    assert "exited with code 3" in api_server.job(job_id)["last_error"]


def test_job_without_escrow_is_released_not_run(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    job_id = api_server.submit(job_spec(model_repo), escrow=False)
    outcome = harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "released" and "escrow" in outcome.reason
    status = api_server.get(f"/api/v1/jobs/{job_id}/status")
    assert status["status"] == "queued" and status["failures"] == 0
    assert oracle.all() == []


def test_cancelled_job_loses_its_lease_and_is_not_attested(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    tmp_path: Path,
) -> None:
    go = tmp_path / "never"
    spec = job_spec(model_repo, commands=[["python3", "wait.py", str(go)]])
    job_id = api_server.submit(spec)

    def cancel_when_running() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            logs = api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]
            if any(line["text"].startswith("waiting for") for line in logs):
                break
            time.sleep(0.1)
        api_server.http.post(f"/api/v1/jobs/{job_id}/cancel", headers=api_server.submitter)

    canceller = threading.Thread(target=cancel_when_running)
    canceller.start()
    outcome = harness.agent.run(once=True).outcomes[0]
    canceller.join()
    # "lost", not failed at the 300 s limit: the next heartbeat found the lease ended.
    assert outcome.status == "lost" and "killed_timeout" not in outcome.reason
    assert api_server.job(job_id)["status"] == "cancelled"
    assert oracle.requests == 0


def test_attestation_waits_in_the_outbox_until_the_oracle_takes_it(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    spec = job_spec(model_repo, steps=20)
    job_id = api_server.submit(spec)
    oracle.fail_next = 10**6  # down for longer than the agent's retries
    outcome = harness.agent.run(once=True).outcomes[0]
    assert outcome.status == "attested" and outcome.reason == "queued in the outbox"
    # The job's own retries, then one more try as the loop exits.
    assert oracle.requests == harness.config.oracle_attempts + 1
    pending = harness.agent.outbox.pending()
    assert len(pending) == 1 and not pending[0].delivered and pending[0].lease_done
    assert api_server.job(job_id)["status"] == "completed"

    # A restarted worker (new agent, same work dir) delivers it once the oracle is back.
    oracle.fail_next = 2
    harness.agent.flush_outbox()
    assert harness.agent.outbox.pending() == []
    assert [a.job_id for a in oracle.all()] == [job_id]
    assert oracle.cose[job_id] == outcome.signed.cose  # type: ignore[union-attr]


def test_a_job_asking_for_egress_is_not_claimed_where_the_provider_allows_none(
    harness: AgentHarness,  # noqa: F811
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
) -> None:
    """`egress: true` is the job's wish, never the provider's duty: a worker whose provider
    allows no egress says so in its claim, and the API never hands it the job."""
    assert not harness.config.allow_egress
    job_id = api_server.submit({**job_spec(model_repo), "egress": True})
    assert harness.agent.run(once=True).jobs == 0
    status = api_server.get(f"/api/v1/jobs/{job_id}/status")
    assert status["status"] == "queued" and status["failures"] == 0
    assert oracle.all() == []
