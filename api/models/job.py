"""Jobs and the leases under which workers run them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index
from sqlmodel import Field

from api.models.base import TableBase

# queued -> leased -> completed; leased -> queued (release, failure, expiry) or failed
# (attempts exhausted); queued/leased -> cancelled by the owner.
# A job with a topology is "running" from submission while its units (api/models/job_unit)
# are leased, and ends completed, stopped (an evaluation failed), failed or cancelled.
JOB_STATUSES = ("queued", "leased", "running", "completed", "stopped", "failed", "cancelled")
TERMINAL_STATUSES = ("completed", "stopped", "failed", "cancelled")
# The outcome of a lease ended at its start because the job's escrow could not pay (or
# could not be checked then): no worker ever held it.
NOT_STARTED = "not_started"


class Job(TableBase, table=True):
    __tablename__ = "jobs"
    __table_args__ = (Index("ix_jobs_status_created", "status", "created_at"),)

    id: int | None = Field(default=None, primary_key=True)
    # The JobSpec's content id: the same spec cannot be queued twice.
    job_id: str = Field(max_length=128, unique=True)
    owner_id: int = Field(foreign_key="users.id", index=True, ondelete="CASCADE")
    spec: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    # Requirements copied out of the spec so matching runs in SQL.
    gpu_count: int
    gpu_memory_mb: int
    status: str = Field(max_length=16)
    # Claims so far; only failures and expired leases count against max_attempts, so a
    # worker that releases a job politely (shutting down) does not use up its retries.
    attempts: int = 0
    failures: int = 0
    max_attempts: int
    progress: float = 0.0
    progress_message: str = Field(default="", max_length=500)
    last_error: str = Field(default="", max_length=2000)
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    current_lease_id: int | None = None
    # Units of a job with a topology (0: leased as a whole). Copied out of the spec so the
    # read paths know without parsing it.
    unit_count: int = 0
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None = None
    # Monotonic counter bumped on every state change: lets clients poll cheaply.
    version: int = Field(default=0, sa_type=BigInteger)


class Lease(TableBase, table=True):
    __tablename__ = "leases"
    __table_args__ = (Index("ix_leases_open_expiry", "ended_at", "expires_at"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    # The unit leased, for a job with a topology; None when the whole job is leased.
    unit_id: int | None = Field(
        default=None, foreign_key="job_units.id", index=True, ondelete="CASCADE"
    )
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    # SHA-256 of the opaque lease token handed to the worker.
    token_hash: str = Field(max_length=64, unique=True)
    # Revealed at claim time, after the spec is fixed: seeds the proof-of-training data order.
    nonce: str = Field(max_length=64)
    attempt: int
    created_at: datetime
    expires_at: datetime
    heartbeat_at: datetime | None = None
    ended_at: datetime | None = None
    # completed | released | failed | expired | cancelled | cluster_failed (another node
    # of its cluster attempt was lost) | not_started (NOT_STARTED)
    outcome: str | None = Field(default=None, max_length=16)
    reason: str = Field(default="", max_length=2000)
    # The GPU models among the provider's checked (offered) GPUs that fit the job when it was
    # claimed (api.services.gpu_challenges): a rate-card lease is paid at one of these
    # models' rates only. None for leases made before the GPU checks.
    gpu_models: list[str] | None = Field(default=None, sa_column=Column(JSON))
    # A whole-job lease that resumed a lost one (api.services.resume): that lease, and the
    # checkpoint of its committed prefix this one starts from (it proves the segments after).
    resumed_lease_id: int | None = None
    resumed_at: int | None = None
    # It resumed a sealed checkpoint: the worker waits for the submitter's resume grant
    # (proofnet/messages/resume_grant.py), kept here once posted (stanzas the API can't open).
    resume_sealed: bool = False
    resume_grants: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    # Set when the oracle quorum stopped the lease for the job's fault (api.services.job_faults):
    # why (`job_fault`), what the oracles found, when, and the segments its uploaded prefix
    # committed then (a partial proof is paid for those, at most).
    stop_reason: str | None = Field(default=None, max_length=32)
    stop_message: str = Field(default="", max_length=2000)
    stopped_at: datetime | None = None
    stop_segments: int | None = None
