"""Storage providers' offers and the placements of jobs' content with them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class StorageOffer(TableBase, table=True):
    """A provider's current storage offer (one per provider key; re-offering replaces it)."""

    __tablename__ = "storage_offers"

    id: int | None = Field(default=None, primary_key=True)
    # Raw Ed25519 public key, lowercase hex: the key that signed the offer and its requests.
    provider_key: str = Field(max_length=64, unique=True)
    payout_address: str = Field(max_length=200)
    endpoint: str = Field(max_length=512)
    bucket: str = Field(max_length=63)
    capacity_bytes: int = Field(sa_type=BigInteger)
    ntx_per_gb_month: int = Field(sa_type=BigInteger)
    # The signed offer as received, kept so anyone can re-verify its terms.
    offer: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    offered_at: datetime


class StoragePlacement(TableBase, table=True):
    """One copy of one object of a job's content with one storage provider: the commitment
    it was stored under, and whether it is held (`active`), failed a challenge (`failed`,
    replaced by another placement) or ended with its term (`ended`)."""

    __tablename__ = "storage_placements"
    __table_args__ = (UniqueConstraint("job_id", "object_key", "provider_key"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=64, index=True)
    kind: str = Field(max_length=16)  # data | results | checkpoints
    object_key: str = Field(max_length=512)
    provider_key: str = Field(max_length=64, index=True)
    content_root: str = Field(max_length=64)
    size: int = Field(sa_type=BigInteger)
    chunk_size: int
    ntx_per_gb_month: int = Field(sa_type=BigInteger)
    status: str = Field(default="active", max_length=16)
    reason: str = Field(default="", max_length=2000)
    replaces_id: int | None = Field(default=None, foreign_key="storage_placements.id")
    placed_at: datetime
    ends_at: datetime
    # What the oracle's answered challenges have earned this copy so far (NTX base units,
    # only ever growing), and through when; pending until a settlement pays it.
    accrued_ntx: int = Field(default=0, sa_type=BigInteger)
    paid_through: datetime | None = None
    challenges_passed: int = 0
    # Failed challenges in a row that did not prove a bad copy (an oracle declares the copy
    # lost at its limit), and the last one's reason; a pass clears both.
    strikes: int = 0
    last_failure: str = Field(default="", max_length=2000)
