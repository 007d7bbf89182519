"""Job outputs under a lease: result files, log lines, metering; and reading them back.

Writes go through `leases.active_lease`, so only the worker holding the job's current,
unexpired lease can add to it; a worker whose lease expired or ended is refused (409).
Result bytes arrive through a resumable upload session (`api.uploads`, staged on disk and
hashed as they come) and go to the content-addressed blob store before the row that names
them is written, so a row never points at a missing blob (an orphan blob is harmless).
The job lock is never held while bytes move.

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
from api.services import resume
from api.services.jobs import get_job
from api.services.leases import ActiveLease, active_lease
from api.services.result_release import Release, ReleasePolicy, release_of, require_released
from api.services.units import UnitInput, plan_of, unit_inputs
from api.storage import BlobRef, BlobStore, DigestMismatch
from api.uploads import ChunkWriter, UploadNotFound, UploadSession, UploadStaging
from proofnet.messages.claim import ResumeFile
from proofnet.messages.envelope import MAGIC_BYTES, is_sealed
from proofnet.messages.result_paths import ResultNameError, check_result_name, declared_by

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


@dataclass(frozen=True)
class UploadStart:
    """A session to send bytes to, or (`stored`) the same file already stored."""

    upload: UploadSession | None
    offset: int
    stored: JobResult | None


def _check_upload(active: ActiveLease, name: str, size: int, max_bytes: int) -> None:
    """What may be uploaded under this lease: a declared result or the unit's checkpoint,
    within the size limit."""
    if not _unit_checkpoint(active, name):
        _declared(active.job, name)
    if size > max_bytes:
        raise PayloadTooLarge(f"result {name!r} is {size} bytes; the limit is {max_bytes}")


def _new_upload(
    staging: UploadStaging, lease_id: int, name: str, size: int, sha256: str | None
) -> UploadSession:
    # Each upload in flight holds disk on the API host: no more than a lease may store.
    if staging.open_count(lease_id) >= MAX_RESULTS_PER_LEASE:
        raise PayloadTooLarge(
            f"a lease may have at most {MAX_RESULTS_PER_LEASE} uploads in progress"
        )
    return staging.new(lease_id, name, size, sha256)


def start_upload(
    session: Session,
    staging: UploadStaging,
    provider: Provider,
    token: str,
    name: str,
    *,
    size: int,
    sha256: str,
    max_bytes: int,
    now: datetime,
) -> UploadStart:
    """Open (or find again) the upload session for one file of the leased job."""
    active = active_lease(session, provider, token, now)
    _check_upload(active, name, size, max_bytes)
    lease_id = active.lease.id
    assert lease_id is not None
    session.rollback()  # release the job lock: nothing below needs it
    row = _result_row(session, lease_id, name)
    if row is not None and (row.sha256, row.size) == (sha256, size):
        return UploadStart(upload=None, offset=size, stored=row)
    upload = staging.find(lease_id, name, size, sha256) or _new_upload(
        staging, lease_id, name, size, sha256
    )
    return UploadStart(upload=upload, offset=staging.offset(upload), stored=None)


def one_shot_upload(
    session: Session,
    staging: UploadStaging,
    provider: Provider,
    token: str,
    name: str,
    *,
    size: int,
    sha256: str | None,
    max_bytes: int,
    now: datetime,
) -> UploadSession:
    """A private session for a whole file sent in one request (`PUT .../results/{name}`)."""
    active = active_lease(session, provider, token, now)
    _check_upload(active, name, size, max_bytes)
    lease_id = active.lease.id
    assert lease_id is not None
    session.rollback()
    return _new_upload(staging, lease_id, name, size, sha256)


def upload_of(
    session: Session,
    staging: UploadStaging,
    provider: Provider,
    token: str,
    upload_id: str,
    now: datetime,
) -> UploadSession:
    """The upload session `upload_id` of the lease `token`; only the lease's holder gets it."""
    active = active_lease(session, provider, token, now)
    lease_id = active.lease.id
    assert lease_id is not None
    session.rollback()
    try:
        return staging.get(lease_id, upload_id)
    except UploadNotFound as e:
        raise NotFound(str(e)) from e


def finish_upload(
    session: Session,
    store: BlobStore,
    staging: UploadStaging,
    writer: ChunkWriter,
    provider: Provider,
    token: str,
    now: datetime,
) -> JobResult:
    """Store a complete upload and record it as the lease's result `name`; a file that does
    not hash to what was declared is thrown away (the worker starts over)."""
    upload = writer.session
    active = active_lease(session, provider, token, now)
    if active.lease.id != upload.lease_id:  # pragma: no cover - the path names the lease
        raise NotFound("no such upload for this lease")
    checkpoint = _unit_checkpoint(active, upload.name)
    session.rollback()  # release the job lock while the blob is written
    digest = writer.sha256()
    if upload.sha256 is not None and digest != upload.sha256:
        staging.discard(upload)
        raise BadRequest(
            f"result {upload.name!r}: content hashes to {digest}, not the declared "
            f"{upload.sha256}; nothing was stored, upload it again"
        )
    if checkpoint and is_sealed(writer.head(MAGIC_BYTES)):
        staging.discard(upload)
        raise BadRequest(
            f"{upload.name} is sealed: checkpoints of a job with a topology are never sealed, "
            "the next provider must read them"
        )
    try:
        blob = store.put_file(staging.part_path(upload), sha256=digest)
    except DigestMismatch as e:  # the staged file changed on disk under us
        staging.discard(upload)
        raise BadRequest(f"result {upload.name!r}: {e}") from e
    staging.discard(upload)
    return _record_result(session, provider, token, upload.name, blob, now)


def _result_row(session: Session, lease_id: int, name: str) -> JobResult | None:
    return session.exec(
        select(JobResult).where(JobResult.lease_id == lease_id, JobResult.name == name)
    ).first()


def _record_result(
    session: Session, provider: Provider, token: str, name: str, blob: BlobRef, now: datetime
) -> JobResult:
    """Name the stored blob as the lease's result `name`; re-uploading a name replaces it."""
    active = active_lease(session, provider, token, now)
    lease_id = active.lease.id
    assert active.job.id is not None and lease_id is not None
    row = _result_row(session, lease_id, name)
    if row is None:
        count = session.exec(
            select(func.count(col(JobResult.id))).where(JobResult.lease_id == lease_id)
        ).one()
        if count >= MAX_RESULTS_PER_LEASE:
            raise PayloadTooLarge(f"a lease may upload at most {MAX_RESULTS_PER_LEASE} results")
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


def _unit_checkpoint(active: ActiveLease, name: str) -> bool:
    """Whether `name` is the checkpoint this unit's lease uploads (the unit makes one),
    rather than a declared result. (That it is not sealed is checked on its bytes.)"""
    unit = active.unit
    if unit is None:
        return False
    expected = plan_of(active.job).checkpoint_result
    if expected is None or name != expected:
        return False
    if unit.kind == "eval":
        raise BadRequest(f"unit {unit.index} is an evaluation: it uploads no {expected}")
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


def lease_resume_file(
    session: Session, provider: Provider, token: str, position: int, now: datetime
) -> ResumeFile:
    """File `position` of `claim.resume.files` of the lease `token` (its holder only): the
    lost attempt's prefix, then its checkpoint's files (`api.services.resume`)."""
    active = active_lease(session, provider, token, now)
    found = resume.resume_file(session, active.lease, position)
    session.rollback()  # release the job lock before the bytes stream
    if found is None:
        raise NotFound(f"this lease resumed nothing, or has no resume file {position}")
    return found


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


def _unit_results(
    session: Session, job: Job, policy: ReleasePolicy, withheld: dict[int, Release] | None = None
) -> list[JobResult]:
    """Each released unit's uploads as `units/<index>/<name>`: those of the lease that
    completed the unit (a unit's results are released with its own attestation's verdict;
    a running or failed attempt's uploads are never served). Detached copies: renaming them
    changes nothing stored. Refused (409) while no unit with uploads is released."""
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
    withheld = {} if withheld is None else withheld
    for unit in units:
        assert unit.id is not None
        lease_id = unit.completed_lease_id or newest.get(unit.id)
        if lease_id is None:
            continue
        lease = session.get(Lease, lease_id)
        verdict = release_of(session, lease, policy)
        if verdict.released:
            chosen[lease_id] = unit.index
        elif _has_uploads(session, lease_id):
            withheld[unit.index] = verdict
    if not chosen:
        if withheld:
            index, verdict = min(withheld.items())
            require_released(verdict, f"unit {index}'s results")
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


def _has_uploads(session: Session, lease_id: int) -> bool:
    return (
        session.exec(select(JobResult.id).where(JobResult.lease_id == lease_id)).first() is not None
    )


def job_results(
    session: Session, owner: User, job_id: str, policy: ReleasePolicy
) -> list[JobResult]:
    """The submitter's results (names, hashes, sizes): only once released
    (`api.services.result_release`); 409 with the reason before. Nothing uploaded yet: []."""
    job = get_job(session, owner, job_id)
    if job.unit_count:
        return _unit_results(session, job, policy)
    lease = _reporting_lease(session, job)
    if lease is None or lease.id is None or not _has_uploads(session, lease.id):
        return []
    require_released(release_of(session, lease, policy), f"job {job_id}'s results")
    return list(
        session.exec(
            select(JobResult).where(JobResult.lease_id == lease.id).order_by(col(JobResult.name))
        ).all()
    )


def job_result(
    session: Session, owner: User, job_id: str, name: str, policy: ReleasePolicy
) -> JobResult:
    job = get_job(session, owner, job_id)
    if job.unit_count:
        # A unit's file is refused (409) while its own verdict has not released it.
        withheld: dict[int, Release] = {}
        rows = _unit_results(session, job, policy, withheld)
        index = _unit_of(name)
        if index in withheld:
            require_released(withheld[index], f"unit {index}'s results")
    else:
        rows = job_results(session, owner, job_id, policy)
    for row in rows:
        if row.name == name:
            return row
    raise NotFound(f"job {job_id} has no result {name!r}")


def _unit_of(name: str) -> int | None:
    """The unit index of a submitter's name `units/<index>/...` (None for another name)."""
    head, _, rest = name.removeprefix(UNIT_RESULT_PREFIX).partition("/")
    if not name.startswith(UNIT_RESULT_PREFIX) or not rest or not head.isdigit():
        return None
    return int(head)


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
