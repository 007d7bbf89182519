"""Providers: registration with a verified payout binding, heartbeats, telemetry, rate cards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import BadRequest, Conflict, Unauthorized
from api.models import Provider, ProviderGpu, PublishedRateCard, RateCard
from api.services import gpu_challenges, rate_cards
from api.services.auth import PURPOSE_WORKER_BINDING, consume_challenge
from proofnet.messages.binding import BindingError, PayoutBinding, verify_payout_binding
from proofnet.messages.registration import ProviderRegistration


@dataclass(frozen=True)
class GpuOffer:
    index: int
    uuid: str
    model: str
    memory_mb: int


def offers_from_registration(registration: ProviderRegistration) -> list[GpuOffer]:
    """The GPUs a registration offers, refused unless its own onboarding report backs them:
    the wrong inventory is the complaint providers' users raise most."""
    uuids = [g.uuid for g in registration.gpus]
    if len(set(uuids)) != len(uuids):
        # One GPU offered twice would hold two leases at once.
        raise BadRequest("GPU UUIDs must be unique")
    details = {d.uuid: d for d in registration.capabilities.gpus}
    if registration.capabilities.cpu_only and registration.gpus:
        raise BadRequest("the report says cpu_only but the registration offers GPUs")
    offers = []
    for gpu in registration.gpus:
        detail = details.get(gpu.uuid)
        if detail is None:
            raise BadRequest(f"GPU {gpu.uuid} is offered but missing from the inventory report")
        if detail.index != gpu.index:
            raise BadRequest(f"GPU {gpu.uuid}: index {gpu.index} differs from the report")
        if gpu.memory_mb * 2**20 > detail.memory_total_bytes + 2**20:
            raise BadRequest(
                f"GPU {gpu.uuid}: offers {gpu.memory_mb} MB but the report shows "
                f"{detail.memory_total_bytes // 2**20} MB"
            )
        offers.append(GpuOffer(gpu.index, gpu.uuid, gpu.name, gpu.memory_mb))
    return offers


@dataclass(frozen=True)
class ProviderView:
    provider: Provider
    gpus: list[ProviderGpu]
    rate_cards: list[RateCard]
    online: bool


def register(
    session: Session,
    config: ApiConfig,
    *,
    worker_key: str,
    binding: PayoutBinding,
    gpus: Sequence[GpuOffer],
    capabilities: dict[str, Any],
    now: datetime,
) -> Provider:
    """Register (or re-register) the worker that signed the request.

    The binding must be signed by that same worker key, over a nonce this API issued to it
    and not yet used; re-registering replaces the payout address and the GPU list.
    """
    if binding.worker_pubkey != worker_key:
        raise Unauthorized("payout binding is signed by a different key than this request")
    consume_challenge(
        session, purpose=PURPOSE_WORKER_BINDING, nonce=binding.nonce, subject=worker_key, now=now
    )
    try:
        verify_payout_binding(
            binding, network=config.network, nonce=binding.nonce, worker_pubkey=worker_key
        )
    except BindingError as e:
        session.commit()  # the nonce stays burnt: one attempt per challenge
        raise Unauthorized(f"payout binding rejected: {e}") from e
    indexes = [g.index for g in gpus]
    if len(set(indexes)) != len(indexes):
        raise BadRequest("GPU indexes must be unique")

    provider = session.exec(select(Provider).where(Provider.worker_key == worker_key)).first()
    previous: dict[str, ProviderGpu] = {}
    if provider is None:
        provider = Provider(
            worker_key=worker_key,
            key_id=binding.key_id,
            payout_address=binding.payout_address,
            binding=binding.model_dump(mode="json"),
            capabilities=capabilities,
            registered_at=now,
            last_heartbeat_at=now,
        )
        session.add(provider)
        session.flush()
    else:
        assert provider.id is not None
        # Kept to carry a passed API challenge of the same GPU over (gpu_challenges).
        previous = {
            g.uuid: ProviderGpu(
                provider_id=g.provider_id,
                index=g.index,
                uuid=g.uuid,
                model=g.model,
                memory_mb=g.memory_mb,
                check_status=g.check_status,
                check_reason=g.check_reason,
                verified_until=g.verified_until,
            )
            for g in gpus_of(session, provider.id)
        }
        provider.payout_address = binding.payout_address
        provider.binding = binding.model_dump(mode="json")
        provider.capabilities = capabilities
        provider.registered_at = now
        provider.last_heartbeat_at = now
        session.add(provider)
        session.execute(delete(ProviderGpu).where(col(ProviderGpu.provider_id) == provider.id))
    assert provider.id is not None
    rows = [
        ProviderGpu(
            provider_id=provider.id,
            index=gpu.index,
            uuid=gpu.uuid,
            model=gpu.model,
            memory_mb=gpu.memory_mb,
        )
        for gpu in gpus
    ]
    # What the worker's own report says against its GPUs keeps them off the market.
    gpu_challenges.apply_registration(rows, capabilities, previous)
    session.add_all(rows)
    session.commit()
    return provider


def heartbeat(session: Session, provider: Provider, now: datetime) -> Provider:
    provider.last_heartbeat_at = now
    session.add(provider)
    session.commit()
    return provider


def record_telemetry(
    session: Session, provider: Provider, snapshot: dict[str, Any], now: datetime
) -> Provider:
    """Keep the latest snapshot; a telemetry report also counts as a heartbeat."""
    provider.telemetry = snapshot
    provider.telemetry_at = now
    provider.last_heartbeat_at = now
    session.add(provider)
    session.commit()
    return provider


@dataclass(frozen=True)
class RateCardSet:
    rates: list[RateCard]
    # The published document the rates are (None when the provider withdrew its rates).
    published: PublishedRateCard | None


def set_rate_card(
    session: Session, config: ApiConfig, provider: Provider, rates: dict[str, int], now: datetime
) -> RateCardSet:
    """Replace the provider's prices (NTX base units per GPU-hour, by GPU model) and publish
    them as its current rate card document (`api.services.rate_cards`). A model's rate is
    only for GPUs that passed that model's checks: a model none of whose GPUs is offered
    (`gpu_challenges.offer_state`) cannot be priced."""
    assert provider.id is not None
    registered = gpus_of(session, provider.id)
    unknown = sorted(set(rates) - {g.model for g in registered})
    if unknown:
        raise BadRequest(
            f"rate card names GPU models this provider did not register: {', '.join(unknown)}"
        )
    offered = {g.model for g in registered if gpu_challenges.offer_state(g, config, now).offered}
    unchecked = sorted(set(rates) - offered)
    if unchecked:
        raise BadRequest(
            "rate card names GPU models none of whose GPUs passed their checks: "
            f"{', '.join(unchecked)} (see GET /api/v1/worker/gpus)"
        )
    try:
        document = rate_cards.publish(session, provider, rates, now)
        session.execute(delete(RateCard).where(col(RateCard.provider_id) == provider.id))
        cards = [
            RateCard(provider_id=provider.id, gpu_model=m, ntx_per_gpu_hour=p, updated_at=now)
            for m, p in sorted(rates.items())
        ]
        session.add_all(cards)
        session.commit()
    except IntegrityError as e:  # two updates of this provider's card at once
        session.rollback()
        raise Conflict("this provider's rate card changed concurrently; send it again") from e
    return RateCardSet(cards, document)


def gpus_of(session: Session, provider_id: int) -> list[ProviderGpu]:
    return list(
        session.exec(
            select(ProviderGpu)
            .where(ProviderGpu.provider_id == provider_id)
            .order_by(col(ProviderGpu.index))
        ).all()
    )


def list_providers(
    session: Session, config: ApiConfig, now: datetime, *, online_only: bool
) -> list[ProviderView]:
    online_since = now - timedelta(seconds=config.provider_online_s)
    stmt = select(Provider).order_by(col(Provider.id))
    if online_only:
        stmt = stmt.where(col(Provider.last_heartbeat_at) >= online_since)
    providers = list(session.exec(stmt).all())
    ids = [p.id for p in providers]
    gpus: dict[int, list[ProviderGpu]] = {}
    for gpu in session.exec(
        select(ProviderGpu)
        .where(col(ProviderGpu.provider_id).in_(ids))
        .order_by(col(ProviderGpu.provider_id), col(ProviderGpu.index))
    ).all():
        gpus.setdefault(gpu.provider_id, []).append(gpu)
    cards: dict[int, list[RateCard]] = {}
    for card in session.exec(
        select(RateCard)
        .where(col(RateCard.provider_id).in_(ids))
        .order_by(col(RateCard.provider_id), col(RateCard.gpu_model))
    ).all():
        cards.setdefault(card.provider_id, []).append(card)
    views = []
    for p in providers:
        assert p.id is not None
        online = p.last_heartbeat_at is not None and p.last_heartbeat_at >= online_since
        # The market shows only offered GPUs: never one whose check failed (or, where the
        # API requires its challenge, one that has not passed it lately).
        offered = [
            g for g in gpus.get(p.id, []) if gpu_challenges.offer_state(g, config, now).offered
        ]
        views.append(ProviderView(p, offered, cards.get(p.id, []), online))
    return views
