"""Rate card documents: published by providers, stored by digest, named by job specs.

A provider's `PUT /worker/rate-card` turns its rates into a `RateCardDocument` (its worker
key as `provider`), stores it under its digest (publishing the same rates again is the same
document) and makes it the provider's current card. A job priced by rate card must name a
published document; only the provider whose current card is that document may claim it, so
a job is an order at one provider's prices. A provider that changes its rates stops taking
jobs priced by its old card until it publishes those rates again (or the submitter reposts
at the new card); the worker and the oracle price with the document, never with the API's
rate rows, so what the API shows cannot change what gets paid.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, and_, exists, not_
from sqlmodel import Session, col, select

from api.errors import ApiError, BadRequest, NotFound
from api.models import Job, JobRateCard, Provider, ProviderRateCard, PublishedRateCard
from proofnet.messages.jobspec import JobSpec, RateCardPrice
from proofnet.messages.rate_card import RATE_CARDS_PATH, RateCardDocument, RateCardError


class RateCardRefused(ApiError):
    """A spec names a rate card this API cannot price it by (422)."""

    status_code = 422


def publish(
    session: Session, provider: Provider, rates: dict[str, int], now: datetime
) -> PublishedRateCard | None:
    """Store the document for `rates` (if new) and make it the provider's current card; no
    rates withdraws the current card. Adds to the caller's transaction."""
    assert provider.id is not None
    current = session.get(ProviderRateCard, provider.id)
    if not rates:
        if current is not None:
            session.delete(current)
        return None
    try:
        document = RateCardDocument.from_dict(
            {"provider": provider.worker_key, "ntx_per_gpu_hour": rates}
        )
    except RateCardError as e:
        raise BadRequest(str(e)) from e
    digest = document.digest
    row = session.get(PublishedRateCard, digest)
    if row is None:
        row = PublishedRateCard(
            digest=digest,
            provider_key=provider.worker_key,
            document=document.canonical_bytes().decode("utf-8"),
            published_at=now,
        )
        session.add(row)
        session.flush()  # the current-card row refers to it
    if current is None:
        current = ProviderRateCard(provider_id=provider.id, digest=digest, updated_at=now)
    else:
        current.digest, current.updated_at = digest, now
    session.add(current)
    return row


def published(session: Session, digest: str) -> PublishedRateCard:
    row = session.get(PublishedRateCard, digest)
    if row is None:
        raise NotFound(f"no rate card {digest} is published on this API")
    return row


def document_of(row: PublishedRateCard) -> RateCardDocument:
    return RateCardDocument.from_canonical(row.document.encode("utf-8"))


def current_cards(
    session: Session, provider_key: str | None = None
) -> list[tuple[PublishedRateCard, Provider, ProviderRateCard]]:
    """Every provider's current document (or one provider's, by worker key or key id)."""
    stmt = (
        select(PublishedRateCard, Provider, ProviderRateCard)
        .join(ProviderRateCard, col(ProviderRateCard.digest) == col(PublishedRateCard.digest))
        .join(Provider, col(Provider.id) == col(ProviderRateCard.provider_id))
        .order_by(col(Provider.id))
    )
    if provider_key is not None:
        stmt = stmt.where(
            (col(Provider.worker_key) == provider_key) | (col(Provider.key_id) == provider_key)
        )
    return [(card, provider, current) for card, provider, current in session.exec(stmt).all()]


def card_for_spec(session: Session, spec: JobSpec) -> RateCardDocument | None:
    """The document a rate-card spec names (None for other pricing); refused with 422 when
    this API has no such document or the job asks for no GPU (rate cards price GPU time)."""
    pricing = spec.pricing
    if not isinstance(pricing, RateCardPrice):
        return None
    row = session.get(PublishedRateCard, pricing.rate_card)
    if row is None:
        raise RateCardRefused(
            f"pricing.rate_card {pricing.rate_card} is not a rate card published on this API; "
            f"providers publish theirs with PUT /api/v1/worker/rate-card and "
            f"GET {RATE_CARDS_PATH} lists the current ones"
        )
    if spec.resources.gpus == 0:
        raise RateCardRefused(
            "rate cards price GPU time and this job asks for no GPU (resources.gpus is 0): "
            "price it with a fixed amount"
        )
    return document_of(row)


def link_job(session: Session, job: Job, spec: JobSpec) -> None:
    """Record which document prices `job` (a rate-card spec only); adds to the caller's
    transaction, after `card_for_spec` accepted the spec."""
    if not isinstance(spec.pricing, RateCardPrice):
        return
    session.flush()  # the job's id
    assert job.id is not None
    session.add(JobRateCard(job_id=job.id, digest=spec.pricing.rate_card))


def claimable_by(provider_id: int) -> ColumnElement[bool]:
    """Claim filter (correlated to Job): the job names no rate card, or the provider's current
    card is the one it names."""
    return not_(
        exists().where(
            col(JobRateCard.job_id) == col(Job.id),
            not_(
                exists().where(
                    and_(
                        col(ProviderRateCard.provider_id) == provider_id,
                        col(ProviderRateCard.digest) == col(JobRateCard.digest),
                    )
                )
            ),
        )
    )


def feed_document(session: Session, spec: JobSpec) -> str | None:
    """The canonical text of the document a rate-card spec names, for the oracle feed (the
    oracle recomputes the price from it); None for other pricing."""
    if not isinstance(spec.pricing, RateCardPrice):
        return None
    row = session.get(PublishedRateCard, spec.pricing.rate_card)
    return None if row is None else row.document
