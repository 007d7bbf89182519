"""The oracles' signed early job-fault verdicts on a lease (proofnet/messages/job_fault.py),
one per oracle key: the API stops the lease once the deployment's threshold of them agree
(api/services/job_faults.py), never on one of them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class JobFaultVote(TableBase, table=True):
    __tablename__ = "job_fault_votes"
    __table_args__ = (UniqueConstraint("lease_id", "oracle_key"),)

    id: int | None = Field(default=None, primary_key=True)
    lease_id: int = Field(foreign_key="leases.id", index=True, ondelete="CASCADE")
    oracle_key: str = Field(max_length=64)
    # SHA-256 of the verdict's signed part.
    digest: str = Field(max_length=64)
    verdict: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    created_at: datetime
