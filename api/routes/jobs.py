from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, status

from api.deps import ConfigDep, CurrentUser, NowDep, SessionDep
from api.schemas.job import JobCreate, JobPublic, JobsPublic, JobStatusPublic, job_public
from api.services import jobs as service

router = APIRouter(prefix="/jobs", tags=["jobs"])

StatusFilter = Literal["queued", "leased", "completed", "failed", "cancelled"]


@router.post("", status_code=status.HTTP_201_CREATED)
def submit(
    body: JobCreate, user: CurrentUser, session: SessionDep, config: ConfigDep, now: NowDep
) -> JobPublic:
    return job_public(service.submit_job(session, config, user, body.spec, now))


@router.get("")
def list_jobs(
    user: CurrentUser,
    session: SessionDep,
    status_filter: Annotated[StatusFilter | None, Query(alias="status")] = None,
    offset: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> JobsPublic:
    rows, total = service.list_jobs(session, user, status=status_filter, offset=offset, limit=limit)
    return JobsPublic(data=[job_public(j) for j in rows], count=total)


@router.get("/{job_id}")
def get_job(job_id: str, user: CurrentUser, session: SessionDep) -> JobPublic:
    return job_public(service.get_job(session, user, job_id))


@router.get("/{job_id}/status")
def job_status(
    job_id: str, user: CurrentUser, session: SessionDep, config: ConfigDep, now: NowDep
) -> JobStatusPublic:
    st = service.job_status(session, config, user, job_id, now)
    return JobStatusPublic(
        job_id=st.job.job_id,
        status=st.job.status,
        progress=st.job.progress,
        progress_message=st.job.progress_message,
        reason=st.reason,
        attempts=st.job.attempts,
        failures=st.job.failures,
        queue_position=st.queue_position,
        matching_providers_online=st.matching_providers_online,
        last_heartbeat_at=st.last_heartbeat_at,
        updated_at=st.job.updated_at,
    )


@router.post("/{job_id}/cancel")
def cancel(job_id: str, user: CurrentUser, session: SessionDep, now: NowDep) -> JobPublic:
    return job_public(service.cancel_job(session, user, job_id, now))
