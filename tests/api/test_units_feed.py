"""The oracle feed of a job with a topology: per unit, the completing lease, the checkpoint
chain and the uploads, which the oracle reads back as `units/<index>/<name>`."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from api_support import NETWORK, FakeClock, Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from nacl.signing import SigningKey
from unit_support import (
    CHECKPOINT,
    UnitWorker,
    chain,
    evaluation,
    multi_node_spec,
    relay_spec,
    sha,
    submit,
    unit_workers,
)

from api.config import ApiConfig
from api.storage import LocalBlobStore
from proofnet.messages.worker_auth import sign_request_headers

ORACLE = SigningKey.generate()
Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(oracle_keys=(bytes(ORACLE.verify_key).hex(),))


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    return unit_workers(worker_factory, ("NVIDIA L4", 24576))


def oracle_get(client: TestClient, path: str) -> Any:
    headers = sign_request_headers(ORACLE, network=NETWORK, method="GET", path=path, body=b"")
    return client.get(path, headers=headers)


def feed(client: TestClient, job_id: str) -> dict[str, Any]:
    response = oracle_get(client, f"/api/v1/oracle/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_feed_lists_units_with_their_completing_lease_chain_and_uploads(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2), evaluation=evaluation(every=1)))
    a, b = workers(), workers()
    first = a.claim()
    # A lost attempt first: the feed names the lease that completed, not the newest.
    assert a.lease(first["lease_token"], "fail", {"reason": "flaky"}).status_code == 200
    first = b.claim()
    assert b.upload(first["lease_token"], "metrics.json", b'{"loss": "0.3"}').status_code == 200
    clock.advance(40)
    b.finish_stage(first, b"c0")
    running = feed(client, job_id)
    assert running["status"] == "running"
    assert running["lease"] is None and running["results"] == {}

    ev = a.claim()
    clock.advance(5)
    assert (
        a.complete(ev["lease_token"], ev["unit"]["index"], None, {"loss": "0.2"}).status_code == 200
    )
    second = b.claim()
    b.finish_stage(second, b"c1")
    ev2 = a.claim()
    a.complete(ev2["lease_token"], ev2["unit"]["index"], None, {"loss": "0.1"})

    body = feed(client, job_id)
    assert body["status"] == "completed"
    units = body["units"]
    assert [(u["index"], u["kind"], u["status"]) for u in units] == [
        (0, "stage", "completed"),
        (1, "stage", "completed"),
        (2, "eval", "completed"),
        (3, "eval", "completed"),
    ]
    stage0 = units[0]
    lease = stage0["lease"]
    assert lease["worker_key"] == b.worker.public_key
    assert lease["nonce"] == first["nonce"] and lease["attempt"] == 2 and lease["gpus"] == 1
    started = datetime.fromisoformat(lease["started_at"])
    completed = datetime.fromisoformat(lease["completed_at"])
    assert (completed - started).total_seconds() == 40 and started.tzinfo is not None
    assert set(lease) == {
        "worker_key",
        "payout_address",
        "nonce",
        "gpus",
        "started_at",
        "completed_at",
        "attempt",
    }
    assert stage0["inputs"] == [] and stage0["output"] == sha(b"c0")
    assert stage0["results"] == {
        f"checkpoint/{CHECKPOINT}": sha(b"c0"),
        "metrics.json": sha(b'{"loss": "0.3"}'),
    }
    # Each unit's inputs chain to the outputs of the units it built on.
    assert units[1]["inputs"] == [sha(b"c0")] and units[1]["output"] == sha(b"c1")
    assert units[2]["inputs"] == [sha(b"c0")] and units[2]["metrics"] == {"loss": "0.2"}
    assert units[2]["output"] is None and units[2]["results"] == {}
    assert units[3]["inputs"] == [sha(b"c1")]
    assert units[2]["lease"]["worker_key"] == a.worker.public_key

    got = oracle_get(
        client, f"/api/v1/oracle/jobs/{job_id}/results/units/1/checkpoint/{CHECKPOINT}"
    )
    assert got.status_code == 200 and got.content == b"c1"
    assert got.headers["X-Content-SHA256"] == sha(b"c1")
    metrics = oracle_get(client, f"/api/v1/oracle/jobs/{job_id}/results/units/0/metrics.json")
    assert metrics.content == b'{"loss": "0.3"}'
    for missing in (
        f"checkpoint/{CHECKPOINT}",  # a unit's uploads are named by unit
        "units/7/metrics.json",
        "units/1/metrics.json",
        "units/x/metrics.json",
        "units/0",
    ):
        response = oracle_get(client, f"/api/v1/oracle/jobs/{job_id}/results/{missing}")
        assert response.status_code == 404, missing


def test_feed_of_a_stopped_pipeline_and_of_a_cluster(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    stopped_id = submit(client, auth, relay_spec(chain(2), evaluation=evaluation(every=1)))
    w = workers()
    w.finish_stage(w.claim(), b"c0")
    ev = w.claim()
    w.complete(ev["lease_token"], ev["unit"]["index"], None, {"loss": "7"})
    body = feed(client, stopped_id)
    assert body["status"] == "stopped"
    assert [u["status"] for u in body["units"]] == [
        "completed",
        "cancelled",
        "completed",
        "cancelled",
    ]
    assert body["units"][1]["lease"] is None and body["units"][1]["inputs"] == []

    cluster_id = submit(client, auth, multi_node_spec(2, checkpoint="final.pt"))
    nodes = [workers(), workers()]
    claims = [n.claim() for n in nodes]
    nodes[0].heartbeat(claims[0]["lease_token"], rendezvous="10.0.0.1:29500")
    nodes[0].upload(claims[0]["lease_token"], "checkpoint/final.pt", b"weights")
    for rank, (n, c) in enumerate(zip(nodes, claims, strict=True)):
        assert n.complete(c["lease_token"], rank, sha(b"weights")).status_code == 200
    body = feed(client, cluster_id)
    assert body["status"] == "completed"
    assert [u["kind"] for u in body["units"]] == ["node", "node"]
    assert [u["lease"]["worker_key"] for u in body["units"]] == [n.worker.public_key for n in nodes]
    assert [u["output"] for u in body["units"]] == [sha(b"weights")] * 2
    assert body["units"][0]["results"] == {"checkpoint/final.pt": sha(b"weights")}
    assert body["units"][1]["results"] == {}


def test_single_unit_feed_is_unchanged(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker], store: LocalBlobStore
) -> None:
    _, auth = approved
    job_id = submit(client, auth, job_spec(gpus=1))
    w = workers()
    claim = w.worker.claim().json()
    assert w.lease(claim["lease_token"], "complete", {"result": {}}).status_code == 200
    body = feed(client, job_id)
    assert "units" not in body
    assert body["status"] == "completed" and body["lease"]["nonce"] == claim["nonce"]
