"""Job outputs under a lease: result files, log lines, metering; and reading them back.

Writes go through `leases.active_lease`, so only the worker holding the job's current,
unexpired lease can add to it; a worker whose lease expired or ended is refused (409).
Result bytes go to the content-addressed blob store before the row that names them is
written, so a row never points at a missing blob (an orphan blob is harmless).

A unit of a job with a topology uploads its checkpoint as `checkpoint/<topology.checkpoint>`
(declared by the topology, not the result globs) and reads its input checkpoints back
through its lease. Its submitter reads each unit's uploads as `units/<index>/<name>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, func
from sqlmodel import Session, col, select

from api.errors import ApiError, BadRequest, NotFound
from api.models import Job, JobLogLine, JobResult, JobUnit, Lease, LeaseUsage, Provider, User
from api.services.jobs import get_job
from api.services.leases import ActiveLease, active_lease
from api.services.units import UnitInput, plan_of, unit_inputs
from api.storage import BlobStore, DigestMismatch
from proofnet.messages.result_paths import ResultNameError, check_result_name, declared_by
from proofnet.messages.sealing import is_sealed

UNIT_RESULT_PREFIX = "units/"

# An attestation names at most 256 results; a lease cannot upload more than it can attest.
MAX_RESULTS_PER_LEASE = 256
MAX_LOG_LINES_PER_REQUEST = 1000
MAX_LOG_LINE_CHARS = 4096
# Older lines are dropped past this, so a chatty job cannot grow the database without end.
MAX_LOG_LINES_PER_JOB = 20_000


class PayloadTooLarge(ApiError):
    status_code = 413


@dataclass(frozen=True)
class LogLineIn:
    at: datetime
    stream: str
    text: str


@dataclass(frozen=True)
class LogAppend:
    stored: int
    truncated_lines: int
    dropped_old: int


def _declared(job: Job, name: str) -> str:
    try:
        check_result_name(name)
    except ResultNameError as e:
        raise BadRequest(str(e)) from e
    globs = [r["path"] for r in job.spec.get("results", [])]
    if declared_by(globs, name) is None:
        raise BadRequest(
            f"result {name!r} is not declared by the job spec (declared: {', '.join(globs) or 'none'})"
        )
    return name


def store_result(
    session: Session,
    store: BlobStore,
    provider: Provider,
    token: str,
    name: str,
    data: bytes,
    *,
    max_bytes: int,
    expected_sha256: str | None,
    now: datetime,
) -> JobResult:
    """Keep one result file of the leased job; re-uploading a name replaces it."""
    active = active_lease(session, provider, token, now)
    if not _unit_checkpoint(active, name, data):
        _declared(active.job, name)
    if len(data) > max_bytes:
        raise PayloadTooLarge(f"result {name!r} is {len(data)} bytes; the limit is {max_bytes}")
    lease_id = active.lease.id
    session.rollback()  # release the job lock while the blob is written

    try:
        blob = store.put_bytes(data, expected_sha256=expected_sha256)
    except DigestMismatch as e:
        raise BadRequest(f"result {name!r}: {e}") from e

    active = active_lease(session, provider, token, now)
    if active.lease.id != lease_id:  # pragma: no cover - a token names one lease forever
        raise NotFound("no such lease for this worker")
    row = session.exec(
        select(JobResult).where(JobResult.lease_id == lease_id, JobResult.name == name)
    ).first()
    if row is None:
        count = session.exec(
            select(func.count(col(JobResult.id))).where(JobResult.lease_id == lease_id)
        ).one()
        if count >= MAX_RESULTS_PER_LEASE:
            raise PayloadTooLarge(f"a lease may upload at most {MAX_RESULTS_PER_LEASE} results")
        assert active.job.id is not None and lease_id is not None
        row = JobResult(
            job_id=active.job.id,
            lease_id=lease_id,
            name=name,
            sha256=blob.sha256,
            size=blob.size,
            uploaded_at=now,
        )
    else:
        row.sha256, row.size, row.uploaded_at = blob.sha256, blob.size, now
    session.add(row)
    session.commit()
    return row


def _unit_checkpoint(active: ActiveLease, name: str, data: bytes) -> bool:
    """Whether `name` is the checkpoint this unit's lease uploads (checked: the unit makes
    one, and it is readable by the next provider), rather than a declared result."""
    unit = active.unit
    if unit is None:
        return False
    expected = plan_of(active.job).checkpoint_result
    if expected is None or name != expected:
        return False
    if unit.kind == "eval":
        raise BadRequest(f"unit {unit.index} is an evaluation: it uploads no {expected}")
    if is_sealed(data):
        raise BadRequest(
            f"{name} is sealed: checkpoints of a job with a topology are never sealed, the "
            "next provider must read them"
        )
    return True


def lease_input(
    session: Session, provider: Provider, token: str, position: int, now: datetime
) -> UnitInput:
    """Input checkpoint `position` of the unit `token` leases; only its holder may read it."""
    active = active_lease(session, provider, token, now)
    unit = active.unit
    session.rollback()  # release the job lock before the bytes stream
    if unit is None:
        raise NotFound("this lease is for a whole job: it has no input checkpoints")
    inputs = unit_inputs(unit)
    if not 0 <= position < len(inputs):
        have = f"positions 0..{len(inputs) - 1}" if inputs else "none"
        raise NotFound(f"unit {unit.index} has {len(inputs)} input checkpoints ({have})")
    return inputs[position]


def append_logs(
    session: Session, provider: Provider, token: str, lines: Sequence[LogLineIn], now: datetime
) -> LogAppend:
    if len(lines) > MAX_LOG_LINES_PER_REQUEST:
        raise PayloadTooLarge(f"send at most {MAX_LOG_LINES_PER_REQUEST} log lines per request")
    active = active_lease(session, provider, token, now)
    job, lease = active.job, active.lease
    assert job.id is not None and lease.id is not None
    truncated = 0
    for line in lines:
        text = line.text
        if len(text) > MAX_LOG_LINE_CHARS:
            text = text[: MAX_LOG_LINE_CHARS - 1] + "…"
            truncated += 1
        session.add(
            JobLogLine(
                job_id=job.id,
                lease_id=lease.id,
                attempt=lease.attempt,
                at=line.at,
                received_at=now,
                stream=line.stream,
                text=text,
            )
        )
    session.flush()
    dropped = 0
    total = session.exec(
        select(func.count(col(JobLogLine.id))).where(JobLogLine.job_id == job.id)
    ).one()
    if total > MAX_LOG_LINES_PER_JOB:
        cutoff = session.exec(
            select(JobLogLine.id)
            .where(JobLogLine.job_id == job.id)
            .order_by(col(JobLogLine.id).desc())
            .offset(MAX_LOG_LINES_PER_JOB)
            .limit(1)
        ).one()
        result = session.execute(
            delete(JobLogLine).where(col(JobLogLine.job_id) == job.id, col(JobLogLine.id) <= cutoff)
        )
        dropped = int(result.rowcount)  # type: ignore[attr-defined]
    session.commit()
    return LogAppend(stored=len(lines), truncated_lines=truncated, dropped_old=dropped)


def record_usage(
    session: Session, provider: Provider, token: str, usage: dict[str, Any], now: datetime
) -> LeaseUsage:
    active = active_lease(session, provider, token, now)
    assert active.job.id is not None and active.lease.id is not None
    row = session.exec(select(LeaseUsage).where(LeaseUsage.lease_id == active.lease.id)).first()
    if row is None:
        row = LeaseUsage(
            lease_id=active.lease.id, job_id=active.job.id, usage=usage, updated_at=now
        )
    else:
        row.usage, row.updated_at = usage, now
    session.add(row)
    session.commit()
    return row


# --- reading back, for the job's submitter ------------------------------------------------


def _reporting_lease(session: Session, job: Job) -> Lease | None:
    """The lease whose outputs describe the job: the one that completed it, else the
    newest one (a running or failed attempt)."""
    leases = session.exec(
        select(Lease).where(Lease.job_id == job.id).order_by(col(Lease.id).desc())
    ).all()
    for lease in leases:
        if lease.outcome == "completed":
            return lease
    return leases[0] if leases else None


def _unit_results(session: Session, job: Job) -> list[JobResult]:
    """Each unit's uploads as `units/<index>/<name>`: those of the lease that completed the
    unit, else of its newest lease (a running or failed attempt). Detached copies: renaming
    them changes nothing stored."""
    units = session.exec(
        select(JobUnit).where(JobUnit.job_id == job.id).order_by(col(JobUnit.index))
    ).all()
    newest: dict[int, int] = {}
    for lease_id, unit_id in session.exec(
        select(Lease.id, Lease.unit_id).where(Lease.job_id == job.id).order_by(col(Lease.id))
    ).all():
        if lease_id is not None and unit_id is not None:
            newest[unit_id] = lease_id
    chosen: dict[int, int] = {}
    for unit in units:
        assert unit.id is not None
        lease_id = unit.completed_lease_id or newest.get(unit.id)
        if lease_id is not None:
            chosen[lease_id] = unit.index
    if not chosen:
        return []
    rows = session.exec(select(JobResult).where(col(JobResult.lease_id).in_(list(chosen)))).all()
    named = [
        JobResult(
            id=r.id,
            job_id=r.job_id,
            lease_id=r.lease_id,
            name=f"{UNIT_RESULT_PREFIX}{chosen[r.lease_id]}/{r.name}",
            sha256=r.sha256,
            size=r.size,
            uploaded_at=r.uploaded_at,
        )
        for r in rows
    ]
    return sorted(named, key=lambda r: r.name)


def job_results(session: Session, owner: User, job_id: str) -> list[JobResult]:
    job = get_job(session, owner, job_id)
    if job.unit_count:
        return _unit_results(session, job)
    lease = _reporting_lease(session, job)
    if lease is None:
        return []
    return list(
        session.exec(
            select(JobResult).where(JobResult.lease_id == lease.id).order_by(col(JobResult.name))
        ).all()
    )


def job_result(session: Session, owner: User, job_id: str, name: str) -> JobResult:
    for row in job_results(session, owner, job_id):
        if row.name == name:
            return row
    raise NotFound(f"job {job_id} has no result {name!r}")


def job_logs(
    session: Session, owner: User, job_id: str, *, after: int, limit: int
) -> list[JobLogLine]:
    job = get_job(session, owner, job_id)
    return list(
        session.exec(
            select(JobLogLine)
            .where(JobLogLine.job_id == job.id, col(JobLogLine.id) > after)
            .order_by(col(JobLogLine.id))
            .limit(limit)
        ).all()
    )


def job_usage(session: Session, owner: User, job_id: str) -> LeaseUsage | None:
    job = get_job(session, owner, job_id)
    lease = _reporting_lease(session, job)
    if lease is None:
        return None
    return session.exec(select(LeaseUsage).where(LeaseUsage.lease_id == lease.id)).first()


def as_utc(at: float) -> datetime:
    """A worker's POSIX timestamp as an aware datetime; nonsense values are refused."""
    try:
        return datetime.fromtimestamp(at, UTC)
    except (OverflowError, OSError, ValueError) as e:
        raise BadRequest(f"timestamp {at!r} is out of range") from e
