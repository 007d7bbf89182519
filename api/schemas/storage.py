"""What the storage routes answer and accept."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from api.models import StoragePlacement as PlacementRow
from api.services.storage_offers import OfferView
from proofnet.messages.storage import Commitment, ObjectKey, StoredKind


class StorageChallengePublic(BaseModel):
    nonce: str
    network: str
    expires_at: datetime


class StorageOfferPublic(BaseModel):
    provider_key: str
    payout_address: str
    endpoint: str
    bucket: str
    capacity_bytes: int
    held_bytes: int
    free_bytes: int
    ntx_per_gb_month: int
    offered_at: datetime
    # The signed offer, so a client can re-verify every term against the provider key.
    offer: dict[str, object]

    @classmethod
    def of(cls, view: OfferView) -> StorageOfferPublic:
        r = view.row
        return cls(
            provider_key=r.provider_key,
            payout_address=r.payout_address,
            endpoint=r.endpoint,
            bucket=r.bucket,
            capacity_bytes=r.capacity_bytes,
            held_bytes=view.held_bytes,
            free_bytes=view.free_bytes,
            ntx_per_gb_month=r.ntx_per_gb_month,
            offered_at=r.offered_at,
            offer=r.offer,
        )


class StorageOffersPublic(BaseModel):
    data: list[StorageOfferPublic]
    count: int


class PlacementRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    job_id: str = Field(pattern=r"^[0-9a-f]{64}$")
    kind: StoredKind
    object_key: ObjectKey
    provider_key: str = Field(pattern=r"^[0-9a-f]{64}$")
    commitment: Commitment


class PlacementPublic(BaseModel):
    id: int
    job_id: str
    kind: str
    object_key: str
    provider_key: str
    content_root: str
    size: int
    chunk_size: int
    ntx_per_gb_month: int
    status: str  # active | failed | ended
    reason: str
    replaces_id: int | None
    placed_at: datetime
    ends_at: datetime
    # Earned so far by answered retrieval challenges, pending settlement (NTX base units).
    accrued_ntx: int
    paid_through: datetime | None
    challenges_passed: int
    # Failed challenges in a row that did not prove a bad copy, and the last one's reason.
    strikes: int = 0
    last_failure: str = ""

    @classmethod
    def of(cls, row: PlacementRow) -> PlacementPublic:
        assert row.id is not None
        return cls.model_validate(row, from_attributes=True)


class PlacementsPublic(BaseModel):
    data: list[PlacementPublic]
    count: int


class OraclePlacementPublic(PlacementPublic):
    budget: int
    max_ntx_per_gb_month: int


class OraclePlacementsPublic(BaseModel):
    data: list[OraclePlacementPublic]
    count: int


class OracleJobStoragePublic(BaseModel):
    """Whether a job's spec keeps storage, and its copies active now: what a settling
    oracle waits for before it spends the job's escrow."""

    job_id: str
    keeps_storage: bool
    placements: list[OraclePlacementPublic]
    # Its copies no longer active (failed): their receipts are checked against these terms.
    ended: list[OraclePlacementPublic] = []


class OracleJobsStoragePublic(BaseModel):
    data: list[OracleJobStoragePublic]
    count: int


class ReplacementRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    provider_key: str = Field(pattern=r"^[0-9a-f]{64}$")
    commitment: Commitment


class PlacementFailure(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)
    replacement: ReplacementRequest | None = None


class PlacementFailedPublic(BaseModel):
    failed: PlacementPublic
    replacement_id: int | None


class AccrualReport(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accrued_ntx: int = Field(ge=0, le=2**63 - 1)
    paid_through: datetime
    challenges_passed: int = Field(ge=0)
    # The copy's strikes now (0 after a pass) and the last failure's reason.
    strikes: int = Field(default=0, ge=0, le=1000)
    last_failure: str = Field(default="", max_length=2000)


class StorageEarningsPublic(BaseModel):
    provider_key: str
    payout_address: str | None
    # Earned by answered challenges, not yet paid by a settlement (NTX base units).
    accrued_ntx: int
    held_bytes: int
    placements: list[PlacementPublic]
