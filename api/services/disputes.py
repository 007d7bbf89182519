"""Dispute units, relayed between the oracles and a disputed provider's worker.

When two verifiers agree a provider's segment does not replay to its commitment, the
oracle posts a signed `DisputeTask` (proofnet/messages/dispute.py) and the provider's worker
replays the disputed segments in a verifier's sandbox, from the very files the verifiers
got (`pending_for`, `task_file`). It answers in two steps: a signed commitment
(`record_commitment`), then the reveal that opens it (`record_reveal`). Oracles read both
back (`state`) and decide (oracle/verification/referee.py).

The API checks what it can: the oracle's signature, that the lease is the provider's, that
the files are the lease's uploads and that the two verifier tasks the dispute arbitrates
are this lease's; that only the provider answers, once, and reveals only after it
committed, with a reveal that opens its commitment. It can make up neither a dispute (no
oracle key) nor an answer (no provider key): oracles check every signature themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.errors import BadRequest, Conflict, Forbidden, NotFound
from api.models import DisputeUnit, Job, JobResult, Provider, VerificationUnit
from api.services.lease_lookup import job_lease
from api.services.write_once import store_once
from proofnet.messages.dispute import (
    DisputeCommitment,
    DisputeError,
    DisputeReveal,
    DisputeTask,
)

MAX_PENDING_LISTED = 20


@dataclass(frozen=True)
class DisputeState:
    id: int
    digest: str
    commitment: dict[str, object] | None
    reveal: dict[str, object] | None
    # When the dispute was first posted: the provider's window runs from it.
    created_at: datetime


@dataclass(frozen=True)
class PendingDispute:
    row_id: int
    task: DisputeTask
    spec: dict[str, object]
    files: list[tuple[str, JobResult]]
    committed: bool


def _state(row: DisputeUnit) -> DisputeState:
    assert row.id is not None
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
    return DisputeState(row.id, row.digest, row.commitment, row.reveal, created)


def record_dispute(
    session: Session, oracle_key: str, task: DisputeTask, now: datetime
) -> DisputeState:
    """Keep an oracle's dispute for the provider (the same dispute twice: one unit)."""
    if task.oracle_key != oracle_key:
        raise Forbidden("an oracle posts only disputes it signed itself")
    try:
        task.verify({oracle_key})
    except DisputeError as e:
        raise BadRequest(str(e)) from e
    existing = session.exec(select(DisputeUnit).where(DisputeUnit.digest == task.digest)).first()
    if existing is not None:
        return _state(existing)
    try:
        job, lease = job_lease(session, task.job_id, task.nonce, task.provider)
    except NotFound:
        job_lease(session, task.job_id, task.nonce)  # NotFound: no such lease at all
        raise BadRequest("the dispute names another provider than the lease's") from None
    provider = session.get(Provider, lease.provider_id)
    if provider is None or provider.worker_key != task.provider:
        raise BadRequest("the dispute names another provider than the lease's")
    # The two verifier tasks it arbitrates: this lease's, posted by this oracle.
    arbitrated = session.exec(
        select(VerificationUnit).where(
            col(VerificationUnit.digest).in_(list(task.verifier_tasks)),
            VerificationUnit.lease_id == lease.id,
            VerificationUnit.oracle_key == oracle_key,
        )
    ).all()
    if len(arbitrated) != 2:
        raise BadRequest("the dispute arbitrates verification tasks this oracle did not post")
    uploads = {
        r.name for r in session.exec(select(JobResult).where(JobResult.lease_id == lease.id)).all()
    }
    missing = [n for n in task.files if _lease_name(task, n) not in uploads]
    if missing:
        raise BadRequest(f"the lease uploaded no {', '.join(repr(m) for m in missing[:5])}")
    assert job.id is not None and lease.id is not None and provider.id is not None
    row = DisputeUnit(
        digest=task.digest,
        job_id=job.id,
        lease_id=lease.id,
        provider_id=provider.id,
        oracle_key=oracle_key,
        task=task.to_json(),
        created_at=now,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:  # the same dispute, posted concurrently
        session.rollback()
        row = session.exec(select(DisputeUnit).where(DisputeUnit.digest == task.digest)).one()
    return _state(row)


def _lease_name(task: DisputeTask, name: str) -> str:
    prefix = f"units/{task.unit}/"
    return name[len(prefix) :] if task.unit is not None and name.startswith(prefix) else name


def state(session: Session, digest: str) -> DisputeState:
    row = session.exec(select(DisputeUnit).where(DisputeUnit.digest == digest)).first()
    if row is None:
        raise NotFound(f"no dispute {digest}")
    return _state(row)


def _files(
    session: Session, row: DisputeUnit, names: tuple[str, ...]
) -> list[tuple[str, JobResult]]:
    task = DisputeTask.from_json(row.task)
    inner = {_lease_name(task, n): n for n in names}
    uploads = session.exec(
        select(JobResult).where(
            JobResult.lease_id == row.lease_id, col(JobResult.name).in_(list(inner))
        )
    ).all()
    by_name = {inner[r.name]: r for r in uploads}
    return [(n, by_name[n]) for n in names if n in by_name]


def pending_for(session: Session, provider: Provider) -> list[PendingDispute]:
    """This worker's disputes not revealed yet, oldest first, with what replaying needs."""
    rows = session.exec(
        select(DisputeUnit)
        .where(DisputeUnit.provider_id == provider.id, col(DisputeUnit.revealed_at).is_(None))
        .order_by(col(DisputeUnit.id))
        .limit(MAX_PENDING_LISTED)
    ).all()
    pending = []
    for row in rows:
        assert row.id is not None
        task = DisputeTask.from_json(row.task)
        job = session.get(Job, row.job_id)
        assert job is not None
        files = _files(session, row, task.files)
        pending.append(PendingDispute(row.id, task, job.spec, files, row.commitment is not None))
    return pending


def _own_row(session: Session, provider: Provider, unit_id: int) -> DisputeUnit:
    row = session.get(DisputeUnit, unit_id)
    if row is None or row.provider_id != provider.id:
        raise NotFound(f"no dispute {unit_id} for this worker")
    return row


def task_file(session: Session, provider: Provider, unit_id: int, name: str) -> JobResult:
    """A proof file the dispute names, for the disputed provider only (as uploaded)."""
    row = _own_row(session, provider, unit_id)
    for named, upload in _files(session, row, (name,)):
        if named in row.task.get("files", ()):
            return upload
    raise NotFound(f"dispute {unit_id} names no file {name!r}")


def record_commitment(
    session: Session, provider: Provider, unit_id: int, raw: object, now: datetime
) -> DisputeState:
    """The provider's signed commitment; committing twice alike is one commitment."""
    row = _own_row(session, provider, unit_id)
    task = DisputeTask.from_json(row.task)
    try:
        commitment = DisputeCommitment.from_json(raw)
        commitment.verify_for(task)
    except DisputeError as e:
        raise BadRequest(str(e)) from e
    store_once(session, row, "commitment", commitment.to_json(), now, f"dispute {unit_id}")
    return _state(row)


def record_reveal(
    session: Session, provider: Provider, unit_id: int, raw: object, now: datetime
) -> DisputeState:
    """The provider's reveal: only after its commitment, and only one that opens it."""
    row = _own_row(session, provider, unit_id)
    if row.commitment is None:
        raise Conflict(f"dispute {unit_id}: commit to the replay before revealing it")
    task = DisputeTask.from_json(row.task)
    try:
        reveal = DisputeReveal.from_json(raw)
        reveal.opens(task, DisputeCommitment.from_json(row.commitment))
    except DisputeError as e:
        raise BadRequest(str(e)) from e
    store_once(session, row, "reveal", reveal.to_json(), now, f"dispute {unit_id}")
    return _state(row)
