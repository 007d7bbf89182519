"""The audit re-derives a stopped lease's share from the stop evidence its settlement
publishes (proofnet/messages/stop_evidence.py, auditor/audit.py::stopped_payout_problems),
played as a quorum that overpays or pays a "stopped" attestation on no, forged or another
lease's evidence would.

The evidence travels as it does on chain: in the bundle's bytes (`make_bundle`, version 4),
read back by the auditor (`bundle_stop_evidence`). The deployment's oracle set is three
oracles, two of which must sign the stop. The honest twin is audited OK.
(The oracle's side: tests/oracle/test_verify_stopped.py; end to end on a devnet:
tests/oracle/test_job_fault_devnet.py.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import PRICE, World, job_spec, make_world
from settlement_fixtures import FakeChain, add_verified, oracle_engine
from sqlmodel import Session

from auditor.audit import (
    STOP_SHARE_EXCEEDED,
    STOP_UNPROVEN,
    OracleSet,
    bundle_stop_evidence,
    stopped_payout_problems,
)
from oracle.models import AttestationRecord
from oracle.settlement.bundle import STOPS_VERSION, make_bundle, parse_bundle
from oracle.settlement.ports import Claim, OutRef
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import VerifiedClaim, stop_evidence_mismatch
from proofnet.messages.attestation import Attestation, StopClaim
from proofnet.messages.job_fault import JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import stopped_share
from proofnet.messages.stop_evidence import StopEvidence
from proofnet.messages.verification_fee import oracle_key_hash

ORACLES = tuple(SigningKey(bytes([i]) * 32) for i in range(1, 4))
DEPLOYMENT = OracleSet(
    frozenset(oracle_key_hash(bytes(k.verify_key).hex()) for k in ORACLES), threshold=2
)
AT_STOP = 2  # of 6 segments: paid 3 (2 committed + the grace), half the price
SHARE = PRICE // 2


def _spec(seed: int | None = None) -> JobSpec:
    data = job_spec(seed=seed).model_dump(mode="python")
    data["proof"] = {
        "steps_per_checkpoint": 10,
        "schedule": {"steps": 60, "dataset_size": 128, "batch_size": 16},
    }
    return JobSpec.from_dict(data)


def _verdict(key: SigningKey, job_id: str, nonce: str, attempt: int = 1) -> JobFaultVerdict:
    return JobFaultVerdict.sign(
        key,
        job_id=job_id,
        nonce=nonce,
        attempt=attempt,
        reason="job_not_replayable",
        message="the two replays of segment 1 disagree",
        prefix_root="ab" * 32,
    )


def _honest() -> tuple[World, Attestation, StopEvidence]:
    world = make_world(spec=_spec())
    att = world.variant(amount=SHARE, stop=StopClaim(segments=AT_STOP))
    evidence = StopEvidence(
        spec=world.spec.canonical_bytes().decode(),
        segments=AT_STOP,
        verdicts=tuple(_verdict(k, world.job_id, att.nonce) for k in ORACLES[:2]),
    )
    return world, att, evidence


def _audited(world: World, att: Attestation, evidence: StopEvidence | None) -> list[str]:
    """The kinds the audit flags for `att` paid beside `evidence`, read from bundle bytes."""
    claim = Claim(
        attestation_id=1,
        escrow=OutRef(att.domain.escrow.tx_id, att.domain.escrow.index),
        leaf_hash=att.leaf_hash(),
        cose=world.sign(att),
        amount=att.amount,
        payout_address=att.payout_address,
        job_id=att.job_id,
        worker_key=att.worker_key,
        stop=evidence,
    )
    body = make_bundle([claim]).body
    (published,) = bundle_stop_evidence(body, 1)
    assert published == evidence
    return [d.kind for d in stopped_payout_problems(att, published, DEPLOYMENT)]


def test_a_stopped_lease_paid_its_share_beside_its_evidence_audits_ok() -> None:
    world, att, evidence = _honest()
    assert stopped_share(world.spec, PRICE, 1, AT_STOP) == SHARE
    assert _audited(world, att, evidence) == []
    # Less than the share (a rate card's metered price, a proof short of the grace) is fine.
    assert _audited(world, world.variant(amount=SHARE - 1, stop=att.stop), evidence) == []


def _tampered(case: str) -> tuple[World, Attestation, StopEvidence | None]:
    world, att, evidence = _honest()
    other_job = _spec(seed=7).job_id
    changes: dict[str, Any] = {
        # The quorum pays the stopped lease the whole price.
        "share_inflated": {"att": world.variant(amount=PRICE, stop=att.stop)},
        # A "stopped" payout with no evidence at all.
        "evidence_missing": {"evidence": None},
        # Another job's spec (and verdicts), pasted beside this attestation.
        "another_jobs_evidence": {
            "evidence": StopEvidence(
                spec=_spec(seed=7).canonical_bytes().decode(),
                segments=AT_STOP,
                verdicts=tuple(_verdict(k, other_job, att.nonce) for k in ORACLES[:2]),
            )
        },
        # This job's spec, but the verdicts stopped another of its leases.
        "another_leases_verdicts": {
            "evidence": evidence.model_copy(
                update={
                    "verdicts": tuple(_verdict(k, world.job_id, "cd" * 32) for k in ORACLES[:2])
                }
            )
        },
        # A verdict whose text was changed after it was signed.
        "forged_verdict": {
            "evidence": evidence.model_copy(
                update={
                    "verdicts": (
                        evidence.verdicts[0],
                        evidence.verdicts[1].model_copy(update={"message": "edited"}),
                    )
                }
            )
        },
        # One oracle's word: short of the deployment's quorum of two.
        "one_oracle": {"evidence": evidence.model_copy(update={"verdicts": evidence.verdicts[:1]})},
        # Signed by keys outside the deployment's oracle set.
        "outside_the_set": {
            "evidence": evidence.model_copy(
                update={
                    "verdicts": tuple(
                        _verdict(SigningKey.generate(), world.job_id, att.nonce) for _ in range(2)
                    )
                }
            )
        },
        # A later stop point than the attestation claims (more segments, more pay).
        "other_segments": {"evidence": evidence.model_copy(update={"segments": AT_STOP + 2})},
        # Evidence beside an attestation that claims no stop.
        "no_stop_claimed": {"att": world.variant(amount=SHARE)},
    }[case]
    return world, changes.get("att", att), changes.get("evidence", evidence)


@pytest.mark.parametrize(
    ("case", "kind"),
    [
        ("share_inflated", STOP_SHARE_EXCEEDED),
        ("evidence_missing", STOP_UNPROVEN),
        ("another_jobs_evidence", STOP_UNPROVEN),
        ("another_leases_verdicts", STOP_UNPROVEN),
        ("forged_verdict", STOP_UNPROVEN),
        ("one_oracle", STOP_UNPROVEN),
        ("outside_the_set", STOP_UNPROVEN),
        ("other_segments", STOP_UNPROVEN),
        ("no_stop_claimed", STOP_UNPROVEN),
    ],
)
def test_the_audit_flags_a_stopped_payout_its_evidence_does_not_back(case: str, kind: str) -> None:
    world, att, evidence = _tampered(case)
    assert _audited(world, att, evidence) == [kind]


def test_the_inflated_share_names_what_the_evidence_allows() -> None:
    world, att, evidence = _honest()
    (problem,) = stopped_payout_problems(
        world.variant(amount=PRICE, stop=att.stop), evidence, DEPLOYMENT
    )
    assert (problem.expected, problem.actual) == (SHARE, PRICE)


def test_a_bundle_with_stop_evidence_is_version_4_and_parses_back() -> None:
    world, att, evidence = _honest()
    claim = Claim(
        attestation_id=1,
        escrow=OutRef(att.domain.escrow.tx_id, att.domain.escrow.index),
        leaf_hash=att.leaf_hash(),
        cose=world.sign(att),
        amount=att.amount,
        payout_address=att.payout_address,
        stop=evidence,
    )
    bundle = make_bundle([claim])
    assert b'"version":4' in bundle.body and STOPS_VERSION == 4
    assert parse_bundle(bundle.body).stops == (evidence,)


def test_the_verified_rows_stop_evidence_reaches_the_published_bundle(tmp_path: Path) -> None:
    """What the oracle kept when it verified the stopped lease (`stop_evidence`) is what the
    engine's claim carries into the bundle."""
    _world, _att, evidence = _honest()
    db = oracle_engine(tmp_path)
    try:
        chain = FakeChain()
        ident = add_verified(db, chain.add_escrow())
        with Session(db) as session:
            row = session.get(AttestationRecord, ident)
            assert row is not None
            row.stop_evidence = evidence.to_json()
            session.add(row)
            session.commit()
        with Session(db) as session:
            (claim,) = AttestationQueue().payable(session, 10)
        assert claim.stop == evidence
        assert parse_bundle(make_bundle([claim]).body).stops == (evidence,)
    finally:
        db.dispose()


def test_a_cosigner_signs_a_stopped_share_only_beside_the_evidence_its_own_feed_shows() -> None:
    """The co-signer's side (`CoSigner.review`): the bundle must publish the stop's evidence
    beside an attestation that claims a stop, none beside one that does not, and the very
    evidence its own verification read."""
    world, att, evidence = _honest()
    ref = OutRef(att.domain.escrow.tx_id, att.domain.escrow.index)
    stopped = VerifiedClaim(ref, att.payout_address, att.amount, attestation=att, stop=evidence)
    assert stop_evidence_mismatch(stopped, evidence) is None
    assert "without the stop's evidence" in str(stop_evidence_mismatch(stopped, None))
    fewer = evidence.model_copy(update={"verdicts": evidence.verdicts[:1]})
    assert "own feed" in str(stop_evidence_mismatch(stopped, fewer))
    whole = world.variant(amount=SHARE)
    plain = VerifiedClaim(ref, whole.payout_address, whole.amount, attestation=whole)
    assert stop_evidence_mismatch(plain, None) is None
    assert "of no stop" in str(stop_evidence_mismatch(plain, evidence))
