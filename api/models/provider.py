"""Providers (one per registered worker key), their GPUs and their rate cards."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, UniqueConstraint
from sqlmodel import Field

from api.models.base import TableBase


class Provider(TableBase, table=True):
    __tablename__ = "providers"

    id: int | None = Field(default=None, primary_key=True)
    # Raw Ed25519 public key, lowercase hex: what signed worker requests are checked against.
    worker_key: str = Field(max_length=64, unique=True)
    key_id: str = Field(max_length=56, unique=True)
    payout_address: str = Field(max_length=200)
    # The signed payout binding, kept so anyone can re-verify where payments go.
    binding: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    capabilities: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    telemetry: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    telemetry_at: datetime | None = None
    registered_at: datetime
    last_heartbeat_at: datetime | None = Field(default=None, index=True)
    # When the worker last asked for verification tasks: only workers that do are drawn
    # as verifiers (api/services/verifications.py).
    verifies_at: datetime | None = None


class ProviderGpu(TableBase, table=True):
    __tablename__ = "provider_gpus"
    __table_args__ = (UniqueConstraint("provider_id", "index"),)

    id: int | None = Field(default=None, primary_key=True)
    provider_id: int = Field(foreign_key="providers.id", ondelete="CASCADE")
    index: int
    uuid: str = Field(max_length=128)
    model: str = Field(max_length=128)
    memory_mb: int
    # The API's own check of this GPU (api/services/gpu_challenges.py): "unchecked" until a
    # challenge of the API passes ("passed", good until `verified_until`) or anything shows
    # the claim false ("failed", with the reason the provider sees).
    check_status: str = Field(default="unchecked", max_length=16)
    check_reason: str = Field(default="", max_length=2000)
    verified_until: datetime | None = None


class RateCard(TableBase, table=True):
    """A provider's asking price per GPU-hour for one GPU model, in NTX base units."""

    __tablename__ = "rate_cards"
    __table_args__ = (UniqueConstraint("provider_id", "gpu_model"),)

    id: int | None = Field(default=None, primary_key=True)
    provider_id: int = Field(foreign_key="providers.id", ondelete="CASCADE")
    gpu_model: str = Field(max_length=128)
    ntx_per_gpu_hour: int
    updated_at: datetime


class GpuChallenge(TableBase, table=True):
    """One round of the API's GPU challenge (proofnet/messages/gpu_challenge.py): the seed it
    issued, when it started the clock (revealing the sign vector), the commitment and when
    it arrived, the rows drawn after it, the verdict. `key` is the API's secret Freivalds
    randomness for this round."""

    __tablename__ = "gpu_challenges"

    id: int | None = Field(default=None, primary_key=True)
    provider_id: int = Field(foreign_key="providers.id", index=True, ondelete="CASCADE")
    gpu_uuid: str = Field(max_length=128)
    gpu_model: str = Field(max_length=128)
    seed: int = Field(sa_type=BigInteger)
    n: int
    dtype: str = Field(max_length=16)
    key: str = Field(max_length=64)
    status: str = Field(max_length=16)  # issued | started | committed | passed | failed
    reason: str = Field(default="", max_length=2000)
    issued_at: datetime
    # The clock starts when the sign vector's key is revealed (the product depends on it).
    started_at: datetime | None = None
    signs_key: str | None = Field(default=None, max_length=64)
    committed_at: datetime | None = None
    commitment: str | None = Field(default=None, max_length=64)
    reveal: list[int] | None = Field(default=None, sa_column=Column(JSON))
    elapsed_s: float | None = None
    measured_tflops: float | None = None
    finished_at: datetime | None = None
