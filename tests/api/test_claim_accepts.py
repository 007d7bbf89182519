"""The claim's `accepts`: a worker gets a node of a multi-node job only when it says it runs
cluster nodes, and a job that asks for network egress only when it says its provider
allows egress (absent means it does not); it still gets everything else. On SQLite and
PostgreSQL: the filters are part of the claim's locking query."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import NETWORK, Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from unit_support import chain, job, multi_node_spec, relay_spec, submit

from api.config import ApiConfig

CLAIM = "/api/v1/worker/claim"
Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(database_url: str) -> ApiConfig:
    return ApiConfig(
        database_url=database_url,
        network=NETWORK,
        rate_limit_per_minute=100_000,
        cluster_wait_s=600,
        cluster_backoff_s=60,
    )


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], Worker]:
    def make() -> Worker:
        worker = worker_factory()
        # Enough GPUs for every claim a test makes: a GPU holds one lease at a time.
        worker.register([("NVIDIA H100", 81920)] * 4)
        return worker

    return make


def _claimed(response: Any) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_worker_not_accepting_clusters_gets_everything_but_nodes(
    client: TestClient, approved: Approved, workers: Callable[[], Worker]
) -> None:
    _, auth = approved
    # Oldest first: the cluster would be handed out before anything else.
    cluster_id = submit(client, auth, multi_node_spec(2))
    relay_id = submit(client, auth, relay_spec(chain(1)))
    plain_id = submit(client, auth, job_spec(gpus=1))

    no_clusters = workers()
    stage = _claimed(no_clusters.claim(cluster=False))
    assert stage["job_id"] == relay_id and stage["unit"]["kind"] == "stage"
    plain = _claimed(no_clusters.claim(cluster=False))
    assert plain["job_id"] == plain_id and plain["unit"] is None
    assert no_clusters.claim(cluster=False).status_code == 204

    # A worker that predates `accepts` sends no body: it cannot be assumed to run nodes.
    # Neither can one that sends an empty body or names no kind.
    for body in (None, {}, {"accepts": {}}, {"accepts": {"cluster": False}}):
        other = workers()
        answer = other.request("POST", CLAIM, body)
        assert answer.status_code == 204, (body, answer.text)
    assert [u["status"] for u in job(client, auth, cluster_id)["units"]] == ["queued", "queued"]

    # Workers that run nodes take the cluster, one rank each.
    ranks = [_claimed(workers().claim(cluster=True)) for _ in range(2)]
    assert {c["job_id"] for c in ranks} == {cluster_id}
    assert [c["unit"]["rank"] for c in ranks] == [0, 1]
    assert ranks[1]["unit"]["cluster"]["world_size"] == 2


def test_a_requeued_cluster_still_goes_only_to_workers_that_run_nodes(
    client: TestClient, approved: Approved, workers: Callable[[], Worker]
) -> None:
    _, auth = approved
    cluster_id = submit(client, auth, multi_node_spec(2))
    first = workers()
    node = _claimed(first.claim(cluster=True))
    lease = f"/api/v1/worker/leases/{node['lease_token']}/fail"
    assert first.request("POST", lease, {"reason": "NCCL timeout"}).status_code == 200
    view = job(client, auth, cluster_id)
    assert [(u["status"], u["attempts"]) for u in view["units"]] == [("queued", 2)] * 2

    assert workers().claim(cluster=False).status_code == 204
    again = _claimed(workers().claim(cluster=True))
    assert again["job_id"] == cluster_id and again["attempt"] == 2


def test_the_claim_body_is_checked(
    client: TestClient, approved: Approved, workers: Callable[[], Worker]
) -> None:
    _, auth = approved
    submit(client, auth, multi_node_spec(2))
    worker = workers()
    for bad in (
        {"accepts": {"cluster": "yes"}},
        {"accepts": {"cluster": 1}},
        {"accepts": {"cluster": None}},
        {"accepts": {"egress": "yes"}},
        {"accepts": {"egress": 1}},
        {"accepts": True},
        {"accept": {"cluster": True}},
    ):
        answer = worker.request("POST", CLAIM, bad)
        assert answer.status_code == 422, (bad, answer.text)
    # Kinds this API does not know are ignored: a newer worker may name more.
    newer = worker.request("POST", CLAIM, {"accepts": {"cluster": True, "sharded": True}})
    assert _claimed(newer)["unit"]["kind"] == "node"


def test_a_job_asking_for_egress_goes_only_to_a_worker_whose_provider_allows_it(
    client: TestClient, approved: Approved, workers: Callable[[], Worker]
) -> None:
    """A submitter's `egress: true` never reaches a provider that allows no egress: the
    job is not handed out to it (so it cannot bounce between such workers either)."""
    _, auth = approved
    # Oldest first: the egress job would be handed out before anything else.
    egress_id = submit(client, auth, {**job_spec(gpus=1), "egress": True})
    relay_id = submit(client, auth, relay_spec(chain(1)))
    plain_id = submit(client, auth, job_spec(gpus=1))

    strict = workers()
    assert _claimed(strict.claim(egress=False))["job_id"] == relay_id
    assert _claimed(strict.claim(egress=False))["job_id"] == plain_id
    assert strict.claim(egress=False).status_code == 204
    for body in (None, {}, {"accepts": {"cluster": True}}):  # absent means no
        assert workers().request("POST", CLAIM, body).status_code == 204, body
    assert job(client, auth, egress_id)["status"] == "queued"

    assert _claimed(workers().claim(egress=True))["job_id"] == egress_id


def test_a_topology_job_asking_for_egress_keeps_its_units_from_strict_workers(
    client: TestClient, approved: Approved, workers: Callable[[], Worker]
) -> None:
    _, auth = approved
    relay_id = submit(client, auth, {**relay_spec(chain(1)), "egress": True})
    assert workers().claim(egress=False).status_code == 204
    stage = _claimed(workers().claim(egress=True))
    assert stage["job_id"] == relay_id and stage["unit"]["kind"] == "stage"
