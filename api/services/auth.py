"""Wallet sign-in (CIP-8 challenge/response), bearer tokens, single-use challenges."""

from __future__ import annotations

import functools
import hmac
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cachetools import TTLCache
from sqlalchemy import Connection, bindparam, update
from sqlalchemy import select as sa_select
from sqlalchemy.orm import make_transient_to_detached
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Unauthorized
from api.models import ApiToken, AuthChallenge, User
from api.services.tokens import new_nonce, new_secret, secret_hash
from api.services.users import get_or_create_user
from api.wallet import parse_sign_in_address, verify_sign_data

PURPOSE_SIGN_IN = "wallet-sign-in"
PURPOSE_WORKER_BINDING = "worker-binding"


@dataclass(frozen=True)
class IssuedToken:
    token: str
    expires_at: datetime
    user: User


def sign_in_message(*, network: str, address: str, nonce: str, issued: datetime) -> str:
    # Domain-separated and human-readable: the wallet shows this text to its owner, and no
    # other proofnet signature (endorsement, binding) can be mistaken for it.
    return (
        "proofnet sign-in v1\n"
        f"network: {network}\n"
        f"address: {address}\n"
        f"nonce: {nonce}\n"
        f"issued: {issued.strftime('%Y-%m-%dT%H:%M:%SZ')}"
    )


def issue_sign_in_challenge(
    session: Session, config: ApiConfig, address: str, now: datetime
) -> AuthChallenge:
    wallet = parse_sign_in_address(address, config.network)
    nonce = new_nonce()
    challenge = AuthChallenge(
        purpose=PURPOSE_SIGN_IN,
        nonce=nonce,
        subject=wallet.bech32,
        message=sign_in_message(
            network=config.network, address=wallet.bech32, nonce=nonce, issued=now
        ),
        created_at=now,
        expires_at=now + timedelta(seconds=config.challenge_ttl_s),
    )
    session.add(challenge)
    session.commit()
    return challenge


def issue_worker_challenge(
    session: Session, config: ApiConfig, worker_key: str, now: datetime
) -> AuthChallenge:
    """A nonce the worker puts in its payout binding; it is good for one registration."""
    nonce = new_nonce(32)
    challenge = AuthChallenge(
        purpose=PURPOSE_WORKER_BINDING,
        nonce=nonce,
        subject=worker_key,
        message="",
        created_at=now,
        expires_at=now + timedelta(seconds=config.challenge_ttl_s),
    )
    session.add(challenge)
    session.commit()
    return challenge


def consume_challenge(
    session: Session, *, purpose: str, nonce: str, subject: str, now: datetime
) -> AuthChallenge:
    """Mark a challenge used, exactly once, or raise Unauthorized saying why not.

    The caller commits: the challenge stays unused if what it guards is rolled back.
    """
    challenge = session.exec(
        select(AuthChallenge).where(AuthChallenge.nonce == nonce, AuthChallenge.purpose == purpose)
    ).first()
    if challenge is None or not hmac.compare_digest(challenge.subject, subject):
        raise Unauthorized("unknown challenge nonce for this address")
    if challenge.used_at is not None:
        raise Unauthorized("challenge nonce was already used")
    if challenge.expires_at <= now:
        raise Unauthorized("challenge expired; request a new one")
    # Conditional update: of two concurrent uses, exactly one sees a row change.
    marked = session.execute(
        update(AuthChallenge)
        .where(col(AuthChallenge.id) == challenge.id, col(AuthChallenge.used_at).is_(None))
        .values(used_at=now)
    )
    if marked.rowcount != 1:  # type: ignore[attr-defined]
        raise Unauthorized("challenge nonce was already used")
    return challenge


def verify_sign_in(
    session: Session,
    config: ApiConfig,
    *,
    address: str,
    nonce: str,
    signature: str,
    key: str,
    now: datetime,
) -> IssuedToken:
    wallet = parse_sign_in_address(address, config.network)
    challenge = consume_challenge(
        session, purpose=PURPOSE_SIGN_IN, nonce=nonce, subject=wallet.bech32, now=now
    )
    try:
        signed = verify_sign_data(signature, key, credential=wallet.credential)
        if signed.message != challenge.message:
            raise Unauthorized("signed message is not the challenge issued")
        if signed.key_hash != wallet.payment_key_hash:
            raise Unauthorized(
                f"signing key does not match the address's {wallet.credential} credential"
            )
    except Unauthorized:
        # One attempt per challenge: a failed answer burns the nonce too.
        session.commit()
        raise
    user = get_or_create_user(session, wallet, now)
    token = new_secret()
    expires_at = now + timedelta(seconds=config.token_ttl_s)
    assert user.id is not None
    session.add(
        ApiToken(
            token_hash=secret_hash(token), user_id=user.id, created_at=now, expires_at=expires_at
        )
    )
    session.commit()
    return IssuedToken(token=token, expires_at=expires_at, user=user)


# How long a validated bearer token may be trusted without asking the database again,
# where a route opts into the cache (`api.deps.CachedUser`). This is the staleness bound:
# a token revoked by another process (another uvicorn worker) or a user deleted elsewhere
# keeps working on cached routes of this process for at most this long. A logout in this
# process evicts the token at once; expiry is checked on every request.
TOKEN_CACHE_TTL_S = 5.0


class TokenCache:
    """Bearer token hash -> the user it signs in, for `ttl_s` seconds (thread-safe, bounded:
    past `max_entries` the least recently used entry goes).

    The user's column values are kept; every `get` gets its own detached `User`, so no two
    requests share an instance (`get_shared`, for read-only callers, is the exception).
    Revocation leaves a tombstone for `ttl_s`, so a lookup that read the database just
    before the revocation committed cannot re-add the token.
    """

    def __init__(
        self,
        ttl_s: float = TOKEN_CACHE_TTL_S,
        *,
        max_entries: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        # token hash -> (token expiry, the user's column values, a shared detached User)
        self._entries: TTLCache[str, tuple[datetime, dict[str, Any], User]] = TTLCache(
            maxsize=max_entries, ttl=ttl_s, timer=clock
        )
        self._revoked: TTLCache[str, bool] = TTLCache(maxsize=max_entries, ttl=ttl_s, timer=clock)
        self._lock = threading.Lock()  # cachetools' caches are not thread-safe
        _token_caches.add(self)

    def get(self, token_hash: str, now: datetime) -> User | None:
        """The cached user, None on a miss; raises Unauthorized when the token has expired."""
        entry = self._fresh(token_hash, now)
        return None if entry is None else _detached_user(entry[1])

    def get_shared(self, token_hash: str, now: datetime) -> User | None:
        """`get`, but one detached `User` per entry, shared by every caller (building a
        `User` costs more than the rest of a hit): only for callers that read who the
        caller is, and never modify it or add it to a session."""
        entry = self._fresh(token_hash, now)
        return None if entry is None else entry[2]

    def _fresh(
        self, token_hash: str, now: datetime
    ) -> tuple[datetime, dict[str, Any], User] | None:
        with self._lock:
            entry = self._entries.get(token_hash)
        if entry is None:
            return None
        if entry[0] <= now:
            raise Unauthorized("bearer token expired; sign in again")
        return entry

    def put(self, token_hash: str, user: User, expires_at: datetime) -> None:
        self.put_values(
            token_hash, {name: getattr(user, name) for name in User.model_fields}, expires_at
        )

    def put_values(self, token_hash: str, values: dict[str, Any], expires_at: datetime) -> None:
        with self._lock:
            if token_hash in self._revoked:
                return
            self._entries[token_hash] = (expires_at, values, _detached_user(values))

    def evict(self, token_hash: str) -> None:
        with self._lock:
            self._entries.pop(token_hash, None)
            self._revoked[token_hash] = True


# Every live cache in this process, so a logout evicts the token wherever it is cached.
_token_caches: weakref.WeakSet[TokenCache] = weakref.WeakSet()


def _detached_user(values: dict[str, Any]) -> User:
    """A `User` from its column values, detached (as if loaded by a closed session)."""
    user = User(**values)
    make_transient_to_detached(user)
    return user


@functools.cache
def _token_statement() -> Any:
    """Token hash -> (user, expiry, revocation): one query on the unique token_hash index.
    Built once; each request only binds the hash."""
    return (
        select(User, ApiToken.expires_at, ApiToken.revoked_at)
        .join(ApiToken, col(ApiToken.user_id) == col(User.id))
        .where(col(ApiToken.token_hash) == bindparam("token_hash"))
    )


def user_for_token(
    session: Session, token: str, now: datetime, cache: TokenCache | None = None
) -> User:
    """The user a bearer token signs in: one indexed query (token joined to its user), or
    none on a `cache` hit."""
    token_hash = secret_hash(token)
    if cache is not None:
        cached = cache.get(token_hash, now)
        if cached is not None:
            return cached
    row = session.exec(_token_statement(), params={"token_hash": token_hash}).first()
    if row is None:
        raise Unauthorized("invalid bearer token")
    user, expires_at, revoked_at = row
    if revoked_at is not None:
        raise Unauthorized("invalid bearer token")
    if expires_at <= now:
        raise Unauthorized("bearer token expired; sign in again")
    if cache is not None:
        cache.put(token_hash, user, expires_at)
    return user


@functools.cache
def _token_columns_statement() -> Any:
    """`_token_statement` as plain columns, for a connection without the ORM."""
    return (
        sa_select(
            *(getattr(User, name) for name in User.model_fields),
            col(ApiToken.expires_at).label("token_expires_at"),
            col(ApiToken.revoked_at).label("token_revoked_at"),
        )
        .join(ApiToken, col(ApiToken.user_id) == col(User.id))
        .where(col(ApiToken.token_hash) == bindparam("token_hash"))
    )


def cached_user_for_token(conn: Connection, token: str, now: datetime, cache: TokenCache) -> User:
    """`user_for_token` through `cache`, reading a miss over a plain connection (no ORM
    session: the polled routes only need who the caller is). Returns a detached user."""
    token_hash = secret_hash(token)
    cached = cache.get(token_hash, now)
    if cached is not None:
        return cached
    row = conn.execute(_token_columns_statement(), {"token_hash": token_hash}).first()
    if row is None or row.token_revoked_at is not None:
        raise Unauthorized("invalid bearer token")
    if row.token_expires_at <= now:
        raise Unauthorized("bearer token expired; sign in again")
    values = {name: row._mapping[name] for name in User.model_fields}
    cache.put_values(token_hash, values, row.token_expires_at)
    return _detached_user(values)


def revoke_token(session: Session, token: str, now: datetime) -> None:
    token_hash = secret_hash(token)
    session.execute(
        update(ApiToken)
        .where(col(ApiToken.token_hash) == token_hash, col(ApiToken.revoked_at).is_(None))
        .values(revoked_at=now)
    )
    session.commit()
    for cache in list(_token_caches):
        cache.evict(token_hash)
