"""Rows of the earnings record as the chain watcher writes them, for tests of its readers
(balances, the lean read path, the change feed). The watcher itself is tested against a
devnet in test_chain_watch.py."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlmodel import Session

from api.models import ChainMovement

DEPLOYMENT = "5e" * 28


def add_movement(
    session: Session,
    *,
    address: str,
    ntx: int,
    tx_hash: str,
    kind: str = "payout",
    action: str = "settle",
    job_id: str = "",
    escrow: tuple[str, int] = ("ee" * 32, 0),
    output_index: int = 0,
    block_height: int = 1,
    lovelace: int = 1_000_000,
    commit: bool = True,
) -> ChainMovement:
    """Record one movement (commits unless told not to)."""
    now = datetime.now(UTC)
    row = ChainMovement(
        deployment=DEPLOYMENT,
        kind=kind,
        action=action,
        escrow_tx_id=escrow[0],
        escrow_index=escrow[1],
        job_id=job_id,
        tx_hash=tx_hash,
        tx_index=0,
        output_index=output_index,
        address=address,
        lovelace=lovelace,
        ntx=ntx,
        block_height=block_height,
        block_hash=f"{block_height:064x}",
        slot=block_height,
        block_time=now,
        recorded_at=now,
    )
    session.add(row)
    if commit:
        session.commit()
    return row
