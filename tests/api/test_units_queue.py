"""The unit queue on SQLite and PostgreSQL: workers claiming at once never share a unit, and
single-unit jobs and units are handed out together."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, col, select
from test_lease_queue import seed_providers
from unit_support import chain, multi_node_spec, relay_spec

from api.config import ApiConfig
from api.db import make_engine, open_session
from api.migrate import upgrade_head
from api.models import Job, JobUnit, Lease, Provider, User
from api.services import leases, units
from proofnet.messages.jobspec import JobSpec

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def queue_engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    upgrade_head(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def qconfig(database_url: str) -> ApiConfig:
    return ApiConfig(database_url=database_url, network="devnet", lease_ttl_s=60)


def _seed(session: Session, *, workers: int, specs: list[dict[str, Any]]) -> list[int]:
    """Providers (L4s) and jobs of `specs`, oldest first; returns the provider ids."""
    owner = User(address="addr_test1owner", payment_key_hash="00" * 28, created_at=T0)
    session.add(owner)
    session.flush()
    assert owner.id is not None
    # Enough GPUs for every unit: a GPU holds one lease at a time.
    ids = seed_providers(session, workers, gpus=len(specs) * 10)
    for n, raw in enumerate(specs):
        spec = JobSpec.from_dict(raw)
        topology = spec.topology
        job = Job(
            job_id=spec.job_id,
            owner_id=owner.id,
            spec=spec.model_dump(mode="json"),
            gpu_count=1,
            gpu_memory_mb=16384,
            status="running" if topology else "queued",
            max_attempts=3,
            unit_count=len(units.plan(topology)) if topology else 0,
            created_at=T0 + timedelta(microseconds=n),
            updated_at=T0,
        )
        session.add(job)
        session.flush()
        if topology is not None:
            units.create_units(session, job, topology, T0)
    session.commit()
    return ids


def _branches(n: int) -> dict[str, Any]:
    return relay_spec(
        [{"shards": [b % 4]} for b in range(n)],
        aggregation="average",
        aggregate_command=["python", "average.py"],
        aggregate_amount=1,
    )


def _plain() -> dict[str, Any]:
    raw = relay_spec(chain(1))
    del raw["topology"]
    return raw


def _provider(session: Session, provider_id: int) -> Provider:
    provider = session.get(Provider, provider_id)
    assert provider is not None
    session.commit()  # end the read: on SQLite it holds the write lock
    return provider


def test_concurrent_claimers_never_get_the_same_unit(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    workers, pipelines, branches, plain = 6, 4, 8, 6
    expected = pipelines * branches + plain  # the aggregations wait for their branches
    specs = [_branches(branches) for _ in range(pipelines)] + [_plain() for _ in range(plain)]
    with open_session(queue_engine) as s:
        provider_ids = _seed(s, workers=workers, specs=specs)
    barrier = threading.Barrier(workers)
    claimed: dict[int, list[tuple[str, int | None]]] = {p: [] for p in provider_ids}
    lock = threading.Lock()
    total = [0]
    errors: list[BaseException] = []

    def run(provider_id: int) -> None:
        try:
            with open_session(queue_engine) as session:
                provider = _provider(session, provider_id)
                barrier.wait()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    with lock:
                        if total[0] >= expected:
                            return
                    got = leases.claim(session, qconfig, provider, T0)
                    if got is None:
                        # Another claimer may hold the job row this instant (SKIP LOCKED).
                        time.sleep(0.005)
                        continue
                    index = None if got.unit is None else got.unit.index
                    with lock:
                        total[0] += 1
                    claimed[provider_id].append((got.job.job_id, index))
                    time.sleep(0.002)  # a real worker starts its unit before claiming again
        except BaseException as e:  # surfaced below: a thread's failure must fail the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(pid,)) for pid in provider_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=90)
    assert not errors, errors
    everything = [c for got in claimed.values() for c in got]
    assert len(everything) == len(set(everything)), "a unit was claimed twice"
    assert len(everything) == expected
    assert sum(1 for got in claimed.values() if got) > 1, {p: len(g) for p, g in claimed.items()}
    with open_session(queue_engine) as s:
        leased = s.exec(select(JobUnit).where(JobUnit.status == "leased")).all()
        assert len(leased) == pipelines * branches
        assert len({u.current_lease_id for u in leased}) == len(leased)
        assert len(s.exec(select(Lease)).all()) == expected
        # Each leased unit's lease points back at it.
        for unit in leased:
            lease = s.get(Lease, unit.current_lease_id)
            assert lease is not None and lease.unit_id == unit.id and lease.ended_at is None
        assert {j.status for j in s.exec(select(Job).where(Job.unit_count == 0)).all()} == {
            "leased"
        }


def test_sweep_requeues_expired_units(queue_engine: Engine, qconfig: ApiConfig) -> None:
    with open_session(queue_engine) as s:
        pids = _seed(s, workers=2, specs=[_branches(2)])
        got = [leases.claim(s, qconfig, _provider(s, pid), T0) for pid in pids]
        assert [g.unit.index for g in got if g and g.unit] == [0, 1]
        assert leases.sweep_expired(s, T0 + timedelta(seconds=59), config=qconfig) == 0
        assert leases.sweep_expired(s, T0 + timedelta(seconds=60), config=qconfig) == 2
    with open_session(queue_engine) as s:
        rows = s.exec(select(JobUnit).order_by(col(JobUnit.index))).all()
        assert [(u.status, u.failures) for u in rows] == [
            ("queued", 1),
            ("queued", 1),
            ("blocked", 0),
        ]
        assert {lease.outcome for lease in s.exec(select(Lease)).all()} == {"expired"}
        job = s.exec(select(Job)).one()
        assert job.status == "running" and job.failures == 2


def test_sweep_releases_a_cluster_that_does_not_assemble(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    config = ApiConfig(
        database_url=qconfig.database_url,
        network="devnet",
        lease_ttl_s=600,
        cluster_wait_s=120,
        cluster_backoff_s=30,
    )
    with open_session(queue_engine) as s:
        pids = _seed(s, workers=2, specs=[multi_node_spec(3)])
        got = [leases.claim(s, config, _provider(s, pid), T0) for pid in pids]
        assert [g.unit.rank for g in got if g and g.unit] == [0, 1]
        leases.sweep_expired(s, T0 + timedelta(seconds=119), config=config)
        assert {u.status for u in s.exec(select(JobUnit)).all()} == {"leased", "queued"}
        leases.sweep_expired(s, T0 + timedelta(seconds=120), config=config)
    with open_session(queue_engine) as s:
        rows = s.exec(select(JobUnit)).all()
        assert {(u.status, u.attempts, u.failures) for u in rows} == {("queued", 2, 0)}
        assert {lease.outcome for lease in s.exec(select(Lease)).all()} == {"cluster_timeout"}
        # Backing off: nobody gets a node for cluster_backoff_s.
        provider = _provider(s, pids[0])
        assert leases.claim(s, config, provider, T0 + timedelta(seconds=149)) is None
        again = leases.claim(s, config, provider, T0 + timedelta(seconds=150))
        assert again is not None and again.unit is not None and again.lease.attempt == 2
