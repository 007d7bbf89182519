"""Verification fees from the oracle's side (proofnet/messages/verification_fee.py): the
verifier whose report matched is paid out of the attestation's amount in the same
settlement entry as the provider; a verifier whose report does not match, one that names
another payout address than it registered, and a proposer paying a fee no report backs
are each the attack a test plays.

The relay is the fake desk of test_units_recomputed (the oracle's signed tasks, answered
by reports signed with the drawn verifier's own key); the units are an aggregation job's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from sqlmodel import Session
from test_units_recomputed import Answer, FakeDesk, _world
from unit_fixtures import UnitWorld

from oracle.settlement.ports import OutRef
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal, _claim
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verifiers import FEE_EVIDENCE, VerifierSpotChecker
from oracle.verification.verify import VerificationResult, verify
from proofnet.messages.verification import VerificationReport
from proofnet.messages.verification_fee import (
    FeeEvidence,
    fee_for,
    oracle_key_hash,
)

ORACLE = SigningKey(b"\x07" * 32)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AttestationStore]:
    engine = make_engine(f"sqlite:///{tmp_path / 'oracle.db'}")
    s = AttestationStore(engine)
    s.create_schema()
    yield s
    engine.dispose()


def _registered(key: str) -> str:
    return f"addr-{key[:8]}"  # what the fake desk says each candidate registered


def _check(world: UnitWorld, answer: Answer) -> tuple[VerificationResult, FakeDesk]:
    keys = [SigningKey.generate() for _ in range(3)]
    desk = FakeDesk({bytes(k.verify_key).hex(): k for k in keys}, answer)
    checker = VerifierSpotChecker(desk, ORACLE)
    return verify(world.sign(2), world.context(spot_checker=checker)), desk


def _aggregated(store: AttestationStore) -> UnitWorld:
    world = _world(store)
    world.complete(2)
    return world


def _honest(world: UnitWorld, **changes: Any) -> Answer:
    def answer(task: Any) -> dict[str, Any]:
        fields = {
            "status": "passed",
            "output_hash": world.outputs[2],
            "payout_address": _registered(task.verifier),
        }
        return fields | changes

    return answer


def test_a_matching_verifier_is_paid_its_share_in_the_providers_settlement_entry(
    store: AttestationStore,
) -> None:
    world = _aggregated(store)
    result, desk = _check(world, _honest(world))
    assert result.ok, result
    (task,) = desk.tasks
    # Stored with the verdict, read back by the settlement queue with the claim.
    cose = world.sign(2)
    row, _ = store.receive(world.attestation(2), cose)
    assert row.id is not None
    store.apply(row.id, result)
    escrow = OutRef(world.escrow.tx_id, world.escrow.index)
    with Session(store.engine) as session:
        claims = AttestationQueue().unit_claims(session, [escrow])
    (claim,) = [c for c in claims if c.unit == 2]
    assert [e.verifier for e in claim.fees] == [task.verifier]
    amount = world.units[2].amount
    paid = claim.payouts()
    assert paid.fees == ((_registered(task.verifier), fee_for(amount)),)
    assert paid.provider == (world.payout(2), amount - fee_for(amount))
    # The stages before it were not checked by a verifier here: no fee, the whole amount.
    for other in (c for c in claims if c.unit != 2):
        assert other.fees == () and other.payouts().outputs == (
            (other.payout_address, other.amount),
        )
    # Only this batch's signers' tasks count.
    assert claim.with_valid_fees({oracle_key_hash(bytes(ORACLE.verify_key).hex())}) == claim
    assert claim.with_valid_fees({"00" * 28}).fees == ()


def test_a_verifier_whose_report_does_not_match_gets_nothing(store: AttestationStore) -> None:
    world = _aggregated(store)
    result, _ = _check(world, _honest(world, output_hash="e" * 64))
    assert result.outcome == "rejected" and result.fault == "provider"
    assert result.spot_check is not None
    assert FEE_EVIDENCE not in (result.spot_check.report or {})


def test_a_verifier_naming_another_payout_address_than_it_registered_gets_nothing(
    store: AttestationStore,
) -> None:
    world = _aggregated(store)
    result, _ = _check(world, _honest(world, payout_address="addr_test1elsewhere"))
    assert result.ok, result  # the provider's verdict does not depend on the fee
    assert result.spot_check is not None
    assert FEE_EVIDENCE not in (result.spot_check.report or {})


def _cosigner(world: UnitWorld) -> CoSigner:
    verifier = IntakeVerifier(world.context())
    return CoSigner(None, None, None, verifier)  # type: ignore[arg-type]


def test_a_cosigner_refuses_a_fee_whose_report_its_own_reading_does_not_match(
    store: AttestationStore,
) -> None:
    """A proposer (or a verifier with a made-up "passed") pays a fee on a recomputation
    that is not the attested output: every check of the signatures holds, the co-signer's
    own reading of the unit does not."""
    world = _aggregated(store)
    result, desk = _check(world, _honest(world))
    assert result.ok and result.spot_check is not None
    honest = FeeEvidence.from_json(result.spot_check.report[FEE_EVIDENCE])  # type: ignore[index]
    claim = _claim(world.attestation(2))
    signers = {oracle_key_hash(bytes(ORACLE.verify_key).hex())}
    cosigner = _cosigner(world)
    assert cosigner._with_fees(claim, [honest], signers).fees == (honest,)
    (task,) = desk.tasks
    lying = VerificationReport.sign(
        desk.verifiers[task.verifier],
        task,
        status="passed",
        output_hash="e" * 64,
        payout_address=_registered(task.verifier),
    )
    with pytest.raises(QuorumRefusal, match="not earned"):
        cosigner._with_fees(claim, [FeeEvidence(task, lying)], signers)
    # Paid twice to one verifier, or on a task no signer of the batch drew.
    with pytest.raises(QuorumRefusal, match="paid twice"):
        cosigner._with_fees(claim, [honest, honest], signers)
    with pytest.raises(QuorumRefusal, match="not signed by an oracle that signs"):
        cosigner._with_fees(claim, [honest], {"00" * 28})
    # Another attestation's evidence (the first stage's) earns nothing on this one.
    stage = dataclasses.replace(_claim(world.attestation(0)))
    with pytest.raises(QuorumRefusal, match="another attestation"):
        cosigner._with_fees(stage, [honest], signers)


def test_a_cosigners_own_verdict_keeps_its_verifiers_evidence_for_the_batch(
    store: AttestationStore,
) -> None:
    """The co-signer re-verifies with its own draw; the evidence its verdict kept is what it
    requires the batch to pay (`unpaid_own_verifiers`), and nothing for a report that did
    not match."""
    from oracle.settlement.quorum import unpaid_own_verifiers

    world = _aggregated(store)
    keys = [SigningKey.generate() for _ in range(3)]
    desk = FakeDesk({bytes(k.verify_key).hex(): k for k in keys}, _honest(world))
    verifier = IntakeVerifier(world.context(spot_checker=VerifierSpotChecker(desk, ORACLE)))
    (claim,) = verifier.verify_bundle([world.sign(2)])
    (task,) = desk.tasks
    assert claim.own_fee is not None and claim.own_fee.verifier == task.verifier
    assert unpaid_own_verifiers([claim]) == [(claim.leaf_hash, claim.own_fee)]
    assert unpaid_own_verifiers([dataclasses.replace(claim, fees=(claim.own_fee,))]) == []
