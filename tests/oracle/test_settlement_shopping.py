"""Co-signer shopping (oracle/settlement/engine.py, proofnet/messages/segment_refusal.py),
played by a cheat and by a lying co-signer.

Co-signer A's own drawn verifier finds segments of an attestation that do not replay, and A
refuses the batch naming them, with its signed task and its verifier's signed report. A is
put on cooldown and co-signer B (whose draw missed) would sign the next batch. Before the
fix the proposer just asked B: a cheat was paid when the proposer's draw and any one
co-signer's missed it. Now the proposer holds the attestation and re-checks exactly the
named segments through its own verifier draw (`DisputeReferee`): a cheat is rejected and
never paid; an honest provider whose segments replay is paid (A's refusal is recorded as
unfounded), so one co-signer has no veto. A refusal whose evidence is not the refuser's
own is handled as before (no re-check spent on it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import make_world
from settlement_fixtures import FakeBuilder, FakeChain, add_verified, oracle_engine, statuses
from sqlmodel import Session

from oracle.models import AttestationRecord
from oracle.settlement.engine import BatchPolicy, SettlementEngine
from oracle.settlement.intents import IntentLog
from oracle.settlement.ports import Claim, OutRef, QuorumNotReached, Recheck
from oracle.settlement.queue import AttestationQueue
from oracle.settlement.quorum import IntakeReferee, IntakeVerifier, QuorumRefusal
from oracle.settlement.watcher import WatchConfig
from oracle.storage.fraud import FRAUD_REASONS
from oracle.verification.reasons import Reason
from oracle.verification.spotcheck import (
    FAILED_SEGMENTS,
    SpotCheckUnavailable,
    SpotCheckVerdict,
)
from oracle.verification.verifiers import with_refusal_evidence
from proofnet.messages.segment_refusal import SegmentRefusal, parse_refusals, refusal_problem
from proofnet.messages.verification import VerificationTask
from proofnet.messages.verification_fee import oracle_key_hash
from tests.proofnet.test_verification_messages import VERIFIER, _hex, report, task_fields

COSIGNER_A = SigningKey(bytes([0xA]) * 32)
A_HASH = oracle_key_hash(_hex(COSIGNER_A))
NAMED = (2, 4)


@pytest.fixture
def db(tmp_path: Path):  # type: ignore[no-untyped-def]
    engine = oracle_engine(tmp_path)
    yield engine
    engine.dispose()


def _refusal(claim: Claim, oracle: SigningKey = COSIGNER_A) -> SegmentRefusal:
    """What A's drawn verifier answered for the attestation: segments 2 and 4 failed."""
    task = VerificationTask.sign(
        oracle,
        **task_fields(attestation=claim.leaf_hash.hex(), job_id=claim.job_id, segments=[1, *NAMED]),
    )
    return SegmentRefusal(
        leaf_hash=claim.leaf_hash.hex(),
        segments=NAMED,
        task=task,
        report=report(task, VERIFIER, status="failed"),
    )


class ShoppingQuorum:
    """A (first asked) refuses any batch paying `refused`, naming its segments; then it is on
    cooldown and B, whose draw missed, signs whatever it is asked."""

    def __init__(self, builder: FakeBuilder, refused: OutRef, oracle: SigningKey) -> None:
        self.builder, self.refused, self.oracle = builder, refused, oracle
        self.a_cooling = False
        self.asked: list[list[str]] = []

    def witnesses(self, unsigned: Any, bundle_body: bytes) -> list[bytes]:
        escrows = [str(c.escrow) for c in unsigned.claims]
        self.asked.append(escrows)
        if not self.a_cooling and str(self.refused) in escrows:
            self.a_cooling = True
            (claim,) = [c for c in unsigned.claims if c.escrow == self.refused]
            raise QuorumNotReached(
                f"attestation for escrow {self.refused} rejected: segments {list(NAMED)}",
                disputed=(_refusal(claim, self.oracle),),
                refuser=A_HASH,
            )
        return [self.builder.witness(unsigned.tx_id), b"co-signer B"]


class ProposersOwnDraw:
    """The proposer's re-check of named segments by its own verifier draw: `outcome`."""

    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.asked: list[tuple[str, tuple[int, ...]]] = []

    def recheck(self, claim: Claim, segments: tuple[int, ...]) -> Recheck | None:
        self.asked.append((claim.leaf_hash.hex(), segments))
        return Recheck(self.outcome, "spot_check_failed" if self.outcome == "fails" else "")


def _world(
    db: Any, outcome: str | None, oracle: SigningKey = COSIGNER_A
) -> tuple[FakeChain, list[OutRef], list[int], ShoppingQuorum, SettlementEngine, Any]:
    chain = FakeChain()
    refs = [chain.add_escrow() for _ in range(3)]
    atts = [add_verified(db, ref, age_s=10 - i) for i, ref in enumerate(refs)]
    builder = FakeBuilder()
    quorum = ShoppingQuorum(builder, refs[1], oracle)
    referee = None if outcome is None else ProposersOwnDraw(outcome)
    engine = SettlementEngine(
        IntentLog(db, AttestationQueue()),
        chain,
        builder,
        signer=quorum,
        policy=BatchPolicy(batch_size=4, max_wait_s=0.0),
        watch=WatchConfig(confirmation_depth=1),
        proposer="test",
        referee=referee,
    )
    for _ in range(8):
        engine.tick()
        chain.produce_block()
    return chain, refs, atts, quorum, engine, referee


def _row(db: Any, ident: int) -> AttestationRecord:
    with Session(db) as session:
        row = session.get(AttestationRecord, ident)
        assert row is not None
        return row


def test_a_cheat_only_the_cosigners_draw_caught_is_rejected_not_shopped(db: Any) -> None:
    chain, refs, atts, quorum, engine, referee = _world(db, "fails")
    # The proposer replayed exactly the segments A named, through its own draw ...
    assert referee.asked == [(_row(db, atts[1]).leaf_hash, NAMED)]
    # ... found them failing, and rejected the attestation: B was never asked to pay it.
    cheat = _row(db, atts[1])
    assert (cheat.status, cheat.fault, cheat.reason) == (
        "rejected",
        "provider",
        "spot_check_failed",
    )
    assert cheat.reason in FRAUD_REASONS  # a fraud the provider's bond is slashed for
    assert all(str(refs[1]) not in asked for asked in quorum.asked[1:])
    assert str(refs[1]) not in chain.paid()
    final = statuses(db)
    assert final[atts[0]] == "settled" and final[atts[2]] == "settled", final


def test_without_the_recheck_the_cheat_is_paid_by_the_next_cosigner(db: Any) -> None:
    """The attack the re-check stops: refused by A, the cheat is paid once B is asked."""
    chain, refs, atts, _quorum, _engine, _referee = _world(db, None)
    assert statuses(db)[atts[1]] == "settled"
    assert str(refs[1]) in chain.paid()


def test_a_lying_cosigner_cannot_block_an_honest_provider(db: Any) -> None:
    """A names segments of an honest attestation; they replay in the proposer's own draw:
    the refusal is recorded as unfounded and B's signature pays the provider."""
    chain, refs, atts, _quorum, engine, referee = _world(db, "replays")
    leaf = _row(db, atts[1]).leaf_hash
    assert referee.asked == [(leaf, NAMED)]
    assert engine.unfounded == [(A_HASH, leaf, NAMED)]
    assert engine.disputes == {}
    assert all(status == "settled" for status in statuses(db).values())
    assert str(refs[1]) in chain.paid()


def test_a_refusal_whose_evidence_is_not_the_refusers_own_is_not_rechecked(db: Any) -> None:
    """Evidence signed by another oracle (an old task, a forged one) proves nothing about
    A's draw: no replay is spent on it; the batch is handled as any refusal."""
    _chain, _refs, atts, _quorum, engine, referee = _world(db, "fails", SigningKey.generate())
    assert referee.asked == [] and engine.disputes == {}
    assert statuses(db)[atts[1]] == "settled"  # as before the fix: B signed it


class CatchingDraw:
    """The co-signer's own drawn verifier: segments 2 and 4 replay to other weights, and its
    referee path ends at the provider's fault."""

    def check(self, att: Any, job: Any, segments: tuple[int, ...] | None = None) -> Any:
        task = VerificationTask.sign(
            COSIGNER_A,
            **task_fields(attestation=att.leaf_hash().hex(), job_id=att.job_id, segments=[1, 2, 4]),
        )
        first = SpotCheckVerdict(
            False, Reason.SPOT_CHECK_FAILED, "no replay", report={FAILED_SEGMENTS: list(NAMED)}
        )
        final = SpotCheckVerdict(False, Reason.SPOT_CHECK_FAILED, "refereed", fault="provider")
        return with_refusal_evidence(final, first, task, report(task, VERIFIER, status="failed"))


def test_a_cosigner_refusal_names_the_failed_segments_with_its_signed_evidence() -> None:
    """The co-signer's side: its refusal carries what the proposer re-checks, and the
    evidence holds for the refused attestation under the refuser's key (and survives the
    409 answer's JSON)."""
    world = make_world()
    cosigner = IntakeVerifier(world.context(spot_checker=CatchingDraw()))
    with pytest.raises(QuorumRefusal) as refused:
        cosigner.verify(world.sign())
    (named,) = parse_refusals([r.to_json() for r in refused.value.disputed])
    assert named.segments == NAMED
    leaf = world.attestation.leaf_hash().hex()
    assert named.leaf_hash == leaf
    where = {"leaf_hash": leaf, "job_id": world.job_id}
    assert refusal_problem(named, refuser_key_hashes={A_HASH}, **where) is None
    # Another co-signer's evidence, or evidence against another attestation, is none.
    assert refusal_problem(named, refuser_key_hashes={"0" * 56}, **where) is not None
    assert (
        refusal_problem(named, refuser_key_hashes={A_HASH}, leaf_hash="e" * 64, job_id=world.job_id)
        is not None
    )


class ProposersDraw:
    """The proposer's verifier spot checker, replaying named segments by a drawn verifier."""

    checks_named_segments = True

    def __init__(self, verdict: SpotCheckVerdict | None) -> None:
        self.verdict = verdict
        self.asked: list[tuple[int, ...] | None] = []

    def check(self, att: Any, job: Any, segments: tuple[int, ...] | None = None) -> Any:
        self.asked.append(segments)
        if self.verdict is None:
            raise SpotCheckUnavailable("waiting for verifier")
        return self.verdict


@pytest.mark.parametrize(
    ("verdict", "outcome"),
    [
        (
            SpotCheckVerdict(False, Reason.SPOT_CHECK_FAILED, "[2] no", fault="provider"),
            ("fails", "spot_check_failed"),
        ),
        # Refereed (two verifiers, the provider's sandbox): the fraud whose slash burns.
        (
            SpotCheckVerdict(False, Reason.REFEREED_REPLAY_FAILED, "[2] no", fault="provider"),
            ("fails", "refereed_replay_failed"),
        ),
        (SpotCheckVerdict(True, None, ""), ("replays", "")),
        # The job's code does not replay: not the provider's fault, so no rejection here.
        (
            SpotCheckVerdict(False, Reason.JOB_NOT_REPLAYABLE, "nondeterministic", fault="job"),
            ("replays", ""),
        ),
        (None, None),  # no verifier answered yet: asked again next tick
    ],
    ids=["fails", "refereed_fails", "replays", "job_fault", "pending"],
)
def test_the_proposer_replays_exactly_the_named_segments_by_its_own_draw(
    verdict: SpotCheckVerdict | None, outcome: tuple[str, str] | None
) -> None:
    world = make_world()
    draw = ProposersDraw(verdict)
    referee = IntakeReferee(world.context(spot_checker=draw))
    claim = Claim(
        attestation_id=1,
        escrow=OutRef(world.attestation.domain.escrow.tx_id, 0),
        leaf_hash=world.attestation.leaf_hash(),
        cose=world.sign(),
        amount=world.attestation.amount,
        payout_address=world.attestation.payout_address,
        job_id=world.job_id,
    )
    found = referee.recheck(claim, NAMED)
    assert (None if found is None else (found.outcome, found.reason)) == outcome
    assert draw.asked == [NAMED]


def test_an_oracle_that_would_run_job_code_itself_does_not_recheck() -> None:
    """A local replayer (the demo's) runs job code on the oracle: never used for this."""
    world = make_world()
    local = ProposersDraw(SpotCheckVerdict(True, None, ""))
    local.checks_named_segments = False
    claim = Claim(1, OutRef("ab" * 32, 0), world.attestation.leaf_hash(), world.sign(), 1, "")
    assert IntakeReferee(world.context(spot_checker=local)).recheck(claim, NAMED) == Recheck(
        "unchecked"
    )
    assert local.asked == []
