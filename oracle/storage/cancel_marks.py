"""Escrows whose cancel this oracle co-signed (`oracle.models.CancelledEscrow`).

`mark` writes one only while this oracle's own store holds no attestation for the escrow or
its job, in any status (received, rejected or payable): an attestation means a provider did
work, and the cancel path is for escrows no work touched. Once marked, the verification
pipeline rejects every attestation for the escrow (`Reason.ESCROW_CANCELLED`) and the
settlement co-signer refuses batches that spend it, so this oracle never signs both a cancel
and a payout of one escrow. Reads and writes only the oracle's database.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, insert, or_
from sqlalchemy import select as core_select
from sqlalchemy.exc import IntegrityError

from oracle.models import AttestationRecord, CancelledEscrow
from proofnet.when import ms_of, when_text


@dataclass(frozen=True)
class CancelMark:
    escrow_ref: str
    job_id: str
    cancel_tx_id: str
    signed_at: datetime

    def describe(self, now: datetime | None = None) -> str:
        now_ms = ms_of(now or datetime.now(UTC))
        return (
            f"this oracle co-signed the cancel of escrow {self.escrow_ref} "
            f"(tx {self.cancel_tx_id}) at {when_text(ms_of(self.signed_at), now_ms)}; "
            "no attestation for it is paid"
        )


class WorkSeen(Exception):
    """This oracle holds an attestation for the job or escrow: work was done."""


_MARKS = CancelledEscrow.__table__  # type: ignore[attr-defined]
_ATTESTATIONS = AttestationRecord.__table__  # type: ignore[attr-defined]


def _rows(conn: Connection, escrows: Sequence[str]) -> dict[str, CancelMark]:
    rows = conn.execute(
        core_select(
            _MARKS.c.escrow_ref, _MARKS.c.job_id, _MARKS.c.cancel_tx_id, _MARKS.c.signed_at
        ).where(_MARKS.c.escrow_ref.in_(list(escrows)))
    ).all()
    return {str(r[0]): CancelMark(str(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows}


def find(engine: Engine, escrows: Sequence[str]) -> dict[str, CancelMark]:
    """The marks of these escrow out-refs (`<tx id>#<index>`) that exist."""
    if not escrows:
        return {}
    with engine.connect() as conn:
        return _rows(conn, escrows)


def mark(
    engine: Engine, *, escrow: str, job_id: str, cancel_tx_id: str, now: datetime
) -> CancelMark:
    """Mark `escrow` cancelled, or raise `WorkSeen`. Asked again for an escrow already
    marked, answers the existing mark (the co-signer may sign the same cancel twice)."""
    with contextlib.suppress(IntegrityError), engine.begin() as conn:
        # IntegrityError: another process marked it between the read and the write.
        seen = conn.execute(
            core_select(_ATTESTATIONS.c.received_at, _ATTESTATIONS.c.status)
            .where(or_(_ATTESTATIONS.c.escrow_ref == escrow, _ATTESTATIONS.c.job_id == job_id))
            .order_by(_ATTESTATIONS.c.received_at)
            .limit(1)
        ).first()
        if seen is not None:
            raise WorkSeen(
                f"this oracle received an attestation for job {job_id} at "
                f"{when_text(ms_of(seen[0]), ms_of(now))} (now {seen[1]}): work was done"
            )
        if escrow not in _rows(conn, [escrow]):
            conn.execute(
                insert(_MARKS).values(
                    escrow_ref=escrow, job_id=job_id, cancel_tx_id=cancel_tx_id, signed_at=now
                )
            )
    return find(engine, [escrow])[escrow]
