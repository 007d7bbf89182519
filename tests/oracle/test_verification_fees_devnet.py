"""Verification fees on a real devnet with the real builders, scripts, co-signer and audit:
the verifier of an aggregation unit is paid its fee out of the unit's attested amount in
the same settlement entry as the provider, a co-signer signs it, and the audit says OK and
shows the fee (not a payout mismatch). A verifier whose "passed" report does not match is
refused by the co-signer; a dishonest proposer that settles a fee on a report that did not
pass (threshold 1) is named by the audit."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

import pytest
import test_units_settlement_devnet as units_devnet
from nacl.signing import SigningKey
from test_units_recomputed import averaged_topology
from test_units_settlement_devnet import Devnet, _audit, _claims, _locked_world, _unsigned
from unit_fixtures import UnitWorld

from auditor import audit as au
from oracle.settlement import scenario as sc
from oracle.settlement.builder_port import CardanoSettlementBuilder
from oracle.settlement.chain_view import BlockfrostChainView
from oracle.settlement.ports import Claim
from oracle.settlement.quorum import CoSigner, IntakeVerifier, QuorumRefusal
from oracle.storage.db import make_engine
from oracle.storage.store import AttestationStore
from oracle.verification.verify import leaf_of
from proofnet.messages.verification import VerificationReport, VerificationTask
from proofnet.messages.verification_fee import FeeEvidence, fee_for

devnet = units_devnet.devnet
VERIFIER = SigningKey(b"\x09" * 32)
VERIFIER_PAYOUT = str(sc.enterprise(sc.seeded_key("fees-devnet/verifier")))


def _world(devnet: Devnet, tmp_path: Path, name: str) -> UnitWorld:
    store = AttestationStore(make_engine(f"sqlite:///{tmp_path / f'{name}.db'}"))
    store.create_schema()
    world = _locked_world(devnet, averaged_topology(), 0, store)
    for index in range(3):
        world.complete(index)
    world.complete(3, metrics={"loss": "0.25"})
    world.set_job(status="completed")
    return world


def _evidence(devnet: Devnet, world: UnitWorld, cose: bytes, **report: object) -> FeeEvidence:
    """Oracle 0's task for the aggregation unit (2), answered by VERIFIER."""
    oracle = SigningKey(bytes(devnet.scenario.oracle_keys[0].payload))
    att = world.attestation(2)
    task = VerificationTask.sign(
        oracle,
        job_id=world.job_id,
        nonce=att.nonce,
        unit=2,
        attestation=leaf_of(cose),
        pot_root=att.pot_root,
        provider=att.worker_key,
        verifier=bytes(VERIFIER.verify_key).hex(),
        device_class="cpu",
        kind="aggregate",
        segments=[],
        inputs=[world.outputs[0], world.outputs[1]],
        files=["units/0/checkpoint/model.npz", "units/1/checkpoint/model.npz"],
        draw_signature="ab" * 64,
    )
    fields: dict[str, object] = {
        "status": "passed",
        "output_hash": world.outputs[2],
        "payout_address": VERIFIER_PAYOUT,
    }
    return FeeEvidence(task, VerificationReport.sign(VERIFIER, task, **(fields | report)))


def _fee_claims(devnet: Devnet, world: UnitWorld, **report: object) -> list[Claim]:
    """Every unit's claim; the aggregation's carries VERIFIER's fee evidence."""
    coses = {i: world.sign(i) for i in range(4)}
    fee = _evidence(devnet, world, coses[2], **report)
    return [
        dataclasses.replace(
            c,
            worker_key=world.worker_key(c.unit or 0),
            fees=(fee,) if c.unit == 2 else (),
        )
        for c in _claims(world, coses)
    ]


def _cosigner(devnet: Devnet, world: UnitWorld) -> CoSigner:
    scenario = devnet.scenario
    return CoSigner(
        scenario.deployment,
        BlockfrostChainView(devnet.api.url),
        scenario.oracle_keys[1],
        IntakeVerifier(world.context(ntx_policy=scenario.ntx_policy)),
    )


def _submit(devnet: Devnet, unsigned: object, body: bytes, witnesses: list[bytes]) -> str:
    builder = CardanoSettlementBuilder(
        devnet.api.context(), devnet.scenario.deployment, devnet.scenario.oracle_keys[0]
    )
    signed = builder.assemble(unsigned, [builder.witness(unsigned.tx_id), *witnesses])  # type: ignore[arg-type, attr-defined]
    BlockfrostChainView(devnet.api.url).submit(signed)
    tx_id = str(unsigned.tx_id)  # type: ignore[attr-defined]
    devnet.api.wait_for_tx(tx_id)
    devnet.bundles[hashlib.sha256(body).hexdigest()] = body
    return tx_id


def test_a_matching_verifier_is_paid_cosigned_and_audited_as_a_fee(
    devnet: Devnet, tmp_path: Path
) -> None:
    world = _world(devnet, tmp_path, "honest")
    scenario = devnet.scenario
    both = [scenario.oracle_pkhs[0], scenario.oracle_pkhs[1]]
    cosigner = _cosigner(devnet, world)

    # A verifier that says "passed" on an aggregate its inputs do not make: every
    # signature holds, the co-signer's own reading of the unit does not.
    unsigned, body = _unsigned(devnet, _fee_claims(devnet, world, output_hash="e" * 64), both)
    with pytest.raises(QuorumRefusal, match="not earned"):
        cosigner.review(unsigned.tx_cbor, body)

    unsigned, body = _unsigned(devnet, _fee_claims(devnet, world), both)
    witness = cosigner.review(unsigned.tx_cbor, body)
    tx_id = _submit(devnet, unsigned, body, [witness])

    amount = world.units[2].amount
    fee = fee_for(amount)
    assert fee > 0
    paid = units_devnet._ntx_outputs(devnet, tx_id)
    assert (VERIFIER_PAYOUT, fee) in paid
    assert (world.payout(2), amount - fee) in paid
    assert (str(scenario.submitter.address), 0) not in paid  # nothing left to refund

    report = _audit(devnet, tx_id)
    assert report.ok, report.problems
    (settled,) = report.escrows
    assert [(f.address, f.amount, f.unit) for f in settled.fees] == [(VERIFIER_PAYOUT, fee, 2)]
    assert settled.fees[0].verifier == bytes(VERIFIER.verify_key).hex()
    assert "verification fees" in report.line()


def test_a_fee_on_a_report_that_did_not_pass_is_named_by_the_audit(
    devnet: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world(devnet, tmp_path, "unearned")
    scenario = devnet.scenario
    claims = _fee_claims(devnet, world, status="failed")
    # An honest proposer drops the unearned fee before building ...
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0]])
    assert all(c.fees == () for c in unsigned.claims)
    # ... a dishonest one (threshold 1) pays it anyway and publishes its evidence.
    monkeypatch.setattr(Claim, "with_valid_fees", lambda self, signers: self)
    unsigned, body = _unsigned(devnet, claims, [scenario.oracle_pkhs[0]])
    assert any(c.fees for c in unsigned.claims)
    tx_id = _submit(devnet, unsigned, body, [])

    report = _audit(devnet, tx_id)
    kinds = {d.kind for d in report.discrepancies}
    assert au.FEE_UNEARNED in kinds and au.PAYOUT_MISMATCH in kinds, report.problems
    (unearned,) = [d for d in report.discrepancies if d.kind == au.FEE_UNEARNED]
    assert "says 'failed'" in unearned.detail
    amount = world.units[2].amount
    # The provider is owed the whole amount (no fee is earned) and got less; the fee's
    # output is one more than the escrow's attestations account for.
    payouts = [d for d in report.discrepancies if d.kind == au.PAYOUT_MISMATCH]
    assert any((d.expected, d.actual) == (amount, amount - fee_for(amount)) for d in payouts), (
        report.problems
    )
    assert any((d.expected, d.actual) == (4, 5) for d in payouts), report.problems
