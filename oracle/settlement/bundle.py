"""The audit trail of one batch: its Merkle root, the published attestation bundle and the
transaction metadata that points at both.

Bundle (canonical JSON, addressed by its SHA-256):
    {"attestations": [<COSE_Sign1 hex>, ...], "merkle_root": <hex>, "version": 1}
in the batch's order, which is the order of the redeemer entries and of the Merkle leaves.
A batch that pays verification fees publishes their evidence too, as version 2:
    {..., "fees": [{"attestation": <position>, "task": {...}, "report": {...}}, ...],
     "version": 2}
(the oracle-signed task and the verifier-signed report, `proofnet.messages.verification_fee`).
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
from proofnet.messages.verification_fee import FeeError, FeeEvidence, bundle_fees

from .ports import Claim

MEMO_LABEL = 674
BUNDLE_VERSION = 1
FEES_VERSION = 2


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
    body = canonical_json(obj)
    return Bundle(
        body,
        hashlib.sha256(body).hexdigest(),
        root,
        tuple(c.cose for c in claims),
        tuple(tuple(c.fees) for c in claims),
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
    if version not in (BUNDLE_VERSION, FEES_VERSION):
        raise BundleError(f"bundle version {version!r} is not {BUNDLE_VERSION} or {FEES_VERSION}")
    leaves = [_cose_leaf(c) for c in cose]
    if merkle.MerkleTree.from_leaf_hashes(leaves).root != root:
        raise BundleError("bundle root does not match its attestations")
    try:
        fees = bundle_fees(obj, len(cose))
    except FeeError as exc:
        raise BundleError(f"malformed fee evidence: {exc}") from exc
    return Bundle(body, hashlib.sha256(body).hexdigest(), root, cose, fees)


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
