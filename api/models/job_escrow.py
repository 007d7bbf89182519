"""The escrow UTxO a submitter locked for a job, as the submitter recorded it (checked on
chain when recorded). The oracle settles only from this out-ref."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class JobEscrow(TableBase, table=True):
    __tablename__ = "job_escrows"
    # One escrow backs one job (its datum names one job id).
    __table_args__ = (UniqueConstraint("tx_id", "output_index"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", unique=True, ondelete="CASCADE")
    tx_id: str = Field(max_length=64)
    output_index: int
    # NTX budget and deadline read from the datum when recorded, for display.
    budget: int = Field(sa_type=BigInteger)
    deadline_ms: int = Field(sa_type=BigInteger)
    recorded_at: datetime
