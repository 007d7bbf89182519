"""The audit trail of one batch: its Merkle root, the published attestation bundle and the
transaction metadata that points at both.

Bundle (canonical JSON, addressed by its SHA-256):
    {"attestations": [<COSE_Sign1 hex>, ...], "merkle_root": <hex>, "version": 1}
in the batch's order, which is the order of the redeemer entries and of the Merkle leaves.
A batch that pays verification fees publishes their evidence too, as version 2:
    {..., "fees": [{"attestation": <position>, "task": {...}, "report": {...}}, ...],
     "version": 2}
(the oracle-signed task and the verifier-signed report, `proofnet.messages.verification_fee`).
A batch that pays storage beside an attestation publishes the oracle-signed receipts, as
version 3 (with or without fees):
    {..., "storage": [{"attestation": <position>, "receipt": {...}}, ...], "version": 3}
(`proofnet.messages.storage_receipt.StorageReceipt`).
A batch that pays a lease stopped for the job's fault publishes the stop's evidence (the
quorum's signed job-fault verdicts, the job's spec, the segments committed at the stop), as
version 4 (with or without fees and storage):
    {..., "stops": [{"attestation": <position>, "spec": ..., "segments": ..., "verdicts":
     [...]}, ...], "version": 4}
(`proofnet.messages.stop_evidence.StopEvidence`: an auditor re-derives the stopped share).
Metadata under CIP-20 label 674: a human memo in `msg` plus the root, bundle hash and batch
id as 32-byte values (every value at most 64 bytes).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from proofnet.messages import merkle
from proofnet.messages.canonical import canonical_json
from proofnet.messages.stop_evidence import StopEvidence, StopEvidenceError, bundle_stops
from proofnet.messages.storage import StorageError
from proofnet.messages.storage_receipt import StorageReceipt, bundle_receipts
from proofnet.messages.verification_fee import FeeError, FeeEvidence, bundle_fees

from .ports import Claim

MEMO_LABEL = 674
BUNDLE_VERSION = 1
FEES_VERSION = 2
STORAGE_VERSION = 3
STOPS_VERSION = 4
VERSIONS = (BUNDLE_VERSION, FEES_VERSION, STORAGE_VERSION, STOPS_VERSION)


class BundleError(ValueError):
    """A bundle is malformed or does not match its root."""


@dataclass(frozen=True)
class Bundle:
    body: bytes
    sha256: str
    merkle_root: bytes
    cose: tuple[bytes, ...]
    # Per attestation, the evidence of the verification fees the batch pays on it.
    fees: tuple[tuple[FeeEvidence, ...], ...] = ()
    # Per attestation, the storage receipts the batch pays beside it.
    storage: tuple[tuple[StorageReceipt, ...], ...] = ()
    # Per attestation, the evidence of its lease's stop (None: not stopped).
    stops: tuple[StopEvidence | None, ...] = ()


def merkle_root(claims: Sequence[Claim]) -> bytes:
    """The RFC 9162 root over the claims' attestation leaves, in the given order."""
    return merkle.MerkleTree.from_leaf_hashes([c.leaf_hash for c in claims]).root


def make_bundle(claims: Sequence[Claim]) -> Bundle:
    root = merkle_root(claims)
    obj: dict[str, Any] = {
        "attestations": [c.cose.hex() for c in claims],
        "merkle_root": root.hex(),
        "version": BUNDLE_VERSION,
    }
    fees = [
        {"attestation": position, **e.to_json()}
        for position, c in enumerate(claims)
        for e in c.fees
    ]
    if fees:
        # Version 2 publishes the evidence of the verification fees the batch pays.
        obj.update(fees=fees, version=FEES_VERSION)
    storage = [
        {"attestation": position, "receipt": r.to_json()}
        for position, c in enumerate(claims)
        for r in c.storage
    ]
    if storage:
        # Version 3 publishes the receipts of the storage the batch pays.
        obj.update(storage=storage, version=STORAGE_VERSION)
    stops = [
        {"attestation": position, **c.stop.to_json()}
        for position, c in enumerate(claims)
        if c.stop is not None
    ]
    if stops:
        # Version 4 publishes the evidence of the stops whose partial shares the batch pays.
        obj.update(stops=stops, version=STOPS_VERSION)
    body = canonical_json(obj)
    return Bundle(
        body,
        hashlib.sha256(body).hexdigest(),
        root,
        tuple(c.cose for c in claims),
        tuple(tuple(c.fees) for c in claims),
        tuple(tuple(c.storage) for c in claims),
        tuple(c.stop for c in claims),
    )


def parse_bundle(body: bytes) -> Bundle:
    """Decode a published bundle and check its root against its attestations' leaves."""
    try:
        obj = json.loads(body)
        cose = tuple(bytes.fromhex(h) for h in obj["attestations"])
        root = bytes.fromhex(obj["merkle_root"])
        version = obj["version"]
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError(f"malformed bundle: {exc}") from exc
    if version not in VERSIONS or isinstance(version, bool):
        raise BundleError(f"bundle version {version!r} is not one of {VERSIONS}")
    leaves = [_cose_leaf(c) for c in cose]
    if merkle.MerkleTree.from_leaf_hashes(leaves).root != root:
        raise BundleError("bundle root does not match its attestations")
    try:
        fees = bundle_fees(obj, len(cose))
    except FeeError as exc:
        raise BundleError(f"malformed fee evidence: {exc}") from exc
    try:
        storage = bundle_receipts(obj, len(cose))
    except StorageError as exc:
        raise BundleError(f"malformed storage receipts: {exc}") from exc
    try:
        stops = bundle_stops(obj, len(cose))
    except StopEvidenceError as exc:
        raise BundleError(f"malformed stop evidence: {exc}") from exc
    return Bundle(body, hashlib.sha256(body).hexdigest(), root, cose, fees, storage, stops)


def _cose_leaf(cose: bytes) -> bytes:
    """The Merkle leaf of a COSE attestation: the hash of its signed canonical payload."""
    import cbor2

    try:
        payload = cbor2.loads(cose)[2]
    except Exception as exc:  # cbor2 raises unrelated types on garbage
        raise BundleError(f"attestation is not COSE_Sign1: {exc}") from exc
    if not isinstance(payload, bytes):
        raise BundleError("attestation payload must be bytes")
    return merkle.leaf_hash(payload)


def audit_metadata(batch_id: bytes, bundle: Bundle, count: int) -> dict[int, Any]:
    return {
        MEMO_LABEL: {
            "msg": [
                "proofnet settlement",
                f"batch {batch_id.hex()[:16]} pays {count} attestations",
                f"bundle /api/v1/bundles/{bundle.sha256[:32]}",
            ],
            "root": bundle.merkle_root,
            "bundle": bytes.fromhex(bundle.sha256),
            "batch": batch_id,
        }
    }
