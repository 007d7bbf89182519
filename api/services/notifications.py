"""Notifications on job completion, settlement and refund: a webhook and an email per user.

Delivery is an outbox: `notify_job_completed`, `notify_settled` and `notify_refunded` add
rows to the caller's transaction (settlements and refunds are queued by the chain watcher,
api.services.chain_watch, once the transaction is deep enough), so a notification exists exactly when the event was committed, and a crash
cannot lose one. A dispatcher (one per API process; several may share a database) claims
due rows under a time-limited lock, sends them, and records the outcome; failures are
retried with exponential backoff up to `max_attempts`. A crash between sending and
recording means the row is sent again once its lock lapses: delivery is at-least-once, and
every delivery carries its idempotency key (`X-Proofnet-Delivery`, the payload's `id`, the
email's Message-ID) so receivers can drop repeats.

Webhook signatures (`X-Proofnet-Signature: t=<unix seconds>,v1=<hex>`): v1 is
HMAC-SHA256, keyed with the subscription's secret (returned when the webhook is set), over
the ASCII timestamp, a ".", and the raw request body. To verify: split the header, recompute
the HMAC over `t + "." + body` exactly as received, compare in constant time, and refuse
timestamps more than a few minutes from your clock (replays). `verify_signature` below is a
reference implementation.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import json
import logging
import re
import smtplib
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlalchemy import Engine, update
from sqlmodel import Session, col, select

from api.db import open_session
from api.errors import BadRequest, NotFound
from api.models import Job, NotificationDelivery, NotificationSubscription, User
from api.services.tokens import new_secret
from proofnet.egress import EgressPolicy, EgressRefused, Resolver, system_resolver
from proofnet.pinned_http import pinned_client
from proofnet.redaction import redact_credentials

log = logging.getLogger(__name__)

EVENT_COMPLETED = "job.completed"
EVENT_SETTLED = "job.settled"
EVENT_REFUNDED = "job.refunded"
SIGNATURE_HEADER = "X-Proofnet-Signature"
DELIVERY_HEADER = "X-Proofnet-Delivery"
EVENT_HEADER = "X-Proofnet-Event"
SIGNATURE_TOLERANCE_S = 300

_EMAIL = re.compile(r"[^@\s<>\"',;]+@[^@\s<>\"',;]+\.[^@\s<>\"',;.]+")


class SignatureError(ValueError):
    """A webhook signature header is malformed, stale, or does not match the body."""


@dataclass(frozen=True)
class NotifierConfig:
    smtp_host: str = ""
    smtp_port: int = 25
    smtp_from: str = "proofnet@localhost"
    smtp_starttls: bool = False
    smtp_username: str = ""
    smtp_password: str = ""
    smtp_timeout_s: float = 10.0
    webhook_timeout_s: float = 10.0
    max_attempts: int = 8
    backoff_base_s: float = 5.0
    backoff_max_s: float = 3600.0
    poll_interval_s: float = 1.0
    # How long a dispatcher owns a claimed row before another may take it over.
    lock_s: float = 120.0
    batch_size: int = 20
    # Loopback and private webhook targets: fine on a devnet, an SSRF hole in production.
    allow_private_targets: bool = False
    # Networks (CIDRs) let back in for webhook targets without allowing every private one.
    webhook_allow_networks: tuple[str, ...] = ()
    # How webhook hosts are resolved (once per delivery; tests inject a resolver) and whose
    # TLS certificates are trusted (True: the system's).
    resolver: Resolver = system_resolver
    webhook_verify: ssl.SSLContext | bool = True

    @classmethod
    def from_settings(cls, settings: Any, *, network: str) -> NotifierConfig:
        return cls(
            smtp_host=str(getattr(settings, "smtp_host", "")),
            smtp_port=int(getattr(settings, "smtp_port", 25)),
            smtp_from=str(getattr(settings, "smtp_from", "proofnet@localhost")),
            smtp_starttls=bool(getattr(settings, "smtp_starttls", False)),
            smtp_username=str(getattr(settings, "smtp_username", "")),
            smtp_password=str(getattr(settings, "smtp_password", "")),
            allow_private_targets=network == "devnet",
        )

    def webhook_egress(self) -> EgressPolicy:
        """Where a webhook may connect: public addresses, or anything on a devnet."""
        if self.allow_private_targets:
            return EgressPolicy.allowing(["0.0.0.0/0", "::/0"])
        return EgressPolicy.allowing(self.webhook_allow_networks)

    def backoff(self, attempts: int) -> timedelta:
        """Delay before the next try after `attempts` failures: base x 2^(n-1), capped."""
        return timedelta(seconds=min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempts - 1)))


# --- signatures ---------------------------------------------------------------------------


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Proofnet-Signature` header value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return f"t={timestamp},v1={mac.hexdigest()}"


def verify_signature(
    secret: str, header: str, body: bytes, *, now: float, tolerance_s: int = SIGNATURE_TOLERANCE_S
) -> int:
    """Check a webhook delivery; returns its timestamp or raises SignatureError."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError(f"malformed signature header part {part!r}")
        fields.setdefault(key, []).append(value)
    try:
        (t,) = fields["t"]
        timestamp = int(t)
    except (KeyError, ValueError):
        raise SignatureError("signature header needs exactly one integer t=") from None
    if abs(now - timestamp) > tolerance_s:
        raise SignatureError(f"signature timestamp is more than {tolerance_s}s from now")
    expected = sign(secret, timestamp, body).rpartition("v1=")[2]
    if not any(hmac.compare_digest(expected, v) for v in fields.get("v1", [])):
        raise SignatureError("signature does not match the body")
    return timestamp


# --- subscriptions ------------------------------------------------------------------------


def _private_host(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(
        ".localhost"
    ):
        return True
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return not ip.is_global


def check_webhook_url(url: str, *, allow_private: bool) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BadRequest("webhook url must be an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise BadRequest("webhook url must not carry credentials")
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        raise BadRequest("webhook url has an invalid port") from None
    if not allow_private and (parts.scheme != "https" or _private_host(parts.hostname)):
        raise BadRequest("webhook url must be https:// to a public host")
    return url


def check_email(address: str) -> str:
    if len(address) > 254 or not _EMAIL.fullmatch(address):
        raise BadRequest("email must be a plain address like name@example.org")
    return address


def subscriptions(session: Session, user: User) -> dict[str, NotificationSubscription]:
    rows = session.exec(
        select(NotificationSubscription).where(NotificationSubscription.user_id == user.id)
    ).all()
    return {r.channel: r for r in rows}


def _upsert(
    session: Session, user: User, channel: str, target: str, now: datetime, *, secret: str | None
) -> NotificationSubscription:
    assert user.id is not None
    row = subscriptions(session, user).get(channel)
    if row is None:
        row = NotificationSubscription(
            user_id=user.id,
            channel=channel,
            target=target,
            secret=secret or "",
            created_at=now,
            updated_at=now,
        )
    else:
        row.target, row.updated_at = target, now
        if secret is not None:
            row.secret = secret
    session.add(row)
    session.commit()
    return row


def set_webhook(
    session: Session,
    config: NotifierConfig,
    user: User,
    url: str,
    now: datetime,
    *,
    rotate_secret: bool = False,
) -> NotificationSubscription:
    """Set the user's webhook; a secret is made on first use and replaced when asked."""
    check_webhook_url(url, allow_private=config.allow_private_targets)
    existing = subscriptions(session, user).get("webhook")
    secret = new_secret() if existing is None or rotate_secret else None
    return _upsert(session, user, "webhook", url, now, secret=secret)


def set_email(
    session: Session, user: User, address: str, now: datetime
) -> NotificationSubscription:
    return _upsert(session, user, "email", check_email(address), now, secret=None)


def remove(session: Session, user: User, channel: str) -> None:
    row = subscriptions(session, user).get(channel)
    if row is None:
        raise NotFound(f"no {channel} notification is set")
    session.delete(row)
    session.commit()


def deliveries(
    session: Session, user: User, *, status: str | None, limit: int
) -> list[NotificationDelivery]:
    stmt = select(NotificationDelivery).where(NotificationDelivery.user_id == user.id)
    if status is not None:
        stmt = stmt.where(NotificationDelivery.status == status)
    stmt = stmt.order_by(col(NotificationDelivery.id).desc()).limit(limit)
    return list(session.exec(stmt).all())


# --- enqueueing (inside the caller's transaction) -------------------------------------------


def _enqueue(
    session: Session, job: Job, event: str, key_suffix: str, body: dict[str, Any], now: datetime
) -> int:
    owner_subs = session.exec(
        select(NotificationSubscription).where(NotificationSubscription.user_id == job.owner_id)
    ).all()
    added = 0
    for sub in owner_subs:
        assert sub.id is not None
        key = f"{event}:{job.job_id}:{key_suffix}:{sub.id}"
        exists = session.exec(
            select(NotificationDelivery.id).where(NotificationDelivery.idempotency_key == key)
        ).first()
        if exists is not None:
            continue
        payload = {"id": key, "event": event, "occurred_at": now.isoformat(), **body}
        session.add(
            NotificationDelivery(
                user_id=job.owner_id,
                subscription_id=sub.id,
                event=event,
                idempotency_key=key,
                payload=payload,
                next_attempt_at=now,
                created_at=now,
            )
        )
        added += 1
    return added


def notify_job_completed(session: Session, job: Job, now: datetime) -> int:
    """Queue 'job completed' to the owner's webhook and email; the caller commits."""
    body = {"job_id": job.job_id, "status": job.status, "finished_at": _iso(job.finished_at)}
    return _enqueue(session, job, EVENT_COMPLETED, "", body, now)


def notify_settled(session: Session, job: Job, tx_hash: str, now: datetime, **details: Any) -> int:
    """Queue 'job settled in tx_hash' to the owner's webhook and email; the caller commits.
    `details` (escrow, block height, NTX paid and refunded) go into the payload."""
    body = {"job_id": job.job_id, "tx_hash": tx_hash, **details}
    return _enqueue(session, job, EVENT_SETTLED, tx_hash, body, now)


def notify_refunded(
    session: Session, job: Job, tx_hash: str, action: str, now: datetime, **details: Any
) -> int:
    """Queue 'job's escrow returned in tx_hash' (`action`: refund after the deadline, or
    cancel) to the owner's webhook and email; the caller commits."""
    body = {"job_id": job.job_id, "tx_hash": tx_hash, "action": action, **details}
    return _enqueue(session, job, EVENT_REFUNDED, tx_hash, body, now)


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


# --- delivery --------------------------------------------------------------------------


@dataclass(frozen=True)
class Claimed:
    delivery_id: int
    channel: str
    target: str
    secret: str
    event: str
    key: str
    payload: dict[str, Any]


class DeliveryError(Exception):
    """One attempt failed; the message says why (kept on the row for the user to read)."""


def claim_due(session: Session, config: NotifierConfig, now: datetime) -> list[Claimed]:
    stmt = (
        select(NotificationDelivery, NotificationSubscription)
        .join(
            NotificationSubscription,
            col(NotificationSubscription.id) == col(NotificationDelivery.subscription_id),
        )
        .where(
            NotificationDelivery.status == "pending",
            col(NotificationDelivery.next_attempt_at) <= now,
            (col(NotificationDelivery.locked_until).is_(None))
            | (col(NotificationDelivery.locked_until) <= now),
        )
        .order_by(col(NotificationDelivery.next_attempt_at), col(NotificationDelivery.id))
        .limit(config.batch_size)
    )
    if session.get_bind().dialect.name == "postgresql":
        stmt = stmt.with_for_update(skip_locked=True, of=NotificationDelivery)
    rows = session.exec(stmt).all()
    until = now + timedelta(seconds=config.lock_s)
    claimed = []
    for delivery, sub in rows:
        assert delivery.id is not None
        delivery.locked_until = until
        session.add(delivery)
        claimed.append(
            Claimed(
                delivery.id,
                sub.channel,
                sub.target,
                sub.secret,
                delivery.event,
                delivery.idempotency_key,
                dict(delivery.payload),
            )
        )
    session.commit()
    return claimed


def send_webhook(config: NotifierConfig, item: Claimed, now: datetime) -> None:
    """POST the signed payload to the target's host, resolved once and pinned to that
    address (which must be public outside a devnet): a name that answers a public address
    to a check and loopback to the connection (DNS rebinding) cannot reach loopback."""
    body = json.dumps(item.payload, separators=(",", ":"), sort_keys=True).encode()
    client = pinned_client(
        config.webhook_egress(),
        resolver=config.resolver,
        allow_http=config.allow_private_targets,
        verify=config.webhook_verify,
        timeout=config.webhook_timeout_s,
    )
    try:
        with client:
            response = client.post(
                item.target,
                content=body,
                headers={
                    "Content-Type": "application/json",
                    "User-Agent": "proofnet-notifier/1",
                    SIGNATURE_HEADER: sign(item.secret, int(now.timestamp()), body),
                    EVENT_HEADER: item.event,
                    DELIVERY_HEADER: item.key,
                },
            )
    except EgressRefused as e:
        raise DeliveryError(f"webhook target refused: {e}") from e
    except (httpx.HTTPError, OSError) as e:
        raise DeliveryError(
            f"webhook request failed: {type(e).__name__}: {redact_credentials(str(e))}"
        ) from e
    if not 200 <= response.status_code < 300:
        raise DeliveryError(f"webhook answered HTTP {response.status_code}: {response.text[:200]}")


def _email_text(item: Claimed) -> tuple[str, str]:
    job = item.payload.get("job_id", "?")
    if item.event == EVENT_SETTLED:
        return (
            f"proofnet: job {job[:12]} settled",
            f"Job {job} was settled on chain in transaction {item.payload.get('tx_hash')}: "
            f"{item.payload.get('paid_ntx', '?')} NTX paid to providers, "
            f"{item.payload.get('refunded_ntx', '?')} NTX returned to you.\n",
        )
    if item.event == EVENT_REFUNDED:
        return (
            f"proofnet: job {job[:12]} escrow returned",
            f"The escrow of job {job} was returned to you on chain "
            f"({item.payload.get('action', 'refund')}) in transaction "
            f"{item.payload.get('tx_hash')}: {item.payload.get('refunded_ntx', '?')} NTX.\n",
        )
    return (
        f"proofnet: job {job[:12]} {item.payload.get('status', 'completed')}",
        f"Job {job} finished ({item.payload.get('status')}) at "
        f"{item.payload.get('finished_at')}.\nResults: GET /api/v1/jobs/{job}/results\n",
    )


def send_email(config: NotifierConfig, item: Claimed) -> None:
    if not config.smtp_host:
        raise DeliveryError("email is not configured on this API (PROOFNET_SMTP_HOST is empty)")
    subject, text = _email_text(item)
    message = EmailMessage()
    message["From"] = config.smtp_from
    message["To"] = item.target
    message["Subject"] = subject
    # Derived from the idempotency key: a repeated delivery carries the same Message-ID.
    digest = hashlib.sha256(item.key.encode()).hexdigest()[:32]
    domain = config.smtp_from.rpartition("@")[2] or "proofnet"
    message["Message-ID"] = f"<{digest}@{domain}>"
    message[DELIVERY_HEADER] = item.key
    message.set_content(text + f"\nDelivery id: {item.key}\n")
    try:
        with smtplib.SMTP(config.smtp_host, config.smtp_port, timeout=config.smtp_timeout_s) as s:
            if config.smtp_starttls:
                s.starttls(context=ssl.create_default_context())
            if config.smtp_username:
                s.login(config.smtp_username, config.smtp_password)
            s.send_message(message)
    except (smtplib.SMTPException, OSError) as e:
        raise DeliveryError(f"SMTP delivery failed: {type(e).__name__}: {e}") from e


def record_outcome(
    session: Session, config: NotifierConfig, item: Claimed, error: str | None, now: datetime
) -> None:
    row = session.get(NotificationDelivery, item.delivery_id)
    if row is None:  # unsubscribed meanwhile: the row went with the subscription
        session.commit()
        return
    if error is None:
        values: dict[str, Any] = {
            "status": "delivered",
            "delivered_at": now,
            "attempts": row.attempts + 1,
            "locked_until": None,
            "last_error": "",
        }
    else:
        attempts = row.attempts + 1
        values = {
            "status": "failed" if attempts >= config.max_attempts else "pending",
            "attempts": attempts,
            "next_attempt_at": now + config.backoff(attempts),
            "locked_until": None,
            "last_error": error[:2000],
        }
    # Only a row still pending is updated: a row delivered by another dispatcher whose lock
    # this one outlived stays delivered.
    session.execute(
        update(NotificationDelivery)
        .where(
            col(NotificationDelivery.id) == item.delivery_id,
            col(NotificationDelivery.status) == "pending",
        )
        .values(**values)
    )
    session.commit()


def dispatch_once(engine: Engine, config: NotifierConfig, clock: Any) -> int:
    """Claim due deliveries, send them, record outcomes; returns how many were attempted."""
    with open_session(engine) as session:
        claimed = claim_due(session, config, clock())
    for item in claimed:
        error: str | None = None
        try:
            if item.channel == "webhook":
                send_webhook(config, item, clock())
            else:
                send_email(config, item)
        except DeliveryError as e:
            error = str(e)
            log.warning("notification %s failed: %s", item.key, error)
        with open_session(engine) as session:
            record_outcome(session, config, item, error, clock())
    return len(claimed)


async def run_dispatcher(engine: Engine, config: NotifierConfig, clock: Any) -> None:
    from starlette.concurrency import run_in_threadpool

    while True:
        try:
            attempted = await run_in_threadpool(dispatch_once, engine, config, clock)
        except Exception:  # keep dispatching: a failed pass (db restart) must not stop it
            log.exception("notification dispatch failed")
            attempted = 0
        if attempted < config.batch_size:
            await asyncio.sleep(config.poll_interval_s)


@contextlib.asynccontextmanager
async def dispatcher_lifespan(app: Any) -> AsyncIterator[None]:
    """Run the dispatcher while the app runs (included through the notifications router).

    `app.state.notifier_config` overrides the settings; `app.state.run_notifier = False`
    turns the dispatcher off (deliveries then wait in the outbox)."""
    if not getattr(app.state, "run_notifier", True):
        yield
        return
    config = getattr(app.state, "notifier_config", None)
    if config is None:
        from proofnet.settings import build_settings

        config = NotifierConfig.from_settings(build_settings(), network=app.state.config.network)
        app.state.notifier_config = config
    task = asyncio.create_task(run_dispatcher(app.state.engine, config, app.state.clock))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
