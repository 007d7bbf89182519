"""Every verifier whose report the quorum's verdict relied on is paid, a co-signer's too.

Each co-signer draws its own verifier and its verdict rests on that verifier's report, yet
the proposer's batch carries the fee evidence of its own draw only. A co-signer signs only a
batch that pays its own verifier (`oracle.settlement.quorum.unpaid_own_verifiers`); refusing,
it hands the evidence back, and the proposer keeps it for the next batch
(`AttestationQueue.add_fees`), checked as it checks its own. Attacks: evidence handed back
for an attestation the batch did not carry, a report not signed by the task's verifier, one
verifier handed back twice; the honest twin is paid once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from nacl.signing import SigningKey
from settlement_fixtures import FakeBuilder, FakeChain, add_verified, oracle_engine
from sqlmodel import Session

from oracle.models import AttestationRecord
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.ports import QuorumNotReached
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import VerifiedClaim, unpaid_own_verifiers
from oracle.settlement.watcher import WatchConfig
from proofnet.messages.verification import VerificationReport, VerificationTask
from proofnet.messages.verification_fee import FeeEvidence

COSIGNER = SigningKey(b"\x21" * 32)
VERIFIER = SigningKey(b"\x22" * 32)
OTHER = SigningKey(b"\x23" * 32)


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = oracle_engine(tmp_path)
    yield engine
    engine.dispose()


def evidence_for(
    row: AttestationRecord, verifier: SigningKey = VERIFIER, signer=None
) -> FeeEvidence:  # type: ignore[no-untyped-def]
    """A co-signer's task for `row`'s attestation and its verifier's matching report."""
    task = VerificationTask.sign(
        COSIGNER,
        job_id=row.job_id,
        nonce="ab" * 16,
        attestation=row.leaf_hash,
        pot_root="cd" * 32,
        provider=row.worker_key,
        verifier=bytes(verifier.verify_key).hex(),
        device_class="cpu",
        kind="replay",
        segments=[1],
        files=["pot/manifest.json"],
        draw_signature="ef" * 64,
    )
    result = {"segment": 1, "weights_hash": "11" * 32, "update_norm": "0.5", "distance": "0"}
    report = VerificationReport.sign(
        signer or verifier,
        task,
        status="passed",
        results=[result],
        repeat=result,
        payout_address="addr_test1verifierpayout",
    )
    return FeeEvidence(task, report)


def row_of(db, attestation_id: int) -> AttestationRecord:  # type: ignore[no-untyped-def]
    with Session(db) as session:
        row = session.get(AttestationRecord, attestation_id)
        assert row is not None
        return row


class CoSignerQuorum:
    """A co-signer whose verdict on `leaf` relied on `evidence`: it signs only a batch that
    pays that verifier, and hands the evidence back otherwise."""

    def __init__(self, builder: FakeBuilder, handed: list[tuple[str, FeeEvidence]]) -> None:
        self.builder, self.handed = builder, handed
        self.fees_seen: list[dict[str, list[str]]] = []

    def witnesses(self, unsigned, bundle_body: bytes) -> list[bytes]:  # type: ignore[no-untyped-def]
        paid = {c.leaf_hash.hex(): [e.verifier for e in c.fees] for c in unsigned.claims}
        self.fees_seen.append(paid)
        missing = [(leaf, e) for leaf, e in self.handed if e.verifier not in paid.get(leaf, [])]
        if missing:
            raise QuorumNotReached("the batch does not pay my verifier", fees=missing)
        return [self.builder.witness(unsigned.tx_id), b"co-signer"]


def engine_with(db, chain: FakeChain, quorum: CoSignerQuorum) -> SettlementEngine:  # type: ignore[no-untyped-def]
    return SettlementEngine(
        IntentLog(db, AttestationQueue()),
        chain,
        quorum.builder,
        signer=quorum,
        policy=BatchPolicy(batch_size=4, max_wait_s=0.0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="test",
    )


def test_a_cosigners_verifier_is_added_and_the_batch_then_signed(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    ref = chain.add_escrow()
    att = add_verified(db, ref)
    row = row_of(db, att)
    evidence = evidence_for(row)
    quorum = CoSignerQuorum(FakeBuilder(), [(row.leaf_hash, evidence)])
    engine = engine_with(db, chain, quorum)
    engine.tick()  # the first batch is refused, the evidence kept
    for _ in range(3):
        chain.produce_block()
        engine.tick()
    first, *later = quorum.fees_seen
    assert first == {row.leaf_hash: []}
    assert later and later[0] == {row.leaf_hash: [evidence.verifier]}
    assert len(chain.paid()[str(ref)]) == 1
    assert engine.suspects == {}  # not a rejection: nothing isolated


def test_evidence_handed_back_is_kept_only_when_it_holds_and_once(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(2)]
    atts = [add_verified(db, r) for r in refs]
    rows = [row_of(db, a) for a in atts]
    queue = AttestationQueue()
    with Session(db) as session:
        (claim,) = [c for c in queue.payable(session, 10) if c.attestation_id == atts[0]]
    honest = evidence_for(rows[0])
    attacks = [
        # For an attestation the refused batch did not carry (rows[1] is not in `claim`).
        (rows[1].leaf_hash, evidence_for(rows[1])),
        # For this attestation, but evidence made for the other one.
        (rows[0].leaf_hash, evidence_for(rows[1])),
        # The report signed by another key than the task's verifier.
        (rows[0].leaf_hash, evidence_for(rows[0], signer=OTHER)),
    ]
    with Session(db) as session, session.begin():
        kept = queue.add_fees(session, [claim], [*attacks, (rows[0].leaf_hash, honest)] * 2)
    assert kept == 1
    with Session(db) as session:
        (claim,) = [c for c in queue.payable(session, 10) if c.attestation_id == atts[0]]
    assert [e.verifier for e in claim.fees] == [honest.verifier]


def test_a_cosigner_signs_only_a_batch_paying_its_own_verifier(db) -> None:  # type: ignore[no-untyped-def]
    chain = FakeChain()
    att = add_verified(db, chain.add_escrow())
    row = row_of(db, att)
    own = evidence_for(row)
    other = evidence_for(row, verifier=OTHER)
    from oracle.settlement.ports import OutRef

    claim = VerifiedClaim(OutRef("aa" * 32, 0), "addr", 100, leaf_hash=row.leaf_hash, own_fee=own)
    # Not paid (no fee at all, or only the proposer's verifier): refused, evidence handed back.
    assert unpaid_own_verifiers([claim]) == [(row.leaf_hash, own)]
    paid_other = VerifiedClaim(
        OutRef("aa" * 32, 0), "addr", 100, leaf_hash=row.leaf_hash, fees=(other,), own_fee=own
    )
    assert unpaid_own_verifiers([paid_other]) == [(row.leaf_hash, own)]
    # Paid (beside the proposer's): signed.
    both = VerifiedClaim(
        OutRef("aa" * 32, 0), "addr", 100, leaf_hash=row.leaf_hash, fees=(other, own), own_fee=own
    )
    assert unpaid_own_verifiers([both]) == []
    # A verdict that relied on no verifier's report (the demo's local replay): nothing owed.
    plain = VerifiedClaim(OutRef("aa" * 32, 0), "addr", 100, leaf_hash=row.leaf_hash)
    assert unpaid_own_verifiers([plain]) == []


def test_the_proposer_reads_the_evidence_off_the_refusal_and_drops_what_does_not_parse(
    db,  # type: ignore[no-untyped-def]
) -> None:
    import httpx

    from oracle.settlement.quorum import _handed_back

    row = row_of(db, add_verified(db, FakeChain().add_escrow()))
    evidence = evidence_for(row)
    body = {
        "detail": "the batch does not pay verifier ...",
        "fees": [
            {"leaf_hash": row.leaf_hash, "evidence": evidence.to_json()},
            {"leaf_hash": row.leaf_hash, "evidence": {"task": "forged"}},
            {"evidence": evidence.to_json()},
            "junk",
        ],
    }
    response = httpx.Response(409, json=body)
    assert _handed_back(response) == ((row.leaf_hash, evidence),)
    assert _handed_back(httpx.Response(409, text="not json")) == ()
