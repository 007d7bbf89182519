from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody
from api.services.providers import ProviderView


class WorkerChallengePublic(PublicBody):
    """The nonce to put in the payout binding; good for one registration."""

    nonce: str
    network: str
    expires_at: datetime


class TelemetryUpdate(RequestBody):
    snapshot: dict[str, Any]


class RateCardUpdate(RequestBody):
    # GPU model -> NTX base units per GPU-hour.
    rates: dict[
        Annotated[str, Field(min_length=1, max_length=128)],
        Annotated[int, Field(ge=1, le=2**63 - 1)],
    ] = Field(max_length=64)


class GpuPublic(PublicBody):
    index: int
    uuid: str
    model: str
    memory_mb: int


class RatePublic(PublicBody):
    gpu_model: str
    ntx_per_gpu_hour: int
    updated_at: datetime


class ProviderPublic(PublicBody):
    key_id: str
    worker_key: str
    payout_address: str
    online: bool
    registered_at: datetime
    last_heartbeat_at: datetime | None
    gpus: list[GpuPublic]
    rate_card: list[RatePublic]
    capabilities: dict[str, Any]
    telemetry: dict[str, Any] | None
    telemetry_at: datetime | None

    @classmethod
    def of(cls, view: ProviderView) -> ProviderPublic:
        p = view.provider
        return cls(
            key_id=p.key_id,
            worker_key=p.worker_key,
            payout_address=p.payout_address,
            online=view.online,
            registered_at=p.registered_at,
            last_heartbeat_at=p.last_heartbeat_at,
            gpus=[GpuPublic.model_validate(g) for g in view.gpus],
            rate_card=[RatePublic.model_validate(r) for r in view.rate_cards],
            capabilities=_listing_capabilities(p.capabilities),
            telemetry=p.telemetry,
            telemetry_at=p.telemetry_at,
        )


def _listing_capabilities(capabilities: dict[str, Any]) -> dict[str, Any]:
    # The revealed challenge rows (up to 16k integers each) prove the onboarding challenge
    # to the API; a market listing needs the verdicts, not the matrices.
    trimmed = dict(capabilities)
    challenges = trimmed.get("challenges")
    if isinstance(challenges, list):
        trimmed["challenges"] = [
            {k: v for k, v in c.items() if k != "revealed"} if isinstance(c, dict) else c
            for c in challenges
        ]
    return trimmed


class ProvidersPublic(PublicBody):
    data: list[ProviderPublic]
    count: int


class HeartbeatPublic(PublicBody):
    server_time: datetime
