"""The one Merkle tree (RFC 6962 / RFC 9162 with SHA-256): attestation batches here, and
proof-of-training commitments in the `pot` library, where it is defined once."""

from pot.merkle import (
    HASH_SIZE,
    InclusionProof,
    MerkleError,
    MerkleTree,
    leaf_hash,
    merkle_root,
    node_hash,
    root_from_proof,
    verify_inclusion,
)

__all__ = [
    "HASH_SIZE",
    "InclusionProof",
    "MerkleError",
    "MerkleTree",
    "leaf_hash",
    "merkle_root",
    "node_hash",
    "root_from_proof",
    "verify_inclusion",
]
