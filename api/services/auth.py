"""Wallet sign-in (CIP-8 challenge/response), bearer tokens, single-use challenges."""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlmodel import Session, col, select

from api.config import ApiConfig
from api.errors import Unauthorized
from api.models import ApiToken, AuthChallenge, User
from api.services.tokens import new_nonce, new_secret, secret_hash
from api.services.users import get_or_create_user
from api.wallet import parse_wallet_address, verify_sign_data

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
    wallet = parse_wallet_address(address, config.network)
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
    wallet = parse_wallet_address(address, config.network)
    challenge = consume_challenge(
        session, purpose=PURPOSE_SIGN_IN, nonce=nonce, subject=wallet.bech32, now=now
    )
    try:
        signed = verify_sign_data(signature, key)
        if signed.message != challenge.message:
            raise Unauthorized("signed message is not the challenge issued")
        if signed.key_hash != wallet.payment_key_hash:
            raise Unauthorized("signing key does not match the address's payment credential")
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


def user_for_token(session: Session, token: str, now: datetime) -> User:
    row = session.exec(select(ApiToken).where(ApiToken.token_hash == secret_hash(token))).first()
    if row is None or row.revoked_at is not None:
        raise Unauthorized("invalid bearer token")
    if row.expires_at <= now:
        raise Unauthorized("bearer token expired; sign in again")
    user = session.get(User, row.user_id)
    if user is None:
        raise Unauthorized("invalid bearer token")
    return user


def revoke_token(session: Session, token: str, now: datetime) -> None:
    session.execute(
        update(ApiToken)
        .where(col(ApiToken.token_hash) == secret_hash(token), col(ApiToken.revoked_at).is_(None))
        .values(revoked_at=now)
    )
    session.commit()
