"""Notification subscriptions (a webhook and an email per user) and the delivery outbox.

Deliveries are rows written in the same transaction as the event they announce, so a crash
can never lose one; the dispatcher (api.services.notifications) sends each until it succeeds
or runs out of attempts. Sending may repeat (at-least-once): receivers dedupe on the
idempotency key, which every delivery carries.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase

CHANNELS = ("webhook", "email")
# pending -> delivered | failed (attempts exhausted)
DELIVERY_STATUSES = ("pending", "delivered", "failed")


class NotificationSubscription(TableBase, table=True):
    __tablename__ = "notification_subscriptions"
    __table_args__ = (UniqueConstraint("user_id", "channel"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", ondelete="CASCADE")
    channel: str = Field(max_length=16)
    # The webhook URL or the email address.
    target: str = Field(max_length=2048)
    # HMAC-SHA256 key for webhook signatures; kept in the clear because the API signs with it.
    secret: str = Field(default="", max_length=128)
    created_at: datetime
    updated_at: datetime


class NotificationDelivery(TableBase, table=True):
    __tablename__ = "notification_outbox"
    __table_args__ = (Index("ix_notification_outbox_due", "status", "next_attempt_at"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(foreign_key="users.id", index=True, ondelete="CASCADE")
    # Unsubscribing drops what is still queued for that channel.
    subscription_id: int = Field(
        foreign_key="notification_subscriptions.id", index=True, ondelete="CASCADE"
    )
    event: str = Field(max_length=32)
    # Same event for the same job and channel -> same key: enqueueing twice is a no-op.
    idempotency_key: str = Field(max_length=200, unique=True)
    payload: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    status: str = Field(default="pending", max_length=16)
    attempts: int = 0
    next_attempt_at: datetime
    # A dispatcher holds a row until then; a crashed one's rows become due again after it.
    locked_until: datetime | None = None
    last_error: str = Field(default="", max_length=2000)
    created_at: datetime
    delivered_at: datetime | None = None
