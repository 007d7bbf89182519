"""Storage providers: the signed offer, the content commitment, and retrieval challenges.

A storage provider runs an S3-compatible endpoint and offers capacity at a price per
GB-month. Its offer is one Ed25519 signature by its provider key (the same kind of key a
compute provider signs its payout binding with) over domain-separated canonical JSON of
every term, including a nonce the API issued for it: an offer can never be replayed on
another network, moved to another key, or have its price, capacity, endpoint or payout
address changed after signing.

What a provider stores is committed to by a content root: the object is cut into chunks of
`chunk_size` bytes (the last one shorter) and the root is the RFC 6962 Merkle root (the one
tree of `proofnet.messages.merkle`) over the chunks. Beside each object the provider keeps a
proof sidecar (`<key>` + `PROOFS_SUFFIX`): one fixed-size slot per chunk holding that
chunk's audit path, so the answer to a challenge for chunk `i` is two ranged reads (the
chunk and slot `i`) on the provider's own S3 endpoint. The sidecar is the provider's
convenience, not trusted: a forged path does not reach the committed root.

A retrieval challenge names a chunk index drawn from a beacon the provider never sees
before the challenge (`proofnet.messages.storage_receipt.beacon_index`); the answer is the chunk and its audit path, accepted only
for that challenge (its id and index), only with the exact length chunk `i` has, and only
when the path leads to the committed root. Pure models and arithmetic: nothing here opens
a connection.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from dataclasses import dataclass
from typing import Annotated, Final, Literal

from pydantic import AfterValidator, Field, model_validator

from proofnet.messages import merkle
from proofnet.messages.binding import (
    NETWORKS,
    BindingError,
    BindingNetwork,
    validate_payout_address,
)
from proofnet.messages.canonical import MAX_INT, canonical_json
from proofnet.messages.fields import Frozen, Hex64, NonNegInt, PosInt, TupleOf

STORAGE_OFFER_DOMAIN: Final = "proofnet/storage-offer/v1"
STORAGE_OFFERS_PATH: Final = "/api/v1/storage/offers"
STORAGE_CHALLENGE_PATH: Final = "/api/v1/storage/challenge"
STORAGE_OFFER_PATH: Final = "/api/v1/storage/offer"

# Prices are per GB-month: 10**9 bytes held for 30 days.
GB: Final = 10**9
MONTH_S: Final = 30 * 24 * 3600
# An offer smaller than this is not worth a challenge's round trip.
MIN_CAPACITY_BYTES: Final = 2**20
# Token quantities in a Cardano value are at most 2**63 - 1.
MAX_NTX: Final = 2**63 - 1
DEFAULT_CHUNK_SIZE: Final = 2**20
MIN_CHUNK_SIZE: Final = 2**10
MAX_CHUNK_SIZE: Final = 2**26
# A tree of at most 2**40 chunks: more than any object S3 serves (5 TB at 4 MiB chunks).
MAX_DEPTH: Final = 40
PROOFS_SUFFIX: Final = ".proofnet-proofs"

_ENDPOINT = re.compile(r"https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/?")
# S3 bucket names (the subset every S3 server accepts): 3-63 of [a-z0-9.-], alnum at ends.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_OBJECT_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,511}")
_HEX_NONCE = re.compile(r"[0-9a-f]{32,128}")


class StorageError(ValueError):
    """A storage offer, commitment, challenge or answer is malformed or does not verify;
    the message says which field and why, in one line."""


def _endpoint(value: str) -> str:
    if len(value) > 512 or not _ENDPOINT.fullmatch(value):
        raise ValueError(
            "endpoint must be http(s)://host[:port] with no path, query or credentials "
            f"(the S3 endpoint's base URL), got {value[:120]!r}"
        )
    return value.rstrip("/")


def _bucket(value: str) -> str:
    if not _BUCKET.fullmatch(value) or ".." in value:
        raise ValueError(
            "bucket must be an S3 bucket name: 3 to 63 characters of a-z, 0-9, '.' and '-', "
            f"starting and ending with a letter or digit, got {value[:80]!r}"
        )
    return value


def _object_key(value: str) -> str:
    if not _OBJECT_KEY.fullmatch(value) or ".." in value or value.endswith(PROOFS_SUFFIX):
        raise ValueError(
            "object key must be 1 to 512 characters of A-Z, a-z, 0-9, '.', '_', '/' and '-' "
            f"without '..' (and not a proof sidecar's name), got {value[:80]!r}"
        )
    return value


Endpoint = Annotated[str, AfterValidator(_endpoint)]
Bucket = Annotated[str, AfterValidator(_bucket)]
ObjectKey = Annotated[str, AfterValidator(_object_key)]
Capacity = Annotated[int, Field(ge=MIN_CAPACITY_BYTES, le=MAX_INT)]
PricePerGbMonth = Annotated[int, Field(ge=1, le=MAX_NTX)]
ChunkSize = Annotated[int, Field(ge=MIN_CHUNK_SIZE, le=MAX_CHUNK_SIZE)]


# --- the offer ------------------------------------------------------------------------


class StorageTerms(Frozen):
    """What a provider offers: where its S3 endpoint is, how much it holds, at what price."""

    endpoint: Endpoint
    bucket: Bucket
    capacity_bytes: Capacity
    ntx_per_gb_month: PricePerGbMonth


class StorageOffer(Frozen):
    """A signed statement "`provider_pubkey` stores data on these terms and is paid at
    `payout_address` on `network`"."""

    domain: Literal["proofnet/storage-offer/v1"] = STORAGE_OFFER_DOMAIN
    network: BindingNetwork
    provider_pubkey: Hex64
    payout_address: Annotated[str, Field(min_length=10, max_length=200)]
    nonce: Annotated[str, Field(pattern=r"^[0-9a-f]{32,128}$")]
    terms: StorageTerms
    signature: Annotated[str, Field(pattern=r"^[0-9a-f]{128}$")]

    def message(self) -> bytes:
        return offer_message(
            network=self.network,
            provider_pubkey=self.provider_pubkey,
            payout_address=self.payout_address,
            nonce=self.nonce,
            terms=self.terms,
        )


def offer_message(
    *, network: str, provider_pubkey: str, payout_address: str, nonce: str, terms: StorageTerms
) -> bytes:
    """The exact bytes a provider signs: canonical JSON (RFC 8785, as every signed message)."""
    if network not in NETWORKS:
        raise StorageError(f"unknown network {network!r}; expected one of {', '.join(NETWORKS)}")
    if not _HEX_NONCE.fullmatch(nonce):
        raise StorageError("nonce must be 32 to 128 lowercase hex characters")
    try:
        validate_payout_address(payout_address, network)
    except BindingError as exc:
        raise StorageError(str(exc)) from None
    return canonical_json(
        {
            "domain": STORAGE_OFFER_DOMAIN,
            "network": network,
            "nonce": nonce,
            "payout_address": payout_address,
            "provider_pubkey": provider_pubkey,
            "terms": terms.model_dump(mode="python"),
        }
    )


def sign_offer(
    signing_key: object, *, network: str, payout_address: str, nonce: str, terms: StorageTerms
) -> StorageOffer:
    """The offer `signing_key` (a nacl.signing.SigningKey) signs for these terms."""
    from nacl.signing import SigningKey

    if not isinstance(signing_key, SigningKey):
        raise TypeError("signing_key must be a nacl.signing.SigningKey")
    pubkey = bytes(signing_key.verify_key).hex()
    message = offer_message(
        network=network, provider_pubkey=pubkey, payout_address=payout_address, nonce=nonce,
        terms=terms,
    )  # fmt: skip
    return StorageOffer(
        network=network,  # type: ignore[arg-type]
        provider_pubkey=pubkey,
        payout_address=payout_address,
        nonce=nonce,
        terms=terms,
        signature=signing_key.sign(message).signature.hex(),
    )


def verify_offer(offer: StorageOffer, *, network: str, nonce: str, provider_pubkey: str) -> None:
    """Raise StorageError unless `offer` is `provider_pubkey`'s signature, for this network,
    over the nonce the verifier issued. Returns None so a forgotten check cannot pass."""
    checks = (
        # An offer for another network would let a testnet signature sell mainnet storage.
        (offer.network == network, f"offer is for network {offer.network!r}, not {network!r}"),
        # The nonce is single-use: an old offer (an old price) cannot be replayed.
        (hmac.compare_digest(offer.nonce, nonce), "offer nonce is not the challenge issued"),
        # The key that signs the request must be the key that signs the offer.
        (offer.provider_pubkey == provider_pubkey, "offer is signed for another provider key"),
    )
    for ok, why in checks:
        if not ok:
            raise StorageError(why)
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        VerifyKey(bytes.fromhex(offer.provider_pubkey)).verify(
            offer.message(), bytes.fromhex(offer.signature)
        )
    except BadSignatureError:
        raise StorageError("offer signature does not verify for its provider key") from None
    except ValueError as exc:
        raise StorageError(f"provider_pubkey is not a usable Ed25519 key: {exc}") from None


# --- cost -----------------------------------------------------------------------------


def storage_cost(size_bytes: int, ntx_per_gb_month: int, seconds: int) -> int:
    """NTX base units for holding `size_bytes` for `seconds` at `ntx_per_gb_month`, rounded
    up (a provider that held data is paid at least one base unit)."""
    if size_bytes < 0 or seconds < 0:
        raise StorageError("size and time held cannot be negative")
    if size_bytes == 0 or seconds == 0:
        return 0
    return max(1, -(-size_bytes * ntx_per_gb_month * seconds // (GB * MONTH_S)))


# --- the content commitment -----------------------------------------------------------


class Commitment(Frozen):
    """What a placement commits to: the Merkle root over the object's chunks."""

    content_root: Hex64
    size: PosInt
    chunk_size: ChunkSize

    @property
    def chunk_count(self) -> int:
        return chunk_count(self.size, self.chunk_size)

    @property
    def depth(self) -> int:
        return tree_depth(self.chunk_count)


def chunk_count(size: int, chunk_size: int) -> int:
    if size < 1 or chunk_size < 1:
        raise StorageError("an object has at least one byte and chunks at least one")
    return -(-size // chunk_size)


def tree_depth(count: int) -> int:
    """The longest audit path in an RFC 6962 tree of `count` leaves."""
    return max(0, (count - 1).bit_length())


def chunk_range(commitment: Commitment, index: int) -> tuple[int, int]:
    """The byte range [start, end) of chunk `index`."""
    if not 0 <= index < commitment.chunk_count:
        raise StorageError(
            f"chunk {index} is out of range: the object has {commitment.chunk_count} chunks"
        )
    start = index * commitment.chunk_size
    return start, min(commitment.size, start + commitment.chunk_size)


def _chunks(data: bytes, chunk_size: int) -> list[bytes]:
    return [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]


def commit(data: bytes, chunk_size: int = DEFAULT_CHUNK_SIZE) -> Commitment:
    """The commitment to `data` cut into `chunk_size` chunks."""
    if not data:
        raise StorageError("an empty object cannot be committed to (nothing to challenge)")
    root = merkle.merkle_root(_chunks(data, chunk_size))
    return Commitment(content_root=root.hex(), size=len(data), chunk_size=chunk_size)


def slot_size(commitment: Commitment) -> int:
    """Bytes per proof slot: a one-byte path length, then the path padded to the depth."""
    return 1 + commitment.depth * merkle.HASH_SIZE


def proof_sidecar(data: bytes, commitment: Commitment) -> bytes:
    """The sidecar a provider stores beside the object: slot `i` is chunk `i`'s audit path."""
    tree = merkle.MerkleTree(_chunks(data, commitment.chunk_size))
    if tree.root.hex() != commitment.content_root:
        raise StorageError("the data is not the committed object (its root differs)")
    width = slot_size(commitment)
    slots = []
    for i in range(commitment.chunk_count):
        path = b"".join(tree.proof(i).path)
        slots.append((bytes([len(path) // merkle.HASH_SIZE]) + path).ljust(width, b"\0"))
    return b"".join(slots)


def slot_range(commitment: Commitment, index: int) -> tuple[int, int]:
    chunk_range(commitment, index)  # the same out-of-range refusal
    width = slot_size(commitment)
    return index * width, (index + 1) * width


def path_of_slot(slot: bytes, commitment: Commitment) -> tuple[str, ...]:
    """The audit path a slot holds, as hex; a malformed slot is the provider's failure."""
    if len(slot) != slot_size(commitment):
        raise StorageError(f"proof slot is {len(slot)} bytes, expected {slot_size(commitment)}")
    n = slot[0]
    if n > commitment.depth:
        raise StorageError(f"proof slot claims {n} hashes in a tree {commitment.depth} deep")
    body = slot[1 : 1 + n * merkle.HASH_SIZE]
    return tuple(
        body[i : i + merkle.HASH_SIZE].hex() for i in range(0, len(body), merkle.HASH_SIZE)
    )


# --- challenges and answers -----------------------------------------------------------


class RetrievalChallenge(Frozen):
    """ "Serve chunk `index` of `object_key` (committed as `commitment`) now"."""

    challenge_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    placement_id: PosInt
    object_key: ObjectKey
    commitment: Commitment
    index: NonNegInt

    @model_validator(mode="after")
    def _chunk_exists(self) -> RetrievalChallenge:
        # A challenge for a chunk that is not there could never be answered, so never paid.
        if self.index >= self.commitment.chunk_count:
            raise ValueError(
                f"chunk {self.index} is out of range: the object has "
                f"{self.commitment.chunk_count} chunks"
            )
        return self


class RetrievalAnswer(Frozen):
    """The chunk and its audit path, for one challenge."""

    challenge_id: Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]
    index: NonNegInt
    chunk: Annotated[str, Field(max_length=4 * MAX_CHUNK_SIZE // 3 + 4)]  # base64
    proof: Annotated[TupleOf[Hex64], Field(max_length=MAX_DEPTH)]

    @classmethod
    def of(cls, challenge_id: str, index: int, chunk: bytes, proof: tuple[str, ...]) -> RetrievalAnswer:  # fmt: skip
        return cls(
            challenge_id=challenge_id,
            index=index,
            chunk=base64.b64encode(chunk).decode("ascii"),
            proof=proof,
        )

    def chunk_bytes(self) -> bytes:
        try:
            return base64.b64decode(self.chunk, validate=True)
        except (binascii.Error, ValueError):
            raise StorageError("answer chunk is not base64") from None


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str  # "" when passed; otherwise one line, stable enough to count failures by


def verify_answer(challenge: RetrievalChallenge, answer: RetrievalAnswer | None) -> Verdict:
    """Whether `answer` proves the provider holds the challenged chunk. Every check is
    applied in turn; the first that fails is the reason."""
    if answer is None:
        return Verdict(False, "no answer: the chunk or its proof could not be read")
    c = challenge.commitment
    if not hmac.compare_digest(answer.challenge_id, challenge.challenge_id):
        # An answer recorded for an earlier challenge (a replay) is not this one's.
        return Verdict(False, "the answer is for another challenge")
    if answer.index != challenge.index:
        return Verdict(False, f"the answer is for chunk {answer.index}, not {challenge.index}")
    try:
        chunk = answer.chunk_bytes()
    except StorageError as exc:
        return Verdict(False, str(exc))
    start, end = chunk_range(c, challenge.index)
    if len(chunk) != end - start:
        # A short chunk would let a provider drop a tail and still pass a hash it kept.
        return Verdict(False, f"chunk {challenge.index} is {end - start} bytes, got {len(chunk)}")
    proof = merkle.InclusionProof(
        index=challenge.index,
        size=c.chunk_count,
        path=tuple(bytes.fromhex(h) for h in answer.proof),
    )
    if not merkle.verify_inclusion(chunk, proof, bytes.fromhex(c.content_root)):
        return Verdict(False, "the chunk and proof do not lead to the committed root")
    return Verdict(True, "")


# --- placement in a job spec ----------------------------------------------------------

StoredKind = Literal["data", "results", "checkpoints"]
MAX_REPLICAS: Final = 16
MAX_TERM_DAYS: Final = 3650


class StoragePlacement(Frozen):
    """A spec's `storage`: keep the job's `kinds` of content with `replicas` storage
    providers each for `term_days`, at no more than `max_ntx_per_gb_month`, paying at most
    `budget` NTX base units (locked in the job's escrow beside the compute price)."""

    kinds: Annotated[TupleOf[StoredKind], Field(min_length=1, max_length=3)]
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)]
    term_days: Annotated[int, Field(ge=1, le=MAX_TERM_DAYS)]
    max_ntx_per_gb_month: PricePerGbMonth
    budget: Annotated[int, Field(ge=1, le=MAX_NTX)]

    @model_validator(mode="after")
    def _kinds_once(self) -> StoragePlacement:
        if len(set(self.kinds)) != len(self.kinds):
            raise ValueError(f"storage.kinds names a kind twice: {list(self.kinds)}")
        return self

    @property
    def term_s(self) -> int:
        return self.term_days * 24 * 3600
