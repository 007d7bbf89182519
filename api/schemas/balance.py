from __future__ import annotations

from datetime import datetime

from api.schemas.common import PublicBody
from api.services.balances import Amount, Balance


class AmountPublic(PublicBody):
    # null when unknown; `note` then says why.
    lovelace: int | None
    ntx: int | None
    note: str

    @classmethod
    def of(cls, amount: Amount) -> AmountPublic:
        return cls(lovelace=amount.lovelace, ntx=amount.ntx, note=amount.note)


class PayoutPublic(PublicBody):
    job_id: str
    payout_address: str
    amount: int
    tx_hash: str
    confirmed_at: datetime
    # Explorer name -> URL of the transaction's page.
    explorer: dict[str, str]


class BalancePublic(PublicBody):
    address: str
    kind: str
    addresses: list[str]
    # policy id hex + asset name hex of the unit counted as NTX (null: not configured).
    ntx_unit: str | None
    available: AmountPublic
    in_escrow: AmountPublic
    earned: AmountPublic
    pending_settlement: AmountPublic
    payouts: list[PayoutPublic]

    @classmethod
    def of(cls, b: Balance) -> BalancePublic:
        return cls(
            address=b.target.text,
            kind=b.target.kind,
            addresses=list(b.addresses),
            ntx_unit=b.ntx_unit,
            available=AmountPublic.of(b.available),
            in_escrow=AmountPublic.of(b.in_escrow),
            earned=AmountPublic.of(b.earned),
            pending_settlement=AmountPublic.of(b.pending_settlement),
            payouts=[
                PayoutPublic(
                    job_id=p.job_id,
                    payout_address=p.payout_address,
                    amount=p.amount,
                    tx_hash=p.tx_hash,
                    confirmed_at=p.confirmed_at,
                    explorer=p.explorer,
                )
                for p in b.payouts
            ],
        )
