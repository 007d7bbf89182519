"""Sealed-bid reverse auctions of auction-priced jobs: windows, commitments, reveals, clearing.

The rule itself (`proofnet.messages.auction.clear`) is shared with the worker and the
oracle; this module keeps the state around it and enforces the windows, which only the API
can (the oracle trusts it for timing and completeness: docs/pricing.md):

- bidding: from the job's submission until `bids_close_at`, a provider whose GPUs fit the
  job may commit (once; a new commitment replaces its earlier one);
- revealing: from `bids_close_at` until `reveals_close_at`, a provider reveals the bid that
  hashes to its commitment, signed by its worker key;
- cleared: at the first claim or read after `reveals_close_at`. The winner alone may claim
  the job, and is paid the clearing price; with no bid at or under the reserve, the job
  fails with that reason (the submitter refunds its escrow);
- resumed: once the winner lost an attempt (released, failed, expired), any provider that
  revealed a bid at or under the reserve (`over_reserve_jobs`) may claim the job too and resume it from the last committed checkpoint
  (`api.services.resume`), paid the same clearing price's share of the segments it proves
  (the oracle re-checks both: `oracle.verification.verify`). A bid is a standing offer to
  run the job; the clearing price is public, so claiming at it is the bidder's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, exists, not_, or_
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, NotFound
from api.models import Auction, AuctionBid, Job, Lease, Provider
from api.services.units import offered_gpus
from proofnet.messages.auction import (
    MAX_BIDS,
    AuctionError,
    Clearing,
    RevealedBid,
    clear,
    parse_revealed,
)
from proofnet.messages.jobspec import AuctionPrice, JobSpec

BIDDING, REVEALING, CLEARED = "bidding", "revealing", "cleared"


def open_auction(session: Session, config: ApiConfig, job: Job, spec: JobSpec) -> None:
    """Start the bidding window of a newly submitted auction-priced job (no-op otherwise)."""
    pricing = spec.pricing
    if not isinstance(pricing, AuctionPrice):
        return
    assert job.id is not None
    closes = job.created_at + timedelta(seconds=pricing.bid_window_s)
    session.add(
        Auction(
            job_id=job.id,
            reserve=pricing.reserve,
            bids_close_at=closes,
            reveals_close_at=closes + timedelta(seconds=config.auction_reveal_s),
        )
    )


# A lease that ended without completing (as `api.services.resume` counts lost attempts).
LOST_OUTCOMES = ("released", "failed", "expired")


def claimable_by(provider_id: int) -> Any:
    """Claim filter (correlated to Job): the job is not auctioned, or it cleared and this
    provider won it, or the winner lost an attempt and this provider revealed a bid."""
    winner_lost = exists().where(
        col(Lease.job_id) == col(Job.id),
        col(Lease.provider_id) == col(Auction.winner_provider_id),
        col(Lease.outcome).in_(LOST_OUTCOMES),
    )
    bid = exists().where(
        col(AuctionBid.job_id) == col(Job.id),
        col(AuctionBid.provider_id) == provider_id,
        col(AuctionBid.revealed_at).is_not(None),
    )
    return not_(
        exists().where(
            col(Auction.job_id) == col(Job.id),
            or_(
                col(Auction.cleared_at).is_(None),
                col(Auction.winner_provider_id).is_(None),
                and_(
                    col(Auction.winner_provider_id) != provider_id,
                    not_(and_(winner_lost, bid)),
                ),
            ),
        )
    )


def over_reserve_jobs(session: Session, provider_id: int) -> set[int]:
    """Jobs whose cleared auction this provider did not win and where its revealed bid is
    above the reserve: it may not stand in for a winner that lost the job there, since the
    oracle pays only bidders at or under the reserve (`auction_fallback_refusal`). The bid
    is JSON (a signed `RevealedBid`), so the amount is compared here, in Python, not in SQL
    (whose JSON operators differ between SQLite and PostgreSQL)."""
    rows = session.exec(
        select(AuctionBid, Auction)
        .join(Auction, col(Auction.job_id) == col(AuctionBid.job_id))
        .where(
            col(AuctionBid.provider_id) == provider_id,
            col(AuctionBid.revealed).is_not(None),
            col(Auction.cleared_at).is_not(None),
            col(Auction.winner_provider_id) != provider_id,
            exists().where(col(Job.id) == col(Auction.job_id), col(Job.status) == "queued"),
        )
    ).all()
    over = set()
    for bid, auction in rows:
        try:
            amount = parse_revealed(bid.revealed).bid.amount
        except AuctionError:
            amount = None  # a stored bid that no longer parses never stands in
        if amount is None or amount > auction.reserve:
            over.add(bid.job_id)
    return over


def phase(auction: Auction, now: datetime) -> str:
    if auction.cleared_at is not None:
        return CLEARED
    if now < auction.bids_close_at:
        return BIDDING
    return REVEALING


def _auction_of(session: Session, job_id: str, *, lock: bool = False) -> tuple[Job, Auction]:
    stmt = select(Job).where(Job.job_id == job_id)
    if lock:
        stmt = stmt.with_for_update()
    job = session.exec(stmt).first()
    auction = None if job is None else session.get(Auction, job.id)
    if job is None or auction is None:
        raise NotFound(f"no auction-priced job {job_id}")
    return job, auction


def commit_bid(
    session: Session,
    config: ApiConfig,
    provider: Provider,
    job_id: str,
    commitment: str,
    now: datetime,
) -> AuctionBid:
    """Record (or replace) `provider`'s sealed bid while the window is open."""
    if len(commitment) != 64 or any(c not in "0123456789abcdef" for c in commitment):
        raise BadRequest("commitment must be 64 lowercase hex digits (SHA-256)")
    job, auction = _auction_of(session, job_id, lock=True)
    if phase(auction, now) != BIDDING:
        raise Conflict(f"bidding on job {job_id} closed at {auction.bids_close_at.isoformat()}")
    if job.status != "queued":
        raise Conflict(f"job {job_id} is {job.status}: it takes no bids")
    assert provider.id is not None and job.id is not None
    fits = session.exec(
        select(offered_gpus(provider.id, config, now)).select_from(Job).where(col(Job.id) == job.id)
    ).one()
    if fits < job.gpu_count:
        raise Conflict(
            f"this provider's GPUs do not fit job {job_id} ({job.gpu_count} GPU(s) with "
            f"{job.gpu_memory_mb} MB each): it may not bid"
        )
    bid = session.exec(
        select(AuctionBid).where(AuctionBid.job_id == job.id, AuctionBid.provider_id == provider.id)
    ).first()
    if bid is None:
        count = len(session.exec(select(AuctionBid.id).where(AuctionBid.job_id == job.id)).all())
        if count >= MAX_BIDS:
            raise Conflict(f"job {job_id} has {count} bids: an auction takes at most {MAX_BIDS}")
        bid = AuctionBid(
            job_id=job.id,
            provider_id=provider.id,
            worker_key=provider.worker_key,
            commitment=commitment,
            committed_at=now,
        )
    else:
        bid.commitment, bid.committed_at = commitment, now
    session.add(bid)
    session.commit()
    session.refresh(bid)
    return bid


def reveal_bid(
    session: Session, provider: Provider, job_id: str, raw: object, now: datetime
) -> AuctionBid:
    """Open `provider`'s sealed bid: it must hash to its commitment and carry its signature."""
    job, auction = _auction_of(session, job_id, lock=True)
    if phase(auction, now) == BIDDING:
        raise Conflict(
            f"bids on job {job_id} are revealed after {auction.bids_close_at.isoformat()}"
        )
    if now >= auction.reveals_close_at or auction.cleared_at is not None:
        raise Conflict(f"reveals on job {job_id} closed at {auction.reveals_close_at.isoformat()}")
    try:
        revealed = parse_revealed(raw)
    except AuctionError as exc:
        raise BadRequest(str(exc)) from None
    bid_row = session.exec(
        select(AuctionBid).where(AuctionBid.job_id == job.id, AuctionBid.provider_id == provider.id)
    ).first()
    if bid_row is None:
        raise Conflict(f"this provider made no commitment on job {job_id}")
    bid = revealed.bid
    if bid.worker_key != provider.worker_key:
        raise BadRequest("the revealed bid names another worker key than the signed request's")
    if bid.job_id != job_id:
        raise BadRequest(f"the revealed bid is for job {bid.job_id}, not {job_id}")
    if bid.commitment != bid_row.commitment:
        raise BadRequest("the revealed bid does not hash to this provider's commitment")
    bid_row.revealed = revealed.model_dump(mode="json")
    bid_row.revealed_at = now
    session.add(bid_row)
    session.commit()
    session.refresh(bid_row)
    return bid_row


@dataclass(frozen=True)
class AuctionRecord:
    """What the auction of one job consists of, as the clearing rule reads it."""

    commitments: tuple[str, ...]
    bids: tuple[RevealedBid, ...]


def record_of(session: Session, job: Job) -> AuctionRecord:
    rows = session.exec(
        select(AuctionBid).where(AuctionBid.job_id == job.id).order_by(col(AuctionBid.id))
    ).all()
    return AuctionRecord(
        commitments=tuple(r.commitment for r in rows),
        bids=tuple(RevealedBid.model_validate(r.revealed) for r in rows if r.revealed),
    )


def clear_due(session: Session, now: datetime) -> int:
    """Clear every auction whose reveal window has closed; returns how many cleared."""
    due = session.exec(
        select(Auction.job_id).where(
            col(Auction.cleared_at).is_(None), col(Auction.reveals_close_at) <= now
        )
    ).all()
    for job_pk in due:
        _clear_one(session, job_pk, now)
    return len(due)


def _clear_one(session: Session, job_pk: int, now: datetime) -> None:
    job = session.exec(select(Job).where(Job.id == job_pk).with_for_update()).one()
    auction = session.get(Auction, job_pk)
    if auction is None or auction.cleared_at is not None:
        session.commit()
        return
    record = record_of(session, job)
    # Each stored bid was checked on reveal; clearing re-checks them as the oracle will.
    outcome = clear(
        job_id=job.job_id,
        reserve=auction.reserve,
        bids=record.bids,
        commitments=record.commitments,
    )
    auction.cleared_at = now
    auction.reason = outcome.reason
    if outcome.winner is not None:
        winner = session.exec(select(Provider).where(Provider.worker_key == outcome.winner)).one()
        auction.winner_provider_id, auction.winner_key = winner.id, outcome.winner
        auction.price = outcome.price
    elif job.status == "queued":
        job.status = "failed"
        job.last_error = f"auction: {outcome.reason}"
        job.finished_at = now
        job.updated_at = now
        job.version += 1
        session.add(job)
    session.add(auction)
    session.commit()


def clearing_of(record: AuctionRecord, job_id: str, reserve: int) -> Clearing:
    return clear(job_id=job_id, reserve=reserve, bids=record.bids, commitments=record.commitments)


def public_view(session: Session, job_id: str, now: datetime) -> dict[str, Any]:
    """What anyone may see of a job's auction: windows and counts while sealed; every
    commitment and revealed bid once bidding closed (so anyone can recompute the outcome)."""
    clear_due(session, now)
    job, auction = _auction_of(session, job_id)
    record = record_of(session, job)
    state = phase(auction, now)
    view: dict[str, Any] = {
        "job_id": job_id,
        "phase": state,
        "reserve": auction.reserve,
        "bids_close_at": auction.bids_close_at,
        "reveals_close_at": auction.reveals_close_at,
        "commitments": len(record.commitments),
        "revealed": len(record.bids),
    }
    if state != BIDDING:
        view["commitment_list"] = sorted(record.commitments)
        view["bids"] = [b.model_dump(mode="json") for b in record.bids]
    if state == CLEARED:
        view.update(
            winner=auction.winner_key,
            price=auction.price,
            reason=auction.reason,
            cleared_at=auction.cleared_at,
        )
    return view


def feed_auction(session: Session, job: Job) -> dict[str, Any] | None:
    """The auction's record for the oracle feed (None for other pricing): the oracle
    re-verifies each bid's signature and re-runs the clearing rule itself."""
    if session.get(Auction, job.id) is None:
        return None
    record = record_of(session, job)
    return {
        "commitments": sorted(record.commitments),
        "bids": [b.model_dump(mode="json") for b in record.bids],
    }


def open_auctions(session: Session, now: datetime, limit: int = 100) -> list[dict[str, Any]]:
    """Auctions still taking bids or reveals, the soonest to close first: what a provider
    looks through for jobs to bid on."""
    clear_due(session, now)
    rows = session.exec(
        select(Auction, Job)
        .where(col(Auction.job_id) == col(Job.id), col(Auction.cleared_at).is_(None))
        .order_by(col(Auction.bids_close_at), col(Job.id))
        .limit(limit)
    ).all()
    listed = []
    for auction, job in rows:
        count = len(session.exec(select(AuctionBid.id).where(AuctionBid.job_id == job.id)).all())
        listed.append(
            {
                "job_id": job.job_id,
                "phase": phase(auction, now),
                "gpus": job.gpu_count,
                "gpu_memory_mb": job.gpu_memory_mb,
                "max_duration_s": int(job.spec["resources"]["max_duration_s"]),
                "reserve": auction.reserve,
                "bids_close_at": auction.bids_close_at,
                "reveals_close_at": auction.reveals_close_at,
                "commitments": count,
            }
        )
    return listed
