from __future__ import annotations

from datetime import datetime

from api.models import Provider, PublishedRateCard
from api.schemas.common import PublicBody
from api.schemas.provider import RatePublic
from api.services.rate_cards import document_of
from proofnet.messages.rate_card import RateCardDocument


class RateCardSetPublic(PublicBody):
    """What a provider's PUT published: the digest job specs name, and the rates."""

    # None when the provider withdrew its rates (an empty rate card).
    digest: str | None
    document: RateCardDocument | None
    rates: list[RatePublic]


class CurrentRateCardPublic(PublicBody):
    """One provider's current rate card: put `digest` in a spec's pricing.rate_card."""

    digest: str
    provider: str  # worker key, as in the document
    key_id: str
    document: RateCardDocument
    published_at: datetime

    @classmethod
    def of(cls, card: PublishedRateCard, provider: Provider) -> CurrentRateCardPublic:
        return cls(
            digest=card.digest,
            provider=provider.worker_key,
            key_id=provider.key_id,
            document=document_of(card),
            published_at=card.published_at,
        )


class CurrentRateCardsPublic(PublicBody):
    data: list[CurrentRateCardPublic]
    count: int
