"""The narrow interfaces the settlement engine needs from the chain, the transaction builders
and the intake side. Concrete adapters live in `chain_view.py`, `builder_port.py` and
`queue.py`; tests substitute in-memory fakes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlmodel import Session

from proofnet.messages.segment_refusal import SegmentRefusal
from proofnet.messages.stop_evidence import StopEvidence
from proofnet.messages.storage_receipt import StorageReceipt, receipt_refusal, storage_outputs
from proofnet.messages.verification_fee import FeeEvidence, Payouts, fee_payouts, fee_refusal


class SettlementError(Exception):
    """Base class of the settlement engine's errors."""


class ChainUnavailable(SettlementError):
    """The chain backend did not answer; retry later, change nothing."""


class SubmitRejected(SettlementError):
    """The backend refused the transaction; `reason` is its explanation."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BuildError(SettlementError):
    """No settlement transaction could be built from the offered claims."""


class UnpayableClaims(BuildError):
    """Claims whose escrow can never be settled (deadline passed, wrong deployment, over
    budget); `reasons` maps attestation id -> why."""

    def __init__(self, reasons: dict[int, str]) -> None:
        super().__init__("; ".join(f"attestation {k}: {v}" for k, v in reasons.items()))
        self.reasons = reasons


@dataclass(frozen=True, order=True)
class OutRef:
    """A transaction output reference, `<tx id hex>#<index>` in text form."""

    tx_id: str
    index: int

    def __post_init__(self) -> None:
        if len(self.tx_id) != 64 or any(c not in "0123456789abcdef" for c in self.tx_id):
            raise ValueError(f"tx id must be 64 lowercase hex characters, got {self.tx_id!r}")
        if not 0 <= self.index < 2**32:
            raise ValueError(f"output index {self.index} out of range")

    def __str__(self) -> str:
        return f"{self.tx_id}#{self.index}"

    @classmethod
    def parse(cls, text: str) -> OutRef:
        tx_id, sep, index = text.partition("#")
        if not sep or not index.isdigit():
            raise ValueError(f"out-ref must look like <txid>#<index>, got {text!r}")
        return cls(tx_id, int(index))


@dataclass(frozen=True)
class Claim:
    """One verified attestation ready to be paid: its escrow pays `amount` NTX to
    `payout_address`, the rest goes back to the escrow's submitter.

    The units of a topology job (`unit` set) all claim their job's one escrow: they are
    settled together, in one settlement entry with one payout output each, never split
    across batches (`group_claims`). So are the attempts of a resumed job (`attempt` set):
    the lost ones and the one that completed, each for its own segments."""

    attestation_id: int
    escrow: OutRef
    leaf_hash: bytes
    cose: bytes
    amount: int
    payout_address: str
    queued_at: float = 0.0  # POSIX seconds the attestation was received
    unit: int | None = None  # unit index of a topology job's attestation
    job_id: str = ""
    # The attesting worker's key (hex), and the evidence of the verifiers' fees: their
    # shares are carved out of `amount` (`proofnet.messages.verification_fee`).
    worker_key: str = ""
    fees: tuple[FeeEvidence, ...] = ()
    # What the job's storage copies earned, paid beside the claim from the same escrow's
    # storage budget (`proofnet.messages.storage`; never carved out of `amount`).
    storage: tuple[StorageReceipt, ...] = ()
    # The attempt of a resumed job the attestation names (`Attestation.segments`): the
    # attempts of one job are settled together too, each paid its own segments' share.
    attempt: int | None = None
    # A lease stopped for the job's fault: the stop's evidence, published beside the claim
    # (`proofnet.messages.stop_evidence`) so an auditor re-derives its share.
    stop: StopEvidence | None = None

    @property
    def grouped(self) -> bool:
        """Whether it is settled with the other claims on its escrow, once its job is over
        (a unit, or an attempt of a resumed job), not alone as soon as it is verified."""
        return self.unit is not None or self.attempt is not None

    def payouts(self) -> Payouts:
        """The outputs paying this claim: the provider's part, then each verifier's fee."""
        return fee_payouts(self.payout_address, self.amount, self.fees)

    def outputs(self) -> tuple[tuple[str, int], ...]:
        """Every output of the claim's settlement entry: its payouts, then its storage."""
        return (*self.payouts().outputs, *storage_outputs(self.storage))

    def with_valid_storage(self, oracle_key_hashes: Collection[str]) -> Claim:
        """This claim with only the storage receipts a settlement signed by
        `oracle_key_hashes` may pay (the rest is neither paid nor published)."""
        valid = tuple(
            r
            for r in self.storage
            if receipt_refusal(r, job_id=self.job_id, oracle_key_hashes=oracle_key_hashes) is None
        )
        return self if valid == self.storage else replace(self, storage=valid)

    def with_valid_fees(self, oracle_key_hashes: Collection[str]) -> Claim:
        """This claim with only the fee evidence that holds for a settlement signed by
        `oracle_key_hashes` (the rest earns nothing and is not published)."""
        valid = tuple(
            e
            for e in self.fees
            if fee_refusal(
                e,
                leaf_hash=self.leaf_hash.hex(),
                provider=self.worker_key,
                job_id=self.job_id,
                oracle_key_hashes=oracle_key_hashes,
            )
            is None
        )
        return self if valid == self.fees else replace(self, fees=valid)


def _part(index: int | None) -> int:
    return -1 if index is None else index


def may_share(group: Sequence[Claim]) -> bool:
    """Whether these claims of one escrow may be paid together: one alone, distinct units
    of one job, or distinct attempts of one job (the co-signers and the auditor also check
    the attempts' segments apart: `proofnet.messages.escrow_share`)."""
    if len(group) < 2:
        return True
    if len({c.job_id for c in group}) != 1:
        return False
    for field_of in (lambda c: c.unit, lambda c: c.attempt):
        parts = [field_of(c) for c in group]
        if all(p is not None for p in parts) and len(set(parts)) == len(parts):
            return True
    return False


def group_claims(claims: Sequence[Claim]) -> list[tuple[Claim, ...]]:
    """The claims per escrow, escrows in order of first appearance, each escrow's unit
    claims in unit order: what one settlement entry pays."""
    groups: dict[str, list[Claim]] = {}
    for claim in claims:
        groups.setdefault(str(claim.escrow), []).append(claim)
    return [
        tuple(sorted(g, key=lambda c: (_part(c.unit), _part(c.attempt), c.attestation_id)))
        for g in groups.values()
    ]


@dataclass(frozen=True)
class UnsignedBatch:
    """A settlement transaction without VKey witnesses. `claims` are the ones the builder
    packed, in the order of the redeemer's entries (the Merkle tree's order)."""

    tx_id: str
    tx_cbor: bytes
    claims: tuple[Claim, ...]
    merkle_root: bytes
    batch_id: bytes


@dataclass(frozen=True)
class TxStatus:
    """Where a transaction is: in a block (`height`), only in the mempool, or unknown."""

    height: int | None
    block_hash: str | None
    in_mempool: bool

    @property
    def confirmed_in_block(self) -> bool:
        return self.height is not None


@dataclass(frozen=True)
class SpendStatus:
    """Whether an output exists on chain and which confirmed transaction spent it."""

    exists: bool
    spent_by: str | None


class ChainView(Protocol):
    """What the engine reads from and sends to the chain."""

    def tip_height(self) -> int: ...
    def tx_status(self, tx_id: str) -> TxStatus: ...
    def spend_status(self, ref: OutRef) -> SpendStatus: ...
    def output_cbor(self, ref: OutRef) -> bytes | None:
        """The CBOR of the output `ref` (spent or not), None when its tx is not confirmed."""
        ...

    def submit(self, tx_cbor: bytes) -> str:
        """Returns the tx id; raises `SubmitRejected` or `ChainUnavailable`."""
        ...


class SettlementBuilder(Protocol):
    """Builds the unsigned batch transaction (the builders' job) and assembles witnesses."""

    def build(
        self,
        claims: Sequence[Claim],
        *,
        batch_id: bytes,
        annotate: Annotate,
        signers: Sequence[bytes] = (),
    ) -> UnsignedBatch:
        """Pack as many of `claims` (a prefix, in order) as fit in one transaction;
        `annotate(packed)` gives the redeemer's Merkle root and the metadata to attach.
        `signers` are the oracle key hashes that will sign (default: this oracle)."""
        ...

    def witness(self, tx_id: str) -> bytes:
        """This oracle's VKey witness (CBOR `[vkey, signature]`) over `tx_id`."""
        ...

    def assemble(self, unsigned: UnsignedBatch, witnesses: Sequence[bytes]) -> bytes:
        """The signed transaction CBOR: `unsigned` plus the given VKey witnesses."""
        ...


@dataclass(frozen=True)
class Annotation:
    merkle_root: bytes
    metadata: Mapping[int, Any]


class Annotate(Protocol):
    def __call__(self, packed: Sequence[Claim]) -> Annotation: ...


class Signer(Protocol):
    """Gathers the VKey witnesses a batch needs (this oracle's own, plus co-signers')."""

    def witnesses(self, unsigned: UnsignedBatch, bundle_body: bytes) -> list[bytes]:
        """At least the quorum's worth of witness CBORs, or raise `QuorumNotReached`."""
        ...


class QuorumNotReached(SettlementError):
    """Fewer co-signers than the threshold approved the batch. `fees`: the fee evidence of
    verifiers a co-signer's verdict relied on that the batch did not pay, (attestation leaf
    hash hex, evidence) pairs it handed back with its refusal: the next batch pays them.
    `pending`: no verdict against the batch, a co-signer's own verification is not done yet
    (its drawn verifier, or a disputed provider, has not answered): asked again soon."""

    def __init__(
        self,
        message: str,
        fees: Sequence[tuple[str, FeeEvidence]] = (),
        *,
        disputed: Sequence[SegmentRefusal] = (),
        refuser: str = "",
        pending: bool = False,
    ) -> None:
        super().__init__(message)
        self.fees = tuple(fees)
        # The segments the refusing co-signer (key hash `refuser`) found not to replay, with
        # its evidence: the engine re-checks them itself (`DisputeReferee`).
        self.disputed = tuple(disputed)
        self.refuser = refuser
        self.pending = pending


@dataclass(frozen=True)
class UnitEscrow:
    """An escrow with verified unit claims waiting (a topology job's)."""

    escrow: OutRef
    job_id: str
    claims: int
    oldest: float  # POSIX seconds the oldest of its claims was received


@dataclass(frozen=True)
class Recheck:
    """What this oracle's own replay of a co-signer's named segments found: "fails" (they
    do not replay: the provider's fault, `reason` the rejection's, a fraud reason of
    `oracle.storage.fraud` so the bond is slashable as for any such rejection), "replays",
    or "unchecked" (this oracle cannot replay them)."""

    outcome: str
    reason: str = ""


class DisputeReferee(Protocol):
    """Re-checks the segments a co-signer's refusal named (`proofnet.messages.
    segment_refusal`) through this oracle's own verifier draw and referee path, never by
    running job code on the oracle (`oracle.settlement.quorum.IntakeReferee`)."""

    def recheck(self, claim: Claim, segments: tuple[int, ...]) -> Recheck | None:
        """The re-check's outcome, or None while no verdict is in yet (asked again)."""
        ...


class Readiness(Protocol):
    """Says when a topology job's escrow may be settled (`oracle.settlement.readiness`)."""

    def ready(self, group: UnitEscrow) -> bool: ...


class ClaimQueue(Protocol):
    """The intake side's attestation rows, read and moved inside the engine's transaction."""

    def payable(self, session: Session, limit: int) -> list[Claim]:
        """Verified attestations of single-unit jobs not yet batched, oldest first."""
        ...

    def unit_escrows(self, session: Session) -> list[UnitEscrow]:
        """Escrows with verified unit attestations not yet batched, oldest first."""
        ...

    def unit_claims(self, session: Session, escrows: Sequence[OutRef]) -> list[Claim]:
        """Every verified unit attestation of these escrows."""
        ...

    def add_fees(
        self, session: Session, claims: Sequence[Claim], handed: Sequence[tuple[str, FeeEvidence]]
    ) -> int:
        """Keep the fee evidence of a co-signer's verifiers for these claims; how many."""
        ...

    def mark(self, session: Session, attestation_ids: Sequence[int], status: str) -> None:
        """Move rows to `verified`, `batched` or `settled`."""
        ...
