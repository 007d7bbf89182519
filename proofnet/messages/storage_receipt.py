"""The receipt a settlement pays a storage copy on, and the challenge evidence it carries.

A receipt is signed by the oracle that ran the retrieval challenges, but a co-signer or an
auditor does not take its word for them: the receipt carries every challenge it is paid
for (`ChallengeEvidence`): the beacon the chunk was drawn from (a block hash, public and
unknown before its block, so the oracle cannot pick easy chunks after the fact), the chunk
index that beacon draws, the leaf hash of the chunk the provider served and its RFC 6962
audit path, and when it was asked and answered. A checker re-derives each index, walks
each path to the committed root, and counts only challenges that hold, once each (one per
beacon, one per instant), spread over the period: a passed challenge vouches for at most
`MAX_CREDIT_S` of holding before it, so challenges bunched at one instant earn one period,
not the term. The amount paid may not exceed what the counted challenges cover at the
copy's price (`evidence_bound`).

Pure models and arithmetic: nothing here opens a connection.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Sequence
from typing import Annotated, Final, Literal

from pydantic import Field

from proofnet.messages import merkle
from proofnet.messages.binding import BindingNetwork
from proofnet.messages.canonical import canonical_json
from proofnet.messages.fields import Frozen, Hex64, NonNegInt, PosInt, TupleOf
from proofnet.messages.storage import (
    MAX_DEPTH,
    MAX_NTX,
    ChunkSize,
    PricePerGbMonth,
    StorageError,
    chunk_count,
    storage_cost,
)

STORAGE_RECEIPT_DOMAIN: Final = "proofnet/storage-receipt/v2"
CHALLENGE_DOMAIN: Final = b"proofnet/storage-challenge/v2"
MAX_RECEIPTS_PER_CLAIM: Final = 64
# A passed challenge proves the copy was held when it was answered; it vouches for at most
# this much holding before it (so a term is paid only when challenged throughout it).
MAX_CREDIT_S: Final = 7 * 24 * 3600
# The challenges one receipt carries (the oracle keeps only those that change the bound).
MAX_EVIDENCE: Final = 1024


def beacon_index(beacon: str, placement_id: int, content_root: str, count: int) -> int:
    """The chunk a challenge drawn from `beacon` (a block hash, hex) asks of a copy: uniform
    over its `count` chunks (SHA-256 with rejection sampling). Anyone re-derives it, and
    nobody knows it before the block is made."""
    if count < 1:
        raise StorageError("an object has at least one chunk")
    limit = (2**256 // count) * count
    counter = 0
    while True:
        digest = hashlib.sha256(
            CHALLENGE_DOMAIN + bytes.fromhex(beacon) + placement_id.to_bytes(8, "big")
            + bytes.fromhex(content_root) + counter.to_bytes(4, "big")
        ).digest()  # fmt: skip
        value = int.from_bytes(digest, "big")
        if value < limit:
            return value % count
        counter += 1


class ChallengeEvidence(Frozen):
    """One passed retrieval challenge, as a checker re-verifies it."""

    beacon: Hex64
    index: NonNegInt
    # SHA-256(0x00 || chunk) of the chunk served: the RFC 6962 leaf its path starts from.
    leaf_hash: Hex64
    proof: Annotated[TupleOf[Hex64], Field(max_length=MAX_DEPTH)]
    issued_at: NonNegInt  # Unix seconds
    answered_at: NonNegInt


class StorageReceiptBody(Frozen):
    """ "Copy `placement_id` of job `job_id` (content root, size, chunk size, price) earned
    `amount` from `placed_at` through `paid_through` (Unix seconds), proven by
    `challenges`; pay it to `payout_address`", as an oracle saw it."""

    domain: Literal["proofnet/storage-receipt/v2"] = STORAGE_RECEIPT_DOMAIN
    network: BindingNetwork
    job_id: Hex64
    placement_id: PosInt
    provider_key: Hex64
    payout_address: Annotated[str, Field(min_length=10, max_length=200)]
    content_root: Hex64
    size: PosInt
    chunk_size: ChunkSize
    ntx_per_gb_month: PricePerGbMonth
    placed_at: NonNegInt
    paid_through: NonNegInt
    challenges: Annotated[TupleOf[ChallengeEvidence], Field(min_length=1, max_length=MAX_EVIDENCE)]
    amount: Annotated[int, Field(ge=1, le=MAX_NTX)]
    # The oracle that ran the challenges and signs the receipt (raw Ed25519, hex).
    oracle_key: Hex64

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="python"))

    @property
    def bound(self) -> int:
        """The most the copy could have earned over the whole period at its price."""
        return storage_cost(
            self.size, self.ntx_per_gb_month, max(0, self.paid_through - self.placed_at)
        )

    @property
    def challenges_passed(self) -> int:
        """The challenges that count (`counted`)."""
        return len(counted(self))


def evidence_refusal(evidence: ChallengeEvidence, body: StorageReceiptBody) -> str | None:
    """Why `evidence` proves nothing about `body`'s copy, or None. Each check in turn:"""
    count = chunk_count(body.size, body.chunk_size)
    checks: list[tuple[bool, str]] = [
        # An answer cannot come before its question, nor outside the paid period.
        (evidence.issued_at <= evidence.answered_at, "answered before it was asked"),
        (
            body.placed_at <= evidence.issued_at and evidence.answered_at <= body.paid_through,
            "outside the period the receipt pays",
        ),
        # The chunk is the one the beacon draws: the oracle did not pick it.
        (
            evidence.index
            == beacon_index(evidence.beacon, body.placement_id, body.content_root, count),  # noqa: E501
            f"chunk {evidence.index} is not the one its beacon draws",
        ),
    ]
    for ok, why in checks:
        if not ok:
            return why
    proof = merkle.InclusionProof(
        index=evidence.index, size=count, path=tuple(bytes.fromhex(h) for h in evidence.proof)
    )
    try:
        root = merkle.root_from_proof(bytes.fromhex(evidence.leaf_hash), proof)
    except merkle.MerkleError as exc:
        return f"malformed audit path: {exc}"
    if root.hex() != body.content_root:
        # A proof for another object (another root) proves nothing about this copy.
        return "the chunk's audit path does not lead to the committed root"
    return None


def counted(body: StorageReceiptBody) -> tuple[ChallengeEvidence, ...]:
    """The challenges that count, in answer order: those that verify, once per beacon
    (one beacon draws one chunk: a duplicate is the same challenge) and once per instant."""
    valid = sorted(
        (e for e in body.challenges if evidence_refusal(e, body) is None),
        key=lambda e: (e.answered_at, e.beacon),
    )
    out: list[ChallengeEvidence] = []
    beacons: set[str] = set()
    for e in valid:
        if e.beacon in beacons or (out and out[-1].answered_at == e.answered_at):
            continue
        beacons.add(e.beacon)
        out.append(e)
    return tuple(out)


def credits(placed_at: int, answered: Sequence[int]) -> tuple[int, ...]:
    """Seconds of holding each passed challenge (answered at these times, ascending) pays:
    the time since the previous one (or the placement), at most `MAX_CREDIT_S`."""
    out, previous = [], placed_at
    for t in answered:
        out.append(max(0, min(t - previous, MAX_CREDIT_S)))
        previous = max(previous, t)
    return tuple(out)


def evidence_bound(body: StorageReceiptBody) -> int:
    """The most the counted challenges let the receipt pay: the seconds they credit, at
    the copy's price (rounded up once, so never above `bound`)."""
    times = [e.answered_at for e in counted(body)]
    return storage_cost(body.size, body.ntx_per_gb_month, sum(credits(body.placed_at, times)))


def thin(evidence: Sequence[ChallengeEvidence], placed_at: int) -> tuple[ChallengeEvidence, ...]:
    """The fewest of `evidence` (ascending answer times) whose credits still cover every
    credited second: one is dropped when the gap it splits is within `MAX_CREDIT_S` anyway.
    What an oracle puts in a receipt when it challenged more often than that."""
    kept: list[ChallengeEvidence] = []
    last = placed_at
    for i, e in enumerate(evidence):
        following = evidence[i + 1].answered_at if i + 1 < len(evidence) else None
        if following is None or following - last > MAX_CREDIT_S:
            kept.append(e)
            last = e.answered_at
    return tuple(kept)


class StorageReceipt(Frozen):
    body: StorageReceiptBody
    signature: Annotated[str, Field(pattern=r"^[0-9a-f]{128}$")]

    def to_json(self) -> dict[str, object]:
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, obj: object) -> StorageReceipt:
        from pydantic import ValidationError

        try:
            return cls.model_validate(obj)
        except ValidationError as exc:
            raise StorageError(f"malformed storage receipt: {exc.errors()[0]['msg']}") from None


def sign_receipt(signing_key: object, body: StorageReceiptBody) -> StorageReceipt:
    from nacl.signing import SigningKey

    if not isinstance(signing_key, SigningKey):
        raise TypeError("signing_key must be a nacl.signing.SigningKey")
    if bytes(signing_key.verify_key).hex() != body.oracle_key:
        raise StorageError("a receipt is signed by the oracle it names")
    return StorageReceipt(
        body=body, signature=signing_key.sign(body.canonical_bytes()).signature.hex()
    )


def receipt_refusal(
    receipt: StorageReceipt,
    *,
    job_id: str,
    oracle_key_hashes: Collection[str],
    network: str | None = None,
) -> str | None:
    """Why a settlement must not pay `receipt` beside job `job_id`'s claim, or None.
    `oracle_key_hashes` are the settlement's required signers (Blake2b-224, hex); `network`,
    when the checker knows its own, must be the receipt's."""
    body = receipt.body
    signer = hashlib.blake2b(bytes.fromhex(body.oracle_key), digest_size=28).hexdigest()
    checks: list[tuple[bool, str]] = [
        (body.job_id == job_id, "the receipt is for another job"),
        (network in (None, body.network), f"the receipt is for network {body.network!r}"),
        # Only an oracle that signs this settlement vouches for the challenges.
        (signer in oracle_key_hashes, "the receipt is not signed by an oracle of this batch"),
        # Never more than holding the object at its price for the whole period earns.
        (body.amount <= body.bound, f"the receipt pays {body.amount}, over {body.bound}"),
    ]
    for ok, why in checks:
        if not ok:
            return why
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(bytes.fromhex(body.oracle_key)).verify(
            body.canonical_bytes(), bytes.fromhex(receipt.signature)
        )
    except (BadSignatureError, ValueError):
        return "the receipt's signature does not verify"
    # The challenges are re-verified, not taken on the signer's word (checked last: the
    # costliest, and a forged signature needs no proof walked).
    proven = evidence_bound(body)
    if body.amount > proven:
        return (
            f"the receipt pays {body.amount}, over the {proven} its "
            f"{body.challenges_passed} verified challenge(s) cover"
        )
    return None


def bundle_receipts(obj: object, count: int) -> tuple[tuple[StorageReceipt, ...], ...]:
    """The storage receipts of a settlement bundle's JSON per attestation position (empty
    when it pays no storage); StorageError when an entry is malformed or misplaced."""
    raw = obj.get("storage", []) if isinstance(obj, dict) else []
    if not isinstance(raw, list):
        raise StorageError("storage is a list")
    per: list[list[StorageReceipt]] = [[] for _ in range(count)]
    for entry in raw:
        position = entry.get("attestation") if isinstance(entry, dict) else None
        if not isinstance(position, int) or isinstance(position, bool):
            raise StorageError("a storage entry names its attestation by position")
        if not 0 <= position < count:
            raise StorageError(f"storage entry for attestation {position} of {count}")
        if len(per[position]) >= MAX_RECEIPTS_PER_CLAIM:
            raise StorageError(f"attestation {position} has too many storage receipts")
        per[position].append(StorageReceipt.from_json(entry.get("receipt")))
    return tuple(tuple(p) for p in per)


def storage_outputs(receipts: Sequence[StorageReceipt]) -> tuple[tuple[str, int], ...]:
    """The payout outputs of the receipts a claim carries, in their order."""
    return tuple((r.body.payout_address, r.body.amount) for r in receipts)


# --- checks against what others recorded: the chain's blocks, the API's placement -------

# A beacon is the chain's latest block hash when the challenge is issued: its block is at
# most this old then (a few block intervals, plus a slow round), and never from later.
BEACON_MAX_AGE_S: Final = 15 * 60
BEACON_CLOCK_SKEW_S: Final = 120


def beacon_refusal(evidence: ChallengeEvidence, block_time: int | None) -> str | None:
    """Why `evidence`'s beacon is not a block hash of the chain at about `issued_at`, or
    None. `block_time`: the Unix time of the block with that hash as the checker's own
    chain reader found it (None: no such block). Without this an oracle could try beacons
    until the drawn chunks are ones a colluding provider kept."""
    checks: list[tuple[bool, str]] = [
        (block_time is not None, f"beacon {evidence.beacon[:16]}... is no block of the chain"),
        # The block existed when the challenge was issued (with the clocks' skew) ...
        (
            block_time is None or block_time <= evidence.issued_at + BEACON_CLOCK_SKEW_S,
            f"beacon {evidence.beacon[:16]}... is a block made after the challenge was issued",
        ),
        # ... and was recent then: an old block's hash is known long before, to grind on.
        (
            block_time is None or evidence.issued_at - block_time <= BEACON_MAX_AGE_S,
            f"beacon {evidence.beacon[:16]}... is a block over {BEACON_MAX_AGE_S} s older "
            "than the challenge",
        ),
    ]
    for ok, why in checks:
        if not ok:
            return why
    return None


def terms_refusal(
    body: StorageReceiptBody,
    *,
    job_id: str,
    provider_key: str,
    content_root: str,
    size: int,
    chunk_size: int,
    ntx_per_gb_month: int,
    placed_at: int,
) -> str | None:
    """Why `body`'s terms are not those of the placement the API recorded (its fields as
    keyword arguments), or None: a receipt signed over another root, size or price would
    pay for a copy nobody agreed to hold."""
    checks: list[tuple[bool, str]] = [
        (body.job_id == job_id, "the placement is another job's"),
        (body.provider_key == provider_key, "the placement is another provider's"),
        (body.content_root == content_root, "the receipt's root is not the placement's"),
        (body.size == size, f"the receipt's size {body.size} is not the placement's {size}"),
        (body.chunk_size == chunk_size, "the receipt's chunk size is not the placement's"),
        (
            body.ntx_per_gb_month == ntx_per_gb_month,
            f"the receipt's price {body.ntx_per_gb_month} is not the placement's "
            f"{ntx_per_gb_month} NTX per GB-month",
        ),
        (body.placed_at >= placed_at, "the receipt pays from before the copy was placed"),
    ]
    for ok, why in checks:
        if not ok:
            return why
    return None
