from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody


class WebhookUpdate(RequestBody):
    url: str = Field(min_length=1, max_length=2048)
    # Make a new signing secret (the old one stops working at once).
    rotate_secret: bool = False


class EmailUpdate(RequestBody):
    address: str = Field(min_length=3, max_length=254)


class WebhookPublic(PublicBody):
    url: str
    created_at: datetime
    updated_at: datetime


class WebhookWithSecret(WebhookPublic):
    # HMAC-SHA256 key for the X-Proofnet-Signature header; shown only when set or rotated.
    secret: str


class EmailPublic(PublicBody):
    address: str
    created_at: datetime
    updated_at: datetime


class NotificationSettingsPublic(PublicBody):
    webhook: WebhookPublic | None
    email: EmailPublic | None


class DeliveryPublic(PublicBody):
    id: int
    channel: str
    event: str
    idempotency_key: str
    payload: dict[str, Any]
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str
    created_at: datetime
    delivered_at: datetime | None


class DeliveriesPublic(PublicBody):
    data: list[DeliveryPublic]
    count: int
