"""Sealed-bid auctions of auction-priced jobs (`proofnet.messages.auction`): one row per
job with its windows and, once cleared, its outcome; one row per provider's bid."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class Auction(TableBase, table=True):
    __tablename__ = "auctions"

    job_id: int = Field(foreign_key="jobs.id", primary_key=True, ondelete="CASCADE")
    reserve: int = Field(sa_type=BigInteger)
    # Commitments are taken until `bids_close_at`, reveals until `reveals_close_at`; the
    # auction clears at the first read or claim after that.
    bids_close_at: datetime = Field(index=True)
    reveals_close_at: datetime = Field(index=True)
    cleared_at: datetime | None = None
    # The winner's provider row and worker key, and the price it is paid (None: no winner).
    winner_provider_id: int | None = Field(
        default=None, foreign_key="providers.id", ondelete="SET NULL"
    )
    winner_key: str | None = Field(default=None, max_length=64)
    price: int | None = Field(default=None, sa_type=BigInteger)
    reason: str = Field(default="", max_length=500)


class AuctionBid(TableBase, table=True):
    __tablename__ = "auction_bids"
    __table_args__ = (UniqueConstraint("job_id", "provider_id"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    worker_key: str = Field(max_length=64)
    commitment: str = Field(max_length=64)
    committed_at: datetime
    # The signed bid (`RevealedBid` as JSON) once revealed; None while sealed.
    revealed: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    revealed_at: datetime | None = None
