"""How every proofnet role serves HTTP: uvicorn with deadlines for slow clients and a cap on
connections, so no client can hold the server's sockets by sending slowly.

uvicorn closes idle kept-alive connections (`timeout_keep_alive`) and answers 503 past
`limit_concurrency`, but it waits forever for a request head or body that trickles in a
byte at a time (each byte even cancels its keep-alive timer). `DeadlineH11Protocol` and
`DeadlineHttpToolsProtocol` (uvicorn's two HTTP/1.1 protocols, each with `_Deadlines`
mixed in) add:

- the head deadline: a request's head must be complete within `header_timeout_s` of its
  first byte (or of the connection opening): a connection that opens and says nothing, or
  trickles a head, gets 408 and is closed;
- the body deadlines: while a body is expected, no pause may last longer than
  `body_timeout_s`, and the whole request (head to last body byte) at most
  `request_timeout_s`; past either, the connection is closed (the app sees a disconnect);
- the connection cap: past `max_connections` open connections a new one gets 503 and is
  closed at once (and uvicorn's own `limit_concurrency` answers 503 to requests beyond it).

Nothing limits how long the app itself takes: only what the client controls is timed.
`HttpLimits.from_settings` reads the `http_*` settings; `uvicorn_config` and `serve` are
what `proofnet api|oracle|devnet serve` call. I/O: the server's sockets only.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from proofnet.settings import Settings

try:  # the `standard` extra: uvicorn's faster parser, preferred when present
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is in requirements.lock
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


@dataclass(frozen=True)
class HttpLimits:
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    request_timeout_s: float = 120.0
    keep_alive_s: float = 5.0
    max_connections: int = 1000

    def __post_init__(self) -> None:
        for name in ("header_timeout_s", "body_timeout_s", "request_timeout_s", "keep_alive_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        if self.max_connections < 1:
            raise ValueError("max_connections must be at least 1")

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpLimits:
        return cls(
            header_timeout_s=settings.http_header_timeout_s,
            body_timeout_s=settings.http_body_timeout_s,
            request_timeout_s=settings.http_request_timeout_s,
            keep_alive_s=settings.http_keep_alive_s,
            max_connections=settings.http_max_connections,
        )


_TIMEOUT_408 = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: 25\r\n\r\nthe request came too slow"
)
_FULL_503 = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: 27\r\n\r\ntoo many connections; retry"
)


class _Deadlines:
    """Deadlines on what the client sends, over a uvicorn HTTP protocol (see the module
    docstring). Uses only what both of uvicorn's protocols share: `config`, `loop`,
    `transport`, `connections`, `cycle` (with `more_body`, `response_complete`)."""

    config: Any
    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport
    connections: set[Any]
    cycle: Any

    def _limits(self) -> HttpLimits:
        limits = getattr(self.config, "http_limits", None)
        return limits if isinstance(limits, HttpLimits) else HttpLimits()

    def connection_made(self, transport: Any) -> None:
        self._timer: asyncio.TimerHandle | None = None
        self._phase = ""
        self._request_deadline = 0.0
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self._limits().max_connections:
            transport.write(_FULL_503)
            transport.close()
            return
        self._arm("head", self._limits().header_timeout_s)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)  # type: ignore[misc]
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()  # type: ignore[misc]
        # Idle until the next request's first byte: uvicorn's keep-alive timer's turn.
        self._cancel()
        self._phase = ""

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def _follow(self) -> None:
        if self.transport.is_closing():
            return
        cycle = self.cycle
        limits = self._limits()
        if cycle is None or cycle.response_complete:
            # Bytes of a head not yet complete: its deadline runs from its first byte and
            # is never pushed back by more bytes.
            if self._phase != "head":
                self._arm("head", limits.header_timeout_s)
            return
        if cycle.more_body:
            if self._phase != "body":
                self._request_deadline = self.loop.time() + limits.request_timeout_s
            left = self._request_deadline - self.loop.time()
            self._arm("body", min(limits.body_timeout_s, max(left, 0.0)))
            return
        # The whole request is in: the app's time is not the client's.
        self._cancel()
        self._phase = "app"

    def _arm(self, phase: str, seconds: float) -> None:
        self._cancel()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expired, phase)

    def _cancel(self) -> None:
        timer = getattr(self, "_timer", None)
        if timer is not None:
            timer.cancel()
        self._timer = None

    def _expired(self, phase: str) -> None:
        self._timer = None
        if self.transport.is_closing() or phase != self._phase:
            return
        if phase == "head":
            self.transport.write(_TIMEOUT_408)
        self.transport.close()


class DeadlineH11Protocol(_Deadlines, H11Protocol):
    pass


if HttpToolsProtocol is not None:

    class DeadlineHttpToolsProtocol(_Deadlines, HttpToolsProtocol):
        pass

    _PROTOCOL: type[asyncio.Protocol] = DeadlineHttpToolsProtocol
else:  # pragma: no cover
    _PROTOCOL = DeadlineH11Protocol


def uvicorn_config(
    app: Any, *, host: str, port: int, limits: HttpLimits, **kwargs: Any
) -> uvicorn.Config:
    """A uvicorn `Config` for `app` under `limits` (other uvicorn options in `kwargs`)."""
    kwargs.setdefault("http", _PROTOCOL)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        timeout_keep_alive=max(1, round(limits.keep_alive_s)),
        limit_concurrency=limits.max_connections,
        **kwargs,
    )
    config.http_limits = limits  # type: ignore[attr-defined]  # read by _Deadlines
    return config


def serve(
    app: Any, *, host: str, port: int, limits: HttpLimits, workers: int = 1, **kwargs: Any
) -> None:
    """Serve until stopped (SIGINT/SIGTERM). With `workers` > 1, `app` must be an import
    string (with `factory=True` for a factory), as for `uvicorn.run`."""
    config = uvicorn_config(app, host=host, port=port, limits=limits, workers=workers, **kwargs)
    if workers == 1:
        uvicorn.Server(config).run()
        return
    from uvicorn.supervisors import Multiprocess

    sock = config.bind_socket()
    Multiprocess(config, sockets=[sock]).run()
