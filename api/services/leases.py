"""The job queue under leases: claim, heartbeat, complete, release, fail, expire.

Every transition locks the job row first (`FOR UPDATE` on PostgreSQL; on SQLite every
transaction is BEGIN IMMEDIATE, see api/db.py) and then changes it only if it is still leased
under the same lease, so a job is claimed by one worker at a time and completes at most once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import exists, func, update
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict, NotFound
from api.models import Job, JobEscrow, Lease, Provider, ProviderGpu
from api.services.estimates import record_run
from api.services.notifications import notify_job_completed
from api.services.tokens import new_nonce, new_secret, secret_hash


@dataclass(frozen=True)
class ClaimedLease:
    job: Job
    lease: Lease
    token: str


@dataclass(frozen=True)
class ActiveLease:
    job: Job
    lease: Lease


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def fitting_gpus(provider_id: int) -> Any:
    """How many of the provider's GPUs have at least the job's memory (correlated to Job)."""
    return (
        select(func.count(col(ProviderGpu.id)))
        .where(
            ProviderGpu.provider_id == provider_id,
            col(ProviderGpu.memory_mb) >= col(Job.gpu_memory_mb),
        )
        .correlate(Job)
        .scalar_subquery()
    )


def claim(
    session: Session, config: ApiConfig, provider: Provider, now: datetime
) -> ClaimedLease | None:
    """Lease the oldest queued job this provider's GPUs fit, or None when there is none.
    With `config.claim_requires_escrow`, only jobs whose escrow is recorded are handed out."""
    assert provider.id is not None
    stmt = (
        select(Job)
        .where(Job.status == "queued", col(Job.gpu_count) <= fitting_gpus(provider.id))
        .order_by(col(Job.created_at), col(Job.id))
        .limit(1)
    )
    if config.claim_requires_escrow:
        stmt = stmt.where(exists().where(col(JobEscrow.job_id) == col(Job.id)))
    if _is_postgres(session):
        # Workers claiming at once each skip rows another has locked instead of queueing
        # behind them; the lock holds until commit.
        stmt = stmt.with_for_update(skip_locked=True, of=Job)
    job = session.exec(stmt).first()
    if job is None:
        session.commit()  # ends the transaction (and its lock) without expiring `provider`
        return None
    assert job.id is not None
    token = new_secret()
    lease = Lease(
        job_id=job.id,
        provider_id=provider.id,
        token_hash=secret_hash(token),
        nonce=new_nonce(32),
        attempt=job.attempts + 1,
        created_at=now,
        expires_at=now + timedelta(seconds=config.lease_ttl_s),
    )
    session.add(lease)
    session.flush()
    changed = session.execute(
        update(Job)
        .where(col(Job.id) == job.id, col(Job.status) == "queued")
        .values(
            status="leased",
            attempts=Job.attempts + 1,
            current_lease_id=lease.id,
            updated_at=now,
            version=Job.version + 1,
        )
    )
    if changed.rowcount != 1:  # type: ignore[attr-defined]
        # Unreachable while the row lock holds; refuse rather than hand out a shared job.
        session.rollback()
        raise Conflict("job was claimed concurrently; claim again")
    # Reload inside the transaction: a refresh after commit would open a new one, which on
    # SQLite holds the write lock until the session's next commit.
    session.refresh(job)
    session.commit()
    return ClaimedLease(job=job, lease=lease, token=token)


def escrow_of(session: Session, job: Job) -> JobEscrow | None:
    """The escrow the submitter recorded for `job` (what pays for it), if any."""
    return session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()


def _lock_job(session: Session, job_id: int) -> Job:
    job = session.exec(select(Job).where(Job.id == job_id).with_for_update()).one()
    return job


def active_lease(session: Session, provider: Provider, token: str, now: datetime) -> ActiveLease:
    """The lease `token` names, locked with its job, or a clear refusal."""
    lease = session.exec(select(Lease).where(Lease.token_hash == secret_hash(token))).first()
    if lease is None or lease.provider_id != provider.id:
        raise NotFound("no such lease for this worker")
    job = _lock_job(session, lease.job_id)
    session.refresh(lease)
    if lease.ended_at is not None:
        raise Conflict(f"lease is no longer valid: it ended ({lease.outcome})")
    if lease.expires_at <= now:
        raise Conflict("lease is no longer valid: it expired; claim the job again")
    if job.status != "leased" or job.current_lease_id != lease.id:
        raise Conflict(f"lease is no longer valid: the job is {job.status}")
    return ActiveLease(job=job, lease=lease)


def _end(lease: Lease, outcome: str, reason: str, now: datetime) -> None:
    lease.ended_at = now
    lease.outcome = outcome
    lease.reason = reason[:2000]


def heartbeat(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    token: str,
    *,
    progress: float | None,
    message: str | None,
    now: datetime,
) -> ActiveLease:
    active = active_lease(session, provider, token, now)
    active.lease.heartbeat_at = now
    active.lease.expires_at = now + timedelta(seconds=config.lease_ttl_s)
    if progress is not None:
        active.job.progress = progress
    if message is not None:
        active.job.progress_message = message[:500]
    active.job.updated_at = now
    active.job.version += 1
    provider.last_heartbeat_at = now
    session.add_all([active.lease, active.job, provider])
    session.commit()
    return active


def complete(
    session: Session,
    provider: Provider,
    token: str,
    *,
    result: dict[str, Any],
    now: datetime,
) -> ActiveLease:
    active = active_lease(session, provider, token, now)
    job, lease = active.job, active.lease
    _end(lease, "completed", "", now)
    job.status = "completed"
    job.progress = 1.0
    job.result = result
    job.current_lease_id = None
    job.finished_at = now
    job.updated_at = now
    job.version += 1
    session.add_all([job, lease])
    # In the completion's own transaction: the measurement and the notifications exist
    # exactly when the completion does.
    record_run(session, job, lease, now)
    notify_job_completed(session, job, now)
    session.commit()
    return active


def release(
    session: Session, provider: Provider, token: str, *, reason: str, now: datetime
) -> ActiveLease:
    """The worker gives the job back without fault: it returns to the queue."""
    active = active_lease(session, provider, token, now)
    _end(active.lease, "released", reason, now)
    _requeue(active.job, now, error=None)
    session.add_all([active.job, active.lease])
    session.commit()
    return active


def fail(
    session: Session, provider: Provider, token: str, *, reason: str, now: datetime
) -> ActiveLease:
    """The run failed: retry elsewhere until max_attempts failures, then the job fails."""
    active = active_lease(session, provider, token, now)
    _end(active.lease, "failed", reason, now)
    _record_failure(active.job, f"attempt {active.lease.attempt} failed: {reason}", now)
    session.add_all([active.job, active.lease])
    session.commit()
    return active


def _requeue(job: Job, now: datetime, *, error: str | None) -> None:
    job.status = "queued"
    job.current_lease_id = None
    job.progress = 0.0
    job.progress_message = ""
    if error is not None:
        job.last_error = error[:2000]
    job.updated_at = now
    job.version += 1


def _record_failure(job: Job, error: str, now: datetime) -> None:
    job.failures += 1
    if job.failures >= job.max_attempts:
        job.status = "failed"
        job.current_lease_id = None
        job.last_error = f"{error} (gave up after {job.failures} failed attempts)"[:2000]
        job.finished_at = now
        job.updated_at = now
        job.version += 1
    else:
        _requeue(job, now, error=error)


def sweep_expired(session: Session, now: datetime, *, limit: int = 100) -> int:
    """End leases whose heartbeats stopped and put their jobs back in the queue."""
    stmt = (
        select(Job, Lease)
        .join(Lease, col(Lease.id) == col(Job.current_lease_id))
        .where(
            Job.status == "leased",
            col(Lease.ended_at).is_(None),
            col(Lease.expires_at) <= now,
        )
        .limit(limit)
    )
    if _is_postgres(session):
        stmt = stmt.with_for_update(skip_locked=True, of=Job)
    rows = session.exec(stmt).all()
    for job, lease in rows:
        seen = lease.heartbeat_at or lease.created_at
        _end(lease, "expired", "no heartbeat before the lease expired", now)
        _record_failure(
            job,
            f"attempt {lease.attempt} lost: the provider stopped heartbeating "
            f"(last seen {seen.strftime('%Y-%m-%dT%H:%M:%SZ')})",
            now,
        )
        session.add_all([job, lease])
    session.commit()
    return len(rows)
