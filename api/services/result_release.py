"""When a lease's results reach the submitter: only with a releasing verdict (issue 12.4).

A submitter who could download the results before the verdict could take them and refund
(the escrow refunds after the deadline whatever happened), so results, result manifests and
the checkpoints among them are served to the submitter only once enough trusted oracles
posted a verdict on the lease's attestation that releases them:

- verified (nobody's fault, or the job's: the job's code could not be replayed and the
  provider is paid for the time used) releases;
- rejected for the job's fault releases (the provider did its part; the job is at fault);
- rejected for the provider's fault, or `unproven` (a disputed segment, see
  docs/protocol.md "Verification"), never releases: the escrow refunds and the submitter
  gets neither the results nor the money back less fees.

Verdicts come only from oracles: each is a request signed with a key of the API's
`oracle_keys` (`record_verdict`'s caller is `api.routes.result_release`), one row per
(lease, oracle). A lease is released when at least `result_release_quorum` distinct oracles
still listed in `oracle_keys` posted a releasing verdict (a key dropped from the config no
longer counts). `release_of` is the one rule; everything that serves results asks it.

I/O: the session it is given; it never contacts an oracle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlmodel import Session, col, select

from api.errors import BadRequest, Conflict
from api.models import Job, JobUnit, Lease, Provider, ResultVerdict
from api.services.lease_lookup import job_lease

VerdictStatus = Literal["verified", "rejected", "unproven"]
STATUSES: frozenset[str] = frozenset({"verified", "rejected", "unproven"})
FAULTS: frozenset[str | None] = frozenset({None, "provider", "job"})

State = Literal["released", "withheld", "waiting"]


class ResultsWithheld(Conflict):
    """The submitter asked for results whose release still waits on (or was refused by)
    the oracles' verdict (409)."""


@dataclass(frozen=True)
class PostedVerdict:
    """One oracle's verdict on the attestation of the lease `nonce` of job `job_id`."""

    job_id: str
    nonce: str
    status: str
    fault: str | None
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ReleasePolicy:
    """Whose verdicts count and how many must release: the API config's `oracle_keys` and
    `result_release_quorum`, built at the edge."""

    trusted: frozenset[str]
    quorum: int = 1


@dataclass(frozen=True)
class Release:
    """Whether a lease's results reach the submitter, and why (`detail`, for people)."""

    state: State
    detail: str
    # Trusted oracles whose verdict releases / refuses, and how many must release.
    releasing: int = 0
    refusing: int = 0
    quorum: int = 1

    @property
    def released(self) -> bool:
        return self.state == "released"


def releases(status: str, fault: str | None) -> bool:
    """Whether one verdict releases the results: verified (nobody's fault or the job's), or
    rejected for the job's fault. A provider's fault and `unproven` never release."""
    if status == "verified":
        return fault in (None, "job")
    if status == "rejected":
        return fault == "job"
    return False


# --- recording --------------------------------------------------------------------------


def _check(verdict: PostedVerdict) -> None:
    """A verdict the rule can read: each check with its reason."""
    checks = (
        (verdict.status in STATUSES, f"status must be one of {sorted(STATUSES)}"),
        (verdict.fault in FAULTS, "fault must be 'provider', 'job' or null"),
        # A verified attestation is nobody's fault or the job's (paid for the time used).
        (
            not (verdict.status == "verified" and verdict.fault == "provider"),
            "a verified attestation is not the provider's fault",
        ),
        # A rejection is always someone's fault (oracle.verification.reasons.fault_of).
        (
            not (verdict.status == "rejected" and verdict.fault is None),
            "a rejection names whose fault it is",
        ),
    )
    for ok, why in checks:
        if not ok:
            raise BadRequest(why)


def record_verdict(
    session: Session, oracle_key: str, verdict: PostedVerdict, now: datetime
) -> ResultVerdict:
    """Store the verdict of oracle `oracle_key` (the caller authenticated the request as
    signed by it); a later verdict of the same oracle on the same lease replaces it."""
    _check(verdict)
    job, lease = job_lease(session, verdict.job_id, verdict.nonce)
    assert job.id is not None and lease.id is not None
    row = session.exec(
        select(ResultVerdict).where(
            ResultVerdict.lease_id == lease.id, ResultVerdict.oracle_key == oracle_key
        )
    ).first() or ResultVerdict(
        job_id=job.id, lease_id=lease.id, oracle_key=oracle_key, status="", recorded_at=now
    )
    row.status, row.fault = verdict.status, verdict.fault
    row.reason, row.message = verdict.reason[:64], verdict.message[:2000]
    row.recorded_at = now
    session.add(row)
    session.commit()
    return row


def lease_of(session: Session, row: ResultVerdict) -> Lease | None:
    return session.get(Lease, row.lease_id)


def completed_by(
    session: Session, job_id: str, provider: Provider
) -> tuple[Job | None, Lease | None]:
    """The job's whole-job lease that `provider` completed (None: it completed none)."""
    job = session.exec(select(Job).where(Job.job_id == job_id)).first()
    if job is None:
        return None, None
    lease = session.exec(
        select(Lease)
        .where(
            Lease.job_id == job.id,
            Lease.provider_id == provider.id,
            Lease.outcome == "completed",
            col(Lease.unit_id).is_(None),
        )
        .order_by(col(Lease.id).desc())
    ).first()
    return job, lease


# --- the rule ---------------------------------------------------------------------------


def release_of(session: Session, lease: Lease | None, policy: ReleasePolicy) -> Release:
    """Whether `lease`'s results are released to the submitter: at least `policy.quorum`
    distinct oracles of `policy.trusted` posted a releasing verdict on its attestation."""
    trusted, quorum = policy.trusted, max(1, policy.quorum)
    if lease is None or lease.id is None:
        return Release("waiting", "no provider has completed the job yet", quorum=quorum)
    rows = session.exec(
        select(ResultVerdict)
        .where(ResultVerdict.lease_id == lease.id)
        .order_by(col(ResultVerdict.id))
    ).all()
    counted = [r for r in rows if r.oracle_key in trusted]
    good = [r for r in counted if releases(r.status, r.fault)]
    bad = [r for r in counted if not releases(r.status, r.fault)]
    if len(good) >= quorum:
        why = "the attestation was verified" if good[0].status == "verified" else ""
        if good[0].fault == "job":
            why = "the fault is the job's"
        return Release("released", why, len(good), len(bad), quorum)
    if bad:
        last = bad[-1]
        fault = f", the {last.fault}'s fault" if last.fault else ""
        return Release(
            "withheld",
            f"results are withheld: the oracles' verdict is {last.status}{fault}"
            f" ({last.reason or 'no reason given'}); they are never released, the escrow"
            " refunds instead",
            len(good),
            len(bad),
            quorum,
        )
    if lease.outcome != "completed":
        return Release(
            "waiting",
            "results are released after the job completes and is verified",
            quorum=quorum,
        )
    return Release(
        "waiting",
        f"results are released once the attestation is verified (or the fault is the job's):"
        f" waiting for the oracles' verdict ({len(good)} of {quorum} releasing verdicts)",
        len(good),
        0,
        quorum,
    )


def require_released(release: Release, what: str) -> None:
    """Refuse (409) to serve `what` to the submitter until its lease is released."""
    if not release.released:
        raise ResultsWithheld(f"{what} is not released to the submitter yet: {release.detail}")


def job_release(session: Session, job: Job, policy: ReleasePolicy) -> Release:
    """Where the release of a whole job stands: its completing lease's, or for a job with a
    topology every completed unit's (released when all are; withheld when one is)."""
    if not job.unit_count:
        lease = session.exec(
            select(Lease)
            .where(
                Lease.job_id == job.id, Lease.outcome == "completed", col(Lease.unit_id).is_(None)
            )
            .order_by(col(Lease.id).desc())
        ).first()
        return release_of(session, lease, policy)
    units = session.exec(select(JobUnit).where(JobUnit.job_id == job.id)).all()
    leases = [session.get(Lease, u.completed_lease_id) for u in units if u.completed_lease_id]
    each = [release_of(session, lease, policy) for lease in leases]
    quorum = max(1, policy.quorum)
    for state in ("withheld", "waiting"):
        for r in each:
            if r.state == state:
                return Release(state, r.detail, r.releasing, r.refusing, quorum)
    running = job.status not in ("completed", "stopped", "failed", "cancelled")
    if not each or (running and len(each) < len(units)):
        done = f"{len(each)} of {len(units)} units completed"
        return Release(
            "waiting", f"each unit's results are released with its verdict ({done})", quorum=quorum
        )
    return Release("released", "every unit's attestation was verified", len(each), 0, quorum)
