"""`GET /jobs/{id}/escrow`: where a job's escrow stands and what its submitter can do next
(api.services.escrow_state); `GET /network`: what clients need to show amounts and links
and to refuse a wallet on another network."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request

from api.deps import ConfigDep, CurrentUser, NowDep, SessionDep
from api.routes.balances import sources_of
from api.schemas.common import PublicBody
from api.services import balances
from api.services import escrow_state as service
from proofnet.when import ms_of, when_text

router = APIRouter(tags=["escrow"])


class ActionPublic(PublicBody):
    possible: bool
    # Times in UTC and relative ("2026-12-03 14:00 UTC (in 3 h 10 min)"), never slots.
    message: str
    from_ms: int | None = None


class ClosingPublic(PublicBody):
    action: str  # settle | refund | cancel
    tx_hash: str
    block_height: int
    block_time: datetime
    confirmations: int | None
    paid_ntx: int
    returned_ntx: int
    explorer: dict[str, str]


class EscrowStatePublic(PublicBody):
    job_id: str
    # none | locked | spent | settled | refunded | cancelled
    state: str
    tx_id: str | None
    index: int | None
    budget: int | None
    deadline_ms: int | None
    deadline: str | None  # the deadline in UTC, and from now
    recorded_at: datetime | None
    lock_explorer: dict[str, str]
    closing: ClosingPublic | None
    refund: ActionPublic
    cancel: ActionPublic
    note: str
    server_time_ms: int


@router.get("/jobs/{job_id}/escrow")
def job_escrow(
    job_id: str, request: Request, user: CurrentUser, session: SessionDep, now: NowDep
) -> EscrowStatePublic:
    """The job's escrow from the API's records (whichever client locked it): locked, or
    settled, refunded or cancelled by which transaction (block, confirmations, explorer
    links), what was paid and returned, and whether a refund or cancel is possible now."""
    state = request.app.state
    sources = sources_of(state)
    network = state.config.network

    def unspent(tx_id: str, index: int) -> bool | None:
        try:
            return sources.lookups.output_unspent(tx_id, index)
        except balances.LookupFailed:
            return None

    found = service.escrow_state(
        session,
        user,
        job_id,
        now=now,
        links=lambda tx: balances.explorer_links(network, sources.devnet_url, tx),
        unspent=unspent,
    )
    now_ms = ms_of(now)
    return EscrowStatePublic(
        job_id=found.job_id,
        state=found.state,
        tx_id=found.tx_id,
        index=found.index,
        budget=found.budget,
        deadline_ms=found.deadline_ms,
        deadline=None if found.deadline_ms is None else when_text(found.deadline_ms, now_ms),
        recorded_at=found.recorded_at,
        lock_explorer=found.lock_explorer,
        closing=None if found.closing is None else ClosingPublic.model_validate(found.closing),
        refund=ActionPublic.model_validate(found.refund),
        cancel=ActionPublic.model_validate(found.cancel),
        note=found.note,
        server_time_ms=now_ms,
    )


class NtxPublic(PublicBody):
    ticker: str
    decimals: int
    # policy id + asset name, hex; null when this API has none configured.
    unit: str | None


class NetworkPublic(PublicBody):
    network: str
    # What CIP-30 `getNetworkId()` answers for a wallet on this network (1 mainnet, 0 else).
    network_id: int
    ntx: NtxPublic
    # Explorer page of a transaction, "{tx}" standing for its hash, by explorer name.
    explorer: dict[str, str]
    server_time_ms: int


@router.get("/network")
def network(request: Request, config: ConfigDep, now: NowDep) -> NetworkPublic:
    """The network this API settles on, NTX's ticker and decimals, explorer links (public)."""
    sources = sources_of(request.app.state)
    links: dict[str, Any] = balances.explorer_links(config.network, sources.devnet_url, "{tx}")
    return NetworkPublic(
        network=config.network,
        network_id=1 if config.mainnet else 0,
        ntx=NtxPublic(
            ticker=config.ntx_ticker, decimals=config.ntx_decimals, unit=sources.ntx_unit
        ),
        explorer=links,
        server_time_ms=ms_of(now),
    )
