"""A provider's earnings, for the worker itself (`GET /api/v1/worker/earnings`, what
`proofnet worker status` prints): paid, pending and slashed NTX at its registered payout
address, its latest payouts with their transactions, and how far the record reaches.

Read from the earnings record the chain watcher keeps (api.services.movements) and the
oracle's status (pending); a worker authenticates with its own key, so it sees exactly its
own payout address, whoever holds that wallet.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlmodel import Session

from api.models import Provider
from api.services import movements
from api.services.balances import (
    Amount,
    BalanceSources,
    MovementView,
    pending_settlement,
    recorded_movements,
)


@dataclass(frozen=True)
class ProviderEarnings:
    worker_key: str
    payout_address: str
    ntx_unit: str | None
    earned: Amount
    pending_settlement: Amount
    slashed: Amount
    payouts: tuple[MovementView, ...]
    # The newest block the record covers and the tip the watcher last saw (None: the
    # watcher has not run against this database yet).
    recorded_to: int | None
    tip: int | None
    updated_at: datetime | None


def provider_earnings(
    session: Session, sources: BalanceSources, provider: Provider, *, network: str
) -> ProviderEarnings:
    addresses = [provider.payout_address]
    earned, _refunded, slashed, payouts, _refunds = recorded_movements(
        session, addresses, network=network, devnet_url=sources.devnet_url
    )
    status = movements.watch_status(session)
    newest = max(status, key=lambda s: s.updated_at) if status else None
    return ProviderEarnings(
        worker_key=provider.worker_key,
        payout_address=provider.payout_address,
        ntx_unit=sources.ntx_unit,
        earned=earned,
        pending_settlement=pending_settlement(session, sources.lookups, addresses),
        slashed=slashed,
        payouts=payouts,
        recorded_to=newest.height if newest else None,
        tip=newest.tip_height if newest else None,
        updated_at=newest.updated_at if newest else None,
    )
