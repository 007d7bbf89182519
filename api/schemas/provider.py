from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, field_validator

from api.schemas.common import PublicBody, RequestBody
from api.services.providers import ProviderView
from proofnet.json_limits import value_refusal


class WorkerChallengePublic(PublicBody):
    """The nonce to put in the payout binding; good for one registration."""

    nonce: str
    network: str
    expires_at: datetime


# A worker's telemetry is free-form JSON that the public provider list shows to everyone:
# bounded so that no worker's snapshot can make that list slow, huge or unserializable.
TELEMETRY_MAX_DEPTH = 8
TELEMETRY_MAX_VALUES = 2_000
TELEMETRY_MAX_BYTES = 64 * 1024


def telemetry_refusal(snapshot: Any) -> str | None:
    """Why a telemetry snapshot must not be stored or shown, or None."""
    if not isinstance(snapshot, dict):
        return "telemetry must be a JSON object"
    refusal = value_refusal(snapshot, max_depth=TELEMETRY_MAX_DEPTH, max_nodes=TELEMETRY_MAX_VALUES)
    if refusal is not None:
        return refusal
    if len(json.dumps(snapshot, allow_nan=False)) > TELEMETRY_MAX_BYTES:
        return f"telemetry is larger than {TELEMETRY_MAX_BYTES} bytes"
    return None


class TelemetryUpdate(RequestBody):
    snapshot: dict[str, Any]

    @field_validator("snapshot")
    @classmethod
    def _bounded(cls, snapshot: dict[str, Any]) -> dict[str, Any]:
        refusal = telemetry_refusal(snapshot)
        if refusal is not None:
            raise ValueError(refusal)
        return snapshot


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
            # Stored before the bounds held (or written around them): a public read never
            # fails on one provider's data; that provider's telemetry is just not shown.
            telemetry=p.telemetry if telemetry_refusal(p.telemetry) is None else None,
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
