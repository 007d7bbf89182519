"""A co-signer not done verifying is asked again soon; a refusal on the merits cools it down.

A co-signer verifies a batch's attestations when first asked to sign, by drawing its own
verifier workers; until they answer, its verdict is "retry". Answered like a refusal, that
put the co-signer on the proposer's 60 s cooldown (and made the escrows suspects, batched
one at a time), so every settlement waited a minute per co-signer that had not verified
yet (seen in `proofnet bench cheat --end-to-end` with drawn verifiers: "no quorum available"
for a minute after each first ask). Now the co-signer answers 409 with `"pending": true`,
the proposer asks it again after `pending_retry_s`, and nothing is held against the batch.
A refusal on the merits (the attacker's co-signer verdict) still cools the co-signer down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from oracle.settlement import quorum
from oracle.settlement.ports import QuorumNotReached, UnsignedBatch
from oracle.settlement.quorum import CoSignerClient, QuorumPending, QuorumRefusal, QuorumSigner

BATCH = UnsignedBatch(tx_id="ab" * 32, tx_cbor=b"\x80", claims=(), merkle_root=b"", batch_id=b"")
NOW = 1_000.0


@dataclass
class Builder:
    def witness(self, tx_id: str) -> bytes:
        return b"own"


class Cosigner(CoSignerClient):
    def __init__(self, answer: Exception) -> None:
        super().__init__("http://cosigner.test", "cd" * 28)
        self.answer = answer

    def healthy(self) -> bool:
        return True

    def sign(self, unsigned: UnsignedBatch, bundle_body: bytes) -> bytes:
        raise self.answer


def _ask(answer: Exception) -> tuple[QuorumNotReached, Cosigner]:
    cosigner = Cosigner(answer)
    signer = QuorumSigner(Builder(), [cosigner], threshold=2, clock=lambda: NOW)
    signer._chosen = signer.choose()
    with pytest.raises(QuorumNotReached) as raised:
        signer.witnesses(BATCH, b"{}")
    return raised.value, cosigner


def test_a_pending_cosigner_is_asked_again_soon_and_holds_nothing_against_the_batch() -> None:
    pending, cosigner = _ask(QuorumPending("attestation for escrow x#0 retry: waiting"))
    assert pending.pending and cosigner.refused_until == NOW + 5.0
    # The refusal on the merits, its twin: the full cooldown, and the batch suspected.
    refused, cosigner = _ask(QuorumRefusal("attestation for escrow x#0 rejected: faked"))
    assert not refused.pending and cosigner.refused_until == NOW + 60.0


@pytest.mark.parametrize(
    ("body", "pending"),
    [
        ({"detail": "attestation for escrow x#0 retry: waiting", "pending": True}, True),
        ({"detail": "attestation for escrow x#0 rejected: faked"}, False),
        # A co-signer cannot make a refusal look pending by wording alone.
        ({"detail": "pending", "pending": "true"}, False),
    ],
)
def test_the_cosigners_answer_says_whether_it_is_only_pending(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], pending: bool
) -> None:
    def post(url: str, **_: Any) -> httpx.Response:
        return httpx.Response(409, json=body, request=httpx.Request("POST", url))

    monkeypatch.setattr(quorum.httpx, "post", post)
    with pytest.raises(QuorumRefusal) as raised:
        CoSignerClient("http://cosigner.test", "cd" * 28).sign(BATCH, b"{}")
    assert isinstance(raised.value, QuorumPending) is pending
