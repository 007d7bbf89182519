from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Path, Request
from sqlalchemy import Engine

from api.db import read_connection
from api.deps import CachedUser, run_read
from api.models import User
from api.schemas.balance import BalancePublic
from api.services import balances as service

router = APIRouter(prefix="/balances", tags=["balances"])

_init_lock = threading.Lock()


def get_sources(request: Request) -> service.BalanceSources:
    """`app.state.balance_sources`, made once from `app.state.settings`."""
    state = request.app.state
    sources = getattr(state, "balance_sources", None)
    if sources is None:
        with _init_lock:
            sources = getattr(state, "balance_sources", None)
            if sources is None:
                sources = service.BalanceSources.from_settings(state.settings)
                state.balance_sources = sources
    assert isinstance(sources, service.BalanceSources)
    return sources


def _assemble(
    engine: Engine, sources: service.BalanceSources, user: User, address: str, network: str
) -> service.Balance:
    with read_connection(engine) as conn:
        return service.balance(
            conn,
            sources.lookups,
            user,
            address,
            network=network,
            devnet_url=sources.devnet_url,
            ntx_unit=sources.ntx_unit,
            cache=sources.balances,
        )


@router.get("/{address}")
async def get_balance(
    address: Annotated[str, Path(min_length=20, max_length=200)],
    request: Request,
    user: CachedUser,
) -> BalancePublic:
    """ADA and NTX of your address or stake address: available on chain, in escrow, earned,
    pending settlement, and your latest payouts with explorer links. Chain and oracle
    figures are cached for a few seconds, the balance as a whole for up to 5 s."""
    # Polled often: a balance assembled in the last 5 s (`BalanceCache`) is served without a
    # query or a thread hop; the address is validated and authorized on every read. Config
    # and sources come straight from app.state: each dependency costs FastAPI time.
    state = request.app.state
    network = state.config.network
    sources = get_sources(request)
    b = service.cached_balance(sources.balances, user, address, network=network)
    if b is None:
        b = await run_read(_assemble, state.engine, sources, user, address, network)
    return BalancePublic.of(b)
