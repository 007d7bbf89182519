"""The units of a job with a topology (proofnet/messages/topology.py): each is leased, run,
attested and paid on its own, all from the job's one escrow.

A job without a topology has no units: it is leased as a whole, exactly as before.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase

# blocked -> queued (everything it waits for completed) -> leased -> completed;
# leased -> queued (release, failure, expiry, a failed cluster attempt) or failed (attempts
# exhausted); anything not finished -> cancelled (owner cancelled, pipeline stopped, job
# failed). A completed node goes back to queued when its cluster attempt fails.
UNIT_STATUSES = ("blocked", "queued", "leased", "completed", "failed", "cancelled")
UNIT_OPEN_STATUSES = ("blocked", "queued", "leased")


class JobUnit(TableBase, table=True):
    __tablename__ = "job_units"
    __table_args__ = (
        UniqueConstraint("job_id", "index"),
        # The claim scans queued units oldest job first.
        Index("ix_job_units_status_job", "status", "job_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", ondelete="CASCADE")
    # `Unit.index` of the job's plan: what the worker, the attestation and the oracle name.
    index: int
    kind: str = Field(max_length=16)
    # Node rank for multi-node units.
    rank: int | None = None
    status: str = Field(max_length=16)
    # Claims of this unit; for nodes, the cluster attempt (the same on every node).
    attempts: int = 0
    # Failed or expired runs (for nodes: failed cluster attempts); max_attempts bounds them.
    failures: int = 0
    current_lease_id: int | None = None
    # The lease whose completion stands (what the oracle checks the attestation against).
    completed_lease_id: int | None = None
    # The checkpoints this unit starts from, fixed when it is released:
    # [{"unit": i, "sha256": hex, "size": bytes}] in the plan's input order.
    inputs: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(JSON))
    # SHA-256 (and size) of the checkpoint the completing lease uploaded, if any.
    output: str | None = Field(default=None, max_length=64)
    output_size: int | None = Field(default=None, sa_type=BigInteger)
    metrics: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # What the current lease last reported by heartbeat (0..1 and a line of text); reset
    # when the unit is leased again. The job's progress counts it while the unit is leased.
    progress: float = 0.0
    progress_message: str = Field(default="", max_length=500)
    # Node rank 0's rendezvous "host:port" for the current cluster attempt.
    endpoint: str | None = Field(default=None, max_length=300)
    # Not handed out before this (a cluster that timed out waiting backs off).
    not_before: datetime | None = None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    version: int = Field(default=0, sa_type=BigInteger)
