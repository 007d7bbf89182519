"""Auctions of auction-priced jobs: public state, and the two signed worker steps (commit,
then reveal). The rules are in api/services/auctions.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field

from api.deps import ConfigDep, CurrentProvider, NowDep, SessionDep
from api.services import auctions as service

router = APIRouter(tags=["auctions"])


class BidCommit(BaseModel):
    model_config = ConfigDict(extra="forbid")
    commitment: str = Field(pattern=r"^[0-9a-f]{64}$")


class BidPublic(BaseModel):
    job_id: str
    worker_key: str
    commitment: str
    committed_at: datetime
    revealed: bool


class AuctionPublic(BaseModel):
    job_id: str
    phase: str
    reserve: int
    bids_close_at: datetime
    reveals_close_at: datetime
    commitments: int
    revealed: int
    # Once bidding closed: every commitment and every revealed (signed) bid, so anyone can
    # recompute the outcome with proofnet.messages.auction.clear.
    commitment_list: list[str] | None = None
    bids: list[dict[str, Any]] | None = None
    winner: str | None = None
    price: int | None = None
    reason: str | None = None
    cleared_at: datetime | None = None


class OpenAuction(BaseModel):
    job_id: str
    phase: str
    gpus: int
    gpu_memory_mb: int
    max_duration_s: int
    reserve: int
    bids_close_at: datetime
    reveals_close_at: datetime
    commitments: int


class OpenAuctions(BaseModel):
    data: list[OpenAuction]


@router.get("/auctions")
def open_auctions(
    session: SessionDep, now: NowDep, limit: int = Query(100, ge=1, le=500)
) -> OpenAuctions:
    """Auctions taking bids or reveals now, the soonest to close first."""
    return OpenAuctions(
        data=[OpenAuction.model_validate(a) for a in service.open_auctions(session, now, limit)]
    )


@router.get("/jobs/{job_id}/auction")
def auction(job_id: str, session: SessionDep, now: NowDep) -> AuctionPublic:
    """An auction-priced job's auction: windows and counts while bids are sealed; every
    commitment and revealed bid after; winner and price once cleared."""
    return AuctionPublic.model_validate(service.public_view(session, job_id, now))


@router.post("/worker/auctions/{job_id}/commit")
def commit(
    job_id: str,
    body: BidCommit,
    provider: CurrentProvider,
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> BidPublic:
    """Seal a bid: SHA-256 of the bid's domain-tagged canonical JSON. Only providers whose
    GPUs fit the job, only while bidding is open; a new commitment replaces the old."""
    row = service.commit_bid(session, config, provider, job_id, body.commitment, now)
    return BidPublic(
        job_id=job_id,
        worker_key=row.worker_key,
        commitment=row.commitment,
        committed_at=row.committed_at,
        revealed=row.revealed is not None,
    )


@router.post("/worker/auctions/{job_id}/reveal")
def reveal(
    job_id: str, body: dict[str, Any], provider: CurrentProvider, session: SessionDep, now: NowDep
) -> BidPublic:
    """Open the sealed bid (`{"bid": {...}, "signature": hex}`) after bidding closed."""
    row = service.reveal_bid(session, provider, job_id, body, now)
    return BidPublic(
        job_id=job_id,
        worker_key=row.worker_key,
        commitment=row.commitment,
        committed_at=row.committed_at,
        revealed=row.revealed is not None,
    )
