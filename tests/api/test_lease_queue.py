"""The lease queue on SQLite and PostgreSQL: exclusive claims, expiry, exactly-once completion."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.db import make_engine, open_session
from api.errors import ApiError, Conflict
from api.migrate import upgrade_head
from api.models import Job, Lease, Provider, ProviderGpu, User
from api.services import leases

T0 = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def queue_engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    upgrade_head(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def qconfig(database_url: str) -> ApiConfig:
    return ApiConfig(database_url=database_url, network="devnet", lease_ttl_s=60, max_attempts=3)


def _owner(session: Session) -> int:
    user = User(
        address=f"addr_test1owner{T0.timestamp()}", payment_key_hash="00" * 28, created_at=T0
    )
    session.add(user)
    session.commit()
    assert user.id is not None
    return user.id


def seed_providers(session: Session, n: int, gpus: int = 1, memory_mb: int = 24576) -> list[int]:
    ids = []
    for i in range(n):
        p = Provider(
            worker_key=f"{i:064x}",
            key_id=f"{i:056x}",
            payout_address="addr_test1payout",
            binding={},
            capabilities={},
            registered_at=T0,
            last_heartbeat_at=T0,
        )
        session.add(p)
        session.flush()
        assert p.id is not None
        for g in range(gpus):
            session.add(
                ProviderGpu(
                    provider_id=p.id, index=g, uuid=f"GPU-{i}-{g}", model="L4", memory_mb=memory_mb
                )
            )
        ids.append(p.id)
    session.commit()
    return ids


def _jobs(
    session: Session, owner_id: int, n: int, gpus: int = 1, memory_mb: int = 16384
) -> list[str]:
    ids = []
    for i in range(n):
        job = Job(
            job_id=f"job-{i:05d}",
            owner_id=owner_id,
            spec={"n": i},
            gpu_count=gpus,
            gpu_memory_mb=memory_mb,
            status="queued",
            max_attempts=3,
            created_at=T0 + timedelta(microseconds=i),
            updated_at=T0,
        )
        session.add(job)
        ids.append(job.job_id)
    session.commit()
    return ids


def _provider(session: Session, provider_id: int) -> Provider:
    provider = session.get(Provider, provider_id)
    assert provider is not None
    # End the read transaction: on SQLite it holds the write lock (BEGIN IMMEDIATE).
    session.commit()
    return provider


def test_concurrent_workers_never_share_a_job(
    queue_engine: Engine, qconfig: ApiConfig, database_url: str
) -> None:
    workers, jobs = 6, 60
    with open_session(queue_engine) as s:
        owner = _owner(s)
        # Enough GPUs for every job: a GPU holds one lease at a time.
        provider_ids = seed_providers(s, workers, gpus=jobs // workers)
        job_ids = _jobs(s, owner, jobs)
    barrier = threading.Barrier(workers)
    claimed: dict[int, list[str]] = {pid: [] for pid in provider_ids}
    errors: list[BaseException] = []

    def run(provider_id: int) -> None:
        try:
            with open_session(queue_engine) as session:
                provider = _provider(session, provider_id)
                barrier.wait()
                while True:
                    got = leases.claim(session, qconfig, provider, T0)
                    if got is None:
                        return
                    claimed[provider_id].append(got.job.job_id)
                    time.sleep(0.002)  # a real worker starts its job before claiming again
        except BaseException as e:  # surfaced below: a thread's failure must fail the test
            errors.append(e)

    threads = [threading.Thread(target=run, args=(pid,)) for pid in provider_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    everything = [j for got in claimed.values() for j in got]
    assert len(everything) == len(set(everything)), "a job was claimed twice"
    assert sorted(everything) == sorted(job_ids)
    # Work actually spread: more than one worker got jobs (true concurrency was exercised).
    assert sum(1 for got in claimed.values() if got) > 1, {p: len(g) for p, g in claimed.items()}
    with open_session(queue_engine) as s:
        assert len(s.exec(select(Lease)).all()) == jobs
        assert {j.status for j in s.exec(select(Job)).all()} == {"leased"}


def test_expired_lease_requeues_and_stale_token_is_refused(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    with open_session(queue_engine) as s:
        owner = _owner(s)
        first_id, second_id = seed_providers(s, 2)
        (job_id,) = _jobs(s, owner, 1)
        first, second = _provider(s, first_id), _provider(s, second_id)
        got = leases.claim(s, qconfig, first, T0)
        assert got is not None and got.lease.attempt == 1
        # Heartbeats keep it alive past the original expiry.
        leases.heartbeat(
            s, qconfig, first, got.token, progress=0.1, message=None, now=T0 + timedelta(seconds=50)
        )
        assert leases.sweep_expired(s, T0 + timedelta(seconds=100)) == 0
        assert leases.claim(s, qconfig, second, T0 + timedelta(seconds=100)) is None
        # Then it goes silent.
        assert leases.sweep_expired(s, T0 + timedelta(seconds=111)) == 1
        job = s.exec(select(Job).where(Job.job_id == job_id)).one()
        s.refresh(job)
        assert (job.status, job.attempts, job.failures) == ("queued", 1, 1)
        assert "stopped heartbeating" in job.last_error
        again = leases.claim(s, qconfig, second, T0 + timedelta(seconds=112))
        assert again is not None and again.job.job_id == job_id and again.lease.attempt == 2
        assert again.lease.nonce != got.lease.nonce
        with pytest.raises(Conflict, match="no longer valid"):
            leases.complete(s, first, got.token, result={}, now=T0 + timedelta(seconds=113))
        done = leases.complete(
            s, second, again.token, result={"ok": 1}, now=T0 + timedelta(seconds=114)
        )
        assert done.job.status == "completed"


def test_lease_expiring_without_sweep_is_refused(queue_engine: Engine, qconfig: ApiConfig) -> None:
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        _jobs(s, owner, 1)
        provider = _provider(s, pid)
        got = leases.claim(s, qconfig, provider, T0)
        assert got is not None
        with pytest.raises(Conflict, match="expired"):
            leases.heartbeat(
                s,
                qconfig,
                provider,
                got.token,
                progress=None,
                message=None,
                now=T0 + timedelta(seconds=61),
            )


def test_job_completes_exactly_once_under_racing_completions(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        _jobs(s, owner, 1)
        got = leases.claim(s, qconfig, _provider(s, pid), T0)
        assert got is not None
    racers = 4
    barrier = threading.Barrier(racers)
    outcomes: list[str] = []

    def finish() -> None:
        with open_session(queue_engine) as session:
            provider = _provider(session, pid)
            barrier.wait()
            try:
                leases.complete(
                    session, provider, got.token, result={}, now=T0 + timedelta(seconds=1)
                )
                outcomes.append("completed")
            except ApiError as e:
                outcomes.append(type(e).__name__)

    threads = [threading.Thread(target=finish) for _ in range(racers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(outcomes) == ["Conflict"] * (racers - 1) + ["completed"]
    with open_session(queue_engine) as s:
        lease = s.exec(select(Lease)).one()
        assert lease.outcome == "completed"


def test_sweep_racing_completion_leaves_one_outcome(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    """A completion and the sweeper at the moment of expiry: the job ends in exactly one state."""
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        _jobs(s, owner, 1)
        got = leases.claim(s, qconfig, _provider(s, pid), T0)
        assert got is not None
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}
    edge = T0 + timedelta(seconds=59, microseconds=999_000)

    def complete() -> None:
        with open_session(queue_engine) as session:
            provider = _provider(session, pid)
            barrier.wait()
            try:
                leases.complete(session, provider, got.token, result={}, now=edge)
                results["complete"] = "ok"
            except Conflict:
                results["complete"] = "refused"

    def sweep() -> None:
        with open_session(queue_engine) as session:
            barrier.wait()
            results["sweep"] = leases.sweep_expired(session, T0 + timedelta(seconds=60))

    threads = [threading.Thread(target=complete), threading.Thread(target=sweep)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    with open_session(queue_engine) as s:
        job = s.exec(select(Job)).one()
        if results["complete"] == "ok":
            assert job.status == "completed" and results["sweep"] == 0
        else:
            assert job.status == "queued" and results["sweep"] == 1
        assert len(s.exec(select(Lease).where(Lease.outcome.is_not(None))).all()) == 1  # type: ignore[union-attr]


def test_attempts_exhausted_fail_the_job(queue_engine: Engine, qconfig: ApiConfig) -> None:
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        _jobs(s, owner, 1)
        provider = _provider(s, pid)
        now = T0
        for _ in range(3):
            got = leases.claim(s, qconfig, provider, now)
            assert got is not None
            now += timedelta(seconds=61)
            assert leases.sweep_expired(s, now) == 1
        job = s.exec(select(Job)).one()
        s.refresh(job)
        assert job.status == "failed" and job.failures == 3
        assert "gave up after 3" in job.last_error
        assert leases.claim(s, qconfig, provider, now) is None


def test_matching_needs_enough_gpus_with_enough_memory(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    with open_session(queue_engine) as s:
        owner = _owner(s)
        small = seed_providers(s, 1, gpus=4, memory_mb=16384)[0]
        _jobs(s, owner, 1, gpus=2, memory_mb=40960)
        assert leases.claim(s, qconfig, _provider(s, small), T0) is None
        job = s.exec(select(Job)).one()
        assert job.status == "queued"


def test_one_gpu_cannot_hold_three_one_gpu_leases(queue_engine: Engine, qconfig: ApiConfig) -> None:
    """The attack: a worker that registered one GPU claims three one-GPU jobs in a row. It
    gets the first; the GPU is busy until that lease ends, then the next job is its."""
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1, gpus=1)
        _jobs(s, owner, 3)
        provider = _provider(s, pid)
        first = leases.claim(s, qconfig, provider, T0)
        assert first is not None
        assert leases.claim(s, qconfig, provider, T0) is None
        assert leases.claim(s, qconfig, provider, T0) is None
        assert [j.status for j in s.exec(select(Job).order_by(col(Job.id))).all()] == [
            "leased",
            "queued",
            "queued",
        ]
        leases.complete(s, provider, first.token, result={}, now=T0 + timedelta(seconds=1))
        second = leases.claim(s, qconfig, provider, T0 + timedelta(seconds=2))
        assert second is not None and second.job.job_id != first.job.job_id


def test_two_gpus_hold_two_leases_and_a_two_gpu_job_waits(
    queue_engine: Engine, qconfig: ApiConfig
) -> None:
    """The honest twin: two GPUs run two one-GPU jobs at once; a two-GPU job queued behind
    them waits until both are free."""
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1, gpus=2)
        _jobs(s, owner, 2)
        provider = _provider(s, pid)
        a = leases.claim(s, qconfig, provider, T0)
        b = leases.claim(s, qconfig, provider, T0)
        assert a is not None and b is not None and a.job.job_id != b.job.job_id
        big = Job(
            job_id="job-big",
            owner_id=owner,
            spec={},
            gpu_count=2,
            gpu_memory_mb=1024,
            status="queued",
            max_attempts=3,
            created_at=T0 + timedelta(seconds=1),
            updated_at=T0,
        )
        s.add(big)
        s.commit()
        leases.complete(s, provider, a.token, result={}, now=T0 + timedelta(seconds=2))
        assert leases.claim(s, qconfig, provider, T0 + timedelta(seconds=3)) is None
        leases.complete(s, provider, b.token, result={}, now=T0 + timedelta(seconds=4))
        got = leases.claim(s, qconfig, provider, T0 + timedelta(seconds=5))
        assert got is not None and got.job.job_id == "job-big"


@pytest.mark.postgres
def test_concurrent_claims_of_one_gpu_get_one_lease(postgres_url: str) -> None:
    """The attack on PostgreSQL, where claims really run at once: one registered GPU, three
    claimers of the same provider released together by a barrier, each in its own session,
    in a few rounds. Exactly one lease per round; the provider's row lock makes the later
    claimers count the first one's lease."""
    engine = make_engine(postgres_url)
    upgrade_head(engine)
    config = ApiConfig(database_url=postgres_url, network="devnet", lease_ttl_s=60)
    claimers, rounds = 3, 4
    try:
        with open_session(engine) as s:
            owner = _owner(s)
            (pid,) = seed_providers(s, 1, gpus=1)
            _jobs(s, owner, claimers * rounds)
        for round_ in range(rounds):
            barrier = threading.Barrier(claimers)
            got: list[leases.ClaimedLease] = []
            errors: list[BaseException] = []
            now = T0 + timedelta(seconds=10 * round_)

            def run(
                now: datetime = now,
                barrier: threading.Barrier = barrier,
                got: list[leases.ClaimedLease] = got,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    with open_session(engine) as session:
                        provider = _provider(session, pid)
                        barrier.wait()
                        claimed = leases.claim(session, config, provider, now)
                        if claimed is not None:
                            got.append(claimed)
                except BaseException as e:  # surfaced below
                    errors.append(e)

            threads = [threading.Thread(target=run) for _ in range(claimers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert not errors, errors
            assert len(got) == 1, [c.job.job_id for c in got]
            with open_session(engine) as s:
                open_leases = s.exec(select(Lease).where(col(Lease.ended_at).is_(None))).all()
                assert len(open_leases) == 1
                provider = _provider(s, pid)
                leases.complete(s, provider, got[0].token, result={}, now=now)
    finally:
        engine.dispose()


def _job_with_duration(session: Session, owner_id: int, max_duration_s: int) -> str:
    job = Job(
        job_id="job-bounded",
        owner_id=owner_id,
        spec={"resources": {"max_duration_s": max_duration_s}},
        gpu_count=1,
        gpu_memory_mb=1024,
        status="queued",
        max_attempts=3,
        created_at=T0,
        updated_at=T0,
    )
    session.add(job)
    session.commit()
    return job.job_id


def test_heartbeats_cannot_keep_a_lease_alive_past_max_duration_and_grace(
    queue_engine: Engine, database_url: str
) -> None:
    """The attack: a worker heartbeats on time forever to be paid for an idle lease. The
    lease ends at max_duration_s plus the grace: the heartbeat after it is refused, the lease
    has ended (expired, saying why) and the job counts a failed attempt."""
    config = ApiConfig(
        database_url=database_url, network="devnet", lease_ttl_s=60, lease_grace_s=100
    )
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        job_id = _job_with_duration(s, owner, max_duration_s=600)
        provider = _provider(s, pid)
        got = leases.claim(s, config, provider, T0)
        assert got is not None
        at = T0
        while at + timedelta(seconds=50) < T0 + timedelta(seconds=700):
            at += timedelta(seconds=50)
            beat = leases.heartbeat(
                s, config, provider, got.token, progress=None, message=None, now=at
            )
            # Never renewed past the deadline, however recent the heartbeat.
            assert beat.lease.expires_at <= T0 + timedelta(seconds=700)
        with pytest.raises(Conflict, match="max_duration_s"):
            leases.heartbeat(
                s,
                config,
                provider,
                got.token,
                progress=None,
                message=None,
                now=T0 + timedelta(seconds=701),
            )
        lease = s.exec(select(Lease)).one()
        s.refresh(lease)
        assert lease.outcome == "expired" and "max_duration_s" in lease.reason
        job = s.exec(select(Job).where(Job.job_id == job_id)).one()
        s.refresh(job)
        assert (job.status, job.failures) == ("queued", 1)
        assert "max_duration_s" in job.last_error
        # Nor can it complete afterwards: the result would be for unallowed time.
        with pytest.raises(Conflict, match="no longer valid"):
            leases.complete(s, provider, got.token, result={}, now=T0 + timedelta(seconds=702))


def test_a_lease_within_max_duration_completes(queue_engine: Engine, database_url: str) -> None:
    """The honest twin: heartbeats within the bound, completion before the deadline."""
    config = ApiConfig(
        database_url=database_url, network="devnet", lease_ttl_s=60, lease_grace_s=100
    )
    with open_session(queue_engine) as s:
        owner = _owner(s)
        (pid,) = seed_providers(s, 1)
        _job_with_duration(s, owner, max_duration_s=600)
        provider = _provider(s, pid)
        got = leases.claim(s, config, provider, T0)
        assert got is not None
        for k in range(1, 13):
            leases.heartbeat(
                s,
                config,
                provider,
                got.token,
                progress=None,
                message=None,
                now=T0 + timedelta(seconds=50 * k),
            )
        done = leases.complete(s, provider, got.token, result={}, now=T0 + timedelta(seconds=650))
        assert done.job.status == "completed"
