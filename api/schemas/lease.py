from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from api.schemas.common import PublicBody, RequestBody


class ClaimAccepts(RequestBody):
    """The kinds of work beyond a plain job or relay unit that the claiming worker can run.

    Unknown kinds are ignored rather than refused: a newer worker may name kinds this API
    does not hand out yet, and ignoring them never gives a worker work it cannot run."""

    model_config = ConfigDict(extra="ignore")

    # Nodes of multi-node jobs: they need the host's network, which a worker may not allow.
    # Absent means no: a worker that does not say so cannot be assumed to run them.
    cluster: bool = Field(default=False, strict=True)


class ClaimRequest(RequestBody):
    """The optional body of POST /worker/claim (absent: the worker accepts nothing extra)."""

    accepts: ClaimAccepts = Field(default_factory=ClaimAccepts)


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


class ClaimInput(PublicBody):
    """An input checkpoint of a unit: download it from .../leases/{token}/inputs/{position}."""

    unit: int
    sha256: str
    size: int


class ClusterPublic(PublicBody):
    """Where a multi-node unit's cluster attempt stands (docs/topologies.md)."""

    state: Literal["waiting", "ready", "failed"]
    world_size: int
    rank: int
    endpoint: str | None
    rdzv_id: str


class ClaimUnit(PublicBody):
    """The unit of a job with a topology that this lease is for (docs/topologies.md)."""

    index: int
    kind: Literal["stage", "eval", "aggregate", "node"]
    inputs: list[ClaimInput]
    shards: list[int]
    amount: int
    evaluates: int | None
    rank: int | None
    cluster: ClusterPublic | None


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
    # Set for a job with a topology: the one unit of it this lease is for.
    unit: ClaimUnit | None = None


class LeaseHeartbeat(RequestBody):
    progress: float | None = Field(default=None, ge=0.0, le=1.0)
    message: str | None = Field(default=None, max_length=500)
    # Node rank 0 of a multi-node job: "host:port" where it hosts the c10d store.
    rendezvous: str | None = Field(default=None, max_length=300)


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
    # For a node of a multi-node job: its cluster attempt.
    cluster: ClusterPublic | None = None


class LeaseRelease(RequestBody):
    reason: str = Field(default="", max_length=2000)
