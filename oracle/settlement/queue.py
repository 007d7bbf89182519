"""`ClaimQueue` over the intake's attestation rows (`oracle.models.AttestationRecord`).

Single-unit attestations are queued one by one; the unit attestations of a topology job,
and the attempts of a resumed job (the lost ones' claims and the completing one's), are
queued per escrow (`unit_escrows`), and all of an escrow's are taken at once
(`unit_claims`) when the engine's readiness rule says the job is over."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, func, or_
from sqlmodel import Session, col, select

from oracle.models import (
    BATCHED,
    PAYABLE_STATUSES,
    REJECTED,
    SETTLED,
    VERIFIED,
    AttestationRecord,
    SpotCheckRecord,
)
from oracle.retrieval.ledger import StorageLedger
from oracle.verification.verifiers import FEE_EVIDENCE
from proofnet.messages.stop_evidence import StopEvidence
from proofnet.messages.verification_fee import FeeError, FeeEvidence

from .ports import Claim, OutRef, UnitEscrow

_MOVES = (VERIFIED, BATCHED, SETTLED, REJECTED)
# Stable reason code for attestations whose escrow was refunded or cancelled under them.
ESCROW_GONE = "escrow_spent"
# An attestation whose segments a co-signer's refusal named and this oracle's own replay of
# them confirmed do not replay (`oracle.verification.reasons.Reason.SPOT_CHECK_FAILED`).
DISPUTED_SEGMENTS_FAILED = "spot_check_failed"


def claim_of(row: AttestationRecord, fees: Sequence[FeeEvidence] = ()) -> Claim:
    assert row.id is not None
    return Claim(
        attestation_id=row.id,
        escrow=OutRef(row.escrow_tx_id, row.escrow_index),
        leaf_hash=bytes.fromhex(row.leaf_hash),
        cose=row.cose,
        amount=row.amount,
        payout_address=row.payout_address,
        queued_at=_posix(row.received_at),
        unit=row.unit_index,
        attempt=row.attempt,
        job_id=row.job_id,
        worker_key=row.worker_key,
        fees=tuple(fees),
        stop=None if row.stop_evidence is None else StopEvidence.from_json(row.stop_evidence),
    )


def fee_evidence(session: Session, attestation_ids: Sequence[int]) -> dict[int, list[FeeEvidence]]:
    """The fee evidence of each attestation's passed spot checks (one per verifier): what
    its verifiers are paid on (`oracle.verification.verifiers.with_fee_evidence`)."""
    found: dict[int, list[FeeEvidence]] = {}
    if not attestation_ids:
        return found
    rows = session.exec(
        select(SpotCheckRecord)
        .where(
            col(SpotCheckRecord.attestation_id).in_(list(attestation_ids)),
            SpotCheckRecord.status == "passed",
        )
        .order_by(col(SpotCheckRecord.id))
    ).all()
    for row in rows:
        raw = (row.report or {}).get(FEE_EVIDENCE)
        if raw is None:
            continue
        try:
            evidence = FeeEvidence.from_json(raw)
        except FeeError:
            continue  # written by this oracle; unreadable only across a format change
        have = found.setdefault(row.attestation_id, [])
        if all(e.verifier != evidence.verifier for e in have):
            have.append(evidence)
    return found


def claims_of(session: Session, rows: Sequence[AttestationRecord]) -> list[Claim]:
    fees = fee_evidence(session, [r.id for r in rows if r.id is not None])
    return [claim_of(r, fees.get(r.id or 0, ())) for r in rows]


def _grouped() -> ColumnElement[bool]:
    """Rows settled per escrow once their job is over: units of a topology job, and the
    attempts of a resumed job (`Claim.grouped`)."""
    return or_(
        col(AttestationRecord.unit_index).is_not(None),
        col(AttestationRecord.attempt).is_not(None),
    )


def _as_datetime(value: object) -> datetime:
    # An aggregate (MIN) comes back from SQLite as text, not through the column's type.
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _posix(stamp: datetime) -> float:
    # SQLite hands back naive datetimes; the intake stores UTC.
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


class AttestationQueue:
    """Verified attestations are the queue; the engine moves them along with its intents.

    With a `storage` ledger (`oracle.retrieval.ledger`), a job that keeps storage waits
    while its copies (as the API lists them, not only those a challenge round saw) are in
    their term, and once they all ended the first claim of the job carries the receipts of
    what they earned, paid beside it from the same escrow (which is spent once)."""

    def __init__(self, storage: StorageLedger | None = None) -> None:
        self.storage = storage

    def prepare_storage(self, session_of: Callable[[], AbstractContextManager[Session]]) -> None:
        """Read the API's storage of every job with a verified claim, before the session
        that batches them opens (`StorageLedger.prepare`: no HTTP call inside a database
        transaction). `session_of` opens a short read-only session of the store."""
        if self.storage is None:
            return
        with session_of() as session:
            jobs = session.exec(
                select(AttestationRecord.job_id)
                .where(AttestationRecord.status == VERIFIED)
                .distinct()
            ).all()
        self.storage.prepare([str(j) for j in jobs])

    def _with_storage(self, session: Session, claims: list[Claim]) -> list[Claim]:
        if self.storage is None or not claims:
            return claims
        oldest: dict[str, float] = {}
        for claim in claims:
            oldest[claim.job_id] = min(oldest.get(claim.job_id, claim.queued_at), claim.queued_at)
        held = self.storage.held_jobs(session, oldest)
        out: list[Claim] = []
        carried: set[str] = set()
        for claim in claims:
            if claim.job_id in held:
                continue  # its escrow pays the storage term too: settled after it
            if claim.job_id not in carried:
                carried.add(claim.job_id)
                receipts = self.storage.receipts(session, claim.job_id)
                claim = dataclasses.replace(claim, storage=receipts) if receipts else claim
            out.append(claim)
        return out

    def payable(self, session: Session, limit: int) -> list[Claim]:
        rows = session.exec(
            select(AttestationRecord)
            .where(
                AttestationRecord.status == VERIFIED,
                col(AttestationRecord.unit_index).is_(None),
                col(AttestationRecord.attempt).is_(None),
            )
            .order_by(col(AttestationRecord.received_at), col(AttestationRecord.id))
            .limit(limit)
        ).all()
        return self._with_storage(session, claims_of(session, rows))

    def unit_escrows(self, session: Session) -> list[UnitEscrow]:
        rows = session.exec(
            select(  # type: ignore[call-overload]
                col(AttestationRecord.escrow_tx_id),
                col(AttestationRecord.escrow_index),
                col(AttestationRecord.job_id),
                func.count(col(AttestationRecord.id)),
                func.min(col(AttestationRecord.received_at)),
            )
            .where(AttestationRecord.status == VERIFIED, _grouped())
            .group_by(
                col(AttestationRecord.escrow_tx_id),
                col(AttestationRecord.escrow_index),
                col(AttestationRecord.job_id),
            )
        ).all()
        oldest = {str(job): _posix(_as_datetime(first)) for _tx, _ix, job, _n, first in rows}
        held = set() if self.storage is None else self.storage.held_jobs(session, oldest)
        found = [
            UnitEscrow(OutRef(tx, int(ix)), str(job), int(n), _posix(_as_datetime(oldest)))
            for tx, ix, job, n, oldest in rows
            if str(job) not in held
        ]
        return sorted(found, key=lambda g: (g.oldest, str(g.escrow)))

    def unit_claims(self, session: Session, escrows: Sequence[OutRef]) -> list[Claim]:
        if not escrows:
            return []
        refs = [str(e) for e in escrows]
        rows = session.exec(
            select(AttestationRecord)
            .where(
                AttestationRecord.status == VERIFIED,
                _grouped(),
                col(AttestationRecord.escrow_ref).in_(refs),
            )
            .order_by(
                col(AttestationRecord.unit_index),
                col(AttestationRecord.attempt),
                col(AttestationRecord.id),
            )
        ).all()
        return self._with_storage(session, claims_of(session, rows))

    def mark(self, session: Session, attestation_ids: Sequence[int], status: str) -> None:
        if status not in _MOVES:
            raise ValueError(f"the settlement engine cannot move attestations to {status!r}")
        if not attestation_ids:
            return
        rows = session.exec(
            select(AttestationRecord).where(col(AttestationRecord.id).in_(list(attestation_ids)))
        ).all()
        stamp = datetime.now(UTC)
        for row in rows:
            row.status = status
            row.updated_at = stamp
            if status == REJECTED:
                # Not payable any more: free the escrow slot and say why.
                row.payable_escrow = None
                row.reason = ESCROW_GONE
                row.message = "the escrow was spent by a refund, cancel or foreign transaction"
            elif status in PAYABLE_STATUSES:
                row.payable_escrow = row.payable_key
            session.add(row)
        session.flush()
        if self.storage is not None:
            self.storage.move(session, {r.job_id for r in rows}, status)

    def reject_disputed(
        self, session: Session, attestation_id: int, message: str, reason: str = ""
    ) -> None:
        """Reject a verified attestation whose segments a co-signer's refusal named and this
        oracle's own replay of them confirmed do not replay: the provider's fault, unpaid."""
        row = session.get(AttestationRecord, attestation_id)
        if row is None or row.status != VERIFIED:
            return
        row.status = REJECTED
        row.payable_escrow = None
        row.reason = reason or DISPUTED_SEGMENTS_FAILED
        row.fault = "provider"
        row.message = message[:2000]
        row.updated_at = datetime.now(UTC)
        session.add(row)
        session.flush()

    def add_fees(
        self, session: Session, claims: Sequence[Claim], handed: Sequence[tuple[str, FeeEvidence]]
    ) -> int:
        """Keep the fee evidence a refusing co-signer handed back (the verifiers its own
        verdicts relied on that the batch did not pay) with the attestations of `claims`
        it names, so the next batch pays them; how many were kept. Kept only when the
        evidence holds for that attestation as signed (`fee_refusal`, with the task's own
        oracle: whether that oracle signs the next batch is the builder's check,
        `Claim.with_valid_fees`), and once per verifier."""
        from proofnet.messages.verification_fee import fee_refusal, oracle_key_hash

        by_leaf = {c.leaf_hash.hex(): c for c in claims}
        have = fee_evidence(session, [c.attestation_id for c in claims])
        kept = 0
        for leaf, evidence in handed:
            claim = by_leaf.get(leaf)
            if claim is None:
                continue  # not an attestation of the batch refused
            why = fee_refusal(
                evidence,
                leaf_hash=leaf,
                provider=claim.worker_key,
                job_id=claim.job_id,
                oracle_key_hashes={oracle_key_hash(evidence.task.oracle_key)},
            )
            known = have.setdefault(claim.attestation_id, [])
            if why is not None or any(e.verifier == evidence.verifier for e in known):
                continue
            known.append(evidence)
            session.add(
                SpotCheckRecord(
                    attestation_id=claim.attestation_id,
                    seed="",
                    segments=list(evidence.task.segments),
                    status="passed",
                    message="a co-signer's drawn verifier, whose report its verdict relied on",
                    report={FEE_EVIDENCE: evidence.to_json()},
                    verifier=evidence.verifier,
                    started_at=datetime.now(UTC),
                )
            )
            kept += 1
        session.flush()
        return kept

    def count(self, session: Session, status: str) -> int:
        result = session.exec(
            select(func.count())
            .select_from(AttestationRecord)
            .where(AttestationRecord.status == status)
        ).one()
        return int(result)
