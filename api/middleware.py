"""ASGI middleware: a request body size limit and a per-client rate limit."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]
ASGIApp = Callable[[Scope, Receive, Send], Any]


async def _reply(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]]) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodySizeLimit:
    """Refuse bodies over `max_bytes` with 413, whether or not Content-Length is honest.

    The body is read (up to the limit) before the app runs, then replayed to it, so an
    oversized chunked upload is cut off without ever being held in full.

    Requests `streams(method, path)` names pass untouched: their routes stream the body to
    disk and enforce their own, per-route limit (uploads: `max_upload_bytes`).
    """

    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        streams: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (
            self.streams is not None and self.streams(scope["method"], scope["path"])
        ):
            await self.app(scope, receive, send)
            return
        too_big = f"request body is larger than the limit of {self.max_bytes} bytes"
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await _reply(send, 400, "invalid Content-Length", [])
                    return
                if declared > self.max_bytes:
                    await _reply(send, 413, too_big, [])
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await _reply(send, 413, too_big, [])
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await self.app(scope, replay, send)


class RateLimit:
    """A token bucket per client address: `per_minute` requests, refilled continuously."""

    # Full buckets carry no information; drop them once this many clients are tracked.
    _PRUNE_AT = 10_000

    def __init__(
        self,
        app: ASGIApp,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.clock = clock
        self.buckets: dict[str, tuple[float, float]] = {}

    def _take(self, client: str) -> float:
        """0 when a request may pass now, else the seconds until it may."""
        now = self.clock()
        tokens, last = self.buckets.get(client, (self.capacity, now))
        tokens = min(self.capacity, tokens + (now - last) * self.rate)
        if tokens >= 1.0:
            self.buckets[client] = (tokens - 1.0, now)
            return 0.0
        self.buckets[client] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _prune(self) -> None:
        now = self.clock()
        for client, (tokens, last) in list(self.buckets.items()):
            if tokens + (now - last) * self.rate >= self.capacity:
                del self.buckets[client]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        key = client[0] if client else "unknown"
        if len(self.buckets) >= self._PRUNE_AT:
            self._prune()
        wait = self._take(key)
        if wait > 0:
            retry = str(max(1, math.ceil(wait))).encode()
            await _reply(send, 429, "too many requests; slow down", [(b"retry-after", retry)])
            return
        await self.app(scope, receive, send)
