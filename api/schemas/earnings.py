from __future__ import annotations

from datetime import datetime

from api.schemas.balance import AmountPublic, MovementPublic
from api.schemas.common import PublicBody
from api.services.earnings import ProviderEarnings


class EarningsPublic(PublicBody):
    worker_key: str
    payout_address: str
    # policy id hex + asset name hex of the unit counted as NTX (null: not configured).
    ntx_unit: str | None
    # Paid to the payout address by settlements on chain.
    earned: AmountPublic
    # Verified by the oracle, not yet seen paid on chain.
    pending_settlement: AmountPublic
    slashed: AmountPublic
    # Latest payouts, newest first.
    payouts: list[MovementPublic]
    # The newest block the record covers and the chain tip when last read (null: the chain
    # watcher has not run yet).
    recorded_to_block: int | None
    tip_block: int | None
    recorded_at: datetime | None

    @classmethod
    def of(cls, e: ProviderEarnings) -> EarningsPublic:
        return cls(
            worker_key=e.worker_key,
            payout_address=e.payout_address,
            ntx_unit=e.ntx_unit,
            earned=AmountPublic.of(e.earned),
            pending_settlement=AmountPublic.of(e.pending_settlement),
            slashed=AmountPublic.of(e.slashed),
            payouts=[MovementPublic.of(p) for p in e.payouts],
            recorded_to_block=e.recorded_to,
            tip_block=e.tip,
            recorded_at=e.updated_at,
        )
