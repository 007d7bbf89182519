"""Payouts the settlement path reported as confirmed on chain: what providers have earned."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class Payout(TableBase, table=True):
    __tablename__ = "payouts"
    # One settlement transaction pays one job's provider once; a repeated report is a no-op.
    __table_args__ = (UniqueConstraint("tx_hash", "job_id"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    payout_address: str = Field(max_length=200, index=True)
    # NTX base units.
    amount: int = Field(sa_type=BigInteger)
    tx_hash: str = Field(max_length=64)
    confirmed_at: datetime
