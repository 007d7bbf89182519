"""Rate-card jobs: the oracle prices the attested GPU time itself, from the document the spec
names (served by the API, checked against the digest), and pays no more."""

from __future__ import annotations

from typing import Any

import pytest
from nacl.signing import SigningKey
from oracle_fixtures import World, make_world

from oracle.inputs.feed import FeedDataError, parse_job
from oracle.verification.metering import ProofTiming, proof_bound_ms
from oracle.verification.spotcheck import SpotCheckVerdict
from oracle.verification.verify import Reason, verify
from proofnet.messages.jobspec import JobSpec
from proofnet.messages.rate_card import RateCardDocument

H100 = "NVIDIA H100"  # what the fixture's attestation names
GPU_MS = 588_000  # the fixture's attested GPU time
MAX_AMOUNT = 1_000_000


def rate_card_spec(card: RateCardDocument, max_amount: int = MAX_AMOUNT) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://example.org/train.git", "commit": "c" * 40},
            "framework": "numpy",
            "image": "python@sha256:" + "d" * 64,
            "commands": [["python", "train.py"]],
            "resources": {
                "gpus": 1,
                "gpu_memory_mb": 1024,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 1024,
                "max_duration_s": 3600,
            },
            "results": [{"path": "metrics.json", "kind": "json"}],
            "pricing": {"kind": "rate_card", "rate_card": card.digest, "max_amount": max_amount},
            "seed": 11,
        }
    )


def rate_card_world(
    rates: dict[str, int], *, max_amount: int = MAX_AMOUNT, provider: SigningKey | None = None
) -> tuple[World, RateCardDocument]:
    """A completed rate-card job; the card is the worker's own unless `provider` is given."""
    worker = SigningKey.generate()
    card = RateCardDocument(
        provider=bytes((provider or worker).verify_key).hex(), ntx_per_gpu_hour=rates
    )
    world = make_world(spec=rate_card_spec(card, max_amount), worker=worker)
    world.set_job(rate_card=card)
    return world, card


def outcome(world: World, **changes: Any) -> tuple[str, Reason | None, str]:
    result = verify(world.sign(world.variant(**changes)), world.context())
    return result.outcome, result.reason, result.message


def test_claiming_the_metered_cost_verifies_and_a_unit_more_is_rejected() -> None:
    world, _ = rate_card_world({H100: 3_600_000, "NVIDIA L4": 360_000})  # 1 unit per GPU-ms
    assert outcome(world, amount=GPU_MS)[:2] == ("verified", None)
    status, reason, message = outcome(world, amount=GPU_MS + 1)
    assert (status, reason) == ("rejected", Reason.AMOUNT_EXCEEDS_PRICE)
    assert str(GPU_MS) in message
    # The rate is the attested GPU model's: the same time on an L4 costs a tenth.
    assert outcome(world, amount=GPU_MS // 10, gpu_model="NVIDIA L4")[0] == "verified"
    assert outcome(world, amount=GPU_MS // 10 + 1, gpu_model="NVIDIA L4")[1] == (
        Reason.AMOUNT_EXCEEDS_PRICE
    )


def test_metered_cost_rounds_up_to_whole_units() -> None:
    world, _ = rate_card_world({H100: 7})  # 7 units per GPU-hour: 588 s cost 1.14 units
    assert outcome(world, amount=2)[0] == "verified"
    assert outcome(world, amount=3)[1] == Reason.AMOUNT_EXCEEDS_PRICE


def test_the_cap_is_max_amount_when_the_metered_cost_is_higher() -> None:
    world, _ = rate_card_world({H100: 36_000_000})  # 10 units per GPU-ms: 5.88M > cap
    assert outcome(world, amount=MAX_AMOUNT)[0] == "verified"
    assert outcome(world, amount=MAX_AMOUNT + 1)[1] == Reason.AMOUNT_EXCEEDS_PRICE


def test_nothing_is_payable_off_the_card_or_under_another_providers_card() -> None:
    world, _ = rate_card_world({"NVIDIA L4": 360_000})
    status, reason, message = outcome(world, amount=1)
    assert (status, reason) == ("rejected", Reason.AMOUNT_EXCEEDS_PRICE)
    assert "no rate for 'NVIDIA H100'" in message
    world, _ = rate_card_world({H100: 3_600_000}, provider=SigningKey.generate())
    status, reason, message = outcome(world, amount=1)
    assert (status, reason) == ("rejected", Reason.AMOUNT_EXCEEDS_PRICE)
    assert "not of worker" in message


def test_a_feed_without_the_document_is_retried_not_paid() -> None:
    world, _ = rate_card_world({H100: 3_600_000})
    world.set_job(rate_card=None)
    status, reason, message = outcome(world, amount=GPU_MS)
    assert (status, reason) == ("retry", None) and "no rate card document" in message


def _feed(world: World, rate_card: Any) -> dict[str, Any]:
    job = world.feed.jobs[world.job_id]
    return {
        "job_id": world.job_id,
        "spec": job.spec.canonical_bytes().decode(),
        "status": "completed",
        "escrow": {"tx_id": world.escrow.tx_id, "index": world.escrow.index},
        "lease": None,
        "results": {},
        "rate_card": rate_card,
    }


def test_the_feed_document_must_be_the_one_the_spec_names() -> None:
    world, card = rate_card_world({H100: 3_600_000})
    parsed = parse_job(_feed(world, card.canonical_bytes().decode()), expected_job_id=world.job_id)
    assert parsed.rate_card == card
    # An API that serves other terms (here: higher rates) under the job is not believed.
    other = RateCardDocument(provider=card.provider, ntx_per_gpu_hour={H100: 36_000_000})
    with pytest.raises(FeedDataError, match="is not rate card"):
        parse_job(_feed(world, other.canonical_bytes().decode()), expected_job_id=world.job_id)
    with pytest.raises(FeedDataError, match="no rate card document"):
        parse_job(_feed(world, None), expected_job_id=world.job_id)
    # A fixed-price job carries none.
    fixed = make_world()
    plain = parse_job(_feed(fixed, None), expected_job_id=fixed.job_id)
    assert plain.rate_card is None


class TimedSpotCheck:
    """Stands in for the replay (its own tests replay real segments): passes and reports
    what it measured, as `LocalSpotChecker` does."""

    def __init__(self, timing: ProofTiming) -> None:
        self.timing = timing

    def check(self, att: Any, job: Any) -> SpotCheckVerdict:
        return SpotCheckVerdict(True, None, "replayed", timing=self.timing)


# 30 steps committed; the replay ran 5 of them in 5 s: 1 s per step. With slack 2 and a
# 60 s allowance the proof backs 30 x 1 s x 2 + 60 s = 120 s of GPU time on one GPU.
TIMING = ProofTiming(committed_steps=30, replayed_steps=5, replay_ms=5_000)
BOUND_MS = 120_000


def _metered(world: World, **changes: Any) -> tuple[str, Reason | None, str]:
    ctx = world.context(
        spot_checker=TimedSpotCheck(TIMING), metering_slack=2.0, metering_allowance_ms=60_000
    )
    result = verify(world.sign(world.variant(**changes)), ctx)
    return result.outcome, result.reason, result.message


def test_inflated_gpu_time_beyond_what_the_proof_backs_is_not_paid() -> None:
    """The attack: a worker that trained 30 short steps attests ten minutes of GPU time (an
    idle lease kept alive, or a count inflated) and prices it at its card's rate."""
    world, _ = rate_card_world({H100: 3_600_000})  # 1 unit per GPU-ms
    status, reason, message = _metered(world, amount=GPU_MS)
    assert (status, reason) == ("rejected", Reason.GPU_TIME_EXCEEDS_PROOF)
    assert f"backs at most {BOUND_MS}" in message and f"at most {BOUND_MS} is payable" in message
    # The same inflated time, but claiming only what the proof backs: paid.
    assert _metered(world, amount=BOUND_MS)[:2] == ("verified", None)
    assert _metered(world, amount=BOUND_MS + 1)[1] == Reason.GPU_TIME_EXCEEDS_PROOF


def test_gpu_time_within_what_the_proof_backs_is_paid_in_full() -> None:
    """The honest twin: attested time within the bound is paid at the card's rate."""
    world, _ = rate_card_world({H100: 3_600_000})
    assert _metered(world, gpu_milliseconds=100_000, amount=100_000)[:2] == ("verified", None)


def test_the_bound_scales_with_the_gpus_the_lease_held() -> None:
    assert proof_bound_ms(TIMING, gpus=4, slack=2.0, allowance_ms=60_000) == 4 * BOUND_MS
    assert (
        proof_bound_ms(
            ProofTiming(committed_steps=30, replayed_steps=0, replay_ms=0),
            gpus=1,
            slack=2.0,
            allowance_ms=0,
        )
        is None
    )


def test_the_replays_start_up_is_paid_once_not_per_step() -> None:
    """The attack: a provider pads its lease by the verifier's start-up share of each step.
    The old bound divided the replay's whole wall time (a 30 s container start-up included)
    by the few replayed steps, so every committed step carried a share of it. The verifier
    now also times segment 1 alone: the difference is the steps' time, the start-up is
    counted once."""
    # 30 s start-up; 600 steps replayed (100 of them segment 1) at 100 ms; 12,000 committed.
    timing = ProofTiming(
        committed_steps=12_000,
        replayed_steps=600,
        replay_ms=30_000 + 60_000,
        first_steps=100,
        first_ms=30_000 + 10_000,
    )
    assert timing.step_ms == 100 and timing.startup_ms == 30_000
    bound = proof_bound_ms(timing, gpus=1, slack=1.15, allowance_ms=60_000)
    assert bound == 12_000 * 100 * 1.15 + 30_000 + 60_000
    undifferenced = ProofTiming(committed_steps=12_000, replayed_steps=600, replay_ms=90_000)
    assert proof_bound_ms(undifferenced, gpus=1, slack=1.15, allowance_ms=60_000) > 2_100_000
    # A segment-1 run slower than the whole drawn run (job code that told them apart and
    # stalled it, to have its honest provider refused) is not used: the whole run's time,
    # which only overstates the step time, bounds it instead.
    slowed = ProofTiming(
        committed_steps=12_000,
        replayed_steps=600,
        replay_ms=90_000,
        first_steps=100,
        first_ms=400_000,
    )
    assert slowed.step_ms == 150 and slowed.startup_ms == 0


def test_a_rate_is_paid_only_for_a_model_whose_gpus_passed_their_checks() -> None:
    """The attack: a worker whose only checked GPUs are L4s (its H100 failed the API's
    challenge, or never took it) runs a rate-card job and attests it as an H100, to be paid
    the H100 rate of a card published while the H100 still passed."""
    world, _ = rate_card_world({H100: 3_600_000, "NVIDIA L4": 360_000})
    world.set_lease(gpu_models=("NVIDIA L4",))
    status, reason, message = outcome(world, amount=GPU_MS)
    assert (status, reason) == ("rejected", Reason.GPU_MODEL_UNCHECKED)
    assert "'NVIDIA L4'" in message
    # The honest twin: attested as what it ran on, at that model's rate.
    assert outcome(world, amount=GPU_MS // 10, gpu_model="NVIDIA L4")[:2] == ("verified", None)
    # A lease made on checked H100s is paid the H100 rate.
    world.set_lease(gpu_models=("NVIDIA H100", "NVIDIA L4"))
    assert outcome(world, amount=GPU_MS)[:2] == ("verified", None)
