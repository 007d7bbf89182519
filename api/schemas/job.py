from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from api.models import Job
from api.schemas.common import PublicBody, RequestBody
from proofnet.messages.jobspec import JobSpec


class JobCreate(RequestBody):
    spec: JobSpec


class UnitPublic(PublicBody):
    """One unit of a job with a topology (docs/topologies.md)."""

    index: int
    kind: str
    status: str
    # Claims so far; for a multi-node unit, its cluster attempt.
    attempts: int
    # Key id of the provider running it, or that completed it.
    provider: str | None
    output: str | None
    metrics: dict[str, Any] | None
    # What its lease last reported by heartbeat while it runs (0..1, and a line of text);
    # 1.0 once completed; 0.0 and "" while it waits. The job's `progress` is (completed
    # units + the progress of the units that run) / units.
    progress: float = 0.0
    progress_message: str = ""


class AttemptPublic(PublicBody):
    """One attempt (lease) of a single-unit job: who ran it, how it ended, where it resumed
    from and the segments of the proof it proved (`last_segment` null: to the end)."""

    attempt: int
    provider: str | None
    outcome: str | None
    resumed_from_attempt: int | None
    resumed_at: int | None  # the checkpoint index it resumed from
    first_segment: int
    last_segment: int | None
    # Whether segments of the final proof are this attempt's (paid for its own segments).
    proved: bool
    # NTX base units its attestation claims (the completing attempt's, at most its share of
    # the price for its segments); null while none does (a lost attempt is not paid yet).
    claimed: int | None = None


class JobPublic(PublicBody):
    job_id: str
    status: str
    spec: dict[str, Any]
    attempts: int
    failures: int
    max_attempts: int
    progress: float
    progress_message: str
    last_error: str
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    version: int
    # The units of a job with a topology (in index order); null for a single-unit job.
    units: list[UnitPublic] | None = None
    # A single-unit job's attempts, with the segments each proved (a lost attempt's
    # committed checkpoints carry over to the next: api.services.resume); null in lists.
    history: list[AttemptPublic] | None = None


class JobsPublic(PublicBody):
    data: list[JobPublic]
    count: int


class JobStatusPublic(PublicBody):
    job_id: str
    status: str
    progress: float
    progress_message: str
    # Why the job is where it is, in words: what a stuck job is waiting for.
    reason: str
    attempts: int
    failures: int
    queue_position: int | None
    matching_providers_online: int | None
    last_heartbeat_at: datetime | None
    updated_at: datetime
    # The units of a job with a topology (in index order); null for a single-unit job.
    units: list[UnitPublic] | None = None


def job_public(
    job: Job, units: Sequence[Any] | None = None, history: Sequence[Any] | None = None
) -> JobPublic:
    """The job; with `units` (rows with UnitPublic's fields) for a job with a topology, or
    `history` (rows with AttemptPublic's fields) for a single-unit one."""
    public = JobPublic.model_validate(job)
    if units is not None:
        public.units = [UnitPublic.model_validate(u) for u in units]
    if history is not None:
        public.history = [AttemptPublic.model_validate(a) for a in history]
    return public
