"""A worker that contributes verification only (`proofnet worker run --verify-only`).

A provider may lend a machine to replaying other providers' drawn segments (and to
answering disputes of its own earlier proofs) without taking training jobs: it asks the
API for verification tasks, so it is a candidate verifier, and never claims. A queued job
with its escrow stays queued beside it. A verify-only worker that could not verify (no
trusted oracle, verification off, an unisolated runtime off the demo) is refused at start
rather than left idle, and `--once`/`--max-jobs` (counts of jobs) do not apply.
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_fixtures import (  # noqa: F401  (fixtures)
    AgentHarness,
    ApiServer,
    FixtureRepo,
    RecordingOracle,
    api_server,
    job_path,
    job_spec,
    model_repo,
    oracle,
)
from sqlmodel import select
from waiting import until

from api.db import open_session
from api.models.provider import Provider
from worker.agent import Agent, AgentConfig
from worker.identity import create_key, load_or_create_key
from worker.runtime.process_runtime import ProcessRuntime
from worker.verifier import VerifierRefused

ORACLE_KEY = "ab" * 32


def _verifies_at(api: ApiServer, worker_key: str) -> Any:
    with open_session(api.engine) as session:
        provider = session.exec(select(Provider).where(Provider.worker_key == worker_key)).one()
        return provider.verifies_at


def test_a_verify_only_worker_asks_for_tasks_and_never_claims(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
) -> None:
    job_id = api_server.submit(job_spec(model_repo))
    h = AgentHarness(
        tmp_path,
        api_server,
        oracle,
        model_repo,
        ProcessRuntime(),
        verify_only=True,
        trusted_oracle_keys=(ORACLE_KEY,),
        demo_process_verify=True,  # the process runtime verifies in the local demo only
        verification_poll_s=0.05,
        release_poll_s=0.05,
    )
    stats: list[Any] = []
    thread = threading.Thread(target=lambda: stats.append(h.agent.run()), daemon=True)
    thread.start()
    try:
        key = h.worker.key.public_key_hex
        first = until(
            "the worker asks for verification tasks", lambda: _verifies_at(api_server, key)
        )
        # Asked again, later: a claiming worker would have claimed before its second round.
        until("a later round", lambda: _verifies_at(api_server, key) != first)
        assert api_server.job(job_id)["status"] == "queued"
    finally:
        h.agent.request_stop()
        thread.join(timeout=60)
        h.close()
    assert not thread.is_alive() and stats[0].jobs == 0 and stats[0].outcomes == ()
    assert api_server.job(job_id)["status"] == "queued"


def test_a_verify_only_agent_that_cannot_verify_is_refused(tmp_path: Path) -> None:
    """Not an idle worker that looks like a verifier: no trusted oracle, or a runtime that
    does not isolate job code outside the demo, ends `run` with why."""
    base = AgentConfig(
        work_dir=tmp_path / "work", network="devnet", payout_address="addr_test1x", verify_only=True
    )
    agent = Agent(
        base,
        api=object(),  # type: ignore[arg-type]
        oracle=object(),  # type: ignore[arg-type]
        runtime=ProcessRuntime(),
        sampler=None,  # type: ignore[arg-type]
        key=create_key(tmp_path / "w.skey"),
    )
    with pytest.raises(VerifierRefused, match="trusts|--oracle-key"):
        agent.run()
    agent.config = dataclasses.replace(base, trusted_oracle_keys=(ORACLE_KEY,))
    with pytest.raises(VerifierRefused, match="does not isolate"):
        agent.run()


def test_worker_run_refuses_a_verify_only_worker_that_cannot_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--verify-only` with `--no-verify`, `--once`, `--max-jobs`, no trusted oracle, or the
    process runtime off the demo: refused with why (exit 2), nothing started. Its honest
    twin (the demo's: devnet, process verification, a trusted oracle) starts verify-only,
    from the option or from PROOFNET_WORKER_VERIFY_ONLY."""
    from typer.testing import CliRunner

    import worker.agent
    from worker.cli import app

    started: list[bool] = []

    class _Agent:
        def __init__(self, config: Any, **_: Any) -> None:
            started.append(config.verify_only)
            self.stopping = False

        def run(self, **_: Any) -> Any:
            return worker.agent.AgentStats(jobs=0, outcomes=(), stopped_by_signal=False)

    monkeypatch.setattr(worker.agent, "Agent", _Agent)
    for name in ("PROOFNET_WORKER_ORACLE_KEYS", "PROOFNET_WORKER_DEMO_PROCESS_VERIFY"):
        monkeypatch.delenv(name, raising=False)
    load_or_create_key(tmp_path / "w.skey")
    args = ["run", "--runtime", "process", "--key-file", str(tmp_path / "w.skey")]
    args += ["--work-dir", str(tmp_path / "work"), "--payout-address", "addr_test1x"]
    args += ["--network", "devnet", "--verify-only"]
    trusted = ["--oracle-key", ORACLE_KEY]
    runner = CliRunner()
    for extra, why in (
        ([], "PROOFNET_WORKER_ORACLE_KEYS"),
        ([*trusted], "isolates job code"),
    ):
        refused = runner.invoke(app, [*args, *extra])
        assert refused.exit_code == 2 and why in refused.output, refused.output
    monkeypatch.setenv("PROOFNET_WORKER_DEMO_PROCESS_VERIFY", "true")
    for extra, why in (
        (["--no-verify"], "nothing to do"),
        (["--once"], "--once and --max-jobs"),
        (["--max-jobs", "2"], "--once and --max-jobs"),
    ):
        refused = runner.invoke(app, [*args, *trusted, *extra])
        assert refused.exit_code == 2 and why in refused.output, refused.output
    assert started == []
    assert runner.invoke(app, [*args, *trusted]).exit_code == 0
    monkeypatch.setenv("PROOFNET_WORKER_VERIFY_ONLY", "true")
    bare = [a for a in args if a != "--verify-only"]
    assert runner.invoke(app, [*bare, *trusted]).exit_code == 0
    monkeypatch.delenv("PROOFNET_WORKER_VERIFY_ONLY")
    assert runner.invoke(app, [*bare, *trusted]).exit_code == 0
    assert started == [True, True, False]
