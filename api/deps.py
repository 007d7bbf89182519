"""FastAPI dependencies: the DB session, config, clock, the signed-in user, the worker."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select
from starlette.datastructures import State

from api.config import ApiConfig
from api.db import open_session
from api.errors import Forbidden, Unauthorized
from api.models import Provider, User, WorkerRequestNonce
from api.reads import ReadPool
from api.services.auth import TokenCache, cached_user_for_token, user_for_token
from api.services.escrow_tx import EscrowUnavailable
from api.services.result_release import ReleasePolicy
from api.services.tokens import secret_hash
from proofnet.messages.worker_auth import (
    SignedRequest,
    WorkerAuthError,
    parse_headers,
    request_message,
    verify_request,
)


def get_session(request: Request) -> Iterator[Session]:
    with open_session(request.app.state.engine) as session:
        yield session


# The trivial dependencies are `async`: FastAPI runs a sync dependency in the thread pool,
# and a thread hop costs more than these do.
async def get_config(request: Request) -> ApiConfig:
    config: ApiConfig = request.app.state.config
    return config


async def get_now(request: Request) -> datetime:
    now: datetime = request.app.state.clock()
    return now


SessionDep = Annotated[Session, Depends(get_session)]
ConfigDep = Annotated[ApiConfig, Depends(get_config)]
NowDep = Annotated[datetime, Depends(get_now)]


async def get_release_policy(config: ConfigDep) -> ReleasePolicy:
    """Whose verdicts release results to the submitter, and how many (the config's oracle
    keys and quorum: api.services.result_release)."""
    return ReleasePolicy(frozenset(config.oracle_keys), config.result_release_quorum)


ReleasePolicyDep = Annotated[ReleasePolicy, Depends(get_release_policy)]

SIGN_IN_FIRST = "sign in first: send 'Authorization: Bearer <token>'"
_bearer = HTTPBearer(auto_error=False, description="Token from POST /api/v1/auth/verify")


def get_current_user(
    session: SessionDep,
    now: NowDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized(SIGN_IN_FIRST)
    return user_for_token(session, credentials.credentials, now)


CurrentUser = Annotated[User, Depends(get_current_user)]

_token_cache_lock = threading.Lock()
_read_pool_lock = threading.Lock()
_T = TypeVar("_T")


def read_pool(state: State) -> ReadPool:
    """`state.read_pool`, the polled reads' threads and connections (api.reads), made on
    first use from `state.engine`; the app closes it on shutdown."""
    pool = getattr(state, "read_pool", None)
    if pool is None:
        with _read_pool_lock:
            pool = getattr(state, "read_pool", None)
            if pool is None:
                pool = state.read_pool = ReadPool(state.engine)
    assert isinstance(pool, ReadPool)
    return pool


async def run_read(state: State, func: Callable[..., _T], *args: Any) -> _T:
    """`func(conn, *args)` on the app's read pool: a read thread and its connection."""
    return await read_pool(state).run(func, *args)


def token_cache(request: Request) -> TokenCache:
    """This app's bearer token cache (`app.state.token_cache`), made on first use."""
    return token_cache_of(request.app.state)


def token_cache_of(state: State) -> TokenCache:
    """`state.token_cache`, made on first use (for callers without a Request)."""
    cache = getattr(state, "token_cache", None)
    if cache is None:
        with _token_cache_lock:
            cache = getattr(state, "token_cache", None)
            if cache is None:
                cache = state.token_cache = TokenCache()
    assert isinstance(cache, TokenCache)
    return cache


def _user_from_database(conn: Connection, token: str, now: datetime, cache: TokenCache) -> User:
    return cached_user_for_token(conn, token, now, cache)


async def get_cached_user(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    """The signed-in user, for hot read-only routes: a token validated in the last
    `TOKEN_CACHE_TTL_S` seconds (5 s) by this process is trusted without a query or a thread
    hop. A token revoked by another process therefore still reads here for up to 5 s; a
    logout in this process takes effect at once; expiry is checked on every request.

    The user is a detached snapshot up to 5 s old, shared with the other requests that
    sign in with the same token: read who the caller is (id, address, payment key hash);
    never modify it, add it to a session, or use flags of it to decide a write (those
    routes take `CurrentUser`, which always asks the database)."""
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Unauthorized(SIGN_IN_FIRST)
    return await cached_user(request.app.state, credentials.credentials)


async def cached_user(state: State, token: str) -> User:
    """`get_cached_user` for a bearer token already taken from its header; `state` is the
    app's (engine, clock, token cache). Shared with the lean read path (api.fastpath)."""
    cache = token_cache_of(state)
    now: datetime = state.clock()
    user = cache.get_shared(secret_hash(token), now)
    if user is not None:
        return user
    return await run_read(state, _user_from_database, token, now, cache)


CachedUser = Annotated[User, Depends(get_cached_user)]


def get_senior_user(user: CurrentUser) -> User:
    if not user.is_senior:
        raise Forbidden("only senior members may do this")
    return user


SeniorUser = Annotated[User, Depends(get_senior_user)]


async def _request_body(request: Request) -> bytes:
    # Starlette caches the body, so the route still parses it after this read.
    return await request.body()


def signed_headers(request: Request, config: ApiConfig, now: datetime) -> SignedRequest:
    """The request's signature headers, well formed and within the clock skew; checked
    before any body is read. The signature itself needs the body's hash: `check_signature`."""
    try:
        signed = parse_headers(request.headers)
    except WorkerAuthError as e:
        raise Unauthorized(str(e)) from e
    if abs(now.timestamp() - signed.timestamp) > config.worker_request_skew_s:
        raise Unauthorized(
            f"worker request timestamp is more than {config.worker_request_skew_s}s away "
            "from the server clock; check the worker's clock"
        )
    return signed


def check_signature(
    request: Request,
    signed: SignedRequest,
    body_sha256: str,
    session: Session,
    config: ApiConfig,
    now: datetime,
) -> str:
    """Verify the signature over the request and its body's SHA-256 and spend the nonce;
    the worker key that signed."""
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    message = request_message(
        network=config.network,
        method=request.method,
        path=path,
        timestamp=signed.timestamp,
        nonce=signed.nonce,
        body_sha256=body_sha256,
    )
    try:
        verify_request(signed, message)
    except WorkerAuthError as e:
        raise Unauthorized(str(e)) from e
    session.add(WorkerRequestNonce(worker_key=signed.worker_key, nonce=signed.nonce, seen_at=now))
    try:
        session.commit()
    except IntegrityError as e:
        session.rollback()
        raise Unauthorized("worker request nonce was already used (replay refused)") from e
    return signed.worker_key


def get_signed_worker_key(
    request: Request,
    body: Annotated[bytes, Depends(_request_body)],
    session: SessionDep,
    config: ConfigDep,
    now: NowDep,
) -> str:
    """The worker public key that signed this request (registered or not)."""
    signed = signed_headers(request, config, now)
    return check_signature(request, signed, hashlib.sha256(body).hexdigest(), session, config, now)


def provider_of(session: Session, worker_key: str) -> Provider:
    provider = session.exec(select(Provider).where(Provider.worker_key == worker_key)).first()
    if provider is None:
        raise Forbidden("this worker key is not registered: POST /api/v1/worker/register first")
    return provider


SignedWorkerKey = Annotated[str, Depends(get_signed_worker_key)]


def get_current_provider(worker_key: SignedWorkerKey, session: SessionDep) -> Provider:
    return provider_of(session, worker_key)


CurrentProvider = Annotated[Provider, Depends(get_current_provider)]


# --- the chain and the protocol deployment (escrows) -------------------------------------

_deployment_lock = threading.Lock()


def get_chain_context(request: Request) -> Any:
    """`app.state.chain_context` when set, else the backend the settings select (cached)."""
    context = getattr(request.app.state, "chain_context", None)
    if context is None:
        from chain.offchain.backends import chain_context
        from proofnet.settings import build_settings

        try:
            context = chain_context(build_settings())
        except Exception as e:  # an unreachable backend is a 503, not a crash
            raise HTTPException(503, f"chain backend unavailable: {type(e).__name__}") from e
        request.app.state.chain_context = context
    return context


def get_deployment(request: Request) -> Any:
    """`app.state.deployment`, else loaded once from the `deployment_file` setting."""
    state = request.app.state
    deployment = getattr(state, "deployment", None)
    if deployment is not None:
        return deployment
    with _deployment_lock:
        deployment = getattr(state, "deployment", None)
        if deployment is None:
            from chain.offchain.builders import BuilderError, Deployment

            path = state.settings.deployment_file
            if not path:
                raise EscrowUnavailable(
                    "this API has no protocol deployment configured "
                    "(set PROOFNET_DEPLOYMENT_FILE to the deployment.json)"
                )
            try:
                deployment = Deployment.load(path)
            except BuilderError as exc:
                raise EscrowUnavailable(f"the API's deployment is unusable: {exc}") from exc
            state.deployment = deployment
    return deployment


ChainDep = Annotated[Any, Depends(get_chain_context)]
DeploymentDep = Annotated[Any, Depends(get_deployment)]
