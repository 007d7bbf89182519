"""An oracle's verdict on the attestation of one lease, as that oracle posted it.

Each trusted oracle posts its own verdict (`POST /api/v1/oracle/verdicts`, a request signed
with its key); the API keeps one row per (lease, oracle) and the release rule
(`api.services.result_release`) counts the distinct trusted oracles whose verdict releases
the lease's results to the submitter. A later verdict of the same oracle replaces its
earlier one (an oracle's verdict on an attestation is final; a newer attestation of the
same lease is judged anew).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class ResultVerdict(TableBase, table=True):
    __tablename__ = "result_verdicts"
    __table_args__ = (UniqueConstraint("lease_id", "oracle_key"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    lease_id: int = Field(foreign_key="leases.id", ondelete="CASCADE")
    # The Ed25519 key (hex) of the oracle whose signed request carried the verdict.
    oracle_key: str = Field(max_length=64)
    # "verified" | "rejected" | "unproven" (the oracle's attestation status).
    status: str = Field(max_length=16)
    # Whose fault: "provider" | "job" | None (nobody's).
    fault: str | None = Field(default=None, max_length=16)
    reason: str = Field(default="", max_length=64)
    message: str = Field(default="", max_length=2000)
    recorded_at: datetime
