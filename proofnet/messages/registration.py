"""The provider registration a worker sends at onboarding, and the challenge it answers.

The body is what `POST /api/v1/worker/register` accepts: the payout binding, the GPUs offered,
and `capabilities`, a structured onboarding report (inventory, container GPU runtime check,
matrix-multiply challenge results). Both requests are signed worker requests (the headers of
`proofnet/messages/worker_auth.py`, checked by `api/deps.py`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from proofnet.messages.binding import BindingNetwork, PayoutBinding

REGISTRATION_CHALLENGE_PATH = "/api/v1/worker/challenge"
REGISTRATION_PATH = "/api/v1/worker/register"


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RegistrationChallenge(BaseModel):
    """The API's answer to a challenge request: the nonce the payout binding must sign.

    Extra fields are ignored so the API can add to its answer without breaking workers."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    nonce: str = Field(pattern=r"^[0-9a-f]{32,128}$")
    network: BindingNetwork
    expires_at: datetime | None = None


class GpuRegistration(_Message):
    index: int = Field(ge=0, le=255)
    uuid: str = Field(min_length=1, max_length=128)
    name: str = Field(min_length=1, max_length=128)
    memory_mb: int = Field(ge=1, le=2**31 - 1)


class GpuDetail(_Message):
    index: int = Field(ge=0, le=255)
    uuid: str = Field(min_length=1, max_length=128)
    compute_capability: str = Field(pattern=r"^[0-9]+\.[0-9]+$")
    pci_bus_id: str = Field(max_length=64)
    memory_total_bytes: int = Field(ge=0)
    power_limit_w: float | None = None


class HostReport(_Message):
    os: str
    kernel: str
    arch: str
    cpu_model: str
    cpu_count: int = Field(ge=1)
    ram_total_bytes: int = Field(ge=0)
    disk_free_bytes: int = Field(ge=0)
    python: str


class RuntimeReport(_Message):
    status: Literal["ok", "failed", "skipped"]
    problem: str
    diagnosis: str
    fix: str = ""


class InclusionProofReport(_Message):
    index: int = Field(ge=0)
    size: int = Field(ge=1)
    path: list[str] = Field(max_length=64)  # hex SHA-256 hashes, bottom-up (RFC 6962)


class RevealedRowReport(_Message):
    index: int = Field(ge=0)
    values: list[int] = Field(max_length=16384)
    proof: InclusionProofReport


class ChallengeReport(_Message):
    """One GPU's (or the CPU's) answer to the seeded matrix-multiply challenge."""

    gpu_index: int | None  # None when the CPU computed it
    gpu_uuid: str | None
    seed: int = Field(ge=0, lt=2**63)
    n: int = Field(ge=2, le=16384)
    dtype: Literal["float32", "float64"]
    commitment: str = Field(pattern=r"^[0-9a-f]{64}$")  # Merkle root over the rows of C
    elapsed_s: float = Field(gt=0)
    tflops: float = Field(ge=0)
    backend: Literal["torch", "cupy", "numpy"]
    device: str
    self_check: str  # the worker's own Freivalds verdict
    plausibility: Literal["plausible", "too-fast", "slow", "unknown-gpu", "cpu"]
    plausibility_detail: str
    revealed: list[RevealedRowReport] = Field(max_length=16)


class WorkerCapabilities(_Message):
    version: Literal[1] = 1
    worker_version: str
    cpu_only: bool
    cpu_only_reason: str | None
    driver_version: str | None
    cuda_version: str | None
    gpus: list[GpuDetail] = Field(max_length=64)
    host: HostReport
    runtime_check: RuntimeReport
    challenge_seed_source: Literal["api-nonce", "local-nonce"]
    challenges: list[ChallengeReport] = Field(max_length=64)


class ProviderRegistration(_Message):
    """The registration body. `binding` is None only in a local report written without a
    payout address; the API requires it."""

    binding: PayoutBinding | None
    gpus: list[GpuRegistration] = Field(max_length=64)
    capabilities: WorkerCapabilities
