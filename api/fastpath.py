"""The two most-polled reads, answered without FastAPI's request machinery.

`GET /api/v1/jobs/{job_id}/status` and `GET /api/v1/balances/{address}` are what every
submitter's client and the web app poll. Through FastAPI each costs most of its CPU in the
framework (dependency resolution, parameter and response validation, Request/Response
objects), not in the read. `LeanReads` is a pure ASGI layer in front of the FastAPI app,
inside the rate limit and the body size limit (both still apply), that matches these two
paths by hand and answers them directly:

- the bearer token is taken from the Authorization header exactly as FastAPI's `HTTPBearer`
  takes it, and the caller is signed in by the same code as the routes' `CachedUser`
  (`api.deps.cached_user`);
- the body is built by the functions the FastAPI routes return
  (`api.routes.jobs.status_public`; for balances `api.routes.balances.balance_of` and
  `BalancePublic.of`, what `balance_public` calls), so whatever those bodies grow flows
  through both paths, and is serialized as FastAPI serializes a declared return type
  (Pydantic's JSON serializer, by alias); a kept status's or balance's body is
  serialized once;
- errors the services raise (`ApiError`) get the app's JSON error body and status; anything
  else propagates to Starlette's error middleware, as it does from a route.

So bodies, status codes and headers are the routes'. Whatever this layer does not recognise
(another method, another path, an address FastAPI's validation would refuse with its own
422 body) goes to FastAPI unchanged; the FastAPI routes stay declared, so the OpenAPI schema
documents both reads.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi.responses import JSONResponse
from fastapi.security.utils import get_authorization_scheme_param
from pydantic import BaseModel, TypeAdapter
from starlette.datastructures import State

from api.deps import SIGN_IN_FIRST, cached_user
from api.errors import ApiError, Unauthorized
from api.middleware import ASGIApp, Receive, Scope, Send
from api.models import User
from api.routes.balances import ADDRESS_MAX_LENGTH, ADDRESS_MIN_LENGTH, balance_of
from api.routes.jobs import status_public
from api.schemas.balance import BalancePublic
from api.services.balances import Balance

JOBS_PREFIX = "/api/v1/jobs/"
STATUS_SUFFIX = "/status"
BALANCES_PREFIX = "/api/v1/balances/"

_JSON = (b"content-type", b"application/json")
# Serialized bodies of kept statuses and balances, per process; cleared when full.
MEMO_ENTRIES = 50_000


def error_response(exc: ApiError) -> JSONResponse:
    """The app's answer to an `ApiError`: its status and `{"detail": ...}`."""
    return JSONResponse(status_code=exc.status_code, content={"detail": exc.detail})


@functools.cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[Any]:
    return TypeAdapter(model)


def _json(body: BaseModel) -> bytes:
    # What FastAPI does with a route's declared return type (fastapi.routing,
    # serialize_response with dump_json): the type's adapter, by alias, nothing excluded.
    return _adapter(type(body)).dump_json(body, by_alias=True)


def route_path(scope: Scope) -> str:
    """The path routes match against: the request path less the root path (as Starlette's
    router computes it)."""
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if not root_path or not path.startswith(root_path):
        return path
    if path == root_path:
        return ""
    if path[len(root_path)] == "/":
        return path[len(root_path) :]
    return path


def bearer_token(scope: Scope) -> str:
    """The bearer token of the request, or Unauthorized: `HTTPBearer(auto_error=False)`
    followed by the routes' check (the first Authorization header; scheme and credentials
    both present, the scheme 'Bearer' in any case)."""
    authorization = ""
    for name, value in scope["headers"]:
        if name == b"authorization":
            authorization = value.decode("latin-1")
            break
    scheme, credentials = get_authorization_scheme_param(authorization)
    if not (authorization and scheme and credentials) or scheme.lower() != "bearer":
        raise Unauthorized(SIGN_IN_FIRST)
    return credentials


class LeanReads:
    """Serves job status and balance reads directly; passes everything else to `app`.

    `state` is the FastAPI app's `app.state`, read on every request (engine, config, clock,
    caches), so what tests or the app put there later is what this layer uses."""

    def __init__(self, app: ASGIApp, state: State) -> None:
        self.app = app
        self.state = state
        # The kept status or balance last served and its body, by job id and by (user id,
        # address); the object is held, so its identity is not reused meanwhile. Only the
        # event loop's thread touches these.
        self._status_bodies: dict[str, tuple[BaseModel, bytes]] = {}
        self._balance_bodies: dict[tuple[int, str], tuple[Balance, bytes]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            path = route_path(scope)
            if path.startswith(JOBS_PREFIX) and path.endswith(STATUS_SUFFIX):
                job_id = path[len(JOBS_PREFIX) : -len(STATUS_SUFFIX)]
                if job_id and "/" not in job_id:
                    await self._serve(scope, send, self._status, job_id)
                    return
            elif path.startswith(BALANCES_PREFIX):
                address = path[len(BALANCES_PREFIX) :]
                if "/" not in address and (
                    ADDRESS_MIN_LENGTH <= len(address) <= ADDRESS_MAX_LENGTH
                ):
                    await self._serve(scope, send, self._balance, address)
                    return
        await self.app(scope, receive, send)

    async def _status(self, user: User, job_id: str) -> bytes:
        # A kept status (api.reads._status_cache) is the same object until dropped: serialized once.
        status = await status_public(self.state, user, job_id)
        memo = self._status_bodies.get(job_id)
        if memo is not None and memo[0] is status:
            return memo[1]
        body = _json(status)
        if len(self._status_bodies) >= MEMO_ENTRIES:
            self._status_bodies.clear()
        self._status_bodies[job_id] = (status, body)
        return body

    async def _balance(self, user: User, address: str) -> bytes:
        # A cached balance is the same object until it expires: serialized once.
        assert user.id is not None
        balance = await balance_of(self.state, user, address)
        key = (user.id, address)
        memo = self._balance_bodies.get(key)
        if memo is not None and memo[0] is balance:
            return memo[1]
        body = _json(BalancePublic.of(balance))
        if len(self._balance_bodies) >= MEMO_ENTRIES:
            self._balance_bodies.clear()
        self._balance_bodies[key] = (balance, body)
        return body

    async def _serve(
        self,
        scope: Scope,
        send: Send,
        read: Callable[[User, str], Awaitable[bytes]],
        argument: str,
    ) -> None:
        try:
            user = await cached_user(self.state, bearer_token(scope))
            body = await read(user, argument)
        except ApiError as e:
            error = error_response(e)
            await _respond(send, error.status_code, error.raw_headers, bytes(error.body))
            return
        await _respond(send, 200, [(b"content-length", str(len(body)).encode()), _JSON], body)


async def _respond(
    send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes
) -> None:
    # The two messages a Starlette Response sends for a body it holds.
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
