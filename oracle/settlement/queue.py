"""`ClaimQueue` over the intake's attestation rows (`oracle.models.AttestationRecord`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlmodel import Session, col, select

from oracle.models import (
    BATCHED,
    PAYABLE_STATUSES,
    REJECTED,
    SETTLED,
    VERIFIED,
    AttestationRecord,
)

from .ports import Claim, OutRef

_MOVES = (VERIFIED, BATCHED, SETTLED, REJECTED)
# Stable reason code for attestations whose escrow was refunded or cancelled under them.
ESCROW_GONE = "escrow_spent"


def claim_of(row: AttestationRecord) -> Claim:
    assert row.id is not None
    return Claim(
        attestation_id=row.id,
        escrow=OutRef(row.escrow_tx_id, row.escrow_index),
        leaf_hash=bytes.fromhex(row.leaf_hash),
        cose=row.cose,
        amount=row.amount,
        payout_address=row.payout_address,
        queued_at=_posix(row.received_at),
    )


def _posix(stamp: datetime) -> float:
    # SQLite hands back naive datetimes; the intake stores UTC.
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


class AttestationQueue:
    """Verified attestations are the queue; the engine moves them along with its intents."""

    def payable(self, session: Session, limit: int) -> list[Claim]:
        rows = session.exec(
            select(AttestationRecord)
            .where(AttestationRecord.status == VERIFIED)
            .order_by(col(AttestationRecord.received_at), col(AttestationRecord.id))
            .limit(limit)
        ).all()
        return [claim_of(r) for r in rows]

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
                row.payable_escrow = row.escrow_ref
            session.add(row)
        session.flush()

    def count(self, session: Session, status: str) -> int:
        from sqlalchemy import func

        result = session.exec(
            select(func.count())
            .select_from(AttestationRecord)
            .where(AttestationRecord.status == status)
        ).one()
        return int(result)
