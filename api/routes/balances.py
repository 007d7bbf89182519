from __future__ import annotations

import threading
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from api.deps import ConfigDep, CurrentUser, SessionDep
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


SourcesDep = Annotated[service.BalanceSources, Depends(get_sources)]


@router.get("/{address}")
def get_balance(
    address: Annotated[str, Path(min_length=20, max_length=200)],
    user: CurrentUser,
    session: SessionDep,
    config: ConfigDep,
    sources: SourcesDep,
) -> BalancePublic:
    """ADA and NTX of your address or stake address: available on chain, in escrow, earned,
    pending settlement, and your latest payouts with explorer links. Chain and oracle
    figures are cached for a few seconds."""
    b = service.balance(
        session,
        sources.lookups,
        user,
        address,
        network=config.network,
        devnet_url=sources.devnet_url,
        ntx_unit=sources.ntx_unit,
    )
    return BalancePublic.of(b)
