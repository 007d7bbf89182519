"""The job queue under leases: claim, heartbeat, complete, release, fail, expire.

Every transition locks the job row first (`FOR UPDATE` on PostgreSQL; on SQLite every
transaction is BEGIN IMMEDIATE, see api/db.py) and then changes it only if it is still leased
under the same lease, so a job is claimed by one worker at a time and completes at most once.

A job with a topology is leased unit by unit (api/services/units.py, clusters.py): the
claim hands out the oldest claimable job or unit, and a lease that names a unit moves that
unit, still under its job's row lock.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import exists, func, update
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, NotFound
from api.models import Job, JobEscrow, JobUnit, Lease, Provider
from api.models.job import NOT_STARTED, TERMINAL_STATUSES
from api.services import auctions, clusters, deliveries, resume, unit_outcomes, units
from api.services.estimates import record_run
from api.services.gpu_challenges import offered_models
from api.services.notifications import notify_job_completed
from api.services.rate_cards import claimable_by as rate_card_claimable
from api.services.tokens import new_nonce, new_secret, secret_hash
from api.services.unit_outcomes import end_lease
from api.services.units import ClusterView, UnitClaim, fitting_gpus
from api.storage import BlobStore
from proofnet.messages.claim import ClaimResume
from proofnet.messages.destinations import DeliveryReport

__all__ = [
    "ActiveLease",
    "ClaimedLease",
    "active_lease",
    "claim",
    "complete",
    "end_unstarted",
    "escrow_of",
    "fail",
    "fitting_gpus",
    "heartbeat",
    "leases_started",
    "release",
    "report_deliveries",
    "sweep_expired",
]


@dataclass(frozen=True)
class ClaimedLease:
    job: Job
    lease: Lease
    token: str
    # For a job with a topology: the unit leased, as the claim hands it out.
    unit: UnitClaim | None = None
    # For a whole job resumed from a lost attempt's last committed checkpoint.
    resume: ClaimResume | None = None


@dataclass(frozen=True)
class ActiveLease:
    job: Job
    lease: Lease
    unit: JobUnit | None = None
    # For a node of a multi-node job: where its cluster attempt stands.
    cluster: ClusterView | None = None


def lease_deadline(job: Job, created_at: datetime, config: ApiConfig) -> datetime | None:
    """When a lease of `job` made at `created_at` ends whatever its heartbeats say: the
    spec's `max_duration_s` plus `config.lease_grace_s`. GPU time past it was never
    allowed by the submitter, so nothing keeps the lease alive (None: the spec names no
    duration)."""
    resources = job.spec.get("resources") if isinstance(job.spec, dict) else None
    max_s = resources.get("max_duration_s") if isinstance(resources, dict) else None
    if isinstance(max_s, bool) or not isinstance(max_s, int) or max_s <= 0:
        return None
    return _aware(created_at) + timedelta(seconds=max_s + config.lease_grace_s)


def _expiry(job: Job, created_at: datetime, now: datetime, config: ApiConfig) -> datetime:
    """A lease's next expiry: a heartbeat TTL from now, never past its deadline."""
    renewed = now + timedelta(seconds=config.lease_ttl_s)
    deadline = lease_deadline(job, created_at, config)
    return renewed if deadline is None else min(renewed, deadline)


def _overran(job: Job, lease: Lease) -> bool:
    """Whether `lease` expired at its deadline (ran past max_duration_s + grace) rather than
    for want of heartbeats: its expiry was capped at or after max_duration_s."""
    resources = job.spec.get("resources") if isinstance(job.spec, dict) else None
    max_s = resources.get("max_duration_s") if isinstance(resources, dict) else None
    if isinstance(max_s, bool) or not isinstance(max_s, int):
        return False
    return _aware(lease.expires_at) >= _aware(lease.created_at) + timedelta(seconds=max_s)


def _expired_reason(job: Job, lease: Lease) -> str:
    if _overran(job, lease):
        return "it ran past the job's max_duration_s plus the grace"
    seen = lease.heartbeat_at or lease.created_at
    return (
        f"no heartbeat before the lease expired (last seen {seen.strftime('%Y-%m-%dT%H:%M:%SZ')})"
    )


def _aware(when: datetime) -> datetime:
    # SQLite hands back naive datetimes for the UTC times stored.
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def claim(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    now: datetime,
    *,
    accepts_cluster: bool = True,
    accepts_egress: bool = True,
    bonded_ntx: int = 0,
    store: BlobStore | None = None,
) -> ClaimedLease | None:
    """Lease the oldest queued job or unit this provider's GPUs fit, or None when there is
    none. With `config.claim_requires_escrow`, only jobs whose escrow is recorded are
    handed out; without `accepts_cluster`, no node of a multi-node job is; without
    `accepts_egress`, no job that asks for network egress is (the route passes what the
    worker's claim says; absent there means no); a job whose spec asks for a minimum bond
    only when `bonded_ntx` (what the provider's bonds back, read on chain by the route:
    api.services.bonds) reaches it. With the blob `store`, a whole job a lost attempt
    committed checkpoints of resumes from the last intact one (`api.services.resume`)."""
    assert provider.id is not None
    # Auctions whose reveals closed clear first: their winners may claim in this call.
    auctions.clear_due(session, now)
    # The provider's row lock serialises its concurrent claims: each counts the GPUs the
    # other's lease holds (`fitting_gpus`), so one GPU never holds two leases. On SQLite
    # every transaction already holds the write lock (BEGIN IMMEDIATE).
    session.exec(select(Provider.id).where(Provider.id == provider.id).with_for_update()).one()
    stmt = (
        select(Job)
        .where(Job.status == "queued", col(Job.gpu_count) <= fitting_gpus(provider.id, config, now))
        .order_by(col(Job.created_at), col(Job.id))
        .limit(1)
    )
    if config.claim_requires_escrow:
        stmt = stmt.where(exists().where(col(JobEscrow.job_id) == col(Job.id)))
    # A rate-card job goes only to the provider whose current card the spec names.
    stmt = stmt.where(rate_card_claimable(provider.id))
    # An auction-priced job goes only to its auction's winner, once cleared.
    stmt = stmt.where(auctions.claimable_by(provider.id))
    # ... or a revealed bidder at or under the reserve, once the winner lost it (checked in
    # Python: the bid is signed JSON).
    over_reserve = auctions.over_reserve_jobs(session, provider.id)
    if over_reserve:
        stmt = stmt.where(col(Job.id).not_in(over_reserve))
    stmt = stmt.where(units.egress_claimable(accepts_egress))
    unit_stmt = units.claimable_unit(
        config,
        provider.id,
        now,
        accepts_cluster=accepts_cluster,
        accepts_egress=accepts_egress,
    )
    stmt = stmt.where(_bond_suffices(bonded_ntx))
    unit_stmt = unit_stmt.where(_bond_suffices(bonded_ntx))
    if _is_postgres(session):
        # Workers claiming at once each skip rows another has locked instead of queueing
        # behind them; the lock holds until commit. A unit is guarded by its job's row,
        # which every change to the job's units locks first; the unit row is locked too, so
        # a row another claimer changed meanwhile is re-checked in its committed version
        # (PostgreSQL re-evaluates only the rows it locks).
        stmt = stmt.with_for_update(skip_locked=True, of=Job)
        unit_stmt = unit_stmt.with_for_update(skip_locked=True, of=[Job, JobUnit])
    job = session.exec(stmt).first()
    unit_row = session.exec(unit_stmt).first()
    if unit_row is not None and (
        job is None or (unit_row[1].created_at, unit_row[1].id) < (job.created_at, job.id)
    ):
        return _claim_unit(session, config, provider, unit_row[1], unit_row[0], now)
    if job is None:
        session.commit()  # ends the transaction (and its lock) without expiring `provider`
        return None
    assert job.id is not None
    token = new_secret()
    point = None if store is None else resume.resume_point(session, store, job)
    lease = Lease(
        job_id=job.id,
        provider_id=provider.id,
        token_hash=secret_hash(token),
        # A resumed run keeps the lost attempt's nonce: its data order is the prefix's.
        nonce=new_nonce(32) if point is None else point.lease.nonce,
        resumed_lease_id=None if point is None else point.lease.id,
        resumed_at=None if point is None else point.at,
        resume_sealed=point is not None and point.sealed,
        attempt=job.attempts + 1,
        created_at=now,
        expires_at=_expiry(job, now, now, config),
        gpu_models=offered_models(session, config, provider.id, job.gpu_memory_mb, now),
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
    return ClaimedLease(
        job=job, lease=lease, token=token, resume=None if point is None else point.claim()
    )


def _claim_unit(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    job: Job,
    unit: JobUnit,
    now: datetime,
) -> ClaimedLease:
    token = new_secret()
    lease = units.lease_unit(
        session,
        job,
        unit,
        provider,
        token_hash=secret_hash(token),
        nonce=new_nonce(32),
        expires_at=_expiry(job, now, now, config),
        now=now,
    )
    lease.gpu_models = offered_models(session, config, provider.id or 0, job.gpu_memory_mb, now)
    session.flush()
    cluster = None
    if unit.kind == "node":
        cluster = clusters.cluster_view(job, units.job_units(session, job), unit)
    view = units.claim_view(job, unit, cluster)
    session.commit()
    return ClaimedLease(job=job, lease=lease, token=token, unit=view)


def leases_started(session: Session, job: Job) -> bool:
    """Whether any lease of `job` was handed to a worker (a lease ended at its start
    because the escrow could not pay never was: `NOT_STARTED`)."""
    return (
        session.exec(
            select(Lease.id).where(
                Lease.job_id == job.id, col(Lease.outcome).is_distinct_from(NOT_STARTED)
            )
        ).first()
        is not None
    )


def bond_required(session: Session) -> bool:
    """Whether any queued job asks for a minimum bond (else no claim reads bonds)."""
    wanted = func.coalesce(col(Job.spec)["min_bond"].as_integer(), 0)
    found = session.exec(select(Job.id).where(Job.status == "queued", wanted > 0).limit(1))
    return found.first() is not None


def _bond_suffices(bonded_ntx: int) -> Any:
    """SQL: the job's spec asks for no bond, or for at most `bonded_ntx` NTX."""
    wanted = col(Job.spec)["min_bond"].as_integer()
    return func.coalesce(wanted, 0) <= bonded_ntx


def end_unstarted(
    session: Session, claimed: ClaimedLease, reason: str, now: datetime, *, escrow_refused: bool
) -> None:
    """Take back a lease before the worker hears of it: its job's escrow could not pay (or
    could not be checked) at the lease's start. The job or unit goes back to the queue as
    if never claimed. When the escrow was refused, it no longer backs the job: before any
    lease started, its record is dropped (the job waits for an escrow that can pay); after
    one did, the job fails (workers attest against that escrow: it cannot be replaced)."""
    assert claimed.job.id is not None
    job = _lock_job(session, claimed.job.id)
    lease = session.exec(
        select(Lease).where(Lease.id == claimed.lease.id).execution_options(populate_existing=True)
    ).one()
    if lease.ended_at is not None:
        session.commit()
        return
    if lease.unit_id is None:
        end_lease(lease, NOT_STARTED, reason, now)
        if job.status == "leased" and job.current_lease_id == lease.id:
            _requeue(job, now, error=None)
            job.attempts = max(job.attempts - 1, 0)
    else:
        unit = session.exec(select(JobUnit).where(JobUnit.id == lease.unit_id)).one()
        _unit_lost(session, ActiveLease(job=job, lease=lease, unit=unit), "released", reason, now)
        lease.outcome = NOT_STARTED
    session.add_all([job, lease])
    session.flush()
    if escrow_refused and job.status not in TERMINAL_STATUSES:
        error = f"the job's escrow can no longer pay: {reason}"
        if not leases_started(session, job):
            recorded = escrow_of(session, job)
            if recorded is not None:
                session.delete(recorded)
            job.last_error = f"{error}; record an escrow that can"[:2000]
        elif job.unit_count:
            unit_outcomes.fail_job(session, job, units.job_units(session, job), [], error, now)
        else:
            job.status = "failed"
            job.current_lease_id = None
            job.finished_at = now
            job.last_error = error[:2000]
        job.updated_at = now
        job.version += 1
        session.add(job)
    session.commit()


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
        ended = f"lease is no longer valid: it ended ({lease.outcome})"
        if lease.unit_id is not None and lease.reason and lease.outcome != "completed":
            # A unit's lease often ends for something that happened elsewhere (a lost
            # cluster node, a failed evaluation): say what.
            ended += f": {lease.reason}"
        raise Conflict(ended)
    if _aware(lease.expires_at) <= now:
        # The lease ends here, as the sweeper would end it: a heartbeat or completion after
        # the expiry (or after max_duration_s plus the grace) never revives it.
        reason = _expired_reason(job, lease)
        _end_expired(session, job, lease, reason, now)
        session.commit()
        raise Conflict(f"lease is no longer valid: it expired ({reason}); claim the job again")
    if lease.unit_id is None:
        if job.status != "leased" or job.current_lease_id != lease.id:
            raise Conflict(f"lease is no longer valid: the job is {job.status}")
        return ActiveLease(job=job, lease=lease)
    unit = session.exec(
        select(JobUnit).where(JobUnit.id == lease.unit_id).execution_options(populate_existing=True)
    ).one()
    if job.status != "running" or unit.status != "leased" or unit.current_lease_id != lease.id:
        raise Conflict(
            f"lease is no longer valid: unit {unit.index} is {unit.status} (job {job.status})"
        )
    return ActiveLease(job=job, lease=lease, unit=unit)


def heartbeat(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    token: str,
    *,
    progress: float | None,
    message: str | None,
    now: datetime,
    rendezvous: str | None = None,
) -> ActiveLease:
    active = active_lease(session, provider, token, now)
    if active.unit is not None:
        return _unit_heartbeat(
            session, config, provider, active, rendezvous, now, progress=progress, message=message
        )
    if rendezvous is not None:
        raise BadRequest("only node rank 0 of a multi-node job publishes a rendezvous")
    active.lease.heartbeat_at = now
    active.lease.expires_at = _expiry(active.job, active.lease.created_at, now, config)
    if active.lease.stopped_at is not None:
        # A stopped lease has the grace to upload and attest what it committed, no more.
        stopped = _aware(active.lease.stopped_at)
        active.lease.expires_at = min(
            _aware(active.lease.expires_at), stopped + timedelta(seconds=config.lease_grace_s)
        )
    if progress is not None:
        active.job.progress = progress
    # A stopped lease's job keeps saying why it stopped (api.services.job_faults).
    if message is not None and active.lease.stop_reason is None:
        active.job.progress_message = message[:500]
    active.job.updated_at = now
    active.job.version += 1
    provider.last_heartbeat_at = now
    session.add_all([active.lease, active.job, provider])
    session.commit()
    return active


def _unit_heartbeat(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    active: ActiveLease,
    rendezvous: str | None,
    now: datetime,
    *,
    progress: float | None,
    message: str | None,
) -> ActiveLease:
    # A unit heartbeat keeps its lease, records the unit's progress (the job's is computed
    # from its units') and, for a node, tends its cluster.
    job, lease, unit = active.job, active.lease, active.unit
    assert unit is not None
    cluster = None
    if rendezvous is not None:
        clusters.publish_rendezvous(session, job, unit, rendezvous, now)
    if unit.kind == "node" and clusters.time_out_if_stuck(session, config, job, now):
        session.commit()
        session.refresh(lease)
        raise Conflict(f"lease is no longer valid: it ended ({lease.outcome}): {lease.reason}")
    units.report_progress(session, job, unit, progress, message, now)
    if unit.kind == "node":
        cluster = clusters.cluster_view(job, units.job_units(session, job), unit)
    lease.heartbeat_at = now
    lease.expires_at = _expiry(job, lease.created_at, now, config)
    provider.last_heartbeat_at = now
    session.add_all([lease, provider])
    session.commit()
    return ActiveLease(job=job, lease=lease, unit=unit, cluster=cluster)


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
    if active.unit is not None:
        if active.unit.kind == "node":
            clusters.complete_node(session, job, active.unit, lease, result, now)
        else:
            unit_outcomes.complete_unit(session, job, active.unit, lease, result, now)
        if active.unit.kind == "stage":
            # A stage is a measured part of the workload (see `record_run`).
            record_run(session, job, lease, now, stage=units.plan_of(job).units[active.unit.index])
        session.commit()
        return active
    pending = deliveries.unacknowledged(session, job, lease, deliveries.BEFORE_COMPLETION)
    if pending:
        # The API's store (when the spec names it) must hold the results before the job
        # completes; the submitter's own destinations follow the oracles' verdict
        # (api.services.deliveries), after completion.
        raise Conflict(
            "the job cannot complete before the API's store acknowledged the results: "
            + "; ".join(pending)
        )
    end_lease(lease, "completed", "", now)
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


def report_deliveries(
    session: Session,
    provider: Provider,
    token: str,
    reports: list[DeliveryReport],
    now: datetime,
) -> list[str]:
    """Record how the API's store destination answered under this lease (the submitter's own
    destinations come after the verdict: `deliveries.record_released`); returns what is
    still unacknowledged before completion (empty: the job may complete)."""
    active = active_lease(session, provider, token, now)
    if active.unit is not None:
        raise BadRequest("result destinations are for single-unit jobs")
    deliveries.record(session, active.job, active.lease, reports, now)
    session.flush()
    pending = deliveries.unacknowledged(
        session, active.job, active.lease, deliveries.BEFORE_COMPLETION
    )
    session.commit()
    return pending


def release(
    session: Session, provider: Provider, token: str, *, reason: str, now: datetime
) -> ActiveLease:
    """The worker gives the job back without fault: it returns to the queue."""
    active = active_lease(session, provider, token, now)
    if active.unit is not None:
        _unit_lost(session, active, "released", reason, now)
        session.commit()
        return active
    end_lease(active.lease, "released", reason, now)
    if not _ended_at_fault(active.job, active.lease, now):
        _requeue(active.job, now, error=None)
    session.add_all([active.job, active.lease])
    session.commit()
    return active


def fail(
    session: Session, provider: Provider, token: str, *, reason: str, now: datetime
) -> ActiveLease:
    """The run failed: retry elsewhere until max_attempts failures, then the job fails."""
    active = active_lease(session, provider, token, now)
    if active.unit is not None:
        _unit_lost(session, active, "failed", reason, now)
        session.commit()
        return active
    end_lease(active.lease, "failed", reason, now)
    if not _ended_at_fault(active.job, active.lease, now):
        _record_failure(active.job, f"attempt {active.lease.attempt} failed: {reason}", now)
    session.add_all([active.job, active.lease])
    session.commit()
    return active


def _unit_lost(
    session: Session,
    active: ActiveLease,
    outcome: str,
    reason: str,
    now: datetime,
    *,
    error: str | None = None,
) -> None:
    """A unit's lease ended without completion (released, failed or expired): the unit goes
    back to the queue, or its whole cluster attempt does (the caller commits)."""
    job, lease, unit = active.job, active.lease, active.unit
    assert unit is not None
    end_lease(lease, outcome, reason, now)
    session.add(lease)
    counts = outcome != "released"
    if unit.kind == "node":
        clusters.break_cluster(
            session, job, unit, outcome=outcome, reason=reason, counts_as_failure=counts, now=now
        )
        return
    what = {"released": "was released", "failed": "failed", "expired": "was lost"}[outcome]
    unit_outcomes.requeue_unit(
        session,
        job,
        unit,
        error or f"unit {unit.index} attempt {lease.attempt} {what}: {reason}",
        now,
        counts_as_failure=counts,
    )


def _ended_at_fault(job: Job, lease: Lease, now: datetime) -> bool:
    """A lease the oracle quorum stopped for the job's fault ended without attesting: the
    job fails with that fault rather than going back to the queue (its code would fail the
    next provider the same way). False for any other lease (the caller requeues)."""
    if lease.stop_reason is None:
        return False
    job.status = "failed"
    job.current_lease_id = None
    job.last_error = f"stopped: job's fault: {lease.stop_message}"[:2000]
    job.finished_at = now
    job.updated_at = now
    job.version += 1
    return True


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


def sweep_expired(
    session: Session, now: datetime, *, limit: int = 100, config: ApiConfig | None = None
) -> int:
    """End leases whose heartbeats stopped and put their jobs (or units) back in the queue;
    with `config`, also release multi-node clusters that waited too long to assemble."""
    expired = _sweep_jobs(session, now, limit=limit)
    expired += _sweep_units(session, now, limit=limit)
    if config is not None:
        _sweep_waiting_clusters(session, config, now, limit=limit)
    return expired


def _sweep_jobs(session: Session, now: datetime, *, limit: int) -> int:
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
        _end_expired(session, job, lease, _expired_reason(job, lease), now)
    session.commit()
    return len(rows)


def _end_expired(session: Session, job: Job, lease: Lease, reason: str, now: datetime) -> None:
    """End an expired lease of a whole job (the caller holds the job's lock and commits);
    a unit's lease goes through `_unit_lost`."""
    if lease.unit_id is not None:
        unit = session.exec(
            select(JobUnit)
            .where(JobUnit.id == lease.unit_id)
            .execution_options(populate_existing=True)
        ).one()
        if unit.current_lease_id == lease.id and unit.status == "leased":
            _unit_lost(
                session,
                ActiveLease(job=job, lease=lease, unit=unit),
                "expired",
                reason,
                now,
                error=f"unit {unit.index} attempt {lease.attempt} lost: {_lost_because(job, lease)}",
            )
        else:
            end_lease(lease, "expired", reason, now)
            session.add(lease)
        return
    end_lease(lease, "expired", reason, now)
    current = job.status == "leased" and job.current_lease_id == lease.id
    if current and not _ended_at_fault(job, lease, now):
        _record_failure(job, f"attempt {lease.attempt} lost: {_lost_because(job, lease)}", now)
    session.add_all([job, lease])


def _lost_because(job: Job, lease: Lease) -> str:
    if _overran(job, lease):
        return "it ran past the job's max_duration_s plus the grace"
    seen = lease.heartbeat_at or lease.created_at
    return f"the provider stopped heartbeating (last seen {seen.strftime('%Y-%m-%dT%H:%M:%SZ')})"


def _sweep_units(session: Session, now: datetime, *, limit: int) -> int:
    stmt = (
        select(Job, JobUnit, Lease)
        .join(JobUnit, col(JobUnit.job_id) == col(Job.id))
        .join(Lease, col(Lease.id) == col(JobUnit.current_lease_id))
        .where(
            JobUnit.status == "leased",
            col(Lease.ended_at).is_(None),
            col(Lease.expires_at) <= now,
        )
        .order_by(col(Job.id), col(JobUnit.index))
        .limit(limit)
    )
    if _is_postgres(session):
        stmt = stmt.with_for_update(skip_locked=True, of=Job)
    rows = session.exec(stmt).all()
    expired = 0
    for job, unit, lease in rows:
        # An earlier row of the same cluster may have ended this lease already.
        session.refresh(lease)
        session.refresh(unit)
        if lease.ended_at is not None or unit.current_lease_id != lease.id:
            continue
        seen = lease.heartbeat_at or lease.created_at
        last = seen.strftime("%Y-%m-%dT%H:%M:%SZ")
        _unit_lost(
            session,
            ActiveLease(job=job, lease=lease, unit=unit),
            "expired",
            f"no heartbeat before the lease expired (last seen {last})",
            now,
            error=f"unit {unit.index} attempt {lease.attempt} lost: the provider stopped "
            f"heartbeating (last seen {last})",
        )
        expired += 1
    session.commit()
    return expired


def _sweep_waiting_clusters(
    session: Session, config: ApiConfig, now: datetime, *, limit: int
) -> None:
    waiting_since = now - timedelta(seconds=config.cluster_wait_s)
    old_node_lease = (
        select(JobUnit.job_id)
        .join(Lease, col(Lease.id) == col(JobUnit.current_lease_id))
        .where(
            JobUnit.kind == "node",
            JobUnit.status == "leased",
            col(Lease.ended_at).is_(None),
            col(Lease.created_at) <= waiting_since,
        )
    )
    unassembled = select(JobUnit.job_id).where(
        JobUnit.kind == "node", col(JobUnit.status).in_(("queued", "blocked"))
    )
    stmt = (
        select(Job)
        .where(
            Job.status == "running",
            col(Job.id).in_(old_node_lease),
            col(Job.id).in_(unassembled),
        )
        .limit(limit)
    )
    if _is_postgres(session):
        stmt = stmt.with_for_update(skip_locked=True)
    for job in session.exec(stmt).all():
        clusters.time_out_if_stuck(session, config, job, now)
    session.commit()
