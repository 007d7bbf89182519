"""`ClaimQueue` over the intake's attestation rows (`oracle.models.AttestationRecord`).

Single-unit attestations are queued one by one; the unit attestations of a topology job are
queued per escrow (`unit_escrows`), and all of an escrow's are taken at once
(`unit_claims`) when the engine's readiness rule says the job is over."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import func
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
from oracle.verification.verifiers import FEE_EVIDENCE
from proofnet.messages.verification_fee import FeeError, FeeEvidence

from .ports import Claim, OutRef, UnitEscrow

_MOVES = (VERIFIED, BATCHED, SETTLED, REJECTED)
# Stable reason code for attestations whose escrow was refunded or cancelled under them.
ESCROW_GONE = "escrow_spent"


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
        job_id=row.job_id,
        worker_key=row.worker_key,
        fees=tuple(fees),
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


def _as_datetime(value: object) -> datetime:
    # An aggregate (MIN) comes back from SQLite as text, not through the column's type.
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))


def _posix(stamp: datetime) -> float:
    # SQLite hands back naive datetimes; the intake stores UTC.
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


class AttestationQueue:
    """Verified attestations are the queue; the engine moves them along with its intents."""

    def payable(self, session: Session, limit: int) -> list[Claim]:
        rows = session.exec(
            select(AttestationRecord)
            .where(
                AttestationRecord.status == VERIFIED,
                col(AttestationRecord.unit_index).is_(None),
            )
            .order_by(col(AttestationRecord.received_at), col(AttestationRecord.id))
            .limit(limit)
        ).all()
        return claims_of(session, rows)

    def unit_escrows(self, session: Session) -> list[UnitEscrow]:
        rows = session.exec(
            select(  # type: ignore[call-overload]
                col(AttestationRecord.escrow_tx_id),
                col(AttestationRecord.escrow_index),
                col(AttestationRecord.job_id),
                func.count(col(AttestationRecord.id)),
                func.min(col(AttestationRecord.received_at)),
            )
            .where(
                AttestationRecord.status == VERIFIED,
                col(AttestationRecord.unit_index).is_not(None),
            )
            .group_by(
                col(AttestationRecord.escrow_tx_id),
                col(AttestationRecord.escrow_index),
                col(AttestationRecord.job_id),
            )
        ).all()
        found = [
            UnitEscrow(OutRef(tx, int(ix)), str(job), int(n), _posix(_as_datetime(oldest)))
            for tx, ix, job, n, oldest in rows
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
                col(AttestationRecord.unit_index).is_not(None),
                col(AttestationRecord.escrow_ref).in_(refs),
            )
            .order_by(col(AttestationRecord.unit_index), col(AttestationRecord.id))
        ).all()
        return claims_of(session, rows)

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

    def count(self, session: Session, status: str) -> int:
        result = session.exec(
            select(func.count())
            .select_from(AttestationRecord)
            .where(AttestationRecord.status == status)
        ).one()
        return int(result)
