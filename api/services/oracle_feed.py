"""What the oracle reads about jobs and workers, and the submitter's escrow record.

The feed hands the oracle the facts it cannot see on chain: the job spec (as the canonical
JSON its id hashes), the escrow out-ref the submitter recorded, the lease that completed the
job (worker key, payout address from the provider's binding, the nonce revealed at claim,
GPUs leased, start and completion times) and the SHA-256 of every uploaded result. A job
with a topology has these per unit instead (`units`, see api/services/unit_feed.py).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.errors import Conflict, NotFound
from api.models import Job, JobEscrow, JobResult, Lease, Provider, User
from api.services import auctions, job_faults, rate_cards, resume, unit_feed
from api.services.jobs import get_job
from api.services.leases import leases_started
from api.services.sealing_keys import sealing_key_for_job
from chain.offchain.escrow_terms import EscrowFacts
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.result_paths import split_attempt_result_name
from proofnet.messages.verification import PREFIX_FILE


def _iso(at: datetime) -> str:
    # SQLite hands datetimes back naive; every time the API stores is UTC.
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).isoformat()


def completing_lease(session: Session, job: Job) -> Lease | None:
    return session.exec(
        select(Lease)
        # A unit's lease completes a unit, never the job (see api.services.unit_feed).
        .where(Lease.job_id == job.id, Lease.outcome == "completed", col(Lease.unit_id).is_(None))
        .order_by(col(Lease.id).desc())
    ).first()


def first_lease(session: Session, job: Job) -> Lease | None:
    """The job's first lease (of the job or any of its units): when work on it started."""
    return session.exec(
        select(Lease).where(Lease.job_id == job.id).order_by(col(Lease.created_at), col(Lease.id))
    ).first()


def job_feed(session: Session, job_id: str) -> dict[str, Any]:
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    spec = JobSpec.from_dict(job.spec)
    escrow = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    lease = completing_lease(session, job)
    started = first_lease(session, job)
    lease_view = None
    results: dict[str, str] = {}
    if lease is not None:
        provider = session.get(Provider, lease.provider_id)
        assert provider is not None and lease.ended_at is not None
        lease_view = {
            "worker_key": provider.worker_key,
            "payout_address": provider.payout_address,
            "nonce": lease.nonce,
            "gpus": job.gpu_count,
            "started_at": _iso(lease.created_at),
            "completed_at": _iso(lease.ended_at),
            "attempt": lease.attempt,
            # The checked GPU models the lease was made on (null before the GPU checks).
            "gpu_models": lease.gpu_models,
            # Set when the oracle quorum stopped the lease for the job's fault: its partial
            # proof is accepted, paid for the segments committed by the stop at most.
            "stop": None
            if lease.stop_reason is None or lease.stopped_at is None
            else {
                "reason": lease.stop_reason,
                "segments": lease.stop_segments or 1,
                "stopped_at": _iso(lease.stopped_at),
                # The oracles' signed verdicts that stopped it: the stop's evidence.
                "verdicts": [v.to_json() for v in job_faults.stop_verdicts(session, lease)],
            },
        }
        rows = session.exec(select(JobResult).where(JobResult.lease_id == lease.id)).all()
        results = {r.name: r.sha256 for r in rows}
    feed: dict[str, Any] = {
        "job_id": job.job_id,
        "spec": spec.canonical_bytes().decode("utf-8"),
        "status": job.status,
        "escrow": None if escrow is None else {"tx_id": escrow.tx_id, "index": escrow.output_index},
        "lease": lease_view,
        "results": results,
        # The document a rate-card spec names: the oracle recomputes the price from it.
        "rate_card": rate_cards.feed_document(session, spec),
        # An auction-priced job's commitments and revealed bids: the oracle re-verifies
        # them and re-runs the clearing rule (proofnet.messages.auction) for winner and price.
        "auction": auctions.feed_auction(session, job),
        # When a provider first leased the job (or a unit of it); null while none has. An
        # oracle co-signs an escrow's cancel only while this is null.
        "work_started_at": None if started is None else _iso(started.created_at),
        # Whether workers seal the job's uploads (its owner registered a sealing key): a
        # verifier then needs the provider's key grant for the proof files it replays.
        "sealed": sealing_key_for_job(session, job) is not None,
    }
    if job.unit_count:
        # A job with a topology is paid per unit: no job-level lease or results.
        feed["units"] = unit_feed.units_feed(session, job)
    else:
        # Each whole-job attempt, with the segments it proved and its proof uploads: a
        # resumed proof is checked against the prefix it resumed (api.services.resume).
        feed["attempts"] = resume.feed_attempts(session, job)
    return feed


# What a worker has uploaded once its run commits segment 1 (worker.checkpoint_upload): the
# committed prefix and the files of checkpoints 0 and 1.
EARLY_FILES = (
    PREFIX_FILE,
    *(f"pot/{i:06d}.{ext}" for i in (0, 1) for ext in ("weights", "optim", "rng.json")),
)
MAX_EARLY_LISTED = 200


def early_commits(session: Session, limit: int = MAX_EARLY_LISTED) -> list[dict[str, Any]]:
    """Running whole-job leases (not resumed ones) of unsealed jobs whose first segment's
    commitment is uploaded, oldest first: what oracles replay early (`oracle.verification.early`). The
    oracle reads each job's attempts and the prefix through the job feed, and judges."""
    uploaded = (
        select(JobResult.lease_id)
        .where(col(JobResult.name).in_(EARLY_FILES))
        .group_by(col(JobResult.lease_id))
        .having(func.count(col(JobResult.name).distinct()) == len(EARLY_FILES))
    )
    rows = session.exec(
        select(Lease, Job)
        .join(Job, col(Job.id) == col(Lease.job_id))
        .where(
            col(Lease.unit_id).is_(None),
            col(Lease.ended_at).is_(None),
            col(Lease.resumed_lease_id).is_(None),
            col(Lease.id).in_(uploaded),
        )
        .order_by(col(Lease.created_at), col(Lease.id))
        .limit(limit)
    ).all()
    return [
        {
            "job_id": job.job_id,
            "attempt": lease.attempt,
            "nonce": lease.nonce,
            # The checked GPU model the lease runs on: verifiers must have it.
            "gpu_model": lease.gpu_models[0] if lease.gpu_models else None,
        }
        for lease, job in rows
        # A sealed job's checkpoints are sealed to its submitter: no verifier could open them.
        if sealing_key_for_job(session, job) is None
    ]


def job_result_row(session: Session, job_id: str, name: str) -> JobResult:
    """An upload of the lease that completed the job (what the attestation covers)."""
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        raise NotFound(f"no job {job_id}")
    if job.unit_count:
        return unit_feed.unit_result_row(session, job, name)
    scoped = split_attempt_result_name(name)
    if scoped is not None:
        found = resume.attempt_result_row(session, job, *scoped)
        if found is None:
            raise NotFound(f"job {job_id} has no attempt upload {name!r}")
        return found
    lease = completing_lease(session, job)
    row = None
    if lease is not None:
        row = session.exec(
            select(JobResult).where(JobResult.lease_id == lease.id, JobResult.name == name)
        ).first()
    if row is None:
        raise NotFound(f"job {job_id} has no completed upload {name!r}")
    return row


def worker_feed(session: Session, worker_key: str, network: str) -> dict[str, Any]:
    provider = session.exec(select(Provider).where(Provider.worker_key == worker_key)).first()
    if provider is None:
        raise NotFound(f"worker {worker_key} is not registered")
    return {
        "worker_key": provider.worker_key,
        "key_id": provider.key_id,
        "payout_address": provider.payout_address,
        "binding": provider.binding,
        "network": network,
        "registered_at": _iso(provider.registered_at),
    }


# --- the submitter records the escrow ---------------------------------------------------


def record_escrow(
    session: Session,
    owner: User,
    job_id: str,
    *,
    tx_id: str,
    index: int,
    found: EscrowFacts,
    now: datetime,
) -> JobEscrow:
    """Record the job's escrow out-ref: an escrow `api.services.payable_escrow` found able
    to pay. It may be replaced only until a lease starts: from then on workers attest
    against it, and a swap would make their attestations fail (`escrow_mismatch`)."""
    job = get_job(session, owner, job_id)
    assert job.id is not None and found.datum is not None
    # The job's row lock orders this against a claim starting a lease meanwhile.
    session.exec(select(Job).where(Job.id == job.id).with_for_update()).one()
    taken = session.exec(
        select(JobEscrow).where(JobEscrow.tx_id == tx_id, JobEscrow.output_index == index)
    ).first()
    if taken is not None and taken.job_id != job.id:
        raise Conflict(f"escrow {tx_id}#{index} is already recorded for another job")
    row = session.exec(select(JobEscrow).where(JobEscrow.job_id == job.id)).first()
    replaced = row is not None and (row.tx_id, row.output_index) != (tx_id, index)
    if replaced and leases_started(session, job):
        assert row is not None
        raise Conflict(
            "a worker has started on this job: its escrow can no longer be replaced "
            f"(recorded: {row.tx_id}#{row.output_index})"
        )
    budget, deadline = found.datum.budget, found.datum.deadline
    if row is None:
        row = JobEscrow(
            job_id=job.id,
            tx_id=tx_id,
            output_index=index,
            budget=budget,
            deadline_ms=deadline,
            recorded_at=now,
        )
    else:
        row.tx_id, row.output_index = tx_id, index
        row.budget, row.deadline_ms, row.recorded_at = budget, deadline, now
    session.add(row)
    try:
        session.commit()
    except IntegrityError as exc:  # a concurrent record of the same out-ref won
        session.rollback()
        raise Conflict(f"escrow {tx_id}#{index} is already recorded") from exc
    return row
