"""Body size limit, per-client rate limit, hostile JSON, and the middleware edge cases."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable
from typing import Any

from api_support import FakeClock, Wallet, Worker, job_spec
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlmodel import select

from api.app import create_app
from api.config import ApiConfig
from api.db import open_session
from api.middleware import BodySizeLimit, RateLimit
from api.models import Provider


def _client(config: ApiConfig, engine: Engine, clock: FakeClock) -> TestClient:
    return TestClient(create_app(config=config, engine=engine, clock=clock, run_sweeper=False))


def test_oversized_body_is_refused(
    make_config: Callable[..., ApiConfig], engine: Engine, clock: FakeClock
) -> None:
    config = make_config(max_body_bytes=1024)
    with _client(config, engine, clock) as client:
        ok = client.post("/api/v1/auth/challenge", json={"address": Wallet().address})
        assert ok.status_code == 200
        big = client.post(
            "/api/v1/auth/challenge", json={"address": Wallet().address, "pad": "x" * 2000}
        )
        assert big.status_code == 413
        assert "1024 bytes" in big.json()["detail"]

        def chunks() -> Any:  # no Content-Length: sent chunked
            for _ in range(10):
                yield b"x" * 200

        chunked = client.post(
            "/api/v1/auth/challenge", content=chunks(), headers={"content-type": "application/json"}
        )
        assert chunked.status_code == 413


def _asgi_call(app: Any, body_chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> list[Any]:
    sent: list[Any] = []
    messages = [
        {"type": "http.request", "body": c, "more_body": i < len(body_chunks) - 1}
        for i, c in enumerate(body_chunks)
    ]

    async def receive() -> Any:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {"type": "http", "headers": headers, "client": ("1.2.3.4", 1)}
    asyncio.run(app(scope, receive, send))
    return sent


def test_body_limit_counts_bytes_even_when_content_length_lies() -> None:
    seen: list[bytes] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        seen.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    limited = BodySizeLimit(inner, max_bytes=100)
    sent = _asgi_call(limited, [b"a" * 60, b"b" * 60], [(b"content-length", b"10")])
    assert sent[0]["status"] == 413 and seen == []
    sent = _asgi_call(limited, [b"a" * 50, b"b" * 50], [])
    assert sent[0]["status"] == 200 and seen == [b"a" * 50 + b"b" * 50]


def test_rate_limit_per_client(
    make_config: Callable[..., ApiConfig], engine: Engine, clock: FakeClock
) -> None:
    config = make_config(rate_limit_per_minute=5)
    with _client(config, engine, clock) as client:
        codes = [client.get("/api/v1/health").status_code for _ in range(7)]
        assert codes == [200] * 5 + [429, 429]
        limited = client.get("/api/v1/health")
        assert int(limited.headers["retry-after"]) >= 1


def test_rate_limit_buckets_refill_and_are_per_client() -> None:
    now = [0.0]

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    limiter = RateLimit(inner, per_minute=2, clock=lambda: now[0])

    def status(client: str) -> int:
        sent: list[Any] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> Any:
            return {"type": "http.request", "body": b""}

        asyncio.run(limiter({"type": "http", "client": (client, 1), "headers": []}, receive, send))
        return int(sent[0]["status"])

    assert [status("a"), status("a"), status("a")] == [200, 200, 429]
    assert status("b") == 200  # another client has its own bucket
    now[0] += 30  # one request's worth refilled (2 per minute)
    assert [status("a"), status("a")] == [200, 429]


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth):
        value = {"n": value}
    return value


def test_hostile_json_gets_4xx_never_500(
    client: TestClient,
    approved: tuple[Wallet, dict[str, str]],
    worker_factory: Callable[[], Worker],
) -> None:
    """The attacks: JSON nested past the parser's recursion limit, integers past 64 bits,
    NaN; each is refused with 400 before any route parses it. The honest twin is served."""
    _, auth = approved
    headers = {**auth, "content-type": "application/json"}
    deep = b'{"spec":' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    assert client.post("/api/v1/jobs", content=deep, headers=headers).status_code == 400
    spec = job_spec()
    raw = json.dumps({"spec": spec}).replace(str(spec["seed"]), "1" + "0" * 30)
    huge = client.post("/api/v1/jobs", content=raw.encode(), headers=headers)
    assert huge.status_code == 400 and "64 bits" in huge.json()["detail"]
    worker = worker_factory()
    worker.register([])
    for snapshot in (_nested(20), {"loss": math.nan}, {"big": 2**70}):
        sent = worker.request("PUT", "/api/v1/worker/telemetry", {"snapshot": snapshot})
        assert 400 <= sent.status_code < 500, (snapshot, sent.text)
    honest = worker.request("PUT", "/api/v1/worker/telemetry", {"snapshot": {"gpu_util": 0.5}})
    assert honest.status_code == 200, honest.text
    assert client.post("/api/v1/jobs", json={"spec": job_spec()}, headers=auth).status_code == 201


def test_stored_telemetry_never_breaks_the_public_provider_list(
    client: TestClient, engine: Engine, worker_factory: Callable[[], Worker]
) -> None:
    """The attack: one provider's telemetry, stored nested deep (before the bounds held, or
    written around them), made `GET /providers` answer 500 for everyone. Now that provider's
    telemetry is left out and everyone else's still shows."""
    hostile, honest = worker_factory(), worker_factory()
    hostile.register([])
    honest.register([])
    assert (
        honest.request(
            "PUT", "/api/v1/worker/telemetry", {"snapshot": {"gpu_util": 0.5}}
        ).status_code
        == 200
    )
    with open_session(engine) as session:
        row = session.exec(select(Provider).where(Provider.worker_key == hostile.public_key)).one()
        row.telemetry = _nested(400)
        session.add(row)
        session.commit()
    listed = client.get("/api/v1/providers")
    assert listed.status_code == 200, listed.text[:300]
    shown = {p["worker_key"]: p["telemetry"] for p in listed.json()["data"]}
    assert shown[hostile.public_key] is None
    assert shown[honest.public_key] == {"gpu_util": 0.5}
