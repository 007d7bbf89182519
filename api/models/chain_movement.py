"""The earnings record: what this deployment's scripts paid out on chain, as the chain
watcher (api.services.chain_watch) read it, and where the watcher stands.

Rows are written only by the watcher, from transactions that spent the deployment's script
UTxOs (chain.offchain.follow); a rollback deletes the rows of the blocks it undid and the
rescan writes them again. Balances, the provider's earnings, `proofnet worker status` and
the settled/refunded notifications all read these rows.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase

# A movement's kind (chain.offchain.follow.classify): who the output is for.
MOVEMENT_KINDS = ("payout", "refund", "cancel", "slash")


class ChainMovement(TableBase, table=True):
    __tablename__ = "chain_movements"
    # An output is created once: recording the same transaction again is a no-op.
    __table_args__ = (
        UniqueConstraint("tx_hash", "output_index"),
        Index("ix_chain_movements_escrow", "escrow_tx_id", "escrow_index"),
        Index("ix_chain_movements_block", "deployment", "block_height"),
    )

    id: int | None = Field(default=None, primary_key=True)
    # The deployment's batch script hash: whose watcher wrote the row (and may undo it).
    deployment: str = Field(max_length=56)
    kind: str = Field(max_length=16)
    # What spent the escrow: settle | refund | cancel (slash for a bond).
    action: str = Field(max_length=16)
    escrow_tx_id: str = Field(max_length=64)
    escrow_index: int
    # The job id in the escrow's datum (hex); "" where there is none.
    job_id: str = Field(max_length=64, index=True)
    tx_hash: str = Field(max_length=64)
    tx_index: int  # position of the transaction in its block
    output_index: int
    address: str = Field(max_length=200, index=True)
    lovelace: int = Field(sa_type=BigInteger)
    # NTX base units.
    ntx: int = Field(sa_type=BigInteger)
    block_height: int = Field(sa_type=BigInteger)
    block_hash: str = Field(max_length=64)
    slot: int = Field(sa_type=BigInteger)
    block_time: datetime
    recorded_at: datetime
    # When the job owner's settled/refunded notification was queued (at the confirmation
    # depth); the same on every row of one escrow's transaction.
    notified_at: datetime | None = None


class ChainWatchCursor(TableBase, table=True):
    """Where one deployment's watcher stands, and who watches: one row per deployment.

    The lease (holder, lease_expires_at) elects one watcher among API processes; every
    write of a pass is also conditioned on the cursor it started from (compare and set),
    so a watcher that lost its lease mid-pass writes nothing."""

    __tablename__ = "chain_watch_cursors"

    deployment: str = Field(primary_key=True, max_length=56)
    # The last block scanned (None until the first pass placed it before the deployment).
    height: int | None = Field(default=None, sa_type=BigInteger)
    block_hash: str | None = Field(default=None, max_length=64)
    slot: int | None = Field(default=None, sa_type=BigInteger)
    # The chain's tip when last asked: confirmations are counted against it.
    tip_height: int | None = Field(default=None, sa_type=BigInteger)
    holder: str = Field(default="", max_length=200)
    lease_expires_at: datetime | None = None
    updated_at: datetime


class ChainWatchPoint(TableBase, table=True):
    """Recent cursors of a deployment's watcher: where it can resume after a rollback."""

    __tablename__ = "chain_watch_points"

    deployment: str = Field(primary_key=True, max_length=56)
    height: int = Field(primary_key=True, sa_type=BigInteger)
    block_hash: str = Field(max_length=64)
    slot: int = Field(sa_type=BigInteger)
