from __future__ import annotations

from datetime import datetime
from typing import Any

from api.models import Job
from api.schemas.common import PublicBody, RequestBody
from proofnet.messages.jobspec import JobSpec


class JobCreate(RequestBody):
    spec: JobSpec


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


def job_public(job: Job) -> JobPublic:
    return JobPublic.model_validate(job)
