from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request, Response, status

from api.deps import CurrentUser, NowDep, SessionDep
from api.models import NotificationSubscription
from api.schemas.notification import (
    DeliveriesPublic,
    DeliveryPublic,
    EmailPublic,
    EmailUpdate,
    NotificationSettingsPublic,
    WebhookPublic,
    WebhookUpdate,
    WebhookWithSecret,
)
from api.services import notifications as service

router = APIRouter(
    prefix="/notifications", tags=["notifications"], lifespan=service.dispatcher_lifespan
)


def _webhook(sub: NotificationSubscription) -> WebhookPublic:
    return WebhookPublic(url=sub.target, created_at=sub.created_at, updated_at=sub.updated_at)


def _email(sub: NotificationSubscription) -> EmailPublic:
    return EmailPublic(address=sub.target, created_at=sub.created_at, updated_at=sub.updated_at)


def _notifier_config(request: Request) -> service.NotifierConfig:
    config = getattr(request.app.state, "notifier_config", None)
    if config is None:  # dispatcher off and no override: judge URLs as the network implies
        config = service.NotifierConfig(
            allow_private_targets=request.app.state.config.network == "devnet"
        )
    return config


@router.get("")
def get_settings(user: CurrentUser, session: SessionDep) -> NotificationSettingsPublic:
    """Your webhook and email for job completion and settlement (the secret is not shown)."""
    subs = service.subscriptions(session, user)
    return NotificationSettingsPublic(
        webhook=_webhook(subs["webhook"]) if "webhook" in subs else None,
        email=_email(subs["email"]) if "email" in subs else None,
    )


@router.put("/webhook")
def set_webhook(
    body: WebhookUpdate, request: Request, user: CurrentUser, session: SessionDep, now: NowDep
) -> WebhookWithSecret:
    """Set your webhook URL. The response carries the signing secret: deliveries are signed
    `X-Proofnet-Signature: t=<unix>,v1=HMAC-SHA256(secret, t + "." + body)`."""
    sub = service.set_webhook(
        session, _notifier_config(request), user, body.url, now, rotate_secret=body.rotate_secret
    )
    return WebhookWithSecret(
        url=sub.target, created_at=sub.created_at, updated_at=sub.updated_at, secret=sub.secret
    )


@router.delete("/webhook", status_code=status.HTTP_204_NO_CONTENT)
def delete_webhook(user: CurrentUser, session: SessionDep) -> Response:
    service.remove(session, user, "webhook")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.put("/email")
def set_email(
    body: EmailUpdate, user: CurrentUser, session: SessionDep, now: NowDep
) -> EmailPublic:
    return _email(service.set_email(session, user, body.address, now))


@router.delete("/email", status_code=status.HTTP_204_NO_CONTENT)
def delete_email(user: CurrentUser, session: SessionDep) -> Response:
    service.remove(session, user, "email")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/deliveries")
def list_deliveries(
    user: CurrentUser,
    session: SessionDep,
    status_filter: Annotated[
        Literal["pending", "delivered", "failed"] | None, Query(alias="status")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> DeliveriesPublic:
    """Your recent notifications and whether they went out."""
    rows = service.deliveries(session, user, status=status_filter, limit=limit)
    subs = {s.id: s.channel for s in service.subscriptions(session, user).values()}
    data = [
        DeliveryPublic(
            id=r.id or 0,
            channel=subs.get(r.subscription_id, "?"),
            event=r.event,
            idempotency_key=r.idempotency_key,
            payload=r.payload,
            status=r.status,
            attempts=r.attempts,
            next_attempt_at=r.next_attempt_at,
            last_error=r.last_error,
            created_at=r.created_at,
            delivered_at=r.delivered_at,
        )
        for r in rows
    ]
    return DeliveriesPublic(data=data, count=len(data))
