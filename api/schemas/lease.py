from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from api.schemas.common import PublicBody, RequestBody


class ClaimEscrow(PublicBody):
    """Where the job's attestation is settled: the escrow UTxO the submitter recorded."""

    network: str
    script_hash: str  # the escrow validator's hash, 56 hex digits
    tx_id: str
    index: int


class ClaimSealing(PublicBody):
    public_key: str
    signature: str
    cose_key: str


class ClaimPublic(PublicBody):
    job_id: str
    spec: dict[str, Any]
    lease_token: str
    # Revealed only now, after the spec is fixed: seeds the proof-of-training data order.
    nonce: str
    attempt: int
    expires_at: datetime
    lease_ttl_s: int
    # None only for a job without a recorded escrow (claimable when the API does not
    # require one); a worker releases such a job, as it could not be paid for it.
    escrow: ClaimEscrow | None = None
    # The submitter's sealing key (with its wallet signature): seal every result to it.
    sealing: ClaimSealing | None = None


class LeaseHeartbeat(RequestBody):
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    message: str | None = Field(default=None, max_length=500)


class LeaseComplete(RequestBody):
    # What the worker hands back for the result pipeline (e.g. attestation, commitments).
    result: dict[str, Any] = Field(default_factory=dict)


class LeaseEnd(RequestBody):
    reason: str = Field(min_length=1, max_length=2000)


class LeasePublic(PublicBody):
    job_id: str
    status: str
    expires_at: datetime
    outcome: str | None


class LeaseRelease(RequestBody):
    reason: str = Field(default="", max_length=2000)
