"""Hostile JSON: what no served role parses, stores or serves.

Python's `json` parses nesting until the interpreter's recursion limit (then raises
`RecursionError`, a 500 in any framework), integers of any size (which the databases and
Cardano values cannot hold), and the non-standard `NaN` and `Infinity` (which a strict
encoder then refuses to write back out: stored once, such a value breaks every later read
that includes it). Every served role therefore refuses, with 400 and before any parser or
route sees the body, a JSON request body that

- nests arrays and objects deeper than `max_depth`;
- holds an integer past 64 bits (outside [-2**63, 2**64 - 1]: signed metrics down to
  int64, unsigned quantities and seeds up to uint64), or a number that overflows;
- holds `NaN`, `Infinity` or `-Infinity`;
- is larger than `max_bytes` (413).

`JsonLimits` is the ASGI middleware (it reads the body once, checks it, and replays it to
the app); `body_refusal` is the check on raw bytes and `value_refusal` the same check on a
parsed value (for stored free-form JSON such as a worker's telemetry). Pure, no I/O.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 32
INT_MIN, INT_MAX = -(2**63), 2**64 - 1

# A JSON string (escapes included); what is inside one is data, never structure.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")
# Integers long enough to leave 64 bits (19 digits may), not part of a fraction or exponent.
_LONG_INT = re.compile(rb"(?<![\d.eE+-])-?\d{19,}(?![\d.eE])")
# Numbers that may overflow a double: a 3-digit exponent, or 300 digits before the point.
_BIG_FLOAT = re.compile(rb"-?\d+(?:\.\d+)?[eE][+-]?\d{3,}|-?\d{300,}(?:\.\d+)?(?:[eE][+-]?\d+)?")
_NON_FINITE = re.compile(rb"(?<![A-Za-z0-9_])(?:NaN|-?Infinity)(?![A-Za-z0-9_])")


def body_refusal(body: bytes, *, max_depth: int = MAX_DEPTH) -> str | None:
    """Why this JSON text must not be parsed (see the module docstring), or None."""
    text = _STRING.sub(b'""', body)
    depth = 0
    for bracket in _BRACKET.finditer(text):
        if bracket.group() in (b"[", b"{"):
            depth += 1
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
        else:
            depth -= 1
    for number in _LONG_INT.finditer(text):
        digits = number.group().lstrip(b"-")
        # 2**64 has 20 digits: longer is out of range (and never converted: Python refuses
        # to convert more than 4300 digits at all).
        if len(digits) > 20 or not INT_MIN <= int(number.group()) <= INT_MAX:
            return "an integer in the JSON is past 64 bits"
    for number in _BIG_FLOAT.finditer(text):
        if not math.isfinite(float(number.group())):
            return "a number in the JSON is too large"
    if _NON_FINITE.search(text):
        return "NaN and Infinity are not JSON"
    return None


def value_refusal(value: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = 10_000) -> str | None:
    """`body_refusal` for a parsed JSON value, plus a bound on how many values it holds."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return f"JSON holds more than {max_nodes} values"
        if isinstance(item, dict | list):
            if depth > max_depth:
                return f"JSON nested deeper than {max_depth} levels"
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
        elif isinstance(item, bool) or item is None or isinstance(item, str):
            continue
        elif isinstance(item, int):
            if not INT_MIN <= item <= INT_MAX:
                return "an integer in the JSON is past 64 bits"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "NaN and Infinity are not JSON"
        else:
            return f"{type(item).__name__} is not a JSON value"
    return None


Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[Message], Any]


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            media = value.split(b";")[0].strip().lower()
            return media == b"application/json" or media.endswith(b"+json")
    # FastAPI parses a body without a content type as JSON too.
    return True


def detail_body(status: int, message: str) -> dict[str, Any]:
    """The error body of the API and the oracle (FastAPI's `{"detail": ...}`)."""
    return {"detail": message}


async def _reply(
    send: Send, status: int, detail: str, error_body: Callable[[int, str], dict[str, Any]]
) -> None:
    body = json.dumps(error_body(status, detail)).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class JsonLimits:
    """ASGI middleware: refuse hostile JSON bodies (400) and JSON bodies over `max_bytes`
    (413) before the app reads them; other bodies pass untouched, unread. `error_body`
    shapes the refusal as the app shapes its errors.

    Requests `streams(method, path)` names pass untouched whatever their content type:
    their routes stream raw bytes to disk and never parse JSON (read here, a chunk without
    a content type would be held whole in memory before its route saw a byte of it)."""

    def __init__(
        self,
        app: Any,
        *,
        max_depth: int = MAX_DEPTH,
        max_bytes: int = 4 << 20,
        error_body: Callable[[int, str], dict[str, Any]] = detail_body,
        streams: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.app = app
        self.max_depth = max_depth
        self.max_bytes = max_bytes
        self.error_body = error_body
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") in ("GET", "HEAD")
            or (self.streams is not None and self.streams(scope["method"], scope["path"]))
            or not _is_json(scope)
        ):
            await self.app(scope, receive, send)
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
                await _reply(
                    send, 413, f"JSON body larger than {self.max_bytes} bytes", self.error_body
                )
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        refusal = body_refusal(body, max_depth=self.max_depth)
        if refusal is not None:
            await _reply(send, 400, refusal, self.error_body)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return dict(await receive())

        await self.app(scope, replay, send)
