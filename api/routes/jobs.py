from __future__ import annotations

import threading
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, status
from sqlalchemy import Engine

from api.config import ApiConfig
from api.db import read_connection
from api.deps import CachedUser, ConfigDep, CurrentUser, NowDep, SessionDep, run_read
from api.models import User
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


_cache_lock = threading.Lock()


def _matching_cache(request: Request) -> service.MatchingCache:
    """`app.state.matching_cache`, made on first use."""
    state = request.app.state
    cache = getattr(state, "matching_cache", None)
    if cache is None:
        with _cache_lock:
            cache = getattr(state, "matching_cache", None)
            if cache is None:
                cache = state.matching_cache = service.MatchingCache()
    assert isinstance(cache, service.MatchingCache)
    return cache


def _status(
    engine: Engine,
    config: ApiConfig,
    user: User,
    job_id: str,
    now: datetime,
    cache: service.MatchingCache,
) -> JobStatusPublic:
    with read_connection(engine) as conn:
        st = service.job_status(conn, config, user, job_id, now, cache)
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


@router.get("/{job_id}/status")
async def job_status(job_id: str, request: Request, user: CachedUser) -> JobStatusPublic:
    """Where the job stands and why: what a queued job waits for (the count of matching
    providers online may be up to a second old)."""
    # Polled often: one thread hop and, for most jobs, one query; the sign-in is cached for
    # up to 5 s (`CachedUser`), the matching-provider count per resource shape for 1 s.
    # Config and clock come straight from app.state: each dependency costs FastAPI time.
    state = request.app.state
    return await run_read(
        _status, state.engine, state.config, user, job_id, state.clock(), _matching_cache(request)
    )


@router.post("/{job_id}/cancel")
def cancel(job_id: str, user: CurrentUser, session: SessionDep, now: NowDep) -> JobPublic:
    return job_public(service.cancel_job(session, user, job_id, now))
