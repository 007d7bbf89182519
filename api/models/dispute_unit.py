"""Dispute units: an oracle-signed `DisputeTask` asking a provider's worker to replay the
disputed segments of its own proof in a verifier's sandbox, and the provider's signed
commitment and reveal, relayed as they came (proofnet/messages/dispute.py).

The API keeps the order the referee relies on: a reveal is taken only after a commitment,
and only one of each (oracle/verification/referee.py checks both signatures itself).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field

from api.models.base import TableBase


class DisputeUnit(TableBase, table=True):
    __tablename__ = "dispute_units"

    id: int | None = Field(default=None, primary_key=True)
    # SHA-256 of the signed task: the same dispute posted twice (a retrying oracle) is one.
    digest: str = Field(max_length=64, unique=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    # The disputed lease, and its provider: alone reads the task's files and answers.
    lease_id: int = Field(foreign_key="leases.id", index=True, ondelete="CASCADE")
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    oracle_key: str = Field(max_length=64)
    task: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    commitment: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    reveal: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime
    committed_at: datetime | None = None
    revealed_at: datetime | None = None
