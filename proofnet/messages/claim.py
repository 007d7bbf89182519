"""The claim a worker gets from `POST /api/v1/worker/claim`, and the lease answers after it.

The API builds these models and serves them (its response schemas subclass them); the
worker parses the answers with them (docs/topologies.md, "Worker <-> API wire"). Values are
strict, but unknown fields are ignored rather than refused: the API is upgraded before the
workers, so a worker must keep reading a claim from a newer API that adds fields.

What only the worker can check (the spec hashes to `job_id`, the unit is one the spec's plan
holds, the wallet signed the sealing key) stays in the worker: these models hold the shape.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from proofnet.messages.attestation import NETWORKS, EscrowRef
from proofnet.messages.fields import Hex56, Hex64, NonNegInt, PosInt, TupleOf
from proofnet.messages.topology import UnitKind

ClusterPhase = Literal["waiting", "ready", "failed"]
# host:port, the host a name, IPv4 address or [IPv6] address (with an optional zone).
_ENDPOINT = re.compile(
    r"(\[[0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?\]|[A-Za-z0-9.-]{1,253}):([0-9]{1,5})"
)
_RDZV_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def check_endpoint(endpoint: str) -> str:
    """`endpoint` when it is host:port with a port in 1..65535; ValueError otherwise."""
    match = _ENDPOINT.fullmatch(endpoint)
    if match is None or not 1 <= int(match.group(2)) <= 65535:
        raise ValueError(f"a rendezvous endpoint is host:port, got {endpoint[:120]!r}")
    return endpoint


def _check_network(value: str) -> str:
    if value not in NETWORKS:
        raise ValueError(f"network {value[:40]!r} is not one of {NETWORKS}")
    return value


def _check_rdzv_id(value: str) -> str:
    if not _RDZV_ID.fullmatch(value):
        raise ValueError(f"rdzv_id must be [A-Za-z0-9_.:-]{{1,200}}, got {value[:80]!r}")
    return value


class ClaimMessage(BaseModel):
    """Base of the claim models: immutable and strict, unknown fields ignored (see above)."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


class ClaimEscrow(ClaimMessage):
    """Where the job's attestation is settled: the escrow UTxO the submitter recorded."""

    network: Annotated[str, AfterValidator(_check_network)]
    script_hash: Hex56  # the escrow validator's hash
    tx_id: Hex64
    index: Annotated[int, Field(ge=0, le=2**32 - 1)]

    @property
    def ref(self) -> EscrowRef:
        return EscrowRef(tx_id=self.tx_id, index=self.index)


class ClaimSealing(ClaimMessage):
    """The submitter's sealing key with its wallet's CIP-8 signature over it."""

    public_key: Hex64
    signature: str  # COSE_Sign1 hex
    cose_key: str  # COSE_Key hex


class UnitInput(ClaimMessage):
    """An input checkpoint of a unit (the output of unit `unit`): download it from
    .../leases/{token}/inputs/{position}, where position is its place in `inputs`."""

    unit: NonNegInt
    sha256: Hex64
    size: NonNegInt


class ClusterState(ClaimMessage):
    """Where a multi-node unit's cluster attempt stands, from the claim or a lease answer."""

    state: ClusterPhase
    world_size: PosInt
    rank: NonNegInt
    # Where node rank 0 hosts the c10d store, once it said so.
    endpoint: Annotated[str, AfterValidator(check_endpoint)] | None
    rdzv_id: Annotated[str, AfterValidator(_check_rdzv_id)]

    @model_validator(mode="after")
    def _rank_fits(self) -> ClusterState:
        if self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} does not fit world size {self.world_size}")
        return self

    @property
    def ready(self) -> bool:
        return self.state == "ready" and self.endpoint is not None


class ClaimUnit(ClaimMessage):
    """The unit of a job with a topology that a lease is for (docs/topologies.md)."""

    index: NonNegInt
    kind: UnitKind
    inputs: TupleOf[UnitInput] = ()
    shards: TupleOf[NonNegInt] = ()
    amount: NonNegInt
    evaluates: NonNegInt | None = None
    rank: NonNegInt | None = None
    cluster: ClusterState | None = None


class ResumeFile(ClaimMessage):
    """A proof file the lost lease uploaded: download it from
    .../leases/{token}/resume/{position}, where position is its place in `resume.files`."""

    name: Annotated[str, Field(min_length=1, max_length=512)]
    sha256: Hex64
    size: NonNegInt


class ClaimResume(ClaimMessage):
    """Where a long job resumes: the lost attempt's committed prefix (`pot/prefix.json`,
    first in `files`) and the files of its checkpoint `at` (weights, optimizer, RNG), each
    checked by the API against the leaf that commits it. The lease's nonce is the lost
    attempt's, so the resumed run draws the same data order (`pot.harness.resume`); its
    proof must keep leaves 0..`at` as the prefix's and proves segments `at`+1.. only."""

    from_attempt: PosInt
    at: NonNegInt  # the checkpoint index resumed from
    step: NonNegInt  # the steps it had done
    prefix_root: Hex64  # the Merkle root of the prefix's leaves
    files: TupleOf[ResumeFile]
    # The checkpoint files are sealed to the submitter (a sealed job): the worker waits for
    # the submitter's resume grant, opens them and checks them against the prefix's leaf
    # (the API could not). The prefix itself is never sealed: it holds commitments only.
    sealed: bool = False


class Claim(ClaimMessage):
    """A leased job, or unit of a job with a topology."""

    job_id: Hex64
    spec: dict[str, Any]
    lease_token: Annotated[str, Field(min_length=1)]
    # Revealed only now, after the spec is fixed: seeds the proof-of-training data order.
    nonce: str
    attempt: NonNegInt
    # Lax: a JSON answer carries it as ISO 8601 text, which strict mode would refuse.
    expires_at: Annotated[datetime, Field(strict=False)]
    lease_ttl_s: PosInt
    # None only for a job without a recorded escrow (claimable when the API does not
    # require one); a worker releases such a job, as it could not be paid for it.
    escrow: ClaimEscrow | None = None
    # The submitter's sealing key (with its wallet signature): seal every result to it.
    sealing: ClaimSealing | None = None
    # Set for a job with a topology: the one unit of it this lease is for.
    unit: ClaimUnit | None = None
    # Set for a whole job resumed from a lost attempt's last committed checkpoint.
    resume: ClaimResume | None = None


class LeaseStop(ClaimMessage):
    """Why the API stopped a lease: `reason` (`job_fault`), what the oracles found, and how
    many segments were committed when it stopped (what a partial proof is paid for)."""

    reason: Annotated[str, Field(min_length=1, max_length=32)]
    message: Annotated[str, Field(max_length=2000)] = ""
    segments: NonNegInt = 0


class LeaseAnswer(ClaimMessage):
    """The API's answer to a lease heartbeat, completion, release or failure."""

    job_id: Hex64
    status: str
    expires_at: Annotated[datetime, Field(strict=False)]
    outcome: str | None
    # For a node of a multi-node job: its cluster attempt.
    cluster: ClusterState | None = None
    # Set once the oracle quorum found the job at fault (proofnet.messages.job_fault): stop
    # training, upload what is committed and attest those segments (a partial proof).
    stop: LeaseStop | None = None
