"""Where a job's results went: one row per destination its spec names, per job.

The worker reports each destination's outcome (`proofnet.messages.destinations.
DeliveryReport`) under its lease; a later attempt's report replaces an earlier one. A job
whose spec names destinations completes only when every one has an acknowledged row from
the completing lease (`api.services.deliveries`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class JobDelivery(TableBase, table=True):
    __tablename__ = "job_deliveries"
    __table_args__ = (UniqueConstraint("job_id", "position"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    lease_id: int = Field(foreign_key="leases.id", ondelete="CASCADE")
    # The destination's index in the spec's `destinations`, and its kind.
    position: int
    kind: str = Field(max_length=16)
    acknowledged: bool
    reason: str = Field(default="", max_length=1000)
    # Per result: name, sha256 of what was sent, HTTP status, ETag (S3).
    results: list[dict[str, Any]] = Field(sa_column=Column(JSON, nullable=False))
    reported_at: datetime
