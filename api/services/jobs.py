"""Submitting, reading and cancelling jobs, and explaining where each one stands."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cachetools import TTLCache
from sqlalchemy import Connection, Row, bindparam, case, exists, false, func
from sqlalchemy import select as sa_select
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict, Forbidden, NotFound
from api.models import Job, JobEscrow, Lease, Provider, ProviderGpu, User
from api.models.job import TERMINAL_STATUSES
from api.services import auctions, rate_cards, unit_outcomes
from api.services import units as unit_service
from api.services.units import UnitRow
from proofnet.messages.jobspec import JobSpec

# A job as the status path reads it: the ORM object, or a row of the columns it needs.
JobLike = Job | Row[Any]


@dataclass(frozen=True)
class JobStatus:
    job: JobLike
    reason: str
    queue_position: int | None
    matching_providers_online: int | None
    last_heartbeat_at: datetime | None
    # The units of a job with a topology, in index order; None for a single-unit job.
    units: list[UnitRow] | None = None


def submit_job(
    session: Session, config: ApiConfig, owner: User, spec: JobSpec, now: datetime
) -> Job:
    """Queue a validated spec. A spec with a topology is split into its units (queued as
    they become ready); the job is then "running" until they are all done."""
    if not owner.is_approved:
        raise Forbidden(
            "only approved submitters may post jobs: apply at /api/v1/approvals and collect "
            f"{config.approval_endorsements} endorsements from senior members"
        )
    job_id = spec.job_id
    if session.exec(select(Job.id).where(Job.job_id == job_id)).first() is not None:
        raise Conflict(f"job {job_id} already exists (same spec; change the seed to rerun)")
    rate_cards.card_for_spec(session, spec)  # 422 unless its rate card is published here
    assert owner.id is not None
    topology = spec.topology
    job = Job(
        job_id=job_id,
        owner_id=owner.id,
        spec=spec.model_dump(mode="json"),
        gpu_count=spec.resources.gpus,
        gpu_memory_mb=spec.resources.gpu_memory_mb,
        status="queued" if topology is None else "running",
        max_attempts=config.max_attempts,
        unit_count=0 if topology is None else len(unit_service.plan(topology)),
        created_at=now,
        updated_at=now,
    )
    session.add(job)
    if topology is not None:
        session.flush()
        unit_service.create_units(session, job, topology, now)
    rate_cards.link_job(session, job, spec)
    if job.id is None:
        session.flush()
    auctions.open_auction(session, config, job, spec)
    session.commit()
    return job


def list_jobs(
    session: Session, owner: User, *, status: str | None, offset: int, limit: int
) -> tuple[list[Job], int]:
    where = [Job.owner_id == owner.id]
    if status is not None:
        where.append(Job.status == status)
    total = session.exec(select(func.count(col(Job.id))).where(*where)).one()
    rows = session.exec(
        select(Job)
        .where(*where)
        .order_by(col(Job.created_at).desc(), col(Job.id).desc())
        .offset(offset)
        .limit(limit)
    ).all()
    return list(rows), total


def get_job(session: Session, owner: User, job_id: str) -> Job:
    """The job if `owner` owns it. Someone else's job reads as missing, not forbidden, so
    job ids cannot be probed."""
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None or job.owner_id != owner.id:
        raise NotFound(f"no job {job_id}")
    return job


def cancel_job(session: Session, owner: User, job_id: str, now: datetime) -> Job:
    job = get_job(session, owner, job_id)
    job = session.exec(select(Job).where(Job.id == job.id).with_for_update()).one()
    session.refresh(job)
    if job.status in TERMINAL_STATUSES:
        raise Conflict(f"job is already {job.status}")
    if job.unit_count:
        unit_outcomes.cancel_units(session, job, "cancelled by the owner", now)
    if job.current_lease_id is not None:
        lease = session.get(Lease, job.current_lease_id)
        if lease is not None and lease.ended_at is None:
            # The worker learns on its next heartbeat that the lease is gone.
            lease.ended_at = now
            lease.outcome = "cancelled"
            lease.reason = "cancelled by the owner"
            session.add(lease)
    job.status = "cancelled"
    job.current_lease_id = None
    job.finished_at = now
    job.updated_at = now
    job.version += 1
    session.add(job)
    session.commit()
    return job


def _gb(mb: int) -> str:
    return f"{mb / 1024:g} GB"


def _requirement(job: JobLike) -> str:
    if job.gpu_count == 0:
        return "any provider"
    plural = "GPU" if job.gpu_count == 1 else "GPUs"
    return f"a provider with >= {job.gpu_count} {plural} of {_gb(job.gpu_memory_mb)}"


def matching_providers_online(
    session: Session | Connection, config: ApiConfig, job: JobLike, now: datetime
) -> int:
    online_since = now - timedelta(seconds=config.provider_online_s)
    fitting = (
        select(func.count(col(ProviderGpu.id)))
        .where(
            col(ProviderGpu.provider_id) == col(Provider.id),
            col(ProviderGpu.memory_mb) >= job.gpu_memory_mb,
        )
        .correlate(Provider)
        .scalar_subquery()
    )
    count = session.execute(
        select(func.count(col(Provider.id))).where(
            col(Provider.last_heartbeat_at) >= online_since, fitting >= job.gpu_count
        )
    ).scalar_one()
    return int(count)


# How long the matching-provider count of a queued job's resource shape may be reused.
MATCHING_CACHE_TTL_S = 1.0


class MatchingCache:
    """Online providers per resource shape (GPUs, GPU memory), for `ttl_s` seconds.

    Counting them scans every online provider's GPUs, and every poller of a queued job
    with the same shape asks the same question; so the answer is kept a second (per app
    clock *and* per process monotonic clock, so a test clock that stands still does not
    keep it forever and a clock moved forward drops it). A provider that comes online or
    goes silent shows in queued jobs' reasons at most `ttl_s` late."""

    def __init__(
        self,
        ttl_s: float = MATCHING_CACHE_TTL_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_entries: int = 10_000,
    ) -> None:
        self.ttl_s = ttl_s
        self.clock = clock
        self.max_entries = max_entries
        # shape -> (the app's time of the count, the count); expired by `clock`.
        self._entries: TTLCache[tuple[int, int, int], tuple[datetime, int]] = TTLCache(
            maxsize=max_entries, ttl=ttl_s, timer=clock
        )
        self._lock = threading.Lock()  # cachetools' caches are not thread-safe

    def matching(
        self, session: Session | Connection, config: ApiConfig, job: JobLike, now: datetime
    ) -> int:
        key = (job.gpu_count, job.gpu_memory_mb, config.provider_online_s)
        with self._lock:
            hit = self._entries.get(key)
        if hit is not None:
            at, count = hit
            if 0 <= (now - at).total_seconds() < self.ttl_s:
                return count
        count = matching_providers_online(session, config, job, now)
        with self._lock:
            self._entries[key] = (now, count)
        return count


_STATUS_COLUMNS = (
    "id",
    "job_id",
    "status",
    "progress",
    "progress_message",
    "attempts",
    "failures",
    "last_error",
    "gpu_count",
    "gpu_memory_mb",
    "current_lease_id",
    "unit_count",
    "updated_at",
)


@functools.cache
def _status_statement(with_escrow: bool) -> Any:
    """The owner's job (the columns a status needs), how many queued jobs go before it
    when it is queued (FIFO by created_at, then id; the bulk of it an index-only range
    count on (status, created_at)), and whether its escrow is recorded. Built once: the
    statement is the same for every request, only its parameters change."""
    other = aliased(Job)
    earlier = (
        select(func.count())
        .select_from(other)
        .where(col(other.status) == "queued", col(other.created_at) < col(Job.created_at))
        .correlate(Job)
        .scalar_subquery()
    )
    same_time = (
        select(func.count())
        .select_from(other)
        .where(
            col(other.status) == "queued",
            col(other.created_at) == col(Job.created_at),
            col(other.id) < col(Job.id),
        )
        .correlate(Job)
        .scalar_subquery()
    )
    ahead = case((col(Job.status) == "queued", earlier + same_time), else_=None)
    escrowed = exists().where(col(JobEscrow.job_id) == col(Job.id)) if with_escrow else false()
    return sa_select(
        *(getattr(Job, name) for name in _STATUS_COLUMNS),
        ahead.label("ahead"),
        escrowed.label("has_escrow"),
    ).where(col(Job.job_id) == bindparam("job_id"), col(Job.owner_id) == bindparam("owner"))


@functools.cache
def _lease_statement() -> Any:
    return (
        select(Lease.heartbeat_at, Lease.created_at, Provider.key_id)
        .outerjoin(Provider, col(Provider.id) == col(Lease.provider_id))
        .where(col(Lease.id) == bindparam("lease_id"))
    )


def job_status(
    session: Session | Connection,
    config: ApiConfig,
    owner: User,
    job_id: str,
    now: datetime,
    matching_cache: MatchingCache | None = None,
) -> JobStatus:
    """Where the owner's job stands and why. One query reads the job with its queue
    position (and whether its escrow is recorded, when claims need one); a leased job
    costs one more (its lease and provider); a queued job's matching-provider count comes
    from `matching_cache` when given. Someone else's job reads as missing. `session` may
    be a plain connection: the reads need no ORM."""
    job = session.execute(
        _status_statement(config.claim_requires_escrow),
        {"job_id": job_id, "owner": owner.id},
    ).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    if job.unit_count:
        return _topology_status(session, config, job)
    if job.status == "queued":
        ahead = int(job.ahead or 0)
        if matching_cache is not None:
            matching = matching_cache.matching(session, config, job, now)
        else:
            matching = matching_providers_online(session, config, job, now)
        if matching == 0:
            reason = f"waiting: no {_requirement(job).removeprefix('a ')} online"
            if job.gpu_count == 0:
                reason = "waiting: no provider online"
        else:
            reason = (
                f"waiting in queue (position {ahead + 1}): {matching} matching "
                f"provider{'s' if matching != 1 else ''} online, all busy"
            )
        if config.claim_requires_escrow and not job.has_escrow:
            # No worker is handed the job before its escrow is recorded.
            reason = (
                "waiting for its escrow: lock the job's NTX and record the escrow "
                f"(POST /api/v1/jobs/{job.job_id}/escrow); {reason}"
            )
        if job.last_error:
            reason += f"; previous attempt: {job.last_error}"
        return JobStatus(job, reason, ahead + 1, matching, None)
    if job.status == "leased" and job.current_lease_id is not None:
        lease_row = session.execute(_lease_statement(), {"lease_id": job.current_lease_id}).first()
        seen = (lease_row[0] or lease_row[1]) if lease_row else None
        key_id = lease_row[2] if lease_row else None
        who = key_id[:16] if key_id is not None else "unknown provider"
        reason = f"running on provider {who} (attempt {job.attempts})"
        if job.progress_message:
            reason += f": {job.progress_message}"
        return JobStatus(job, reason, None, None, seen)
    stopped = job.progress_message if job.progress_message.startswith("stopped: ") else ""
    reasons = {
        # A job the oracle quorum stopped early for its own fault says so once completed.
        "completed": f"completed ({stopped})" if stopped else "completed",
        "cancelled": "cancelled by the owner",
        "failed": f"failed: {job.last_error}" if job.last_error else "failed",
    }
    return JobStatus(job, reasons.get(job.status, job.status), None, None, None)


def job_units(session: Session | Connection, job: Job) -> list[UnitRow] | None:
    """The units of a job with a topology (None for a single-unit job)."""
    if not job.unit_count:
        return None
    assert job.id is not None
    return unit_service.unit_rows(session, job.id)


def _unit_name(row: UnitRow) -> str:
    return f"node {row.rank}" if row.kind == "node" else f"unit {row.index} ({row.kind})"


def _topology_status(session: Session | Connection, config: ApiConfig, job: Row[Any]) -> JobStatus:
    """Where a job with a topology stands: its units, and in words what runs and waits."""
    rows = unit_service.unit_rows(session, job.id)
    seen = [r.heartbeat_at for r in rows if r.heartbeat_at is not None]
    last_seen = max(seen) if seen else None
    if job.status != "running":
        reasons = {
            "completed": "completed",
            "cancelled": "cancelled by the owner",
            "stopped": f"stopped: {job.last_error}" if job.last_error else "stopped",
            "failed": f"failed: {job.last_error}" if job.last_error else "failed",
        }
        return JobStatus(job, reasons.get(job.status, job.status), None, None, None, rows)
    done = sum(1 for r in rows if r.status == "completed")
    parts = [f"running: {done} of {len(rows)} units completed"]
    nodes = [r for r in rows if r.kind == "node"]
    if nodes:
        leased = sum(1 for r in nodes if r.status in ("leased", "completed"))
        attempt = nodes[0].attempts
        if leased < len(nodes):
            parts.append(
                f"cluster attempt {attempt}: {leased} of {len(nodes)} nodes leased, "
                "waiting for the rest (nothing starts until every node is leased)"
            )
        else:
            parts.append(f"cluster attempt {attempt} runs on {len(nodes)} nodes")
    else:
        for r in rows:
            if r.status == "leased":
                who = r.provider[:16] if r.provider else "unknown provider"
                running = f"{_unit_name(r)} running on provider {who} (attempt {r.attempts}"
                running += f", {r.progress:.0%})" if r.progress else ")"
                if r.progress_message:
                    running += f": {r.progress_message}"
                parts.append(running)
        waiting = [str(r.index) for r in rows if r.status == "queued"]
        if waiting:
            parts.append(f"units {', '.join(waiting)} waiting for a provider")
    if config.claim_requires_escrow and not job.has_escrow:
        parts.insert(
            0,
            "waiting for its escrow: lock the job's NTX and record the escrow "
            f"(POST /api/v1/jobs/{job.job_id}/escrow)",
        )
    reason = "; ".join(parts)
    if job.last_error:
        reason += f"; last problem: {job.last_error}"
    return JobStatus(job, reason, None, None, last_seen, rows)
