"""What the settlement engine pays storage on: the oracle's accruals as signed receipts.

A job whose copies are still within their term holds its escrow back (its claims are not
payable yet: one escrow is settled once, so the storage is paid with the compute, after the
term). Once every copy of the job ended or failed, each copy that earned something becomes
one `StorageReceipt`, signed by this oracle, paid beside the job's claim in the same
settlement entry (`oracle.settlement.ports.Claim.storage`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime

from nacl.signing import SigningKey
from sqlmodel import Session, col, select

from oracle.models import StorageAccrual
from proofnet.messages.storage import StorageReceipt, StorageReceiptBody, sign_receipt

ACCRUING = "accruing"


def _unix(stamp: datetime) -> int:
    return int((stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp())


class StorageLedger:
    def __init__(self, signing_key: SigningKey, network: str) -> None:
        self.key = signing_key
        self.network = network

    def held_jobs(self, session: Session) -> set[str]:
        """Jobs with a copy still in its term: their escrow must not be settled yet."""
        rows = session.exec(
            select(StorageAccrual.job_id).where(StorageAccrual.status == ACCRUING)
        ).all()
        return set(rows)

    def receipts(self, session: Session, job_id: str) -> tuple[StorageReceipt, ...]:
        """One signed receipt per copy of `job_id` that earned something, not yet batched."""
        rows = session.exec(
            select(StorageAccrual)
            .where(
                StorageAccrual.job_id == job_id,
                col(StorageAccrual.amount) > 0,
                col(StorageAccrual.settlement).is_(None),
                StorageAccrual.status != ACCRUING,
            )
            .order_by(col(StorageAccrual.placement_id))
        ).all()
        oracle = bytes(self.key.verify_key).hex()
        return tuple(
            sign_receipt(
                self.key,
                StorageReceiptBody(
                    network=self.network,  # type: ignore[arg-type]
                    job_id=r.job_id,
                    placement_id=r.placement_id,
                    provider_key=r.provider_key,
                    payout_address=r.payout_address,
                    content_root=r.content_root,
                    size=r.size,
                    ntx_per_gb_month=r.ntx_per_gb_month,
                    placed_at=_unix(r.placed_at),
                    paid_through=_unix(r.paid_through),
                    challenges_passed=max(1, r.challenges_passed),
                    amount=r.amount,
                    oracle_key=oracle,
                ),
            )
            for r in rows
            if r.payout_address
        )

    def move(self, session: Session, job_ids: Collection[str], status: str) -> None:
        """Move the copies of `job_ids` with the attestations they are paid beside:
        batched with them, settled with them, unpaid again when their batch is dropped
        (status "verified") or their escrow is gone ("rejected")."""
        if not job_ids:
            return
        query = select(StorageAccrual).where(col(StorageAccrual.job_id).in_(list(job_ids)))
        for row in session.exec(query).all():
            if status == "batched":
                payable = row.amount > 0 and row.status != ACCRUING and row.settlement is None
                row.settlement = "batched" if payable else row.settlement
            elif status == "settled" and row.settlement == "batched":
                row.settlement = "settled"
            elif status in ("verified", "rejected") and row.settlement == "batched":
                row.settlement = None
            session.add(row)
        session.flush()
