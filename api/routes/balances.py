from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Path, Request
from sqlalchemy import Connection
from starlette.datastructures import State

from api.deps import CachedUser, run_read
from api.models import User
from api.schemas.balance import BalancePublic
from api.services import balances as service

router = APIRouter(prefix="/balances", tags=["balances"])

# Bounds on the address path parameter (bech32 addresses and stake addresses fit).
ADDRESS_MIN_LENGTH = 20
ADDRESS_MAX_LENGTH = 200

_init_lock = threading.Lock()


def sources_of(state: State) -> service.BalanceSources:
    """`state.balance_sources`, made once from `state.settings`."""
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
    conn: Connection, sources: service.BalanceSources, user: User, address: str, network: str
) -> service.Balance:
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
    address: Annotated[str, Path(min_length=ADDRESS_MIN_LENGTH, max_length=ADDRESS_MAX_LENGTH)],
    request: Request,
    user: CachedUser,
) -> BalancePublic:
    """ADA and NTX of your address or stake address: available on chain, in escrow, earned,
    pending settlement, and your latest payouts with explorer links. Chain and oracle
    figures are cached for a few seconds, the balance as a whole for up to 5 s."""
    # Served by api.fastpath in the running app; this declaration documents it (OpenAPI),
    # validates the address's length, and answers when the lean path is off.
    return await balance_public(request.app.state, user, address)


async def balance_public(state: State, user: User, address: str) -> BalancePublic:
    """The balance body of `address` for `user`, from the app's `state`: what the route
    above returns and what the lean read path (api.fastpath) serves for it."""
    return BalancePublic.of(await balance_of(state, user, address))


async def balance_of(state: State, user: User, address: str) -> service.Balance:
    """The balance `balance_public` shows: the one cached for this user and address, the
    same object while it lasts, or a new one."""
    # Polled often: a balance assembled in the last 5 s (`BalanceCache`) is served without a
    # query or a thread hop; the address is validated and authorized on every read.
    network = state.config.network
    sources = sources_of(state)
    b = service.cached_balance(sources.balances, user, address, network=network)
    if b is None:
        b = await run_read(state, _assemble, sources, user, address, network)
    return b
