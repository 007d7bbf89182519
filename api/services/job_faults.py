"""Stopping a lease for the job's fault, on the oracle quorum's signed word.

An oracle whose early replay found the job at fault (its trainer does not load, or two
replays of segment 1 disagree: `oracle.verification.early`) posts its signed verdict
(`proofnet.messages.job_fault.JobFaultVerdict`). Each is checked in turn (`CHECKS`, each with
its reason) and kept, one per oracle key and lease; the lease stops only once
`config.oracle_threshold` distinct oracle keys of the deployment's set signed a stop of that
very lease. The caller's own word counts for nothing: only signatures do, and a caller posts
only a verdict it signed itself (the request's signer is the verdict's oracle key).

A stopped lease records why, when, and how many segments its uploaded prefix committed then
(`stop_segments`): its heartbeat answer tells the worker to stop (`LeaseStop`), the worker
attests the segments it committed, and the oracles pay a partial proof of such a lease only,
and for those segments at most (`oracle.verification.proof_checks`, `verify._check_amount`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, Forbidden, NotFound
from api.models import Job, JobFaultVote, Lease
from api.services.resume import committed_prefix
from api.storage import BlobStore
from proofnet.messages.claim import LeaseStop
from proofnet.messages.job_fault import STOP_JOB_FAULT, JobFaultError, JobFaultVerdict


@dataclass(frozen=True)
class JobFaultState:
    """Where a lease's stop stands: the oracles that signed it, the threshold, and the stop
    once reached."""

    job_id: str
    nonce: str
    attempt: int
    oracles: tuple[str, ...]
    threshold: int
    stop: LeaseStop | None


@dataclass(frozen=True)
class _Posted:
    caller: str
    verdict: JobFaultVerdict
    config: ApiConfig


Check = Callable[[_Posted], str | None]


def _check_own(posted: _Posted) -> str | None:
    # A caller's word is not a verdict: an oracle relays only what it signed itself.
    if posted.verdict.oracle_key != posted.caller:
        return "an oracle posts only job-fault verdicts it signed itself"
    return None


def _check_signed_by_oracle_set(posted: _Posted) -> str | None:
    # Only the deployment's oracles count toward the quorum, each by its own signature.
    try:
        posted.verdict.verify(posted.config.oracle_keys)
    except JobFaultError as exc:
        return str(exc)
    return None


CHECKS: tuple[Check, ...] = (_check_own, _check_signed_by_oracle_set)


def _lease(session: Session, verdict: JobFaultVerdict) -> tuple[Job, Lease]:
    """The whole-job lease the verdict names (job, nonce and attempt: never another's)."""
    job = session.exec(select(Job).where(Job.job_id == verdict.job_id)).first()
    if job is None:
        raise NotFound(f"no job {verdict.job_id}")
    lease = session.exec(
        select(Lease)
        .where(
            Lease.job_id == job.id,
            Lease.nonce == verdict.nonce,
            Lease.attempt == verdict.attempt,
            col(Lease.unit_id).is_(None),
        )
        .order_by(col(Lease.id).desc())
    ).first()
    if lease is None or lease.id is None:
        raise NotFound(
            f"job {verdict.job_id} has no lease with nonce {verdict.nonce} "
            f"and attempt {verdict.attempt}"
        )
    return job, lease


def lease_stop(lease: Lease) -> LeaseStop | None:
    """What a stopped lease's heartbeat answer says (None while it runs on)."""
    if lease.stop_reason is None:
        return None
    return LeaseStop(
        reason=lease.stop_reason, message=lease.stop_message, segments=lease.stop_segments or 0
    )


def stopped_for_job_fault(lease: Lease) -> bool:
    """Whether the oracle quorum stopped `lease` for the job's fault: its results go to the
    submitter (the fault is the job's), its provider is paid for the segments it committed."""
    return lease.stop_reason == STOP_JOB_FAULT


def job_fault_of(session: Session, job: Job) -> str | None:
    """Why the oracle quorum stopped one of the job's whole-job leases for the job's fault,
    or None: the verdict a results gate reads (the fault is the job's, so its results and
    checkpoints go to the submitter). Only a stop the quorum's signed votes made counts."""
    lease = session.exec(
        select(Lease)
        .where(Lease.job_id == job.id, Lease.stop_reason == STOP_JOB_FAULT)
        .order_by(col(Lease.id).desc())
    ).first()
    return None if lease is None else lease.stop_message or STOP_JOB_FAULT


def stop_verdicts(session: Session, lease: Lease) -> list[JobFaultVerdict]:
    """The signed verdicts kept for `lease`, oldest first: once it stopped, what the oracle
    feed serves and the settlement publishes as the stop's evidence
    (`proofnet.messages.stop_evidence`)."""
    rows = session.exec(
        select(JobFaultVote).where(JobFaultVote.lease_id == lease.id).order_by(col(JobFaultVote.id))
    ).all()
    return [JobFaultVerdict.from_json(r.verdict) for r in rows]


def _state(job: Job, lease: Lease, votes: list[JobFaultVerdict], threshold: int) -> JobFaultState:
    return JobFaultState(
        job_id=job.job_id,
        nonce=lease.nonce,
        attempt=lease.attempt,
        oracles=tuple(sorted({v.oracle_key for v in votes})),
        threshold=threshold,
        stop=lease_stop(lease),
    )


def record_verdict(
    session: Session,
    config: ApiConfig,
    store: BlobStore,
    caller: str,
    verdict: JobFaultVerdict,
    now: datetime,
) -> JobFaultState:
    """Keep an oracle's signed verdict (the same oracle twice: one vote) and stop the lease
    once the threshold of distinct oracle keys signed it."""
    posted = _Posted(caller, verdict, config)
    for check in CHECKS:
        why = check(posted)
        if why is not None:
            raise Forbidden(why) if check is _check_own else BadRequest(why)
    job, lease = _lease(session, verdict)
    # The row lock orders concurrent votes: the one that reaches the threshold stops it once.
    session.exec(select(Lease).where(Lease.id == lease.id).with_for_update()).one()
    if lease.ended_at is not None and lease.stop_reason is None:
        raise Conflict(f"the lease already ended ({lease.outcome}): there is nothing to stop")
    existing = session.exec(
        select(JobFaultVote).where(
            JobFaultVote.lease_id == lease.id, JobFaultVote.oracle_key == verdict.oracle_key
        )
    ).first()
    if existing is None:
        assert lease.id is not None
        session.add(
            JobFaultVote(
                lease_id=lease.id,
                oracle_key=verdict.oracle_key,
                digest=verdict.digest,
                verdict=verdict.to_json(),
                created_at=now,
            )
        )
        try:
            session.flush()
        except IntegrityError:  # the same oracle's verdict, posted concurrently
            session.rollback()
            return _state(job, lease, stop_verdicts(session, lease), config.oracle_threshold)
    votes = stop_verdicts(session, lease)
    agreeing = {v.oracle_key for v in votes}
    if lease.stop_reason is None and len(agreeing) >= config.oracle_threshold:
        prefix = committed_prefix(session, store, lease)
        lease.stop_reason = STOP_JOB_FAULT
        lease.stop_message = f"{verdict.reason}: {verdict.message}"[:2000]
        lease.stopped_at = now
        # The early replay needed segment 1 committed: a prefix unreadable now pays that one.
        lease.stop_segments = max(1, prefix.segments if prefix is not None else 1)
        job.progress_message = f"stopped: job's fault: {verdict.message}"[:500]
        job.updated_at = now
        job.version += 1
        session.add_all([lease, job])
    session.commit()
    return _state(job, lease, votes, config.oracle_threshold)
