"""Notifications: signed webhooks to a real HTTP receiver and email to a real SMTP server,
from a durable outbox with retries, backoff and at-least-once redelivery."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from api_support import FakeClock, Wallet, Worker, job_spec, sign_in, wait_for
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import Session, select

from api.app import create_app
from api.config import ApiConfig
from api.db import make_engine, open_session
from api.models import Job, NotificationDelivery
from api.services import notifications as service
from api.services.notifications import NotifierConfig, SignatureError, sign, verify_signature
from tests.net_servers import ScriptedResolver, names, serve, tls_for


class Receiver:
    """A real HTTP webhook receiver that verifies each delivery's signature."""

    def __init__(self) -> None:
        self.secret = ""
        self.received: list[dict[str, Any]] = []
        self.failures_left = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    if receiver.failures_left > 0:
                        receiver.failures_left -= 1
                        self.send_response(503)
                        self.end_headers()
                        return
                    try:
                        verify_signature(
                            receiver.secret,
                            self.headers[service.SIGNATURE_HEADER],
                            body,
                            now=time.time(),
                        )
                    except SignatureError:
                        self.send_response(401)
                        self.end_headers()
                        return
                    receiver.received.append(
                        {
                            "body": json.loads(body),
                            "key": self.headers[service.DELIVERY_HEADER],
                            "event": self.headers[service.EVENT_HEADER],
                        }
                    )
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Mailbox:
    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    def __init__(self) -> None:
        self.messages: list[Any] = []


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    box = Mailbox()
    with socket.socket() as probe:  # a free port: aiosmtpd checks readiness by connecting
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield box, port
    finally:
        controller.stop()


def _notifier(port: int, **overrides: Any) -> NotifierConfig:
    values: dict[str, Any] = {
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "smtp_from": "jobs@proofnet.test",
        "poll_interval_s": 0.05,
        "backoff_base_s": 10.0,
        "allow_private_targets": True,
    }
    values.update(overrides)
    return NotifierConfig(**values)


def test_signature_roundtrip_and_refusals() -> None:
    body = b'{"a":1}'
    header = sign("s3cret", 1_700_000_000, body)
    assert header.startswith("t=1700000000,v1=")
    assert verify_signature("s3cret", header, body, now=1_700_000_010) == 1_700_000_000
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature("s3cret", header, b'{"a":2}', now=1_700_000_010)
    with pytest.raises(SignatureError, match="does not match"):
        verify_signature("other", header, body, now=1_700_000_010)
    with pytest.raises(SignatureError, match="from now"):
        verify_signature("s3cret", header, body, now=1_700_001_000)
    with pytest.raises(SignatureError):
        verify_signature("s3cret", "v1=abc", body, now=1_700_000_000)


def test_backoff_grows_and_is_capped() -> None:
    c = NotifierConfig(backoff_base_s=5, backoff_max_s=60)
    assert [c.backoff(n).total_seconds() for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 60]


def test_settings_are_per_user_and_validated(client: TestClient) -> None:
    alice, bob = sign_in(client, Wallet()), sign_in(client, Wallet())
    put = client.put(
        "/api/v1/notifications/webhook", json={"url": "https://hooks.example/x"}, headers=alice
    )
    assert put.status_code == 200, put.text
    secret = put.json()["secret"]
    assert len(secret) >= 32
    # Same URL again keeps the secret; rotating replaces it.
    again = client.put(
        "/api/v1/notifications/webhook", json={"url": "https://hooks.example/y"}, headers=alice
    )
    assert again.json()["secret"] == secret
    rotated = client.put(
        "/api/v1/notifications/webhook",
        json={"url": "https://hooks.example/y", "rotate_secret": True},
        headers=alice,
    )
    assert rotated.json()["secret"] != secret
    assert (
        client.put(
            "/api/v1/notifications/email", json={"address": "alice@example.org"}, headers=alice
        ).json()["address"]
        == "alice@example.org"
    )

    mine = client.get("/api/v1/notifications", headers=alice).json()
    assert mine["webhook"]["url"] == "https://hooks.example/y" and "secret" not in mine["webhook"]
    assert mine["email"]["address"] == "alice@example.org"
    # Bob sees only his own (nothing), and cannot delete Alice's.
    assert client.get("/api/v1/notifications", headers=bob).json() == {
        "webhook": None,
        "email": None,
    }
    assert client.delete("/api/v1/notifications/webhook", headers=bob).status_code == 404
    assert client.get("/api/v1/notifications/deliveries", headers=bob).json()["count"] == 0
    assert client.get("/api/v1/notifications").status_code == 401

    for bad in ("ftp://x.example/h", "https://user:pw@x.example/", "not a url", "https://x:99999/"):
        r = client.put("/api/v1/notifications/webhook", json={"url": bad}, headers=alice)
        assert r.status_code == 400, (bad, r.text)
    for bad in ("no-at-sign", "a@b", "a@b.c\r\nBcc: x@y.z", "<a@b.org>"):
        r = client.put("/api/v1/notifications/email", json={"address": bad}, headers=alice)
        assert r.status_code in (400, 422), (bad, r.text)
    assert client.delete("/api/v1/notifications/email", headers=alice).status_code == 204
    assert client.get("/api/v1/notifications", headers=alice).json()["email"] is None


def test_private_webhook_targets_are_refused_outside_devnet() -> None:
    with pytest.raises(Exception, match="public host"):
        service.check_webhook_url("http://127.0.0.1:9/h", allow_private=False)
    with pytest.raises(Exception, match="public host"):
        service.check_webhook_url("https://localhost/h", allow_private=False)
    with pytest.raises(Exception, match="public host"):
        service.check_webhook_url("https://10.1.2.3/h", allow_private=False)
    assert service.check_webhook_url("https://hooks.example/h", allow_private=False)


def _run_job(client: TestClient, auth: dict[str, str], worker: Worker) -> str:
    posted = client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth)
    assert posted.status_code == 201, posted.text
    claim = worker.claim().json()
    done = worker.request("POST", f"/api/v1/worker/leases/{claim['lease_token']}/complete", {})
    assert done.status_code == 200, done.text
    return str(posted.json()["job_id"])


def test_completion_and_settlement_reach_webhook_and_email(
    config: ApiConfig,
    engine: Engine,
    clock: FakeClock,
    receiver: Receiver,
    smtp: tuple[Mailbox, int],
) -> None:
    mailbox, port = smtp
    app = create_app(config=config, engine=engine, clock=clock, run_sweeper=False)
    app.state.notifier_config = _notifier(port)
    with TestClient(app) as client:
        from api.services.users import add_senior

        wallet = Wallet()
        with open_session(engine) as s:
            add_senior(s, config, wallet.address, clock())
        auth = sign_in(client, wallet)
        hook = client.put("/api/v1/notifications/webhook", json={"url": receiver.url}, headers=auth)
        receiver.secret = hook.json()["secret"]
        client.put("/api/v1/notifications/email", json={"address": "me@example.org"}, headers=auth)
        worker = Worker(client, clock=clock)
        worker.register([("NVIDIA A100 80GB", 81920)])

        job_id = _run_job(client, auth, worker)
        wait_for(lambda: len(receiver.received) == 1 and len(mailbox.messages) == 1, timeout=10)
        got = receiver.received[0]
        assert got["event"] == "job.completed" and got["body"]["job_id"] == job_id
        assert got["body"]["status"] == "completed" and got["body"]["id"] == got["key"]
        mail = mailbox.messages[0]
        assert mail["To"] == "me@example.org" and mail["From"] == "jobs@proofnet.test"
        assert job_id[:12] in mail["Subject"] and job_id in mail.get_payload()

        # A settlement (queued by the chain watcher) is delivered once, however often queued.
        with open_session(engine) as s:
            job = s.exec(select(Job).where(Job.job_id == job_id)).one()
            for _ in range(2):
                service.notify_settled(s, job, "ab" * 32, clock(), paid_ntx=5, refunded_ntx=0)
                s.commit()
        wait_for(lambda: len(receiver.received) == 2 and len(mailbox.messages) == 2, timeout=10)
        settled = receiver.received[1]
        assert settled["event"] == "job.settled" and settled["body"]["tx_hash"] == "ab" * 32
        assert "settled" in mailbox.messages[1]["Subject"]
        listed = client.get("/api/v1/notifications/deliveries", headers=auth).json()
        assert listed["count"] == 4
        assert {d["status"] for d in listed["data"]} == {"delivered"}
        time.sleep(0.2)  # nothing is sent twice while all is well
        assert len(receiver.received) == 2 and len(mailbox.messages) == 2


def _outbox(session: Session) -> list[NotificationDelivery]:
    session.expire_all()
    rows = list(session.exec(select(NotificationDelivery).order_by(NotificationDelivery.id)))
    session.commit()  # end the read: on SQLite it holds the write lock (BEGIN IMMEDIATE)
    return rows


@pytest.fixture
def quiet_engine(database_url: str) -> Iterator[Engine]:
    """On SQLite and on PostgreSQL (where claims use FOR UPDATE SKIP LOCKED)."""
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def quiet_client(
    make_config: Callable[..., ApiConfig], database_url: str, quiet_engine: Engine, clock: FakeClock
) -> Iterator[TestClient]:
    """An app whose own dispatcher is off: the test drives delivery step by step."""
    config = make_config(database_url=database_url)
    app = create_app(config=config, engine=quiet_engine, clock=clock, run_sweeper=False)
    app.state.run_notifier = False
    with TestClient(app) as c:
        yield c


@pytest.fixture
def quiet_auth(quiet_client: TestClient, quiet_engine: Engine, clock: FakeClock) -> dict[str, str]:
    from api.services.users import add_senior

    wallet = Wallet()
    config = quiet_client.app.state.config  # type: ignore[attr-defined]
    with open_session(quiet_engine) as s:
        add_senior(s, config, wallet.address, clock())
    return sign_in(quiet_client, wallet)


def test_failures_retry_with_backoff_then_give_up(
    quiet_client: TestClient,
    quiet_auth: dict[str, str],
    quiet_engine: Engine,
    clock: FakeClock,
    receiver: Receiver,
) -> None:
    client, auth = quiet_client, quiet_auth
    hook = client.put("/api/v1/notifications/webhook", json={"url": receiver.url}, headers=auth)
    receiver.secret = hook.json()["secret"]
    # Email with no SMTP server configured: fails every time.
    client.put("/api/v1/notifications/email", json={"address": "me@example.org"}, headers=auth)
    worker = Worker(client, clock=clock)
    worker.register([("NVIDIA A100 80GB", 81920)])
    receiver.failures_left = 1
    config = NotifierConfig(backoff_base_s=10, max_attempts=3, allow_private_targets=True)
    _run_job(client, auth, worker)
    assert service.dispatch_once(quiet_engine, config, clock) == 2
    with open_session(quiet_engine) as session:
        webhook, email = sorted(_outbox(session), key=lambda r: r.subscription_id)
    assert (webhook.status, webhook.attempts, email.attempts) == ("pending", 1, 1)
    assert "HTTP 503" in webhook.last_error
    # Not due before the backoff has passed.
    assert service.dispatch_once(quiet_engine, config, clock) == 0
    clock.advance(10)
    assert service.dispatch_once(quiet_engine, config, clock) == 2
    clock.advance(20)  # the email's second backoff (2 x 10 s)
    assert service.dispatch_once(quiet_engine, config, clock) == 1
    clock.advance(3600)
    assert service.dispatch_once(quiet_engine, config, clock) == 0  # nothing left to try
    with open_session(quiet_engine) as session:
        webhook, email = sorted(_outbox(session), key=lambda r: r.subscription_id)
    assert webhook.status == "delivered" and webhook.attempts == 2
    assert email.status == "failed" and email.attempts == 3
    assert "PROOFNET_SMTP_HOST" in email.last_error
    assert len(receiver.received) == 1


def test_a_crashed_dispatcher_is_taken_over_and_the_key_repeats(
    quiet_client: TestClient,
    quiet_auth: dict[str, str],
    quiet_engine: Engine,
    clock: FakeClock,
    receiver: Receiver,
) -> None:
    client, auth = quiet_client, quiet_auth
    hook = client.put("/api/v1/notifications/webhook", json={"url": receiver.url}, headers=auth)
    receiver.secret = hook.json()["secret"]
    worker = Worker(client, clock=clock)
    worker.register([("NVIDIA A100 80GB", 81920)])
    config = NotifierConfig(lock_s=60, allow_private_targets=True, poll_interval_s=3600)
    _run_job(client, auth, worker)
    # A dispatcher claims the row, sends it, and dies before recording the outcome.
    with open_session(quiet_engine) as s:
        (item,) = service.claim_due(s, config, clock())
    service.send_webhook(config, item, clock())
    with open_session(quiet_engine) as s:  # while its lock holds, nobody else takes the row
        assert service.claim_due(s, config, clock()) == []
    clock.advance(61)
    assert service.dispatch_once(quiet_engine, config, clock) == 1
    with open_session(quiet_engine) as session:
        (row,) = _outbox(session)
    assert row.status == "delivered"
    keys = [r["key"] for r in receiver.received]
    assert keys == [item.key, item.key]  # at-least-once: the receiver dedupes on the key


def _hook_item(url: str) -> service.Claimed:
    payload = {"id": "delivery-1", "job_id": "j"}
    return service.Claimed(1, "webhook", url, "s3cret", "job.completed", "delivery-1", payload)


def test_dns_rebinding_cannot_turn_a_webhook_onto_loopback() -> None:
    """The target's name answers the (allowed) public address, then a loopback victim's on
    the same port. Each delivery resolves the name once and connects to that answer: the
    first lands on the public host; the second, resolving to loopback, is refused before
    any connection. The victim never sees a request."""
    tls = tls_for("hooks.example.test")
    resolver = ScriptedResolver([["127.0.0.1"], ["127.0.0.2"]])
    with (
        serve({"/hook": b"ok"}, tls=tls) as public,
        serve({"/hook": b"stolen"}, tls=tls, host="127.0.0.2", port=public.port) as victim,
    ):
        config = NotifierConfig(
            # The local server stands in for a public host: exactly its address is let in.
            webhook_allow_networks=("127.0.0.1/32",),
            resolver=resolver,
            webhook_verify=tls.ca_context(),
        )
        item = _hook_item(public.url("hooks.example.test", "/hook"))
        service.send_webhook(config, item, datetime.now(UTC))
        assert len(resolver.lookups) == 1  # httpx never looked the name up again
        with pytest.raises(service.DeliveryError, match="refused: .*127.0.0.2 is a loopback"):
            service.send_webhook(config, item, datetime.now(UTC))
    assert [(s.path, s.sni) for s in public.seen] == [("/hook", "hooks.example.test")]
    assert victim.seen == [] and victim.handshakes == []


@pytest.mark.parametrize("answer", ["127.0.0.1", "169.254.169.254", "10.0.0.7", "::1"])
def test_a_webhook_name_resolving_to_a_private_address_is_refused_at_delivery(
    answer: str,
) -> None:
    """The URL passed the subscription check (a public-looking name); what it resolves to
    when sent is what counts."""
    config = NotifierConfig(resolver=names({"hooks.example.test": [answer]}))
    with serve({"/hook": b"ok"}) as server:
        url = f"https://hooks.example.test:{server.port}/hook"
        assert service.check_webhook_url(url, allow_private=False) == url
        with pytest.raises(service.DeliveryError, match="refused"):
            service.send_webhook(config, _hook_item(url), datetime.now(UTC))
    assert server.seen == [] and server.handshakes == []
