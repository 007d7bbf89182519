from __future__ import annotations

import threading
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, status
from sqlalchemy import Connection
from starlette.datastructures import State

from api.config import ApiConfig
from api.deps import CachedUser, ConfigDep, CurrentUser, NowDep, SessionDep, run_read
from api.models import User
from api.reads import StatusCache
from api.routes.worker_io import BlobStoreDep
from api.schemas.delivery import DeliveriesView, DeliveryPublic
from api.schemas.job import (
    JobCreate,
    JobPublic,
    JobsPublic,
    JobStatusPublic,
    UnitPublic,
    job_public,
)
from api.services import deliveries, resume
from api.services import jobs as service

router = APIRouter(prefix="/jobs", tags=["jobs"])

StatusFilter = Literal["queued", "leased", "running", "completed", "stopped", "failed", "cancelled"]


@router.post("", status_code=status.HTTP_201_CREATED)
def submit(
    body: JobCreate, user: CurrentUser, session: SessionDep, config: ConfigDep, now: NowDep
) -> JobPublic:
    job = service.submit_job(session, config, user, body.spec, now)
    return job_public(job, service.job_units(session, job))


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
def get_job(job_id: str, user: CurrentUser, session: SessionDep, store: BlobStoreDep) -> JobPublic:
    job = service.get_job(session, user, job_id)
    units = service.job_units(session, job)
    assert job.id is not None
    history = None
    if units is None:
        rows = resume.attempt_history(session, job.id)
        lost = resume.lost_claims(session, store, job, rows)
        history = resume.with_claims(rows, job.result, lost)
    return job_public(job, units, history)


@router.get("/{job_id}/deliveries")
def job_deliveries(job_id: str, user: CurrentUser, session: SessionDep) -> DeliveriesView:
    """Where the results went: each destination of the spec and how it answered."""
    job = service.get_job(session, user, job_id)
    data = [DeliveryPublic.model_validate(d) for d in deliveries.view(session, job)]
    return DeliveriesView(data=data, complete=all(d.state == "acknowledged" for d in data))


_cache_lock = threading.Lock()


def _matching_cache(state: State) -> service.MatchingCache:
    """`app.state.matching_cache`, made on first use."""
    cache = getattr(state, "matching_cache", None)
    if cache is None:
        with _cache_lock:
            cache = getattr(state, "matching_cache", None)
            if cache is None:
                cache = state.matching_cache = service.MatchingCache()
    assert isinstance(cache, service.MatchingCache)
    return cache


def _status(
    conn: Connection,
    config: ApiConfig,
    user: User,
    job_id: str,
    now: datetime,
    cache: service.MatchingCache,
) -> JobStatusPublic:
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
        units=None if st.units is None else [UnitPublic.model_validate(u) for u in st.units],
    )


async def status_public(state: State, user: User, job_id: str) -> JobStatusPublic:
    """The status body of `user`'s job, from the app's `state`: what the route below
    returns and what the lean read path (api.fastpath) serves for it."""
    # Polled often: on PostgreSQL a body read in the last few seconds is served again until
    # any process changes the job (`StatusCache`); otherwise one thread hop and, for most
    # jobs, one query. The sign-in is cached for up to 5 s (`CachedUser`), the
    # matching-provider count per resource shape for 1 s.
    now = state.clock()
    cache: StatusCache | None = getattr(state, "status_cache", None)
    assert user.id is not None
    if cache is not None:
        kept = cache.get(user.id, job_id, now)
        if kept is not None:
            assert isinstance(kept, JobStatusPublic)
            return kept
        ticket = cache.begin(now)
    body = await run_read(state, _status, state.config, user, job_id, now, _matching_cache(state))
    if cache is not None:
        cache.put(user.id, job_id, body.status, body, ticket)
    return body


@router.get("/{job_id}/status")
async def job_status(job_id: str, request: Request, user: CachedUser) -> JobStatusPublic:
    """Where the job stands and why: what a queued job waits for (the count of matching
    providers online may be up to a second old). On PostgreSQL a change made through any
    API process shows here within milliseconds (at worst 5 s)."""
    # Served by api.fastpath in the running app; this declaration documents it (OpenAPI)
    # and answers when the lean path is off.
    return await status_public(request.app.state, user, job_id)


@router.post("/{job_id}/cancel")
def cancel(job_id: str, user: CurrentUser, session: SessionDep, now: NowDep) -> JobPublic:
    job = service.cancel_job(session, user, job_id, now)
    return job_public(job, service.job_units(session, job))
