"""Verification units, relayed between the oracles and drawn verifiers.

An oracle lists the workers that could verify a lease's proof (`candidates`: online,
with the device class the proof was made on, other than the provider), draws one with its
own signature, and posts a signed `VerificationTask`; the verifier reads its pending tasks
with the job's spec and the task's proof files (`pending_for`, `task_file`), replays them
in the job's image and posts its signed report; oracles read the report back (`state`).

The API checks what it can: the oracle's signature, that the lease exists and is the
provider's, that the verifier is a registered worker other than the provider and paid to
another address, that the report is the verifier's own answer to the task. It cannot make
up a task (no oracle key) nor a report (no verifier key): oracles check both signatures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Forbidden, NotFound
from api.models import (
    Job,
    JobResult,
    ProofKeyRequest,
    Provider,
    ProviderGpu,
    VerificationUnit,
)
from api.services.gpu_challenges import offered_clause
from api.services.lease_lookup import job_lease
from api.services.unit_feed import unit_result_row
from api.services.write_once import store_once
from proofnet.messages.verification import (
    CPU,
    VerificationError,
    VerificationReport,
    VerificationTask,
)

MAX_PENDING_LISTED = 20
MAX_CANDIDATES = 1000


@dataclass(frozen=True)
class Candidate:
    worker_key: str
    payout_address: str


@dataclass(frozen=True)
class PendingTask:
    row_id: int
    task: VerificationTask
    spec: dict[str, object]
    files: list[tuple[str, JobResult]]  # (the task's name for it, the upload)
    # Key requests naming this verifier for the lease: the grants of sealed proof files.
    key_requests: list[int]


def candidates(
    session: Session, config: ApiConfig, device_class: str, exclude: str, now: datetime
) -> list[Candidate]:
    """Workers that asked for verification tasks within the config's online window and can
    replay a proof made on `device_class` (any of them for a job that leased no GPU),
    leaving out worker `exclude` and every worker paid to its address. A GPU model counts
    only on GPUs offered by the same rule as for leases (`offered_clause`): a registration
    naming a model the API's checks failed, or never checked where they are required, does
    not make its worker a verifier of that model."""
    excluded = session.exec(select(Provider).where(Provider.worker_key == exclude)).first()
    online_since = now - timedelta(seconds=config.verifier_online_s)
    stmt = select(Provider).where(col(Provider.verifies_at) >= online_since)
    if device_class != CPU:
        with_model = select(ProviderGpu.provider_id).where(
            ProviderGpu.model == device_class, offered_clause(config, now)
        )
        stmt = stmt.where(col(Provider.id).in_(with_model))
    found = []
    for p in session.exec(stmt.order_by(col(Provider.worker_key)).limit(MAX_CANDIDATES)).all():
        if p.worker_key == exclude or (
            excluded is not None and p.payout_address == excluded.payout_address
        ):
            continue
        found.append(Candidate(p.worker_key, p.payout_address))
    return found


def record_task(
    session: Session, oracle_key: str, task: VerificationTask, now: datetime
) -> VerificationUnitState:
    """Keep an oracle's task for its verifier (the same task twice: one unit)."""
    if task.oracle_key != oracle_key:
        raise Forbidden("an oracle posts only verification tasks it signed itself")
    try:
        task.verify({oracle_key})
    except VerificationError as e:
        raise BadRequest(str(e)) from e
    existing = session.exec(
        select(VerificationUnit).where(VerificationUnit.digest == task.digest)
    ).first()
    if existing is not None:
        return _state(existing)
    try:
        job, lease = job_lease(session, task.job_id, task.nonce, task.provider)
    except NotFound:
        job_lease(session, task.job_id, task.nonce)  # NotFound: no such lease at all
        raise BadRequest("the task names another provider than the lease's") from None
    provider = session.get(Provider, lease.provider_id)
    if provider is None or provider.worker_key != task.provider:
        raise BadRequest("the task names another provider than the lease's")
    verifier = session.exec(select(Provider).where(Provider.worker_key == task.verifier)).first()
    if verifier is None:
        raise BadRequest(f"the verifier {task.verifier} is not a registered worker")
    if verifier.id == provider.id or verifier.payout_address == provider.payout_address:
        raise BadRequest("a verifier is another worker than the provider, paid elsewhere")
    if task.replays:
        uploads = {
            r.name
            for r in session.exec(select(JobResult).where(JobResult.lease_id == lease.id)).all()
        }
        missing = [name for name in task.files if task.lease_name(name) not in uploads]
        if missing:
            raise BadRequest(f"the lease uploaded no {', '.join(repr(m) for m in missing[:5])}")
    else:
        _check_inputs(session, job, task)
    assert job.id is not None and lease.id is not None
    assert provider.id is not None and verifier.id is not None
    row = VerificationUnit(
        digest=task.digest,
        job_id=job.id,
        lease_id=lease.id,
        provider_id=provider.id,
        verifier_id=verifier.id,
        oracle_key=oracle_key,
        task=task.to_json(),
        created_at=now,
    )
    session.add(row)
    try:
        session.commit()
    except IntegrityError:  # the same task, posted concurrently
        session.rollback()
        row = session.exec(
            select(VerificationUnit).where(VerificationUnit.digest == task.digest)
        ).one()
    return _state(row)


@dataclass(frozen=True)
class VerificationUnitState:
    id: int
    digest: str
    report: dict[str, object] | None
    # When the task was first posted: an oracle redraws a verifier silent for too long.
    created_at: datetime


def _state(row: VerificationUnit) -> VerificationUnitState:
    assert row.id is not None
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=UTC)
    return VerificationUnitState(row.id, row.digest, row.report, created)


def state(session: Session, digest: str) -> VerificationUnitState:
    row = session.exec(select(VerificationUnit).where(VerificationUnit.digest == digest)).first()
    if row is None:
        raise NotFound(f"no verification task {digest}")
    return _state(row)


def _check_inputs(session: Session, job: Job, task: VerificationTask) -> None:
    """A recomputation's files are the input units' completed uploads (`units/<i>/<name>`),
    each the checkpoint the task names in `inputs`."""
    for name, digest in zip(task.files, task.inputs, strict=True):
        try:
            row = unit_result_row(session, job, name)
        except NotFound as e:
            raise BadRequest(str(e)) from e
        if row.sha256 != digest:
            raise BadRequest(f"{name!r} is not the input checkpoint {digest} the task names")


def _files(
    session: Session, row: VerificationUnit, names: tuple[str, ...]
) -> list[tuple[str, JobResult]]:
    """The uploads the task names, each with the task's name for it: the lease's for a
    replay, the input units' completed ones for a recomputation."""
    task = VerificationTask.from_json(row.task)
    if not task.replays:
        job = session.get(Job, row.job_id)
        assert job is not None
        found = []
        for name in names:
            try:
                found.append((name, unit_result_row(session, job, name)))
            except NotFound:
                continue
        return found
    inner = {task.lease_name(n): n for n in names}
    uploads = session.exec(
        select(JobResult).where(
            JobResult.lease_id == row.lease_id, col(JobResult.name).in_(list(inner))
        )
    ).all()
    by_name = {inner[r.name]: r for r in uploads}
    return [(n, by_name[n]) for n in names if n in by_name]


def pending_for(session: Session, verifier: Provider, now: datetime) -> list[PendingTask]:
    """This worker's tasks not reported yet, oldest first, with what replaying them needs.
    Asking marks the worker as one that verifies (a candidate for the next draws)."""
    verifier.verifies_at = now
    session.add(verifier)
    session.commit()
    rows = session.exec(
        select(VerificationUnit)
        .where(
            VerificationUnit.verifier_id == verifier.id,
            col(VerificationUnit.reported_at).is_(None),
        )
        .order_by(col(VerificationUnit.id))
        .limit(MAX_PENDING_LISTED)
    ).all()
    pending = []
    for row in rows:
        assert row.id is not None
        task = VerificationTask.from_json(row.task)
        job = session.get(Job, row.job_id)
        assert job is not None
        requests = session.exec(
            select(ProofKeyRequest.id).where(
                ProofKeyRequest.lease_id == row.lease_id,
                ProofKeyRequest.recipient_key == verifier.worker_key,
            )
        ).all()
        pending.append(
            PendingTask(
                row.id,
                task,
                job.spec,
                _files(session, row, task.files),
                [int(i) for i in requests if i is not None],
            )
        )
    return pending


def _own_row(session: Session, verifier: Provider, unit_id: int) -> VerificationUnit:
    row = session.get(VerificationUnit, unit_id)
    if row is None or row.verifier_id != verifier.id:
        raise NotFound(f"no verification task {unit_id} for this worker")
    return row


def task_file(session: Session, verifier: Provider, unit_id: int, name: str) -> JobResult:
    """A proof file the task names, for its verifier only (the bytes as uploaded: sealed
    ones stay sealed; their keys come by a key grant)."""
    row = _own_row(session, verifier, unit_id)
    for named, upload in _files(session, row, (name,)):
        if named in row.task.get("files", ()):
            return upload
    raise NotFound(f"verification task {unit_id} names no file {name!r}")


def record_report(
    session: Session, verifier: Provider, unit_id: int, raw: object, now: datetime
) -> VerificationUnitState:
    """The verifier's signed report; reporting twice alike is one report."""
    row = _own_row(session, verifier, unit_id)
    task = VerificationTask.from_json(row.task)
    try:
        report = VerificationReport.from_json(raw)
        report.verify_for(task)
    except VerificationError as e:
        raise BadRequest(str(e)) from e
    store_once(session, row, "report", report.to_json(), now, f"verification task {unit_id}")
    return _state(row)
