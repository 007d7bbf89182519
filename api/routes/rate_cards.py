"""Published rate card documents (public): the current ones, and any one by digest."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from api.deps import SessionDep
from api.schemas.rate_card import CurrentRateCardPublic, CurrentRateCardsPublic
from api.services import rate_cards as service

router = APIRouter(prefix="/rate-cards", tags=["rate cards"])

DigestPath = Annotated[str, Path(pattern=r"^sha256:[0-9a-f]{64}$")]


@router.get("")
def current_rate_cards(
    session: SessionDep,
    provider: Annotated[
        str | None, Query(max_length=64, description="only this provider (worker key or key id)")
    ] = None,
) -> CurrentRateCardsPublic:
    """Every provider's current rate card: the digests specs can name in pricing.rate_card."""
    rows = service.current_cards(session, provider)
    data = [CurrentRateCardPublic.of(card, p) for card, p, _ in rows]
    return CurrentRateCardsPublic(data=data, count=len(data))


@router.get(
    "/{digest}",
    response_class=Response,
    responses={
        200: {
            "description": "the document's canonical JSON: exactly the bytes its digest hashes "
            "after the domain tag b'proofnet/rate-card/v1'",
            "content": {"application/json": {}},
        },
        404: {"description": "no such document is published here"},
    },
)
def rate_card_document(digest: DigestPath, session: SessionDep) -> Response:
    """One published document, by digest, in the canonical bytes a client can re-hash."""
    row = service.published(session, digest)
    return Response(
        content=row.document.encode("utf-8"),
        media_type="application/json",
        headers={"Cache-Control": "public, max-age=31536000, immutable"},
    )
