"""Result release (api/services/result_release.py): oracles post their verdicts on a lease's
attestation (a request signed with an oracle key the config lists; anyone else is refused);
the submitter, and the provider that completed the job, read where the release stands."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter
from pydantic import Field

from api.deps import CurrentProvider, CurrentUser, NowDep, ReleasePolicyDep, SessionDep
from api.errors import NotFound
from api.routes.oracle_feed import OracleKey
from api.schemas.common import PublicBody, RequestBody
from api.schemas.lease import LeaseDeliveries
from api.services import deliveries
from api.services import result_release as service
from api.services.jobs import get_job

router = APIRouter(tags=["results"])

Hex64 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class VerdictBody(RequestBody):
    job_id: Annotated[str, Field(min_length=1, max_length=64)]
    # The attested lease: the nonce its claim revealed (the attestation names it).
    nonce: Hex64
    status: Literal["verified", "rejected", "unproven"]
    fault: Literal["provider", "job"] | None = None
    reason: Annotated[str, Field(max_length=64)] = ""
    message: Annotated[str, Field(max_length=2000)] = ""


class ReleasePublic(PublicBody):
    job_id: str
    # released: served; waiting: no releasing verdict yet; withheld: refused for good.
    state: Literal["released", "withheld", "waiting"]
    detail: str
    releasing_verdicts: int
    refusing_verdicts: int
    quorum: int


def _public(job_id: str, release: service.Release) -> ReleasePublic:
    return ReleasePublic(
        job_id=job_id,
        state=release.state,
        detail=release.detail,
        releasing_verdicts=release.releasing,
        refusing_verdicts=release.refusing,
        quorum=release.quorum,
    )


@router.post("/oracle/verdicts")
def post_verdict(
    body: VerdictBody,
    oracle: OracleKey,
    session: SessionDep,
    now: NowDep,
    policy: ReleasePolicyDep,
) -> ReleasePublic:
    """An oracle's verdict on the attestation of lease `nonce` (signed by that oracle's
    key: a verdict is never taken from anyone else); answers the release as it now stands."""
    verdict = service.PostedVerdict(
        body.job_id, body.nonce, body.status, body.fault, body.reason, body.message
    )
    row = service.record_verdict(session, oracle, verdict, now)
    lease = service.lease_of(session, row)
    return _public(body.job_id, service.release_of(session, lease, policy))


@router.get("/jobs/{job_id}/release")
def job_release(
    job_id: str, user: CurrentUser, session: SessionDep, policy: ReleasePolicyDep
) -> ReleasePublic:
    """Whether the job's results are released to you, and what the release waits on."""
    job = get_job(session, user, job_id)
    return _public(job_id, service.job_release(session, job, policy))


class DeliveriesPending(PublicBody):
    pending: list[str]


@router.post("/worker/jobs/{job_id}/deliveries")
def released_deliveries(
    job_id: str,
    body: LeaseDeliveries,
    provider: CurrentProvider,
    session: SessionDep,
    policy: ReleasePolicyDep,
    now: NowDep,
) -> DeliveriesPending:
    """The provider that completed the job reports its delivery to the submitter's own
    destinations, made once the results were released (refused before: 409)."""
    pending = deliveries.record_released(session, provider, job_id, body.reports, policy, now)
    return DeliveriesPending(pending=pending)


@router.get("/worker/jobs/{job_id}/release")
def provider_release(
    job_id: str, provider: CurrentProvider, session: SessionDep, policy: ReleasePolicyDep
) -> ReleasePublic:
    """For the provider that completed the job: whether its results are released, so it
    delivers them to the submitter's own destinations (worker.agent) only then."""
    job, lease = service.completed_by(session, job_id, provider)
    if lease is None:
        raise NotFound(f"job {job_id} was not completed by this worker")
    del job
    return _public(job_id, service.release_of(session, lease, policy))
