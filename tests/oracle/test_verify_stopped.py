"""A partial proof, played as a dishonest provider would (oracle/verification/proof_checks.py,
verify._check_amount): only a lease the oracle quorum stopped for the job's fault may attest
fewer segments than the schedule, and it is paid for the segments committed when it was
stopped (plus one grace segment) at most, however long it trained on after the stop.

The runs are real (numpy) harness runs of a 6-segment schedule, replayed by the local spot
checker as in test_verify_spotcheck; the stop is the API's feed saying so (`LeaseInfo.stop`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import PRICE, World, job_spec, make_world
from test_verify_spotcheck import check, honest, repo, schedule_of, world_for  # noqa: F401

from oracle.inputs.feed_values import LeaseStopInfo
from oracle.settlement.quorum import IntakeVerifier, QuorumRefusal
from oracle.verification.spotcheck import LocalSpotChecker
from oracle.verification.verify import Reason
from proofnet.messages.attestation import StopClaim
from proofnet.messages.job_fault import STOP_JOB_FAULT, JobFaultVerdict
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import segment_cap, stopped_share

SEGMENTS = 6


ORACLE = SigningKey(bytes(range(32)))


def _stopped(world: World, segments: int, reason: str = STOP_JOB_FAULT) -> None:
    lease = world.feed.jobs[world.job_id].lease
    assert lease is not None
    verdict = JobFaultVerdict.sign(
        ORACLE,
        job_id=world.job_id,
        nonce=lease.nonce,
        attempt=1,
        reason="job_not_replayable",
        message="the two replays of segment 1 disagree",
        prefix_root="ab" * 32,
    )
    stop = LeaseStopInfo(reason=reason, segments=segments, stopped_ms=0, verdicts=(verdict,))
    world.set_job(lease=replace(lease, stop=stop))


def _claiming(world: World, amount: int, stop: int | None = None) -> None:
    """The attestation claims `amount`, and the stop its lease's heartbeat answer told it
    (a stop for the job's fault), unless `stop` says which it claims."""
    lease = world.feed.jobs[world.job_id].lease
    told = None if lease is None or lease.stop is None or not lease.stop.job_fault else lease.stop
    segments = stop if stop is not None else (None if told is None else told.segments)
    claim = None if segments is None else StopClaim(segments=segments)
    world.attestation = world.variant(amount=amount, stop=claim)


def _partial(source: tuple[str, str], tmp_path: Path) -> tuple[World, LocalSpotChecker]:
    """A run that committed 3 of the 6 segments (stopped there), honest on each."""
    return world_for(source, tmp_path, schedule_of(15))


def test_a_partial_proof_of_a_stopped_lease_is_verified_and_paid_its_share(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    world, checker = _partial(repo, tmp_path)
    _stopped(world, 3)
    share = stopped_share(world.spec, PRICE, 1, 3, committed=3)
    assert share == segment_cap(world.spec, PRICE, 1, 3) == PRICE * 3 // SEGMENTS
    _claiming(world, share)
    result = check(world, checker)
    assert result.ok, result
    assert result.spot_check is not None and all(s <= 3 for s in result.spot_check.segments)
    # What its settlement publishes: the quorum's verdict, the spec, the segments at the stop.
    assert result.stop is not None and result.stop.segments == 3
    assert result.stop.job_id == world.job_id and result.stop.verdicts[0].oracle_key == (
        bytes(ORACLE.verify_key).hex()
    )


def test_an_attestation_claims_exactly_the_stop_its_lease_had(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    """A stop claimed by a lease not stopped (or at other segments), or a stopped lease's
    attestation that hides its stop (it would settle as a whole job's), is refused."""
    world, checker = _partial(repo, tmp_path)
    _claiming(world, PRICE * 3 // SEGMENTS, stop=3)
    assert check(world, checker).reason == Reason.STOP_CLAIM_MISMATCH
    _stopped(world, 3)
    _claiming(world, PRICE * 3 // SEGMENTS, stop=2)
    assert check(world, checker).reason == Reason.STOP_CLAIM_MISMATCH
    world.attestation = world.variant(amount=PRICE * 3 // SEGMENTS, stop=None)
    assert check(world, checker).reason == Reason.STOP_CLAIM_MISMATCH


@pytest.mark.parametrize(
    ("stop", "amount", "reason", "fragment"),
    [
        # No stop: a provider stopping where it likes cannot claim a truncated schedule.
        (None, PRICE * 3 // SEGMENTS, Reason.POT_SCHEDULE_MISMATCH, "commits 3 segments"),
        # A stop that was not for the job's fault is no licence for a partial proof.
        (("released", 3), PRICE * 3 // SEGMENTS, Reason.POT_SCHEDULE_MISMATCH, "commits 3"),
        # Stopped, but claiming the whole price for half the work.
        ((STOP_JOB_FAULT, 3), PRICE, Reason.AMOUNT_EXCEEDS_PRICE, "committed when the lease"),
        # A proof cut shorter than what the lease had committed at the stop.
        ((STOP_JOB_FAULT, 4), PRICE * 3 // SEGMENTS, Reason.POT_SCHEDULE_MISMATCH, "had committed"),
    ],
    ids=["no_stop", "stop_not_job_fault", "whole_price", "shorter_than_stop"],
)
def test_a_partial_proof_is_refused_unless_stopped_for_the_jobs_fault_and_paid_its_share(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
    stop: tuple[str, int] | None,
    amount: int,
    reason: Reason,
    fragment: str,
) -> None:
    world, checker = _partial(repo, tmp_path)
    if stop is not None:
        _stopped(world, stop[1], stop[0])
    _claiming(world, amount)
    result = check(world, checker)
    assert result.outcome == "rejected" and result.reason == reason, result
    assert fragment in result.message


def test_training_on_after_the_stop_is_paid_no_more_than_up_to_the_stop_and_grace(
    repo: tuple[str, str],  # noqa: F811
    tmp_path: Path,
) -> None:
    """The provider ignored the stop at segment 2 and trained all 6: the whole proof is
    valid, but it is paid for segments 1..3 (2 committed at the stop, 1 grace) at most."""
    world, checker = world_for(repo, tmp_path, honest)
    _stopped(world, 2)
    _claiming(world, PRICE)
    greedy = check(world, checker)
    assert greedy.reason == Reason.AMOUNT_EXCEEDS_PRICE, greedy
    _claiming(world, stopped_share(world.spec, PRICE, 1, 2))
    assert stopped_share(world.spec, PRICE, 1, 2) == PRICE * 3 // SEGMENTS
    assert check(world, checker).ok


def test_a_cosigner_re_checks_the_stopped_share_over_its_own_feed() -> None:
    """A co-signer re-runs the pipeline (`IntakeVerifier`) on the proposer's bundle: the
    stopped lease's share passes, the whole price for it is refused."""
    data = job_spec().model_dump(mode="python")
    data["proof"] = {
        "steps_per_checkpoint": 10,
        "schedule": {"steps": 60, "dataset_size": 128, "batch_size": 16},
    }
    world = make_world(spec=JobSpec.from_dict(data))
    _stopped(world, 2)
    share = stopped_share(world.spec, PRICE, 1, 2)
    cosigner = IntakeVerifier(world.context())
    _claiming(world, share)
    assert cosigner.verify(world.sign()).amount == share
    _claiming(world, PRICE)
    with pytest.raises(QuorumRefusal, match="amount_exceeds_price"):
        cosigner.verify(world.sign())
