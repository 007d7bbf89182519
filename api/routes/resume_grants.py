"""Resume grants of sealed jobs: the submitter posts, the resuming provider reads."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from api.deps import CurrentProvider, CurrentUser, NowDep, SessionDep
from api.routes.worker_io import BlobStoreDep
from api.schemas.resume_grant import PendingGrantPublic, ResumeGrantIn, ResumeGrantPublic
from api.services import resume_grants as service

router = APIRouter(tags=["resume-grants"])


@router.get("/jobs/{job_id}/resume-grant")
def pending_grant(
    job_id: str, user: CurrentUser, session: SessionDep, store: BlobStoreDep
) -> PendingGrantPublic:
    """The sealed checkpoint files of the job's resuming lease (with each one's clear
    header) and its provider's worker key: re-wrap each file's content key for that
    provider (`proofnet job grant-resume`) and post the stanzas."""
    pending = service.pending(session, user, job_id, store)
    body = asdict(pending)
    body["files"] = [f.model_dump() for f in pending.files]
    return PendingGrantPublic.model_validate(body)


@router.post("/jobs/{job_id}/resume-grant")
def post_grant(
    job_id: str, body: ResumeGrantIn, user: CurrentUser, session: SessionDep, now: NowDep
) -> ResumeGrantPublic:
    lease = service.record(session, user, job_id, body.grants, now)
    return ResumeGrantPublic(grants=lease.resume_grants or {})


@router.get("/worker/leases/{token}/resume-grant")
def lease_grant(
    token: str, provider: CurrentProvider, session: SessionDep, now: NowDep
) -> ResumeGrantPublic:
    """The submitter's grant for this lease's sealed checkpoint (null while it waits)."""
    return ResumeGrantPublic(grants=service.for_lease(session, provider, token, now))
