"""Published rate card documents (content-addressed), each provider's current one, and the
document each rate-card job is priced by."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Text
from sqlmodel import Field

from api.models.base import TableBase

DIGEST_LENGTH = 71  # "sha256:" + 64 hex digits


class PublishedRateCard(TableBase, table=True):
    """A document as published: never changed or deleted, since job specs name it."""

    __tablename__ = "rate_card_documents"

    digest: str = Field(primary_key=True, max_length=DIGEST_LENGTH)
    # The document's `provider` (worker key), copied out for lookups.
    provider_key: str = Field(max_length=64, index=True)
    # Canonical JSON: exactly the bytes the digest hashes (after the domain tag).
    document: str = Field(sa_type=Text)
    published_at: datetime


class ProviderRateCard(TableBase, table=True):
    """The document a provider prices by now; only it lets the provider claim rate-card jobs."""

    __tablename__ = "provider_rate_cards"

    provider_id: int = Field(foreign_key="providers.id", primary_key=True, ondelete="CASCADE")
    digest: str = Field(foreign_key="rate_card_documents.digest", max_length=DIGEST_LENGTH)
    updated_at: datetime


class JobRateCard(TableBase, table=True):
    """The rate card a job's spec names, copied out so the claim can match it in SQL."""

    __tablename__ = "job_rate_cards"

    job_id: int = Field(foreign_key="jobs.id", primary_key=True, ondelete="CASCADE")
    digest: str = Field(
        foreign_key="rate_card_documents.digest", max_length=DIGEST_LENGTH, index=True
    )
