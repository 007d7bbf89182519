"""The Merkle tree must be RFC 6962's, with working and tamper-evident inclusion proofs."""

from __future__ import annotations

import hashlib

import pytest

from proofnet.messages.merkle import (
    InclusionProof,
    MerkleError,
    MerkleTree,
    leaf_hash,
    merkle_root,
    node_hash,
    root_from_proof,
    verify_inclusion,
)


def _mth(leaves: list[bytes]) -> bytes:
    """RFC 6962 section 2.1, written recursively exactly as the RFC states it."""
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = 1
    while k * 2 < n:
        k *= 2
    return hashlib.sha256(b"\x01" + _mth(leaves[:k]) + _mth(leaves[k:])).digest()


def _path(m: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 section 2.1.1 PATH(m, D[n])."""
    n = len(leaves)
    if n == 1:
        return []
    k = 1
    while k * 2 < n:
        k *= 2
    if m < k:
        return _path(m, leaves[:k]) + [_mth(leaves[k:])]
    return _path(m - k, leaves[k:]) + [_mth(leaves[:k])]


LEAVES = [f"leaf-{i}".encode() for i in range(33)]


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 33])
def test_root_matches_rfc6962_reference(n: int) -> None:
    assert merkle_root(LEAVES[:n]) == _mth(LEAVES[:n])


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 8, 13, 33])
def test_every_proof_matches_rfc_and_verifies(n: int) -> None:
    leaves = LEAVES[:n]
    tree = MerkleTree(leaves)
    for i in range(n):
        proof = tree.proof(i)
        assert list(proof.path) == _path(i, leaves)
        assert verify_inclusion(leaves[i], proof, tree.root)


def test_known_vector() -> None:
    # Two leaves by hand: the prefixes 0x00 / 0x01 are part of the format.
    a, b = b"a", b"b"
    expected = hashlib.sha256(
        b"\x01" + hashlib.sha256(b"\x00a").digest() + hashlib.sha256(b"\x00b").digest()
    ).digest()
    assert merkle_root([a, b]) == expected == node_hash(leaf_hash(a), leaf_hash(b))


def test_odd_node_is_promoted_not_duplicated() -> None:
    # With duplication, [a, b, c] and [a, b, c, c] would share a root (CVE-2012-2459).
    assert merkle_root([b"a", b"b", b"c"]) != merkle_root([b"a", b"b", b"c", b"c"])
    assert merkle_root([b"a", b"b", b"c"]) == node_hash(
        node_hash(leaf_hash(b"a"), leaf_hash(b"b")), leaf_hash(b"c")
    )


def test_leaf_cannot_pose_as_inner_node() -> None:
    inner = node_hash(leaf_hash(b"a"), leaf_hash(b"b"))
    # A one-leaf tree whose leaf is the two child hashes must not equal the two-leaf root.
    assert merkle_root([leaf_hash(b"a") + leaf_hash(b"b")]) != inner


def test_tampered_proofs_are_rejected() -> None:
    tree = MerkleTree(LEAVES[:9])
    proof = tree.proof(4)
    root = tree.root
    assert not verify_inclusion(b"other", proof, root)
    assert not verify_inclusion(LEAVES[5], proof, root)
    bad_path = (bytes(32),) + proof.path[1:]
    assert not verify_inclusion(LEAVES[4], InclusionProof(4, 9, bad_path), root)
    assert not verify_inclusion(LEAVES[4], InclusionProof(5, 9, proof.path), root)
    # A size that changes the tree's shape breaks the proof (the root does not commit to
    # the size by itself: sizes that give index 4 the same path are indistinguishable).
    assert not verify_inclusion(LEAVES[4], InclusionProof(4, 5, proof.path), root)
    assert not verify_inclusion(LEAVES[4], InclusionProof(4, 9, proof.path[:-1]), root)
    assert not verify_inclusion(LEAVES[4], InclusionProof(4, 9, proof.path + (root,)), root)
    assert not verify_inclusion(LEAVES[4], InclusionProof(9, 9, proof.path), root)
    with pytest.raises(MerkleError):
        root_from_proof(leaf_hash(LEAVES[4]), InclusionProof(4, 9, (b"short",)))


def test_proof_index_out_of_range() -> None:
    with pytest.raises(MerkleError):
        MerkleTree(LEAVES[:3]).proof(3)
    with pytest.raises(MerkleError):
        MerkleTree([]).proof(0)


def test_proof_json_round_trip_and_malformed() -> None:
    proof = MerkleTree(LEAVES[:6]).proof(5)
    assert InclusionProof.from_json(proof.to_json()) == proof
    with pytest.raises(MerkleError):
        InclusionProof.from_json({"index": 1, "size": 2})
    with pytest.raises(MerkleError):
        InclusionProof.from_json({"index": 1, "size": 2, "path": ["zz"]})


def test_from_leaf_hashes_equals_building_from_leaves() -> None:
    hashes = [leaf_hash(x) for x in LEAVES[:11]]
    assert MerkleTree.from_leaf_hashes(hashes).root == merkle_root(LEAVES[:11])
    with pytest.raises(MerkleError):
        MerkleTree.from_leaf_hashes([b"short"])
