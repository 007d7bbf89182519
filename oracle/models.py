"""The oracle's tables: attestations, their verification results, and spot checks.

The oracle keeps its own SQLModel registry (its own metadata), so its tables never mix with
the API's even when both share one PostgreSQL server. The settlement engine subclasses
`OracleTable` in `oracle/settlement/models.py`, so `create_schema` covers its tables too once
that module is imported.

Attestation lifecycle: received -> verified | rejected; verified -> batched -> settled, and
batched -> verified when a batch is dropped or superseded (the settlement engine's call).
Uniqueness that makes replays harmless:

- `leaf_hash` is UNIQUE over every row: the same signed attestation (however its COSE
  envelope is re-encoded) is stored once;
- `payable_escrow` holds the row's payable key while it is payable (verified, batched,
  settled) and NULL otherwise; it is UNIQUE, and NULLs never collide on SQLite or
  PostgreSQL, so rejected attestations do not block an honest one. The key is the escrow
  out-ref for a single-unit job (at most one attestation paid per escrow) and
  `<out-ref>/<unit index>` for a unit of a topology job (at most one per escrow and unit).

`attempt` copies the attested `segments.attempt` (NULL unless the job resumed): the key
is then `<out-ref>@<attempt>`, one payable attestation per attempt, each for its segments.

`unit_index` and `unit_output` copy the attestation's `unit` (NULL for a single-unit job) so
the chain of checkpoints and the settlement's grouping are read without decoding COSE.
Databases created before these columns existed are upgraded in place by `create_tables`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, MetaData
from sqlalchemy import DateTime as SADateTime
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

oracle_registry = registry(metadata=MetaData(naming_convention=NAMING_CONVENTION))

RECEIVED: Final = "received"
VERIFIED: Final = "verified"
REJECTED: Final = "rejected"
# A disputed segment nothing proved either way (oracle.verification.referee): never paid,
# never a fraud; the escrow refunds.
UNPROVEN: Final = "unproven"
BATCHED: Final = "batched"
SETTLED: Final = "settled"
STATUSES: Final = (RECEIVED, VERIFIED, REJECTED, UNPROVEN, BATCHED, SETTLED)
PAYABLE_STATUSES: Final = (VERIFIED, BATCHED, SETTLED)


def escrow_ref(tx_id: str, index: int) -> str:
    """The one text form of an escrow out-ref: `<tx id hex>#<index>`."""
    return f"{tx_id}#{index}"


def payable_key(escrow: str, unit: int | None, attempt: int | None = None) -> str:
    """What `payable_escrow` holds for a payable attestation: the escrow out-ref,
    `<out-ref>/<unit index>` for a unit of a topology job, or `<out-ref>@<attempt>` for an
    attempt of a resumed job (its attestation names its segments)."""
    if unit is not None:
        return f"{escrow}/{unit}"
    return escrow if attempt is None else f"{escrow}@{attempt}"


# <64 hex>#<up to 2**32-1>/<up to 65535> or @<up to 2**31-1>: 86 characters at most.
PAYABLE_KEY_LENGTH = 96


# Times are stored with their zone (UTC) so PostgreSQL and SQLite read back the same value.
TZ_DATETIME = SADateTime(timezone=True)


class OracleTable(SQLModel, registry=oracle_registry):
    """Base class of every oracle table (intake and settlement)."""


class AttestationRecord(OracleTable, table=True):
    __tablename__ = "oracle_attestations"
    __table_args__ = (Index("ix_oracle_attestations_status_received", "status", "received_at"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: str = Field(max_length=64, index=True)
    escrow_tx_id: str = Field(max_length=64)
    escrow_index: int
    escrow_ref: str = Field(max_length=80, index=True)
    # payable_key(...) while payable, else NULL: one payable attestation per escrow (unit).
    payable_escrow: str | None = Field(default=None, max_length=PAYABLE_KEY_LENGTH, unique=True)
    worker_key: str = Field(max_length=64, index=True)
    payout_address: str = Field(max_length=200)
    # NTX base units; intake refuses amounts above 2**63 - 1 (no escrow can hold more).
    amount: int = Field(sa_type=BigInteger)
    cose: bytes = Field(sa_type=LargeBinary)
    # Hex of Attestation.leaf_hash(): the attestation's identity and its batch-tree leaf.
    leaf_hash: str = Field(max_length=64, unique=True)
    status: str = Field(max_length=16)
    # Stable reason code of the rejection (see oracle.verification.verify.Reason), "" otherwise.
    reason: str = Field(default="", max_length=64)
    message: str = Field(default="", max_length=2000)
    attempts: int = 0
    received_at: datetime = Field(sa_type=TZ_DATETIME)
    updated_at: datetime = Field(sa_type=TZ_DATETIME)
    # When a verification that could not finish (chain or API unreachable) is retried.
    retry_at: datetime | None = Field(default=None, sa_type=TZ_DATETIME)
    # The attested unit of a topology job (index and output checkpoint); NULL otherwise.
    unit_index: int | None = Field(default=None)
    unit_output: str | None = Field(default=None, max_length=64)
    # Whose fault the verdict is ("provider" or "job"; oracle.verification.verify.fault_of), NULL while
    # unverified or when nobody is at fault.
    fault: str | None = Field(default=None, max_length=16)
    # The attempt of a resumed single-unit job this attests (its `segments`), NULL
    # otherwise: such attestations are paid per attempt, together, from their one escrow.
    attempt: int | None = Field(default=None)
    # A verified attestation of a lease stopped for the job's fault: the stop's evidence
    # (`proofnet.messages.stop_evidence`), published in its settlement's bundle; NULL otherwise.
    stop_evidence: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))

    @property
    def escrow(self) -> tuple[str, int]:
        return self.escrow_tx_id, self.escrow_index

    @property
    def payable_key(self) -> str:
        return payable_key(self.escrow_ref, self.unit_index, self.attempt)


class VerificationRecord(OracleTable, table=True):
    """One run of the verification pipeline over one attestation."""

    __tablename__ = "oracle_verifications"

    id: int | None = Field(default=None, primary_key=True)
    attestation_id: int = Field(
        foreign_key="oracle_attestations.id", index=True, ondelete="CASCADE"
    )
    # verified | rejected | retry
    outcome: str = Field(max_length=16)
    reason: str = Field(default="", max_length=64)
    message: str = Field(default="", max_length=2000)
    # Names of the checks that passed, in order.
    checks: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    verifier: str = Field(default="", max_length=64)
    started_at: datetime = Field(sa_type=TZ_DATETIME)
    duration_ms: float = 0.0


class SpotCheckRecord(OracleTable, table=True):
    """A proof-of-training spot check: which segments were replayed, with what seed, verdict."""

    __tablename__ = "oracle_spot_checks"

    id: int | None = Field(default=None, primary_key=True)
    attestation_id: int = Field(
        foreign_key="oracle_attestations.id", index=True, ondelete="CASCADE"
    )
    # Chosen by the oracle after the root was committed (hex).
    seed: str = Field(max_length=128)
    segments: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    # passed | failed | error
    status: str = Field(max_length=16)
    message: str = Field(default="", max_length=2000)
    report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    verifier: str = Field(default="", max_length=64)
    started_at: datetime = Field(sa_type=TZ_DATETIME)
    duration_ms: float = 0.0


class EarlyCheckRecord(OracleTable, table=True):
    """The early replay of a running lease's first segment (`oracle.verification.early`):
    one decided verdict per lease (its nonce), with whose fault a failure is and why."""

    __tablename__ = "oracle_early_checks"

    id: int | None = Field(default=None, primary_key=True)
    nonce: str = Field(max_length=128, unique=True)
    job_id: str = Field(max_length=64, index=True)
    attempt: int
    # passed | failed
    status: str = Field(max_length=16)
    # "job" or "provider" when failed (whose fault), NULL when passed.
    fault: str | None = Field(default=None, max_length=16)
    reason: str = Field(default="", max_length=64)
    message: str = Field(default="", max_length=2000)
    prefix_root: str = Field(default="", max_length=64)
    verifier: str = Field(default="", max_length=64)
    report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    checked_at: datetime = Field(sa_type=TZ_DATETIME)


class CancelledEscrow(OracleTable, table=True):
    """An escrow whose cancel this oracle co-signed (`oracle.settlement.cancel`): from then
    on no attestation for it is verified, batched or co-signed, so the oracle never signs
    both a cancel and a settlement of one escrow (the row is never deleted: a cancel that
    never reached the chain leaves a job the API has cancelled anyway)."""

    __tablename__ = "oracle_cancelled_escrows"

    escrow_ref: str = Field(primary_key=True, max_length=80)
    job_id: str = Field(max_length=64, index=True)
    # The id of the cancel transaction this oracle signed (the first, if asked again).
    cancel_tx_id: str = Field(max_length=64)
    signed_at: datetime = Field(sa_type=TZ_DATETIME)


class StorageChallengeRecord(OracleTable, table=True):
    """One retrieval challenge to a storage provider (`oracle.retrieval`): the chunk drawn,
    and the verdict on what its endpoint served. `challenge_id` is fresh per challenge, so
    an answer is recorded once and an old one is never another challenge's."""

    __tablename__ = "oracle_storage_challenges"

    challenge_id: str = Field(primary_key=True, max_length=32)
    placement_id: int = Field(index=True)
    job_id: str = Field(max_length=64, index=True)
    provider_key: str = Field(max_length=64, index=True)
    chunk_index: int = Field(sa_type=BigInteger)
    issued_at: datetime = Field(sa_type=TZ_DATETIME)
    answered_at: datetime | None = Field(default=None, sa_type=TZ_DATETIME)
    passed: bool | None = None
    reason: str = Field(default="", max_length=2000)
    # The evidence a receipt carries (proofnet.messages.storage_receipt): the block hash the
    # chunk was drawn from, and on a pass the served chunk's leaf hash and audit path.
    beacon: str | None = Field(default=None, max_length=64)
    leaf_hash: str | None = Field(default=None, max_length=64)
    proof: list[str] | None = Field(default=None, sa_column=Column(JSON, nullable=True))


class StorageAccrual(OracleTable, table=True):
    """What one placement has earned: GB-months held, proven by answered challenges, in NTX
    base units (`amount`), through `paid_through`. A failed challenge ends the placement
    (`status` failed) and the time since its last answered challenge is never paid."""

    __tablename__ = "oracle_storage_accruals"

    placement_id: int = Field(primary_key=True)
    job_id: str = Field(max_length=64, index=True)
    provider_key: str = Field(max_length=64, index=True)
    payout_address: str = Field(max_length=200)
    # What the copy committed to and its price (what a receipt states).
    content_root: str = Field(max_length=64)
    size: int = Field(sa_type=BigInteger)
    # NULL on rows from before receipts carried challenge evidence (they pay nothing).
    chunk_size: int | None = Field(default=None)
    ntx_per_gb_month: int = Field(sa_type=BigInteger)
    placed_at: datetime = Field(sa_type=TZ_DATETIME)
    amount: int = Field(default=0, sa_type=BigInteger)
    paid_through: datetime = Field(sa_type=TZ_DATETIME)
    # accruing (its term runs: the job's escrow waits) | failed | ended
    status: str = Field(default="accruing", max_length=16)
    # None until a settlement batch pays it: batched, then settled (back to None when the
    # batch is dropped), moved with the attestation it is paid beside.
    settlement: str | None = Field(default=None, max_length=16)
    challenges_passed: int = 0
    updated_at: datetime = Field(sa_type=TZ_DATETIME)
    # Consecutive failed challenges that did not prove a bad copy (timeouts, an endpoint
    # down), and when the first of them was; a pass clears both.
    strikes: int = 0
    struck_at: datetime | None = Field(default=None, sa_type=TZ_DATETIME)
    # The end of the copy's term (NULL on rows from before it was kept): the job's escrow
    # waits for it, and a little past it for the last round (oracle.retrieval.ledger).
    ends_at: datetime | None = Field(default=None, sa_type=TZ_DATETIME)


metadata = oracle_registry.metadata
