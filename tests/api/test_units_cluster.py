"""Multi-node clusters through the HTTP API: nodes are leased together, rank 0 publishes the
rendezvous, losing any node restarts the whole cluster attempt, and a cluster that cannot
assemble lets its providers go."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker
from fastapi.testclient import TestClient
from unit_support import UnitWorker, job, multi_node_spec, sha, submit, unit_workers

from api.config import ApiConfig
from api.storage import LocalBlobStore

Approved = tuple[Wallet, dict[str, str]]
ENDPOINT = "10.1.2.3:29500"


@pytest.fixture
def config(make_config: Callable[..., ApiConfig]) -> ApiConfig:
    return make_config(lease_ttl_s=120, cluster_wait_s=600, cluster_backoff_s=60)


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    return unit_workers(worker_factory, ("NVIDIA H100", 81920))


def _cluster(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return dict(response.json()["cluster"])


def _assemble(
    workers: Callable[[], UnitWorker], n: int
) -> tuple[list[UnitWorker], list[dict[str, Any]]]:
    nodes = [workers() for _ in range(n)]
    claims = [w.claim() for w in nodes]
    assert [c["unit"]["rank"] for c in claims] == list(range(n))
    return nodes, claims


def test_cluster_waits_for_every_node_then_is_ready_with_the_endpoint(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(3))
    assert [u["status"] for u in job(client, auth, job_id)["units"]] == ["queued"] * 3
    w0, w1, w2 = workers(), workers(), workers()

    c0 = w0.claim()
    assert c0["unit"]["kind"] == "node" and c0["unit"]["amount"] == 50
    assert c0["unit"]["cluster"] == {
        "state": "waiting",
        "world_size": 3,
        "rank": 0,
        "endpoint": None,
        "rdzv_id": f"{job_id}-1",
    }
    # One host, one node: the same worker never gets a second rank of the cluster.
    w0.claim_nothing()
    # Only rank 0 publishes, and only an endpoint others can dial.
    for bad in ("10.1.2.3", "10.1.2.3:0", "10.1.2.3:70000", "0.0.0.0:29500", "a b:1", "[::1"):
        refused = w0.heartbeat(c0["lease_token"], rendezvous=bad)
        assert refused.status_code == 400, bad
    assert _cluster(w0.heartbeat(c0["lease_token"], rendezvous=ENDPOINT))["state"] == "waiting"

    c1 = w1.claim()
    assert c1["unit"]["cluster"]["state"] == "waiting"
    assert c1["unit"]["cluster"]["endpoint"] == ENDPOINT
    refused = w1.heartbeat(c1["lease_token"], rendezvous="10.9.9.9:1")
    assert refused.status_code == 400 and "rank 0" in refused.json()["detail"]
    status = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()
    assert "2 of 3 nodes leased" in status["reason"]

    c2 = w2.claim()
    assert c2["unit"]["cluster"] == {
        "state": "ready",
        "world_size": 3,
        "rank": 2,
        "endpoint": ENDPOINT,
        "rdzv_id": f"{job_id}-1",
    }
    for w, c in ((w0, c0), (w1, c1)):
        assert _cluster(w.heartbeat(c["lease_token"]))["state"] == "ready"
    # The endpoint cannot move under a running cluster.
    moved = w0.heartbeat(c0["lease_token"], rendezvous="10.1.2.4:29500")
    assert moved.status_code == 409
    assert w0.heartbeat(c0["lease_token"], rendezvous=ENDPOINT).status_code == 200
    assert (
        "runs on 3 nodes"
        in client.get(f"/api/v1/jobs/{job_id}/status", headers=auth).json()["reason"]
    )


def test_a_node_that_completes_before_the_cluster_is_ready_is_refused(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> None:
    _, auth = approved
    submit(client, auth, multi_node_spec(2))
    w0 = workers()
    c0 = w0.claim()
    early = w0.complete(c0["lease_token"], 0)
    assert early.status_code == 409 and "still waiting" in early.json()["detail"]


def test_losing_a_node_ends_the_others_and_requeues_every_node(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(3))
    nodes, claims = _assemble(workers, 3)
    nodes[0].heartbeat(claims[0]["lease_token"], rendezvous=ENDPOINT)
    # Rank 2 finished its part before rank 1 crashed: it must run again with the others.
    assert nodes[2].complete(claims[2]["lease_token"], 2).status_code == 200
    failed = nodes[1].lease(claims[1]["lease_token"], "fail", {"reason": "NCCL timeout"})
    assert failed.status_code == 200, failed.text

    lost = nodes[0].heartbeat(claims[0]["lease_token"])
    assert lost.status_code == 409
    assert "cluster_failed" in lost.json()["detail"]
    assert "the cluster lost node 1 (failed: NCCL timeout)" in lost.json()["detail"]
    assert nodes[0].complete(claims[0]["lease_token"], 0).status_code == 409
    view = job(client, auth, job_id)
    assert view["status"] == "running" and view["failures"] == 1
    assert [(u["status"], u["attempts"]) for u in view["units"]] == [("queued", 2)] * 3
    assert "cluster attempt 1 failed" in view["last_error"]

    # The next attempt has its own rendezvous id; nobody holds a node now.
    _, again = _assemble(workers, 3)
    assert {c["unit"]["cluster"]["rdzv_id"] for c in again} == {f"{job_id}-2"}
    assert {c["attempt"] for c in again} == {2}


def test_a_released_node_restarts_the_cluster_without_using_an_attempt(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(2))
    nodes, claims = _assemble(workers, 2)
    assert nodes[0].lease(claims[0]["lease_token"], "release", {"reason": "bye"}).status_code == 200
    assert nodes[1].heartbeat(claims[1]["lease_token"]).status_code == 409
    view = job(client, auth, job_id)
    assert view["failures"] == 0
    assert [(u["status"], u["attempts"]) for u in view["units"]] == [("queued", 2)] * 2


def test_expired_node_fails_the_cluster_attempt(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    config: ApiConfig,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(2))
    nodes, claims = _assemble(workers, 2)
    clock.advance(config.lease_ttl_s - 10)
    assert nodes[0].heartbeat(claims[0]["lease_token"]).status_code == 200
    clock.advance(20)  # node 1 never heartbeated: its lease expired
    view = job(client, auth, job_id)
    assert [u["status"] for u in view["units"]] == ["leased", "leased"]  # not swept yet
    retry = workers().claim()  # a claim sweeps first
    assert retry["attempt"] == 2 and retry["unit"]["rank"] == 0
    lost = nodes[0].heartbeat(claims[0]["lease_token"])
    assert lost.status_code == 409 and "lost node 1 (expired" in lost.json()["detail"]
    view = job(client, auth, job_id)
    assert view["failures"] == 1
    assert [u["status"] for u in view["units"]] == ["leased", "queued"]


def test_failed_cluster_attempts_exhaust_and_fail_the_job(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker], config: ApiConfig
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(2))
    for _ in range(config.max_attempts):
        nodes, claims = _assemble(workers, 2)
        assert (
            nodes[1].lease(claims[1]["lease_token"], "fail", {"reason": "oom"}).status_code == 200
        )
    view = job(client, auth, job_id)
    assert (
        view["status"] == "failed"
        and "gave up after 3 failed cluster attempts" in view["last_error"]
    )
    assert [u["status"] for u in view["units"]] == ["failed", "failed"]
    workers().claim_nothing()


def test_cluster_completes_when_every_node_of_one_attempt_did(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(3, checkpoint="final.pt"))
    nodes, claims = _assemble(workers, 3)
    nodes[0].heartbeat(claims[0]["lease_token"], rendezvous="node0.cluster.example:29400")
    model = b"weights written by rank 0"
    # Before rank 0 uploads, a node's reported output is taken as is (the oracle compares
    # the nodes' attestations); afterwards it must match the upload.
    assert nodes[1].complete(claims[1]["lease_token"], 1, sha(model)).status_code == 200
    assert (
        nodes[0].upload(claims[0]["lease_token"], "checkpoint/final.pt", model).status_code == 200
    )
    wrong = nodes[2].complete(claims[2]["lease_token"], 2, sha(b"other"))
    assert wrong.status_code == 409 and "cluster attempt 1" in wrong.json()["detail"]
    assert nodes[2].complete(claims[2]["lease_token"], 2, None).status_code == 422
    assert nodes[2].complete(claims[2]["lease_token"], 2, sha(model)).status_code == 200
    assert job(client, auth, job_id)["status"] == "running"
    assert nodes[0].complete(claims[0]["lease_token"], 0, sha(model)).status_code == 200
    view = job(client, auth, job_id)
    assert view["status"] == "completed" and view["progress"] == 1.0
    assert view["result"] == {"nodes": 3, "sha256": sha(model)}
    assert [u["output"] for u in view["units"]] == [sha(model)] * 3


def test_a_cluster_that_cannot_assemble_releases_its_nodes_and_backs_off(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    config: ApiConfig,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(3))
    w0, w1 = workers(), workers()
    c0 = w0.claim()
    for _ in range(3):
        clock.advance(100)
        assert _cluster(w0.heartbeat(c0["lease_token"]))["state"] == "waiting"
    c1 = w1.claim()
    for step in (100, 100, 99):  # both keep heartbeating while they wait
        clock.advance(step)
        assert _cluster(w0.heartbeat(c0["lease_token"]))["state"] == "waiting"
        assert w1.heartbeat(c1["lease_token"]).status_code == 200
    clock.advance(1)  # 600 s since node 0 was leased, and node 2 never was
    timed_out = w0.heartbeat(c0["lease_token"])
    assert timed_out.status_code == 409
    assert "cluster_timeout" in timed_out.json()["detail"]
    assert "1 of 3" not in timed_out.json()["detail"]
    assert "2 of 3 nodes were leased within 600s" in timed_out.json()["detail"]
    assert w1.heartbeat(c1["lease_token"]).status_code == 409
    view = job(client, auth, job_id)
    assert [(u["status"], u["attempts"]) for u in view["units"]] == [("queued", 2)] * 3
    assert view["failures"] == 0
    # The providers take other work first: the cluster is not offered during the back-off.
    w0.claim_nothing()
    clock.advance(config.cluster_backoff_s)
    assert w0.claim()["unit"]["cluster"]["rdzv_id"] == f"{job_id}-2"


def test_the_sweep_times_out_a_cluster_nobody_heartbeats_about(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    clock: FakeClock,
    config: ApiConfig,
    engine: Any,
) -> None:
    from api.db import open_session
    from api.services.leases import sweep_expired

    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(2))
    w0 = workers()
    c0 = w0.claim()
    clock.advance(config.lease_ttl_s - 1)
    assert w0.heartbeat(c0["lease_token"]).status_code == 200
    clock.advance(config.cluster_wait_s - config.lease_ttl_s + 2)
    # The lease is alive (heartbeated within its TTL) but the cluster waited too long.
    with open_session(engine) as session:
        sweep_expired(session, clock(), config=config)
    assert [u["status"] for u in job(client, auth, job_id)["units"]] == ["queued", "queued"]
    assert w0.heartbeat(c0["lease_token"]).status_code == 409
