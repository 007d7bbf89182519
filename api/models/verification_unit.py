"""Verification units: an oracle-signed task for a drawn verifier to replay segments of a
lease's proof, and the verifier's signed report, relayed as they came.

The API stores both and checks what it can (the oracle's signature, that the verifier is a
registered worker other than the provider and paid elsewhere); the oracle checks the
report's signature itself (proofnet/messages/verification.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field

from api.models.base import TableBase


class VerificationUnit(TableBase, table=True):
    __tablename__ = "verification_units"

    id: int | None = Field(default=None, primary_key=True)
    # SHA-256 of the signed task: the same task posted twice (by a retrying oracle) is one.
    digest: str = Field(max_length=64, unique=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    # The lease whose proof is replayed, and its provider.
    lease_id: int = Field(foreign_key="leases.id", index=True, ondelete="CASCADE")
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    # The drawn verifier, who alone reads the task's files and reports.
    verifier_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    oracle_key: str = Field(max_length=64)
    task: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime
    reported_at: datetime | None = None
