"""Whose fault a failed job is. This machine's (its git mirror cache, work dir, container
engine) never costs the job one of its attempts: the lease is released, the provider is told
what to fix, and the job runs once the machine is repaired. The job's own fault still
counts. Each job here may fail only once (max_attempts=1), so a counted fault would end it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    job_path,
    job_spec,
    make_api_server,
    model_repo,
    oracle,
)

from worker.agent import Agent
from worker.runtime.base import EngineUnavailable, RunHandle, RunSpec
from worker.runtime.process_runtime import ProcessRuntime
from worker.workspace import RepoCache


@pytest.fixture
def api_server(tmp_path: Path) -> Iterator[ApiServer]:
    # Overrides agent_fixtures' (its `oracle` fixture then uses this one too).
    yield from make_api_server(tmp_path, max_attempts=1)


def _harness(
    tmp_path: Path, api: ApiServer, recorder: RecordingOracle, repo: FixtureRepo, runtime: Any
) -> AgentHarness:
    return AgentHarness(tmp_path, api, recorder, repo, runtime, max_backoff_s=0.01)


def _with_cache(harness: AgentHarness, root: Path, repo: FixtureRepo) -> None:
    harness.agent.repos = RepoCache(root, rewrites=repo.rewrites)


def test_an_unusable_git_mirror_cache_does_not_cost_the_job_an_attempt(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    harness = _harness(tmp_path, api_server, oracle, model_repo, ProcessRuntime())
    blocked = tmp_path / "git-cache"
    blocked.write_text("a file where the provider's mirror cache should be\n")
    _with_cache(harness, blocked, model_repo)
    spec = job_spec(model_repo)
    job_id = api_server.submit(spec)
    try:
        with caplog.at_level(logging.ERROR, logger="worker.agent"):
            outcome = harness.agent.run(once=True).outcomes[0]
        assert outcome.status == "host_fault", outcome.reason
        assert "git mirror cache" in outcome.reason
        # The provider is told, loudly, that its machine is at fault and what is wrong.
        assert any(
            "THIS MACHINE cannot run jobs" in r.message and str(blocked) in r.message
            for r in caplog.records
        )
        status = api_server.get(f"/api/v1/jobs/{job_id}/status")
        assert status["status"] == "queued" and status["failures"] == 0
        assert oracle.all() == []
        texts = [line["text"] for line in api_server.get(f"/api/v1/jobs/{job_id}/logs")["lines"]]
        assert any("does not count against it" in t for t in texts)

        # The provider repairs the machine: the same job, still with its one attempt, runs.
        blocked.unlink()
        again = harness.agent.run(once=True).outcomes[0]
        assert again.status == "attested", again.reason
        assert api_server.job(job_id)["status"] == "completed"
        assert oracle.accepted[job_id]
    finally:
        harness.close()


class _EngineGone(ProcessRuntime):
    """A runtime whose engine went away between the claim and the run."""

    def run(self, spec: RunSpec, **kwargs: Any) -> RunHandle:
        raise EngineUnavailable("cannot reach the Docker engine at unix:///var/run/docker.sock")


def test_a_container_engine_that_went_away_does_not_cost_the_job_an_attempt(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    harness = _harness(tmp_path, api_server, oracle, model_repo, _EngineGone())
    job_id = api_server.submit(job_spec(model_repo))
    try:
        outcome = harness.agent.run(once=True).outcomes[0]
        assert outcome.status == "host_fault" and "Docker engine" in outcome.reason
        status = api_server.get(f"/api/v1/jobs/{job_id}/status")
        assert status["status"] == "queued" and status["failures"] == 0
    finally:
        harness.close()


def test_the_jobs_own_fault_still_counts(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    # The honest twin of the tests above: a commit its repository does not hold, and a
    # command that fails, are the job's; with one attempt allowed, each ends its job.
    harness = _harness(tmp_path, api_server, oracle, model_repo, ProcessRuntime())
    missing = job_spec(model_repo)
    missing["model"]["commit"] = "0" * 40
    failing = job_spec(model_repo, commands=[["python3", "-c", "raise SystemExit(3)"]])
    try:
        for spec, why in ((missing, "not in"), (failing, "exit")):
            job_id = api_server.submit(spec)
            outcome = harness.agent.run(once=True).outcomes[0]
            assert outcome.status == "failed" and why in outcome.reason, outcome.reason
            status = api_server.get(f"/api/v1/jobs/{job_id}/status")
            assert status["status"] == "failed" and status["failures"] == 1
    finally:
        harness.close()


def test_a_machine_fault_makes_the_loop_wait_before_claiming_again(
    tmp_path: Path,
    api_server: ApiServer,
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    # Claiming again at once would bounce every queued job off a broken machine.
    pauses: list[float] = []
    harness = _harness(tmp_path, api_server, oracle, model_repo, ProcessRuntime())
    blocked = tmp_path / "git-cache"
    blocked.write_text("blocked\n")
    _with_cache(harness, blocked, model_repo)
    agent: Agent = harness.agent
    agent._sleep = pauses.append
    api_server.submit(job_spec(model_repo))
    api_server.submit(job_spec(model_repo))
    try:
        stats = agent.run(max_jobs=2)
        assert [o.status for o in stats.outcomes] == ["host_fault", "host_fault"]
        assert len(pauses) == 1 and pauses[0] > 0
    finally:
        harness.close()
