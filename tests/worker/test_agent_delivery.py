"""The agent delivers a finished job's results where the spec says, end to end: a real API
over HTTP, real jobs on the process runtime, and local HTTPS servers as the submitter's
webhook and pre-signed S3 URL. The provider lets 127.0.0.1 back in through its data-egress
allow-list (`PROOFNET_WORKER_DATA_ALLOW_NETWORKS`); the attack runs with the default
public-only policy and must leave the job incomplete."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
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

from proofnet.egress import EgressPolicy
from proofnet.shard_fetch import DataFetchPolicy
from tests.net_servers import LocalServer, Status, Stored, names, serve, tls_for

HOST = "hooks.example.test"
TLS = tls_for(HOST)


@pytest.fixture
def far_end() -> Iterator[LocalServer]:
    with serve({"/hook": Status(204), "/bucket/weights": Stored('"etag-w"')}, tls=TLS) as s:
        yield s


def _harness(
    tmp: Path, api: ApiServer, recorder: RecordingOracle, repo: FixtureRepo, egress: EgressPolicy
) -> AgentHarness:
    from worker.runtime.process_runtime import ProcessRuntime

    data = DataFetchPolicy(
        egress=egress, resolver=names({HOST: ["127.0.0.1"]}), verify=TLS.ca_context()
    )
    return AgentHarness(tmp, api, recorder, repo, ProcessRuntime(), data=data)


def _spec(repo: FixtureRepo, server: LocalServer) -> dict[str, Any]:
    spec = job_spec(repo)
    spec["destinations"] = [
        {"kind": "api"},
        {"kind": "webhook", "url": server.url(HOST, "/hook")},
        {
            "kind": "s3_presigned",
            "puts": [{"name": "results/model.weights", "url": server.url(HOST, "/bucket/weights")}],
        },
    ]
    return spec


def test_results_reach_every_destination_and_the_job_completes(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
    far_end: LocalServer,
) -> None:
    h = _harness(tmp_path, api_server, oracle, model_repo, EgressPolicy.allowing(["127.0.0.1"]))
    try:
        job_id = api_server.submit(_spec(model_repo, far_end))
        outcome = h.agent.run(once=True).outcomes[0]
    finally:
        h.close()
    assert outcome.status == "attested", outcome.reason
    assert api_server.job(job_id)["status"] == "completed"
    by_path = {s.path: s for s in far_end.seen}
    hook, put = by_path["/hook"], by_path["/bucket/weights"]
    assert hook.headers["X-Proofnet-Result"] == "results/metrics.json"
    assert outcome.result_hashes is not None
    assert hashlib.sha256(hook.body).hexdigest() == outcome.result_hashes["results/metrics.json"]
    assert hashlib.sha256(put.body).hexdigest() == outcome.result_hashes["results/model.weights"]


def test_a_webhook_at_loopback_is_refused_and_the_job_does_not_complete(
    tmp_path: Path,
    api_server: ApiServer,  # noqa: F811
    oracle: RecordingOracle,  # noqa: F811
    model_repo: FixtureRepo,  # noqa: F811
    job_path: None,  # noqa: F811
    far_end: LocalServer,
) -> None:
    h = _harness(tmp_path, api_server, oracle, model_repo, EgressPolicy())
    try:
        job_id = api_server.submit(_spec(model_repo, far_end))
        outcome = h.agent.run(once=True).outcomes[0]
    finally:
        h.close()
    assert outcome.status == "failed"
    assert "not acknowledged" in outcome.reason and "loopback" in outcome.reason
    assert far_end.seen == [] and far_end.handshakes == []
    assert oracle.all() == []  # never attested
    job = api_server.job(job_id)
    assert job["status"] != "completed" and "loopback" in job["last_error"]
