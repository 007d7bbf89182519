"""The worker's signed attestation: one canonical, versioned, domain-separated message.

Wire form (CIP-8 / CIP-30 `signData` shape, so Cardano tooling such as pycardano's
`cip8.verify` accepts it): an untagged COSE_Sign1 array

    [ protected: bstr(map{1: -8 (EdDSA), 4: kid = worker Ed25519 key (32 bytes),
                          "address": enterprise address bytes of that key}),
      unprotected: {"hashed": false},
      payload: canonical JSON of the attestation,
      signature: Ed25519 over Sig_structure ["Signature1", protected, h'', payload] ]

The domain (tag, network, escrow script hash, escrow out-ref, job id) is inside the signed
payload, so an attestation cannot be replayed on another network, script, escrow or job.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import cbor2
from nacl.exceptions import BadSignatureError
from nacl.signing import SigningKey, VerifyKey
from pydantic import AfterValidator, Field, ValidationError, model_validator

from proofnet.messages import merkle
from proofnet.messages.address import (
    AddressError,
    enterprise_address_bytes,
    key_hash,
    network_id,
    payment_address_bytes,
)
from proofnet.messages.canonical import CanonicalJSONError, canonical_json, parse_canonical_json
from proofnet.messages.fields import (
    DecimalStr,
    Digest,
    Frozen,
    Hex56,
    Hex64,
    NonNegInt,
    PosInt,
    TupleOf,
    Version1,
)
from proofnet.messages.topology import UnitKind

ATTESTATION_DOMAIN: Final = "proofnet/attestation/v1"
ATTESTATION_VERSION = 1
COSE_ALG_EDDSA = -8
COSE_HEADER_ALG = 1
COSE_HEADER_KID = 4
COSE_SIGN1_TAG = 18

Network = Literal["devnet", "preprod", "preview", "mainnet"]
NETWORKS: tuple[str, ...] = ("devnet", "preprod", "preview", "mainnet")


class AttestationError(ValueError):
    """An attestation was refused; the subclass says why."""


class MalformedAttestation(AttestationError):
    """Not a well-formed COSE_Sign1 attestation, or a field is invalid."""


class UnknownVersion(AttestationError):
    """The payload declares a version this software does not read."""


class BadSignature(AttestationError):
    """The Ed25519 signature does not verify, or the signer's key is not the one attested."""


class WrongDomain(AttestationError):
    """Signed for another purpose, network, script, escrow or job than the verifier expects."""


class WrongNetwork(WrongDomain):
    pass


class WrongScript(WrongDomain):
    pass


class WrongEscrow(WrongDomain):
    pass


class WrongJob(WrongDomain):
    pass


class _FrozenDict(dict[str, Any]):
    """A dict the signed payload can hold without being changed after signing."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("attestation fields are immutable")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def __reduce__(self) -> tuple[Any, ...]:
        # copy/pickle would otherwise rebuild it through the refused __setitem__
        return (_FrozenDict, (dict(self),))


_NAME = re.compile(r"[^\x00-\x1f\x7f]{1,512}")
_METRIC = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")
_NONCE = re.compile(r"(?:[0-9a-f]{2}){16,32}")
_GPU_MODEL = re.compile(r"[\x20-\x7e]{1,128}")


def _result_names(value: dict[str, str]) -> _FrozenDict:
    for name in value:
        if not _NAME.fullmatch(name):
            raise ValueError(f"result name {name[:80]!r} must be 1-512 printable characters")
    return _FrozenDict(value)


def _metric_names(value: dict[str, int | str]) -> _FrozenDict:
    for name in value:
        if not _METRIC.fullmatch(name):
            raise ValueError(f"metric name {name[:80]!r} must match [A-Za-z0-9_.:/-]{{1,64}}")
    return _FrozenDict(value)


def _check(regex: re.Pattern[str], what: str) -> AfterValidator:
    def check(value: str) -> str:
        if not regex.fullmatch(value):
            raise ValueError(f"must be {what}, got {value[:80]!r}")
        return value

    return AfterValidator(check)


Nonce = Annotated[str, _check(_NONCE, "16 to 32 bytes as lowercase hex")]
GpuModel = Annotated[str, _check(_GPU_MODEL, "1-128 printable ASCII characters")]
MetricValue = Annotated[int, Field(ge=-(2**63), le=2**63 - 1)] | DecimalStr
ResultHashes = Annotated[dict[str, Hex64], Field(max_length=256), AfterValidator(_result_names)]
Metrics = Annotated[dict[str, MetricValue], Field(max_length=64), AfterValidator(_metric_names)]


class EscrowRef(Frozen):
    """The escrow UTxO this attestation claims against (transaction id + output index)."""

    tx_id: Hex64
    index: Annotated[int, Field(ge=0, le=2**32 - 1)]


class AttestationDomain(Frozen):
    tag: Literal["proofnet/attestation/v1"] = ATTESTATION_DOMAIN
    network: Network
    escrow_script_hash: Hex56
    escrow: EscrowRef
    job_id: Hex64


class UnitWork(Frozen):
    """Which unit of a multi-unit job (see proofnet.messages.topology) this attests, and the
    checkpoints it chains: `inputs` are the SHA-256 of the checkpoints it started from (the
    outputs of its planned input units, in plan order), `output` the one it produced."""

    index: Annotated[int, Field(ge=0, le=65_535)]
    kind: UnitKind
    inputs: Annotated[TupleOf[Hex64], Field(max_length=64)] = ()
    output: Hex64 | None = None


class SegmentClaim(Frozen):
    """Which attempt of a resumed single-unit job this attests, and the segments of the
    schedule it proved (`first`..`last`, 1-based, inclusive): `pot_root` is then the root
    of the attempt's leaves 0..`last` (its committed prefix trimmed there, for an attempt
    that was lost; its whole manifest, for the attempt that completed). Each attempt is
    paid from the one escrow for its own segments (`proofnet.messages.segment_share`)."""

    attempt: Annotated[int, Field(ge=1, le=2**31 - 1)]
    first: Annotated[int, Field(ge=1, le=2**31 - 1)]
    last: Annotated[int, Field(ge=1, le=2**31 - 1)]

    @model_validator(mode="after")
    def _ordered(self) -> SegmentClaim:
        if self.last < self.first:
            raise ValueError(f"segments {self.first}..{self.last} are empty")
        return self


class StopClaim(Frozen):
    """That the attested lease was stopped by the oracle quorum for the job's fault
    (`proofnet.messages.job_fault`) with `segments` committed, as its heartbeat answer said:
    the attestation claims the stopped lease's share (`segment_share.stopped_share`), which
    a settlement pays only beside the stop's evidence (`proofnet.messages.stop_evidence`)."""

    segments: Annotated[int, Field(ge=1, le=2**31 - 1)]


class Attestation(Frozen):
    """What a worker swears to about one job. Integers and strings only: no floats."""

    version: Version1 = ATTESTATION_VERSION
    domain: AttestationDomain
    worker_key: Hex64  # Ed25519 public key, 32 bytes
    payout_address: str  # bech32, on domain.network
    started_ms: NonNegInt  # POSIX milliseconds
    ended_ms: NonNegInt
    gpu_milliseconds: NonNegInt  # GPU-seconds x 1000, summed over GPUs
    gpu_model: GpuModel
    gpu_uuid_sha256: Hex64  # the UUID itself stays private; the hash links jobs to one card
    image_digest: Digest
    command_hash: Hex64
    result_hashes: ResultHashes  # returned file name -> SHA-256
    pot_root: Hex64  # proof-of-training Merkle root
    metrics: Metrics  # final metrics: integers or decimal strings
    nonce: Nonce
    amount: PosInt  # NTX base units claimed
    # Absent for single-unit jobs; for relay stages, evaluations, aggregations and nodes.
    unit: UnitWork | None = None
    # Absent unless the job resumed: the attempt and the segments it proved.
    segments: SegmentClaim | None = None
    # Set when the lease was stopped for the job's fault: a partial proof, paid its share.
    stop: StopClaim | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Attestation:
        if self.ended_ms < self.started_ms:
            raise ValueError("ended_ms is before started_ms")
        if self.unit is not None and self.segments is not None:
            raise ValueError("a unit of a topology job is never resumed: no segments")
        if self.unit is not None and self.stop is not None:
            raise ValueError("a unit of a topology job is never stopped as a whole lease")
        try:
            payment_address_bytes(self.payout_address, self.domain.network)
        except AddressError as exc:
            raise ValueError(f"payout_address: {exc}") from exc
        return self

    @property
    def job_id(self) -> str:
        return self.domain.job_id

    @property
    def network(self) -> str:
        return self.domain.network

    def canonical_bytes(self) -> bytes:
        body = self.model_dump(mode="python")
        for optional in ("unit", "segments", "stop"):
            if body[optional] is None:
                # Attestations without it keep their encoding: absent, never null.
                del body[optional]
        return canonical_json(body)

    def leaf_hash(self) -> bytes:
        """This attestation's leaf in the batch Merkle tree (see `batch_tree`)."""
        return merkle.leaf_hash(self.canonical_bytes())


@dataclass(frozen=True)
class SignedAttestation:
    cose: bytes  # the COSE_Sign1 bytes, as sent over HTTP and published for auditors
    attestation: Attestation

    def hex(self) -> str:
        return self.cose.hex()


def _signing_key(key: SigningKey | bytes) -> SigningKey:
    if isinstance(key, SigningKey):
        return key
    if isinstance(key, bytes) and len(key) == 32:
        return SigningKey(key)
    raise TypeError("signing_key must be a nacl SigningKey or a 32-byte Ed25519 seed")


def protected_header(verification_key: bytes, network: str) -> bytes:
    """The protected header bytes, in RFC 8949 deterministic key order."""
    return cbor2.dumps(
        {
            COSE_HEADER_ALG: COSE_ALG_EDDSA,
            COSE_HEADER_KID: verification_key,
            "address": enterprise_address_bytes(verification_key, network),
        },
        canonical=True,
    )


def _sig_structure(protected: bytes, payload: bytes) -> bytes:
    return cbor2.dumps(["Signature1", protected, b"", payload])


def sign_attestation(att: Attestation, signing_key: SigningKey | bytes) -> SignedAttestation:
    """Sign as COSE_Sign1. `signing_key` may be a pycardano key's `.payload` (its seed)."""
    sk = _signing_key(signing_key)
    vk = bytes(sk.verify_key)
    if vk.hex() != att.worker_key:
        raise ValueError("signing key does not match the attestation's worker_key")
    protected = protected_header(vk, att.domain.network)
    payload = att.canonical_bytes()
    signature = sk.sign(_sig_structure(protected, payload)).signature
    cose = cbor2.dumps([protected, {"hashed": False}, payload, signature])
    return SignedAttestation(cose=cose, attestation=att)


def _decode_cose(cose: bytes) -> tuple[bytes, bytes, bytes]:
    """Returns (protected, payload, signature) after checking the structure."""
    if not isinstance(cose, bytes | bytearray):
        raise MalformedAttestation("attestation must be bytes")
    try:
        msg = cbor2.loads(cose)
    except Exception as exc:  # cbor2 raises several unrelated types on garbage
        raise MalformedAttestation(f"not CBOR: {exc}") from exc
    if isinstance(msg, cbor2.CBORTag):
        if msg.tag != COSE_SIGN1_TAG:
            raise MalformedAttestation(f"CBOR tag {msg.tag} is not COSE_Sign1 ({COSE_SIGN1_TAG})")
        msg = msg.value
    if not (isinstance(msg, list) and len(msg) == 4):
        raise MalformedAttestation("COSE_Sign1 must be an array of 4 items")
    protected, unprotected, payload, signature = msg
    if not isinstance(protected, bytes) or not isinstance(unprotected, dict):
        raise MalformedAttestation("COSE_Sign1 headers must be a bstr and a map")
    if not isinstance(payload, bytes):
        raise MalformedAttestation("payload must be attached (a bstr), not detached")
    if not (isinstance(signature, bytes) and len(signature) == 64):
        raise MalformedAttestation("signature must be 64 bytes")
    if unprotected.get("hashed", False) is not False:
        raise MalformedAttestation("hashed payloads are not used for attestations")
    return protected, payload, signature


def _decode_protected(protected: bytes) -> tuple[bytes, bytes]:
    """Returns (verification key, address bytes)."""
    try:
        header = cbor2.loads(protected)
    except Exception as exc:
        raise MalformedAttestation(f"protected header is not CBOR: {exc}") from exc
    if not isinstance(header, dict):
        raise MalformedAttestation("protected header must be a map")
    if header.get(COSE_HEADER_ALG) != COSE_ALG_EDDSA:
        raise MalformedAttestation(
            f"algorithm {header.get(COSE_HEADER_ALG)!r} is not EdDSA ({COSE_ALG_EDDSA})"
        )
    vk, address = header.get(COSE_HEADER_KID), header.get("address")
    if not (isinstance(vk, bytes) and len(vk) == 32):
        raise MalformedAttestation("protected header kid must be a 32-byte Ed25519 key")
    if not (isinstance(address, bytes) and len(address) == 29 and address[0] >> 4 == 6):
        raise MalformedAttestation("protected header address must be an enterprise address")
    if address[1:] != key_hash(vk):
        raise BadSignature("address header is not bound to the signing key")
    return vk, address


def verify_attestation(
    cose: bytes,
    *,
    expected_network: str,
    expected_script_hash: str,
    expected_escrow: EscrowRef | None = None,
    expected_job_id: str | None = None,
) -> Attestation:
    """Check signature, encoding, version and domain; return the attestation.

    Network and escrow script are always checked; the escrow out-ref and job id are checked
    when the verifier knows which escrow it is settling (it should).
    """
    if expected_network not in NETWORKS:
        raise ValueError(f"expected_network must be one of {NETWORKS}")
    protected, payload, signature = _decode_cose(cose)
    vk, address = _decode_protected(protected)
    try:
        VerifyKey(vk).verify(_sig_structure(protected, payload), signature)
    except BadSignatureError as exc:
        raise BadSignature("Ed25519 signature does not verify") from exc

    try:
        raw = parse_canonical_json(payload)
    except CanonicalJSONError as exc:
        raise MalformedAttestation(f"payload: {exc}") from exc
    if not isinstance(raw, dict):
        raise MalformedAttestation("payload must be a JSON object")
    version = raw.get("version")
    if version != ATTESTATION_VERSION or isinstance(version, bool):
        raise UnknownVersion(f"attestation version {version!r} is not {ATTESTATION_VERSION}")
    domain = raw.get("domain")
    tag = domain.get("tag") if isinstance(domain, dict) else None
    if tag != ATTESTATION_DOMAIN:
        raise WrongDomain(f"domain tag {tag!r} is not {ATTESTATION_DOMAIN!r}")
    if "unit" in raw and raw["unit"] is None:
        # Absent and null would sign the same attestation under two encodings (two leaves).
        raise MalformedAttestation("unit must be absent, not null, for a single-unit job")
    if "segments" in raw and raw["segments"] is None:
        raise MalformedAttestation("segments must be absent, not null, when not resumed")
    if "stop" in raw and raw["stop"] is None:
        raise MalformedAttestation("stop must be absent, not null, when not stopped")
    try:
        att = Attestation.model_validate(raw)
    except ValidationError as exc:
        raise MalformedAttestation(str(exc)) from exc

    if att.worker_key != vk.hex():
        raise BadSignature("signed by a key other than the attestation's worker_key")
    if att.domain.network != expected_network:
        raise WrongNetwork(f"signed for {att.domain.network}, expected {expected_network}")
    if address[0] & 0x0F != network_id(expected_network):
        raise WrongNetwork("address header is for another network")
    if att.domain.escrow_script_hash != expected_script_hash:
        raise WrongScript(
            f"signed for escrow script {att.domain.escrow_script_hash}, "
            f"expected {expected_script_hash}"
        )
    if expected_escrow is not None and att.domain.escrow != expected_escrow:
        e = att.domain.escrow
        raise WrongEscrow(
            f"signed for escrow {e.tx_id}#{e.index}, "
            f"expected {expected_escrow.tx_id}#{expected_escrow.index}"
        )
    if expected_job_id is not None and att.job_id != expected_job_id:
        raise WrongJob(f"signed for job {att.job_id}, expected {expected_job_id}")
    return att


def batch_tree(attestations: Iterable[Attestation]) -> merkle.MerkleTree:
    """The batch Merkle tree over attestations, in the order given (the settlement's order)."""
    return merkle.MerkleTree([a.canonical_bytes() for a in attestations])


def batch_root(attestations: Iterable[Attestation]) -> bytes:
    return batch_tree(attestations).root


def attestation_from_dict(obj: Mapping[str, Any]) -> Attestation:
    try:
        return Attestation.model_validate(dict(obj))
    except ValidationError as exc:
        raise MalformedAttestation(str(exc)) from exc


def signed_structure(cose: bytes) -> tuple[bytes, bytes, bytes]:
    """(Ed25519 key, the exact bytes it signed, signature) of an attestation, after checking
    the signature; what a bond slash cites on chain (the script re-checks the signature)."""
    protected, payload, signature = _decode_cose(cose)
    vk, _ = _decode_protected(protected)
    signed = _sig_structure(protected, payload)
    try:
        VerifyKey(vk).verify(signed, signature)
    except BadSignatureError as exc:
        raise BadSignature("Ed25519 signature does not verify") from exc
    return vk, signed, signature


def attestation_of_cose(cose: bytes) -> Attestation:
    """The attestation a COSE_Sign1 carries, after checking its signature and that the
    signer is its `worker_key` (no domain expectations: for citing it, not for paying it)."""
    vk, _, _ = signed_structure(cose)
    _, payload, _ = _decode_cose(cose)
    try:
        att = Attestation.model_validate(parse_canonical_json(payload))
    except (CanonicalJSONError, ValidationError) as exc:
        raise MalformedAttestation(f"payload: {exc}") from exc
    if att.worker_key != vk.hex():
        raise BadSignature("signed by a key other than the attestation's worker_key")
    return att
