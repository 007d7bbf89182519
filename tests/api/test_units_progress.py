"""Progress of jobs with a topology, on SQLite and PostgreSQL: a unit lease's heartbeat
records the unit's progress and message, the job's units show them while the unit runs,
and the job's progress is (completed units + the progress of the units that run) / units,
read on the status path without a query more."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from api_support import FakeClock, Wallet, Worker
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlmodel import Session, select
from unit_support import (
    UnitWorker,
    chain,
    evaluation,
    job,
    multi_node_spec,
    relay_spec,
    submit,
    unit_workers,
)

from api.config import ApiConfig
from api.models import User
from api.services.jobs import job_status
from api.storage import LocalBlobStore

Approved = tuple[Wallet, dict[str, str]]


@pytest.fixture
def config(make_config: Callable[..., ApiConfig], database_url: str) -> ApiConfig:
    return make_config(database_url=database_url, lease_ttl_s=120, cluster_wait_s=600)


@pytest.fixture
def workers(worker_factory: Callable[[], Worker]) -> Callable[[], UnitWorker]:
    return unit_workers(worker_factory, ("NVIDIA L4", 24576))


def _status(client: TestClient, auth: dict[str, str], job_id: str) -> dict[str, Any]:
    response = client.get(f"/api/v1/jobs/{job_id}/status", headers=auth)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _progress(body: dict[str, Any]) -> list[tuple[float, str]]:
    return [(u["progress"], u["progress_message"]) for u in body["units"]]


def test_unit_heartbeats_show_per_unit_and_in_the_jobs_progress(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    store: LocalBlobStore,
) -> None:
    _, auth = approved
    job_id = submit(client, auth, relay_spec(chain(3), evaluation=evaluation()))  # 5 units
    a, b = workers(), workers()
    first = a.claim()
    token = first["lease_token"]
    beat = a.heartbeat(token, progress=0.4, message="epoch 2 of 5")
    assert beat.status_code == 200, beat.text

    view = job(client, auth, job_id)
    assert _progress(view)[0] == (0.4, "epoch 2 of 5")
    assert _progress(view)[1:] == [(0.0, "")] * 4
    assert view["progress"] == pytest.approx(0.4 / 5)
    status = _status(client, auth, job_id)
    assert status["progress"] == pytest.approx(0.4 / 5)
    assert _progress(status) == _progress(view)
    assert "(attempt 1, 40%): epoch 2 of 5" in status["reason"]
    # A heartbeat that reports nothing new keeps what was reported.
    assert a.heartbeat(token).status_code == 200
    assert _progress(job(client, auth, job_id))[0] == (0.4, "epoch 2 of 5")

    a.finish_stage(first, b"checkpoint 0")
    view = job(client, auth, job_id)
    assert view["progress"] == pytest.approx(1 / 5) and _progress(view)[0][0] == 1.0

    second = b.claim()
    assert b.heartbeat(second["lease_token"], progress=0.5, message="half").status_code == 200
    assert job(client, auth, job_id)["progress"] == pytest.approx(1.5 / 5)
    # The lease fails: what it had done no longer counts, and its unit shows nothing.
    failed = b.lease(second["lease_token"], "fail", {"reason": "CUDA out of memory"})
    assert failed.status_code == 200, failed.text
    view = job(client, auth, job_id)
    assert view["progress"] == pytest.approx(1 / 5)
    assert view["units"][1]["status"] == "queued" and _progress(view)[1] == (0.0, "")
    again = a.claim()
    assert again["unit"]["index"] == 1
    assert _progress(job(client, auth, job_id))[1] == (0.0, "")  # the new lease: nothing yet


def test_cluster_nodes_report_progress_until_their_attempt_fails(
    client: TestClient, approved: Approved, workers: Callable[[], UnitWorker]
) -> None:
    _, auth = approved
    job_id = submit(client, auth, multi_node_spec(2))
    w0, w1 = workers(), workers()
    c0, c1 = w0.claim(), w1.claim()
    assert w0.heartbeat(c0["lease_token"], rendezvous="10.1.2.3:29500").status_code == 200
    r0 = w0.heartbeat(c0["lease_token"], progress=0.5, message="step 50/100")
    r1 = w1.heartbeat(c1["lease_token"], progress=0.3)
    assert r0.status_code == r1.status_code == 200, (r0.text, r1.text)
    assert r0.json()["cluster"]["state"] == "ready"
    view = job(client, auth, job_id)
    assert _progress(view) == [(0.5, "step 50/100"), (0.3, "")]
    assert view["progress"] == pytest.approx(0.4)

    # Node 1 is lost: the attempt fails, both nodes wait again and show nothing.
    assert w1.lease(c1["lease_token"], "fail", {"reason": "NCCL timeout"}).status_code == 200
    view = job(client, auth, job_id)
    assert [u["status"] for u in view["units"]] == ["queued", "queued"]
    assert _progress(view) == [(0.0, "")] * 2 and view["progress"] == 0.0


def test_the_status_read_of_a_topology_job_stays_two_queries(
    client: TestClient,
    approved: Approved,
    workers: Callable[[], UnitWorker],
    engine: Engine,
    session: Session,
    config: ApiConfig,
    clock: FakeClock,
) -> None:
    """The job row, then its units with their leases and providers: progress rides along."""
    wallet, auth = approved
    job_id = submit(client, auth, relay_spec(chain(2)))
    w = workers()
    claimed = w.claim()
    assert w.heartbeat(claimed["lease_token"], progress=0.25).status_code == 200
    owner = session.exec(select(User).where(User.address == wallet.address)).one()
    session.expunge(owner)
    session.rollback()  # SQLite: every transaction holds the write lock

    statements: list[str] = []

    def count(*args: Any) -> None:
        if not str(args[2]).startswith("BEGIN"):  # SQLite's BEGIN IMMEDIATE (api.db)
            statements.append(str(args[2]))

    with engine.connect() as conn:
        event.listen(engine, "before_cursor_execute", count)
        try:
            st = job_status(conn, config, owner, job_id, clock())
        finally:
            event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == 2, statements
    assert st.job.progress == pytest.approx(0.25 / 2)
    assert st.units is not None and st.units[0].progress == 0.25
