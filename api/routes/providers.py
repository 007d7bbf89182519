from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.deps import ConfigDep, NowDep, SessionDep
from api.schemas.provider import ProviderPublic, ProvidersPublic
from api.services import providers as service

router = APIRouter(prefix="/providers", tags=["providers"])


@router.get("")
def list_providers(
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
    online: Annotated[bool, Query(description="only providers heartbeating now")] = False,
) -> ProvidersPublic:
    """The market: every registered provider with its GPUs and rate card (public)."""
    views = service.list_providers(session, config, now, online_only=online)
    return ProvidersPublic(data=[ProviderPublic.of(v) for v in views], count=len(views))
