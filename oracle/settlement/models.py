"""The settlement engine's tables: the intent log, its items, published bundles, the
proposer lease and an append-only event trail.

An escrow can be named by several intents over time (a dropped batch is rebuilt), but by at
most one *live* intent: `IntentItem.live_escrow` holds the out-ref while the intent may
still pay it and is NULL once the intent is dropped or superseded, and it is UNIQUE (NULLs
never collide on SQLite or PostgreSQL). The database itself therefore refuses two live
batches over one escrow, whichever process proposes them.
"""

from __future__ import annotations

import enum
import time

from sqlalchemy import BigInteger, LargeBinary
from sqlmodel import Field

from oracle.models import OracleTable


class IntentState(enum.StrEnum):
    PLANNED = "planned"  # unsigned tx recorded, escrows reserved, nothing signed yet
    SIGNED = "signed"  # the exact signed CBOR is durable; it may or may not have been sent
    SUBMITTED = "submitted"  # sent at least once; `block_height` set while seen in a block
    CONFIRMED = "confirmed"  # `confirmation_depth` blocks deep: final
    DROPPED = "dropped"  # never included (or rolled back) and no longer resubmittable
    SUPERSEDED = "superseded"  # another tx spent one of its escrows

    @property
    def final(self) -> bool:
        return self in (IntentState.CONFIRMED, IntentState.DROPPED, IntentState.SUPERSEDED)


OPEN_STATES = (IntentState.PLANNED, IntentState.SIGNED, IntentState.SUBMITTED)


def now() -> float:
    return time.time()


class SettlementIntent(OracleTable, table=True):
    __tablename__ = "settlement_intents"

    id: str = Field(primary_key=True, max_length=64)  # batch id, hex
    state: str = Field(index=True, max_length=16)
    tx_id: str | None = Field(default=None, index=True, max_length=64)
    unsigned_cbor: bytes = Field(sa_type=LargeBinary)
    # The exact signed transaction, once signed.
    tx_cbor: bytes | None = Field(default=None, sa_type=LargeBinary)
    merkle_root: str = Field(max_length=64)
    bundle_sha256: str = Field(max_length=64)
    proposer: str = Field(max_length=128)
    block_height: int | None = None
    block_hash: str | None = Field(default=None, max_length=64)
    submit_attempts: int = 0
    last_error: str | None = None
    created_at: float = Field(default_factory=now, index=True)
    updated_at: float = Field(default_factory=now)
    submitted_at: float | None = None
    confirmed_at: float | None = None


class IntentItem(OracleTable, table=True):
    __tablename__ = "settlement_items"

    id: int | None = Field(default=None, primary_key=True)
    intent_id: str = Field(foreign_key="settlement_intents.id", index=True, max_length=64)
    position: int
    attestation_id: int = Field(index=True)
    escrow_ref: str = Field(index=True, max_length=80)
    leaf_hash: str = Field(max_length=64)
    amount: int = Field(sa_type=BigInteger)
    payout_address: str = Field(max_length=200)
    cose: bytes = Field(sa_type=LargeBinary)
    # The out-ref while the intent is live; NULL once dropped/superseded (see module doc).
    live_escrow: str | None = Field(default=None, unique=True, max_length=80)


class SettlementBundle(OracleTable, table=True):
    """The attestation bundle auditors fetch at `/api/v1/bundles/{sha256}`."""

    __tablename__ = "settlement_bundles"

    sha256: str = Field(primary_key=True, max_length=64)
    merkle_root: str = Field(max_length=64)
    body: bytes = Field(sa_type=LargeBinary)
    created_at: float = Field(default_factory=now)


class SettlementEvent(OracleTable, table=True):
    """What happened to an intent, in order (rollbacks, resubmissions, supersessions)."""

    __tablename__ = "settlement_events"

    id: int | None = Field(default=None, primary_key=True)
    intent_id: str = Field(index=True, max_length=64)
    kind: str = Field(max_length=32)
    detail: str = ""
    at: float = Field(default_factory=now)


class JobEnd(OracleTable, table=True):
    """When this oracle first saw a topology job over (completed, stopped, failed or
    cancelled): the start of the grace period its escrow's settlement may wait for late
    unit attestations (`oracle.settlement.readiness`). Kept across restarts."""

    __tablename__ = "settlement_job_ends"

    escrow_ref: str = Field(primary_key=True, max_length=80)
    job_id: str = Field(max_length=64)
    status: str = Field(max_length=16)
    seen_at: float = Field(default_factory=now)


class ProposerLease(OracleTable, table=True):
    """At most one oracle process sharing a database proposes batches at a time."""

    __tablename__ = "settlement_leases"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=128)
    expires_at: float
