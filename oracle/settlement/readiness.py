"""When the escrow of a topology job (or of a resumed job) is settled: once, when the job
is over.

A resumed single-unit job's attempts are paid like units: the claims of its lost attempts
and the completing attempt's attestation (each names its attempt: `Attestation.segments`)
wait for the job's end and are settled together, in one entry; `undecided_attempts` is
the rule for them that `undecided` is for units.

A topology job's units are paid from its one escrow, in one settlement entry (one payout
output per verified unit, the rest refunded to the submitter). The escrow is a single UTxO,
so it can be settled only once: settling while units still run would refund what they are
about to earn. `JobEndReadiness.ready` says when the wait is over:

- the API reports the job over (completed, stopped, failed or cancelled), and every unit it
  reports completed has an attestation here that is payable, or rejected with no other
  attestation of that unit still being verified; or
- the job is over and `grace_s` has passed since this oracle first saw it so (a provider
  whose attestation never arrives does not hold the others' payouts forever); or
- the escrow's deadline is less than `deadline_margin_s` away, whatever the job's state:
  after the deadline the escrow can only be refunded, so what is verified is paid now.

When the job is over, a verified unit attestation whose lease is no longer the one the API
counts for its unit (a node of a cluster attempt that failed after the node completed) is
rejected (`lease_superseded`): it frees the unit for the attestation of the lease that
stands, which waits for that (see `oracle.verification.unit_checks.check_superseded`).

The time a job was first seen over is kept in `settlement_job_ends` (across restarts). The
API is asked about a job that is not over at most every `recheck_s` seconds.

Co-signers apply the same rule before they sign (`refusal`), from their own read of the API
feed, their own store and their own clock, so a dishonest proposer cannot settle a running
job's escrow early (paying the units verified so far and refunding the rest while later
stages still run). A co-signer signs when the escrow's deadline is less than
`deadline_margin_s` away, or when the job is over and every unit the API reports completed
is either paid by the batch or decided in the co-signer's own store, or when `grace_s` has
passed since the co-signer first saw the job over. Before judging, it rejects the
attestations of superseded leases in its own store exactly as the proposer does
(`release_superseded`): both read the same fact, which lease the API counts for the unit.

How the two clocks interact. Nothing is exchanged between oracles but the batch, so each
judges with its own clock and its own first sighting of the job's end:

- an honest batch of a job that is over and whose completed units are all in the batch
  needs no clock at all: every co-signer signs at once;
- a batch the proposer builds after its grace period without some unit's attestation is
  refused by a co-signer until its own grace period has passed since it first saw the job
  over (at the latest, its first review of the batch; kept across restarts). The proposer
  retries after the refusal cool-down, so such a batch is delayed by at most one more grace
  period, never refused for good;
- the deadline margin is read by both from the same escrow datum; clocks that disagree by
  `d` seconds delay a near-deadline batch by about `d` (and a retry). Whatever else holds,
  both sign once the margin is reached, so no honest batch waits past it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pycardano import TransactionOutput
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from chain.contracts import types as t
from chain.offchain.builders.onchain import datum_cbor
from oracle.inputs.feed import ApiFeed, FeedError, JobInfo
from oracle.inputs.feed_units import JOB_OVER_STATUSES
from oracle.models import (
    PAYABLE_STATUSES,
    RECEIVED,
    REJECTED,
    UNPROVEN,
    VERIFIED,
    AttestationRecord,
)
from oracle.verification.lost_attempts import LOST_OUTCOMES
from oracle.verification.unit_checks import LEASE_SUPERSEDED, attested_nonce

from .models import JobEnd
from .ports import ChainUnavailable, ChainView, OutRef, UnitEscrow

log = logging.getLogger("oracle.settlement")


@dataclass(frozen=True)
class ReadinessPolicy:
    grace_s: float = 600.0
    deadline_margin_s: float = 1800.0
    recheck_s: float = 10.0

    def __post_init__(self) -> None:
        if self.grace_s < 0 or self.deadline_margin_s < 0 or self.recheck_s < 0:
            raise ValueError("readiness times must not be negative")


@dataclass
class JobEndReadiness:
    """`Readiness` over the API feed, the chain (escrow deadlines) and the oracle's store."""

    feed: ApiFeed
    chain: ChainView
    db: Engine
    policy: ReadinessPolicy = field(default_factory=ReadinessPolicy)
    clock: Callable[[], float] = field(default=time.time)
    _deadlines: dict[str, int] = field(default_factory=dict)
    _asked: dict[str, float] = field(default_factory=dict)

    def ready(self, group: UnitEscrow) -> bool:
        ref = str(group.escrow)
        now = self.clock()
        if self._deadline_near(group.escrow, now):
            # Settled now whatever the job's state; a superseded lease's attestation is not
            # paid here either (co-signers would refuse it). The API being unreachable does
            # not hold this settlement back: after the deadline only a refund is possible.
            job = self._read(group.job_id, ref)
            if job is not None:
                self.release_superseded(ref, job)
            log.info(
                "escrow %s: its deadline is near; settling its verified unit(s) now",
                ref,
                extra={"job": "readiness", "escrow": ref, "job_id": group.job_id},
            )
            return True
        asked = self._asked.get(ref)
        if asked is not None and now - asked < self.policy.recheck_s:
            return False
        self._asked[ref] = now
        job = self._read(group.job_id, ref)
        if job is None or job.status not in JOB_OVER_STATUSES:
            return False
        ended = self._ended(ref, job, now)
        if self.release_superseded(ref, job):
            return False  # their units wait for the attestations of the leases that stand
        if now - ended >= self.policy.grace_s:
            return True
        waiting = self.undecided(ref, job)
        attempts = self.undecided_attempts(ref, job)
        if waiting or attempts:
            log.info(
                "job %s is %s; escrow %s waits for the attestations of unit(s) %s, attempt(s) %s",
                job.job_id,
                job.status,
                ref,
                waiting,
                attempts,
                extra={"job": "readiness", "escrow": ref},
            )
            return False
        return True

    def refusal(
        self,
        escrow: OutRef,
        job_id: str,
        bundled: Collection[int],
        attempts: Collection[int] = (),
    ) -> str | None:
        """Why a co-signer must not sign a batch that settles `escrow` of job `job_id` paying
        the units `bundled` (whose attestations the co-signer verifies itself), or None when
        the rule above allows settling it now. Reads the API afresh (a co-signer is asked
        rarely, and a stale "running" would refuse an honest batch) and may reject this
        oracle's own attestations of superseded leases, as the proposer does."""
        ref = str(escrow)
        now = self.clock()
        if self._deadline_near(escrow, now):
            job = self._read(job_id, ref)
            if job is not None:
                self.release_superseded(ref, job)
            return None
        try:
            job = self.feed.job(job_id)
        except FeedError as exc:
            return f"cannot ask the API whether job {job_id} is over: {exc}"
        if job is None:
            return f"the API does not know job {job_id}"
        if job.status not in JOB_OVER_STATUSES:
            return (
                f"job {job_id} is {job.status} in this oracle's read of the API: escrow {ref} "
                "is settled once the job is over (or once its deadline is less than "
                f"{self.policy.deadline_margin_s:.0f}s away), not while its units still run"
            )
        ended = self._ended(ref, job, now)
        self.release_superseded(ref, job)
        waited = now - ended
        if waited >= self.policy.grace_s:
            return None
        paid = set(bundled)
        waiting = [i for i in self.undecided(ref, job) if i not in paid]
        lost = [n for n in self.undecided_attempts(ref, job) if n not in set(attempts)]
        if waiting or lost:
            what = f"unit(s) {waiting}" if waiting else f"attempt(s) {lost}"
            return (
                f"job {job_id} is {job.status}, but {what} completed or proved segments and "
                "are neither paid by the batch nor decided by this oracle; it signs without "
                f"them {self.policy.grace_s - waited:.0f}s from now (the grace period since "
                "it first saw the job over)"
            )
        return None

    def undecided(self, ref: str, job: JobInfo) -> list[int]:
        """Units the API reports completed whose attestation has no final verdict here."""
        with Session(self.db) as session:
            rows = session.exec(
                select(AttestationRecord.unit_index, AttestationRecord.status).where(
                    AttestationRecord.escrow_ref == ref,
                    col(AttestationRecord.unit_index).is_not(None),
                )
            ).all()
        states: dict[int, set[str]] = {}
        for index, status in rows:
            if index is not None:
                states.setdefault(int(index), set()).add(str(status))
        waiting = []
        for unit in job.units:
            if not unit.completed:
                continue
            seen = states.get(unit.index, set())
            payable = bool(seen & set(PAYABLE_STATUSES))
            refused = bool({REJECTED, UNPROVEN} & seen) and RECEIVED not in seen
            if not (payable or refused):
                waiting.append(unit.index)
        return waiting

    def undecided_attempts(self, ref: str, job: JobInfo) -> list[int]:
        """Attempts of a resumed job that proved segments (the completing one; a lost one
        the next resumed from) whose attestation has no final verdict here: the escrow
        pays them all in one entry, so it waits for each (or for the grace period: a lost
        provider that left no claim is not paid)."""
        if job.units or not any(a.resumed_from is not None for a in job.attempts):
            return []
        with Session(self.db) as session:
            rows = session.exec(
                select(AttestationRecord.attempt, AttestationRecord.status).where(
                    AttestationRecord.escrow_ref == ref,
                    col(AttestationRecord.attempt).is_not(None),
                )
            ).all()
        states: dict[int, set[str]] = {}
        for number, status in rows:
            if number is not None:
                states.setdefault(int(number), set()).add(str(status))
        waiting = []
        for attempt in job.attempts:
            last = attempt.last_segment
            proved = attempt.outcome == "completed" or (
                attempt.outcome in LOST_OUTCOMES
                and last is not None
                and last >= attempt.first_segment
            )
            if not proved:
                continue
            seen = states.get(attempt.attempt, set())
            payable = bool(seen & set(PAYABLE_STATUSES))
            refused = REJECTED in seen and RECEIVED not in seen
            if not (payable or refused):
                waiting.append(attempt.attempt)
        return waiting

    def release_superseded(self, ref: str, job: JobInfo) -> list[int]:
        """Reject the verified unit attestations of `ref` whose lease is not the completing
        lease the API reports for their unit; their ids."""
        released = []
        with Session(self.db) as session:
            rows = session.exec(
                select(AttestationRecord).where(
                    AttestationRecord.escrow_ref == ref,
                    AttestationRecord.status == VERIFIED,
                    col(AttestationRecord.unit_index).is_not(None),
                )
            ).all()
            for row in rows:
                info = None if row.unit_index is None else job.unit(row.unit_index)
                lease = None if info is None or not info.completed else info.lease
                if lease is not None and attested_nonce(row.cose) == lease.nonce:
                    continue
                row.status, row.payable_escrow = REJECTED, None
                row.reason = LEASE_SUPERSEDED
                row.message = (
                    f"the API no longer counts the lease of unit {row.unit_index} this "
                    "attestation was made under"
                )
                row.updated_at = datetime.now(UTC)
                session.add(row)
                assert row.id is not None
                released.append(row.id)
            session.commit()
        if released:
            log.warning(
                "escrow %s: attestations %s are of superseded leases and are not paid",
                ref,
                released,
                extra={"job": "readiness", "escrow": ref},
            )
        return released

    def _read(self, job_id: str, ref: str) -> JobInfo | None:
        """The job as the API reports it now, or None (logged) when it cannot be read."""
        try:
            return self.feed.job(job_id)
        except FeedError as exc:
            log.warning(
                "cannot ask the API whether job %s is over: %s",
                job_id,
                exc,
                extra={"job": "readiness", "escrow": ref},
            )
            return None

    def _deadline_near(self, escrow: OutRef, now: float) -> bool:
        deadline_ms = self._deadline(escrow)
        return deadline_ms is not None and deadline_ms / 1000 - now <= self.policy.deadline_margin_s

    def _ended(self, ref: str, job: JobInfo, now: float) -> float:
        with Session(self.db) as session:
            row = session.get(JobEnd, ref)
            if row is not None:
                return row.seen_at
            session.add(JobEnd(escrow_ref=ref, job_id=job.job_id, status=job.status, seen_at=now))
            try:
                session.commit()
            except IntegrityError:  # recorded by another process meanwhile: its time stands
                session.rollback()
                row = session.get(JobEnd, ref)
                return now if row is None else row.seen_at
        log.info(
            "job %s is %s: its escrow %s is settled once its units are decided",
            job.job_id,
            job.status,
            ref,
            extra={"job": "readiness", "escrow": ref},
        )
        return now

    def _deadline(self, escrow: OutRef) -> int | None:
        """The escrow datum's deadline (POSIX ms), or None while the chain cannot tell."""
        ref = str(escrow)
        if ref in self._deadlines:
            return self._deadlines[ref]
        try:
            raw = self.chain.output_cbor(escrow)
        except ChainUnavailable:
            return None
        if raw is None:
            return None
        try:
            output = TransactionOutput.from_cbor(raw)
            datum = t.EscrowDatum.from_cbor(datum_cbor(output.datum))
        except Exception:  # not an escrow datum: the builder refuses the escrow itself
            return None
        self._deadlines[ref] = int(datum.deadline)
        return self._deadlines[ref]
