"""The one Merkle tree: proof-of-training commitments and the batch root over attestations.

It is the Merkle Tree Hash of RFC 6962 / RFC 9162 (Certificate Transparency) with SHA-256,
so any CT library can check our roots and proofs:

- leaf hash  = SHA-256(0x00 || leaf bytes)
- node hash  = SHA-256(0x01 || left || right)
  (the prefixes keep a leaf from ever being passed off as an inner node, or the reverse)
- odd-node rule: a tree of n > 1 leaves splits at k, the largest power of two below n; built
  level by level this means an unpaired last node is promoted unchanged to the next level,
  never duplicated (duplicating it would give [a, b, c] and [a, b, c, c] the same root).
- the empty tree's root is SHA-256 of the empty string.

As in Certificate Transparency the root does not commit to the number of leaves by itself;
whoever publishes a root publishes the leaf count (or the leaves) with it.

On-chain code only carries the root, so SHA-256 costs nothing there. Standard library only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

HASH_SIZE = 32
_LEAF = b"\x00"
_NODE = b"\x01"


class MerkleError(ValueError):
    """A proof or tree input is malformed."""


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(_LEAF + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(_NODE + left + right).digest()


def _next_level(level: list[bytes]) -> list[bytes]:
    paired = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
    if len(level) % 2:
        paired.append(level[-1])  # promoted, not duplicated
    return paired


@dataclass(frozen=True)
class InclusionProof:
    """Audit path for the leaf at `index` in a tree of `size` leaves, bottom-up."""

    index: int
    size: int
    path: tuple[bytes, ...]

    def to_json(self) -> dict[str, object]:
        return {"index": self.index, "size": self.size, "path": [h.hex() for h in self.path]}

    @classmethod
    def from_json(cls, obj: dict[str, object]) -> InclusionProof:
        try:
            index, size, path = obj["index"], obj["size"], obj["path"]
            if not (isinstance(index, int) and isinstance(size, int) and isinstance(path, list)):
                raise TypeError("index/size must be integers and path a list")
            hashes = tuple(bytes.fromhex(h) for h in path)
        except (KeyError, TypeError, ValueError) as exc:
            raise MerkleError(f"malformed inclusion proof: {exc}") from exc
        return cls(index=index, size=size, path=hashes)


class MerkleTree:
    """All levels kept, so proofs cost O(log n) after an O(n) build."""

    def __init__(self, leaves: Sequence[bytes]) -> None:
        self._levels: list[list[bytes]] = [[leaf_hash(leaf) for leaf in leaves]]
        while len(self._levels[-1]) > 1:
            self._levels.append(_next_level(self._levels[-1]))

    @classmethod
    def from_leaf_hashes(cls, hashes: Sequence[bytes]) -> MerkleTree:
        tree = cls.__new__(cls)
        for h in hashes:
            if len(h) != HASH_SIZE:
                raise MerkleError(f"leaf hash must be {HASH_SIZE} bytes, got {len(h)}")
        tree._levels = [list(hashes)]
        while len(tree._levels[-1]) > 1:
            tree._levels.append(_next_level(tree._levels[-1]))
        return tree

    def __len__(self) -> int:
        return len(self._levels[0])

    @property
    def root(self) -> bytes:
        if not self._levels[0]:
            return hashlib.sha256(b"").digest()
        return self._levels[-1][0]

    def proof(self, index: int) -> InclusionProof:
        size = len(self)
        if not 0 <= index < size:
            raise MerkleError(f"leaf index {index} out of range for {size} leaves")
        path: list[bytes] = []
        i = index
        for level in self._levels[:-1]:
            sibling = i ^ 1
            if sibling < len(level):
                path.append(level[sibling])
            # else: this node was promoted; nothing to add at this level
            i //= 2
        return InclusionProof(index=index, size=size, path=tuple(path))


def merkle_root(leaves: Sequence[bytes]) -> bytes:
    return MerkleTree(leaves).root


def root_from_proof(leaf_digest: bytes, proof: InclusionProof) -> bytes:
    """Recompute the root from a leaf hash and its audit path (RFC 9162, section 2.1.3.2)."""
    if not 0 <= proof.index < proof.size:
        raise MerkleError(f"leaf index {proof.index} out of range for {proof.size} leaves")
    fn, sn = proof.index, proof.size - 1
    r = leaf_digest
    for p in proof.path:
        if len(p) != HASH_SIZE:
            raise MerkleError(f"proof hash must be {HASH_SIZE} bytes, got {len(p)}")
        if sn == 0:
            raise MerkleError("inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn & 1 == 0 and fn != 0:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise MerkleError("inclusion proof is shorter than the tree is deep")
    return r


def verify_inclusion(leaf: bytes, proof: InclusionProof, root: bytes) -> bool:
    """True when `leaf` (the leaf's bytes, not its hash) is in the tree with this root."""
    try:
        return root_from_proof(leaf_hash(leaf), proof) == root
    except MerkleError:
        return False
