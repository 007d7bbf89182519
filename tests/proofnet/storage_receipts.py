"""Builds storage receipts whose challenges really verify: an object, its commitment, and
one challenge per answer time drawn from a fresh beacon (what an honest oracle signs)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from nacl.signing import SigningKey

from proofnet.messages import merkle
from proofnet.messages import storage as s
from proofnet.messages import storage_receipt as r

CHUNK = 1024


def evidence_for(
    data: bytes, placement_id: int, answered: Sequence[int], chunk_size: int = CHUNK
) -> tuple[r.ChallengeEvidence, ...]:
    """One passed challenge per time in `answered` against `data`'s real tree."""
    commitment = s.commit(data, chunk_size)
    chunks = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
    tree = merkle.MerkleTree(chunks)
    out = []
    for t in answered:
        beacon = secrets.token_hex(32)
        index = r.beacon_index(
            beacon, placement_id, commitment.content_root, commitment.chunk_count
        )
        out.append(
            r.ChallengeEvidence(
                beacon=beacon,
                index=index,
                leaf_hash=merkle.leaf_hash(chunks[index]).hex(),
                proof=tuple(h.hex() for h in tree.proof(index).path),
                issued_at=t,
                answered_at=t,
            )
        )
    return tuple(out)


def receipt(
    key: SigningKey,
    *,
    network: str,
    job_id: str,
    payout_address: str,
    data: bytes,
    placed_at: int,
    answered: Sequence[int],
    placement_id: int = 7,
    provider_key: str = "cd" * 32,
    ntx_per_gb_month: int = 1_000,
    amount: int | None = None,
    chunk_size: int = CHUNK,
    **over: object,
) -> r.StorageReceipt:
    """A signed receipt for `data` held from `placed_at`, challenged at `answered`; by default
    it pays what those challenges cover."""
    commitment = s.commit(data, chunk_size)
    fields: dict[str, object] = {
        "network": network,
        "job_id": job_id,
        "placement_id": placement_id,
        "provider_key": provider_key,
        "payout_address": payout_address,
        "content_root": commitment.content_root,
        "size": commitment.size,
        "chunk_size": chunk_size,
        "ntx_per_gb_month": ntx_per_gb_month,
        "placed_at": placed_at,
        "paid_through": max(answered),
        "challenges": evidence_for(data, placement_id, answered, chunk_size),
        "amount": 1,
        "oracle_key": bytes(key.verify_key).hex(),
    }
    fields.update(over)
    body = r.StorageReceiptBody.model_validate(fields)
    if amount is None and "amount" not in over:
        amount = max(1, r.evidence_bound(body))
    if amount is not None:
        body = body.model_copy(update={"amount": amount})
    return r.sign_receipt(key, body)
