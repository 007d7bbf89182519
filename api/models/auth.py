"""Single-use challenges, bearer tokens, and seen worker request nonces."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class AuthChallenge(TableBase, table=True):
    """A single-use nonce: for a wallet sign-in or for a worker's payout binding."""

    __tablename__ = "auth_challenges"

    id: int | None = Field(default=None, primary_key=True)
    purpose: str = Field(max_length=32)
    nonce: str = Field(max_length=64, unique=True)
    # The wallet address signing in, or the worker public key registering.
    subject: str = Field(max_length=128)
    message: str = Field(max_length=1024)
    created_at: datetime
    expires_at: datetime = Field(index=True)
    used_at: datetime | None = None


class ApiToken(TableBase, table=True):
    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    # SHA-256 of the opaque token; the token itself is never stored.
    token_hash: str = Field(max_length=64, unique=True)
    user_id: int = Field(foreign_key="users.id", index=True, ondelete="CASCADE")
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None


class WorkerRequestNonce(TableBase, table=True):
    """Nonces of signed worker requests inside the accepted clock window (replay guard)."""

    __tablename__ = "worker_request_nonces"
    __table_args__ = (UniqueConstraint("worker_key", "nonce"),)

    id: int | None = Field(default=None, primary_key=True)
    worker_key: str = Field(max_length=64)
    nonce: str = Field(max_length=64)
    seen_at: datetime = Field(index=True)
