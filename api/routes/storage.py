"""Storage providers' offers (signed like worker requests) and where jobs' content is kept."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from api.deps import ConfigDep, CurrentUser, NowDep, SessionDep, SignedWorkerKey
from api.errors import BadRequest
from api.routes.oracle_feed import OracleKey
from api.schemas.storage import (
    AccrualReport,
    OracleJobsStoragePublic,
    OracleJobStoragePublic,
    OraclePlacementPublic,
    OraclePlacementsPublic,
    PlacementFailedPublic,
    PlacementFailure,
    PlacementPublic,
    PlacementRequest,
    PlacementsPublic,
    StorageChallengePublic,
    StorageEarningsPublic,
    StorageOfferPublic,
    StorageOffersPublic,
)
from api.services import storage_offers as service
from proofnet.messages.storage import MAX_NTX, StorageOffer

router = APIRouter(prefix="/storage", tags=["storage"])

KeyQuery = Annotated[str | None, Query(pattern=r"^[0-9a-f]{64}$")]


@router.post("/challenge")
def offer_challenge(
    provider_key: SignedWorkerKey, session: SessionDep, config: ConfigDep, now: NowDep
) -> StorageChallengePublic:
    """A single-use nonce the provider signs into its storage offer."""
    issued = service.issue_offer_challenge(session, config, provider_key, now)
    return StorageChallengePublic(
        nonce=issued.nonce, network=config.network, expires_at=issued.expires_at
    )


@router.put("/offer")
def put_offer(
    body: StorageOffer,
    provider_key: SignedWorkerKey,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> StorageOfferPublic:
    """Offer (or re-offer) storage: capacity, price per GB-month in NTX base units and the
    S3-compatible endpoint, signed by the key that signs this request."""
    service.offer(session, config, provider_key=provider_key, body=body, now=now)
    return StorageOfferPublic.of(service.offer_of(session, provider_key))


@router.get("/offers")
def list_offers(
    session: SessionDep,
    max_ntx_per_gb_month: Annotated[int | None, Query(ge=1, le=MAX_NTX)] = None,
) -> StorageOffersPublic:
    """Every storage offer, cheapest first, with the capacity each still has free."""
    data = [StorageOfferPublic.of(v) for v in service.list_offers(session, max_price=max_ntx_per_gb_month)]  # fmt: skip
    return StorageOffersPublic(data=data, count=len(data))


@router.get("/earnings/{provider_key}")
def storage_earnings(
    provider_key: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$")], session: SessionDep
) -> StorageEarningsPublic:
    """What a storage provider's copies have earned by answered challenges (pending
    settlement), beside what it holds."""
    offer_row, rows = service.earnings(session, provider_key)
    return StorageEarningsPublic(
        provider_key=provider_key,
        payout_address=None if offer_row is None else offer_row.payout_address,
        accrued_ntx=sum(r.accrued_ntx for r in rows),
        held_bytes=sum(r.size for r in rows if r.status == service.ACTIVE),
        placements=[PlacementPublic.of(r) for r in rows],
    )


@router.post("/placements")
def record_placement(
    body: PlacementRequest, user: CurrentUser, session: SessionDep, now: NowDep
) -> PlacementPublic:
    """Record a copy of one of the job's objects now held by a storage provider (the job's
    owner, after putting the object and its proof sidecar on the provider's endpoint)."""
    row = service.place(
        session,
        owner=user,
        job_id=body.job_id,
        kind=body.kind,
        object_key=body.object_key,
        provider_key=body.provider_key,
        commitment=body.commitment,
        now=now,
    )
    return PlacementPublic.of(row)


@router.get("/placements")
def list_placements(
    session: SessionDep, job_id: KeyQuery = None, provider_key: KeyQuery = None
) -> PlacementsPublic:
    """Placements (what is stored where, under which content root, and its status)."""
    rows = service.placements(session, job_id=job_id, provider_key=provider_key)
    data = [PlacementPublic.of(r) for r in rows]
    return PlacementsPublic(data=data, count=len(data))


oracle_router = APIRouter(prefix="/oracle/storage", tags=["oracle"])


@oracle_router.get("/placements")
def oracle_placements(_oracle: OracleKey, session: SessionDep) -> OraclePlacementsPublic:
    """Active placements with their job's storage budget and price cap (oracles only)."""
    data = [
        OraclePlacementPublic(
            **PlacementPublic.of(v.row).model_dump(),
            budget=v.budget,
            max_ntx_per_gb_month=v.max_ntx_per_gb_month,
        )
        for v in service.active_for_oracle(session)
    ]
    return OraclePlacementsPublic(data=data, count=len(data))


def _oracle_view(view: service.OracleView) -> OraclePlacementPublic:
    return OraclePlacementPublic(
        **PlacementPublic.of(view.row).model_dump(),
        budget=view.budget,
        max_ntx_per_gb_month=view.max_ntx_per_gb_month,
    )


@oracle_router.get("/jobs")
def oracle_jobs_storage(
    _oracle: OracleKey,
    session: SessionDep,
    job_id: Annotated[list[str], Query(max_length=64)],
) -> OracleJobsStoragePublic:
    """Per job: whether its spec keeps storage, and its active copies (oracles only): a
    settling oracle holds such a job's escrow until the copies' terms were challenged; and
    its failed copies (`ended`), whose receipts a co-signer checks the terms of too."""
    if any(len(j) != 64 or any(c not in "0123456789abcdef" for c in j) for j in job_id):
        raise BadRequest("job_id must be 64 lowercase hex characters")
    data = [
        OracleJobStoragePublic(
            job_id=j,
            keeps_storage=keeps,
            placements=[_oracle_view(v) for v in views],
            ended=[_oracle_view(v) for v in ended],
        )
        for j, keeps, views, ended in service.jobs_for_oracle(session, job_id)
    ]
    return OracleJobsStoragePublic(data=data, count=len(data))


@oracle_router.post("/placements/{placement_id}/failed")
def placement_failed(
    placement_id: int, body: PlacementFailure, _oracle: OracleKey, session: SessionDep, now: NowDep
) -> PlacementFailedPublic:
    """An oracle reports a copy that failed its retrieval challenge, and the copy it made
    with another provider in its place (oracles only)."""
    replacement = body.replacement
    failed, new = service.fail(
        session,
        placement_id=placement_id,
        reason=body.reason,
        replacement_key=None if replacement is None else replacement.provider_key,
        replacement=None if replacement is None else replacement.commitment,
        now=now,
    )
    return PlacementFailedPublic(
        failed=PlacementPublic.of(failed), replacement_id=None if new is None else new.id
    )


@oracle_router.post("/placements/{placement_id}/accrual")
def placement_accrual(
    placement_id: int, body: AccrualReport, _oracle: OracleKey, session: SessionDep
) -> PlacementPublic:
    """An oracle's running total of what a copy earned by answered challenges."""
    row = service.record_accrual(
        session,
        placement_id=placement_id,
        accrued_ntx=body.accrued_ntx,
        paid_through=body.paid_through,
        challenges_passed=body.challenges_passed,
        strikes=body.strikes,
        last_failure=body.last_failure,
    )
    return PlacementPublic.of(row)
