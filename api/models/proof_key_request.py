"""Key requests for sealed proof files: an oracle-signed request, relayed to the provider, and
the provider's grant (content keys wrapped for the drawn verifier), relayed to the verifier.

The API stores both as they came: it can open neither (proofnet/messages/key_grant.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field

from api.models.base import TableBase


class ProofKeyRequest(TableBase, table=True):
    __tablename__ = "proof_key_requests"

    id: int | None = Field(default=None, primary_key=True)
    # SHA-256 of the signed request: the same request posted twice is one row.
    digest: str = Field(max_length=64, unique=True)
    job_id: int = Field(foreign_key="jobs.id", index=True, ondelete="CASCADE")
    # The lease whose files are asked for; its provider answers.
    lease_id: int = Field(foreign_key="leases.id", index=True, ondelete="CASCADE")
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    # The drawn verifier (a registered worker's Ed25519 key), who alone reads the grant.
    recipient_key: str = Field(max_length=64, index=True)
    request: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    # {file name: stanza} once the provider answered.
    grants: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    created_at: datetime
    answered_at: datetime | None = None
