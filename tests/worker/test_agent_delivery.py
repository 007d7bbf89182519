"""The agent delivers a finished job's results where the spec says, end to end: a real API
over HTTP, real jobs on the process runtime, and local HTTPS servers as the submitter's
webhook and pre-signed S3 URL. The provider lets 127.0.0.1 back in through its data-egress
allow-list (`PROOFNET_WORKER_DATA_ALLOW_NETWORKS`).

The submitter's own destinations get the results only once the oracles' verdict releases
them (issue 12.4): the job completes with the API's store holding them, the worker holds a
copy (worker.held_results), and nothing reaches the webhook or the bucket before the verdict
nor ever after a provider's-fault one. The attack on the egress policy runs with the default
public-only policy: the delivery is refused, never sent, and its reason recorded."""

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
        assert outcome.status == "attested", outcome.reason
        assert api_server.job(job_id)["status"] == "completed"
        # Before the verdict: nothing reached the submitter's webhook or bucket.
        assert h.agent.deliver_released() == 0
        assert far_end.seen == [] and far_end.handshakes == []
        view = api_server.get(f"/api/v1/jobs/{job_id}/deliveries")
        assert [d["state"] for d in view["data"]] == ["acknowledged", "pending", "pending"]
        api_server.release(job_id)
        assert h.agent.deliver_released() == 1
    finally:
        h.close()
    view = api_server.get(f"/api/v1/jobs/{job_id}/deliveries")
    assert view["complete"] is True, view
    assert list(h.agent.held.pending()) == []
    by_path = {s.path: s for s in far_end.seen}
    hook, put = by_path["/hook"], by_path["/bucket/weights"]
    assert hook.headers["X-Proofnet-Result"] == "results/metrics.json"
    assert outcome.result_hashes is not None
    assert hashlib.sha256(hook.body).hexdigest() == outcome.result_hashes["results/metrics.json"]
    assert hashlib.sha256(put.body).hexdigest() == outcome.result_hashes["results/model.weights"]


def test_a_provider_fault_verdict_never_delivers_to_the_submitters_destinations(
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
        assert h.agent.run(once=True).outcomes[0].status == "attested"
        api_server.release(job_id, status="rejected", fault="provider")
        assert h.agent.deliver_released() == 0
        assert list(h.agent.held.pending()) == []  # dropped, undelivered
    finally:
        h.close()
    assert far_end.seen == [] and far_end.handshakes == []


def test_a_webhook_at_loopback_is_refused_after_the_release_and_never_sent(
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
        assert outcome.status == "attested", outcome.reason
        api_server.release(job_id)
        assert h.agent.deliver_released() == 0
    finally:
        h.close()
    assert far_end.seen == [] and far_end.handshakes == []
    view = api_server.get(f"/api/v1/jobs/{job_id}/deliveries")
    assert view["data"][1]["state"] == "refused" and "loopback" in view["data"][1]["reason"]
    assert view["complete"] is False
