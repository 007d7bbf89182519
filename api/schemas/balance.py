from __future__ import annotations

from datetime import datetime

from api.schemas.common import PublicBody
from api.services.balances import Amount, Balance, MovementView


class AmountPublic(PublicBody):
    # null when unknown; `note` then says why.
    lovelace: int | None
    ntx: int | None
    note: str

    @classmethod
    def of(cls, amount: Amount) -> AmountPublic:
        return cls(lovelace=amount.lovelace, ntx=amount.ntx, note=amount.note)


class MovementPublic(PublicBody):
    """A payout, refund, cancel or slash as the chain recorded it."""

    # payout | refund | cancel | slash
    kind: str
    # What spent the escrow: settle | refund | cancel (slash for a bond).
    action: str
    job_id: str
    # The escrow UTxO spent, "txid#index".
    escrow: str
    # Who received it (who lost it, for a slash).
    address: str
    # NTX base units.
    amount: int
    lovelace: int
    tx_hash: str
    output_index: int
    block_height: int
    block_hash: str
    slot: int
    # The block's time.
    confirmed_at: datetime
    # Blocks on top of the transaction's, its own included; null until the watcher saw a tip.
    confirmations: int | None
    # Explorer name -> URL of the transaction's page.
    explorer: dict[str, str]

    @classmethod
    def of(cls, view: MovementView) -> MovementPublic:
        r = view.row
        return cls(
            kind=r.kind,
            action=r.action,
            job_id=r.job_id,
            escrow=r.escrow_ref,
            address=r.address,
            amount=r.ntx,
            lovelace=r.lovelace,
            tx_hash=r.tx_hash,
            output_index=r.output_index,
            block_height=r.block_height,
            block_hash=r.block_hash,
            slot=r.slot,
            confirmed_at=r.block_time,
            confirmations=r.confirmations,
            explorer=view.explorer,
        )


class BalancePublic(PublicBody):
    address: str
    kind: str
    addresses: list[str]
    # policy id hex + asset name hex of the unit counted as NTX (null: not configured).
    ntx_unit: str | None
    available: AmountPublic
    in_escrow: AmountPublic
    # Payouts to these addresses, from the chain (lovelace: the ADA that came with them).
    earned: AmountPublic
    pending_settlement: AmountPublic
    # Escrows returned to these addresses: refunds, settlement remainders, cancels.
    refunded: AmountPublic
    # Taken from these addresses' provider bonds.
    slashed: AmountPublic
    payouts: list[MovementPublic]
    refunds: list[MovementPublic]

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
            refunded=AmountPublic.of(b.refunded),
            slashed=AmountPublic.of(b.slashed),
            payouts=[MovementPublic.of(p) for p in b.payouts],
            refunds=[MovementPublic.of(p) for p in b.refunds],
        )
