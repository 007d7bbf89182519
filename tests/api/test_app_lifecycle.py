"""The app as a whole: migrates on start, sweeps expired leases in the background, and
runs the same HTTP flow on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from api_support import FakeClock, Wallet, Worker, job_spec, sign_in, wait_for
from fastapi.testclient import TestClient
from sqlmodel import select

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import current_revision, head_revision
from api.models import Job
from api.services.users import add_senior


def test_http_flow_on_both_databases(database_url: str) -> None:
    clock = FakeClock()
    config = ApiConfig(database_url=database_url, network="devnet", rate_limit_per_minute=10_000)
    engine = make_engine(database_url)
    try:
        app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
        with TestClient(app) as client:
            assert current_revision(engine) == head_revision()
            wallet = Wallet()
            with open_session(engine) as session:
                add_senior(session, config, wallet.address, clock())
            headers = sign_in(client, wallet)
            job = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=headers).json()
            worker = Worker(client, clock=clock)
            worker.register([("L4", 24576)])
            claim = worker.claim().json()
            assert claim["job_id"] == job["job_id"]
            done = worker.request(
                "POST", f"/api/v1/worker/leases/{claim['lease_token']}/complete", {"result": {}}
            )
            assert done.status_code == 200
            got = client.get(f"/api/v1/jobs/{job['job_id']}", headers=headers).json()
            assert got["status"] == "completed"
    finally:
        engine.dispose()


def test_background_sweeper_requeues_expired_leases(
    make_config: Any, sqlite_url: str, clock: FakeClock
) -> None:
    config: ApiConfig = make_config(sweep_interval_s=0.02)
    engine = make_engine(sqlite_url)
    try:
        app = create_app(config=config, engine=engine, clock=clock, run_sweeper=True)
        with TestClient(app) as client:
            wallet = Wallet()
            with open_session(engine) as session:
                add_senior(session, config, wallet.address, clock())
            headers = sign_in(client, wallet)
            job_id = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=headers).json()[
                "job_id"
            ]
            worker = Worker(client, clock=clock)
            worker.register([("L4", 24576)])
            assert worker.claim().status_code == 200
            clock.advance(config.lease_ttl_s + 1)

            def requeued() -> bool:
                with open_session(engine) as session:
                    job = session.exec(select(Job).where(Job.job_id == job_id)).one()
                    return job.status == "queued"

            wait_for(requeued)
    finally:
        engine.dispose()


def test_create_app_does_no_io_until_started(tmp_path: Any) -> None:
    db = tmp_path / "later" / "api.db"
    config = ApiConfig(database_url=f"sqlite:///{db}", network="devnet")
    app = create_app(config=config)
    assert not db.exists()
    with TestClient(app) as client:
        assert client.get("/api/v1/health").status_code == 200
    assert db.exists()
