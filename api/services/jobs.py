"""Submitting, reading and cancelling jobs, and explaining where each one stands."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Conflict, Forbidden, NotFound
from api.models import Job, JobEscrow, Lease, Provider, ProviderGpu, User
from proofnet.messages.jobspec import JobSpec


@dataclass(frozen=True)
class JobStatus:
    job: Job
    reason: str
    queue_position: int | None
    matching_providers_online: int | None
    last_heartbeat_at: datetime | None


def submit_job(
    session: Session, config: ApiConfig, owner: User, spec: JobSpec, now: datetime
) -> Job:
    """Queue a validated spec. Escrow locking, when it lands, goes between these two steps."""
    if not owner.is_approved:
        raise Forbidden(
            "only approved submitters may post jobs: apply at /api/v1/approvals and collect "
            f"{config.approval_endorsements} endorsements from senior members"
        )
    job_id = spec.job_id
    if session.exec(select(Job.id).where(Job.job_id == job_id)).first() is not None:
        raise Conflict(f"job {job_id} already exists (same spec; change the seed to rerun)")
    assert owner.id is not None
    job = Job(
        job_id=job_id,
        owner_id=owner.id,
        spec=spec.model_dump(mode="json"),
        gpu_count=spec.resources.gpus,
        gpu_memory_mb=spec.resources.gpu_memory_mb,
        status="queued",
        max_attempts=config.max_attempts,
        created_at=now,
        updated_at=now,
    )
    session.add(job)
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
    if job.status in ("completed", "failed", "cancelled"):
        raise Conflict(f"job is already {job.status}")
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


def _requirement(job: Job) -> str:
    if job.gpu_count == 0:
        return "any provider"
    plural = "GPU" if job.gpu_count == 1 else "GPUs"
    return f"a provider with >= {job.gpu_count} {plural} of {_gb(job.gpu_memory_mb)}"


def matching_providers_online(session: Session, config: ApiConfig, job: Job, now: datetime) -> int:
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
    return session.exec(
        select(func.count(col(Provider.id))).where(
            col(Provider.last_heartbeat_at) >= online_since, fitting >= job.gpu_count
        )
    ).one()


def job_status(
    session: Session, config: ApiConfig, owner: User, job_id: str, now: datetime
) -> JobStatus:
    job = get_job(session, owner, job_id)
    if job.status == "queued":
        ahead = session.exec(
            select(func.count(col(Job.id))).where(
                Job.status == "queued",
                (col(Job.created_at) < job.created_at)
                | ((col(Job.created_at) == job.created_at) & (col(Job.id) < job.id)),
            )
        ).one()
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
        if config.claim_requires_escrow and _escrow_missing(session, job):
            # No worker is handed the job before its escrow is recorded.
            reason = (
                "waiting for its escrow: lock the job's NTX and record the escrow "
                f"(POST /api/v1/jobs/{job.job_id}/escrow); {reason}"
            )
        if job.last_error:
            reason += f"; previous attempt: {job.last_error}"
        return JobStatus(job, reason, ahead + 1, matching, None)
    if job.status == "leased" and job.current_lease_id is not None:
        lease = session.get(Lease, job.current_lease_id)
        provider = session.get(Provider, lease.provider_id) if lease else None
        seen = (lease.heartbeat_at or lease.created_at) if lease else None
        who = provider.key_id[:16] if provider else "unknown provider"
        reason = f"running on provider {who} (attempt {job.attempts})"
        if job.progress_message:
            reason += f": {job.progress_message}"
        return JobStatus(job, reason, None, None, seen)
    reasons = {
        "completed": "completed",
        "cancelled": "cancelled by the owner",
        "failed": f"failed: {job.last_error}" if job.last_error else "failed",
    }
    return JobStatus(job, reasons.get(job.status, job.status), None, None, None)


def _escrow_missing(session: Session, job: Job) -> bool:
    return session.exec(select(JobEscrow.id).where(JobEscrow.job_id == job.id)).first() is None
