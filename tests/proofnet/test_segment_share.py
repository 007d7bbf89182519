"""A resumed attempt's share of the job's price (`proofnet.messages.segment_share`): the
segments it proved out of the schedule's, rounded down, so two attempts' shares never sum
past the price; a rate-card attempt's metered price is capped by its share of the cap."""

from __future__ import annotations

from typing import Any

from proofnet.messages.jobspec import JobSpec
from proofnet.messages.segment_share import (
    STOP_GRACE_SEGMENTS,
    segment_cap,
    stopped_last,
    stopped_share,
)


def spec(pricing: dict[str, Any], *, steps: int = 60, every: int = 10) -> JobSpec:
    return JobSpec.from_dict(
        {
            "model": {"repo_url": "https://git.example.test/mlp.git", "commit": "a" * 40},
            "framework": "numpy",
            "image": "proofnet/test@sha256:" + "e" * 64,
            "commands": [],
            "resources": {
                "gpus": 0,
                "gpu_memory_mb": 0,
                "cpus": 1,
                "ram_mb": 1024,
                "disk_mb": 100,
                "max_duration_s": 60,
            },
            "results": [{"path": "pot/**", "kind": "model"}],
            "pricing": pricing,
            "seed": 5,
            "proof": {
                "trainer": "mlp:MLPTrainer",
                "steps_per_checkpoint": every,
                "schedule": {"steps": steps, "dataset_size": 128, "batch_size": 16},
            },
        }
    )


def test_shares_of_disjoint_segments_never_sum_past_the_price() -> None:
    fixed = spec({"kind": "fixed", "amount": 1_000_001})
    assert segment_cap(fixed, 1_000_001, 1) == 1_000_001  # all 6 segments: the price
    for at in range(1, 6):
        lost = segment_cap(fixed, 1_000_001, 1, at)
        resumed = segment_cap(fixed, 1_000_001, at + 1)
        assert resumed == 1_000_001 * (6 - at) // 6
        assert lost + resumed <= 1_000_001
    # Three attempts: 1..2, 3..4, 5..6.
    parts = [segment_cap(fixed, 1_000_001, a, b) for a, b in ((1, 2), (3, 4), (5, None))]
    assert sum(parts) <= 1_000_001 and all(p == 1_000_001 // 3 for p in parts)
    assert segment_cap(fixed, 1_000_001, 7) == 0  # proved nothing of the schedule


def test_a_rate_card_attempt_keeps_its_metered_price_within_its_share_of_the_cap() -> None:
    card = spec({"kind": "rate_card", "rate_card": "sha256:" + "c" * 64, "max_amount": 600})
    assert segment_cap(card, 50, 4) == 50  # metered below its share (300): as metered
    assert segment_cap(card, 600, 4) == 300  # metered at the cap: its half of it


def test_a_spec_without_a_schedule_pays_only_a_whole_run() -> None:
    """No schedule, no segments: a part of a run is worth nothing, never the price."""
    data = spec({"kind": "fixed", "amount": 1000}).model_dump(mode="python")
    data["proof"] = {"steps_per_checkpoint": 10}
    data["commands"] = [["python", "train.py"]]
    plain = JobSpec.from_dict(data)
    assert plain.schedule is None
    assert segment_cap(plain, 1000, 1) == 1000
    assert segment_cap(plain, 1000, 3) == 0 and segment_cap(plain, 1000, 1, 2) == 0


def test_a_stopped_lease_is_paid_for_its_committed_segments_and_one_grace_at_most() -> None:
    """Stopped for the job's fault with 2 of 6 segments committed: paid for what its proof
    commits, never past the 2 committed at the stop plus 1 grace, however far it trained."""
    fixed = spec({"kind": "fixed", "amount": 600_000})
    assert stopped_share(fixed, 600_000, 1, 2, committed=2) == 200_000
    assert stopped_share(fixed, 600_000, 1, 2, committed=3) == 300_000  # the grace segment
    assert stopped_share(fixed, 600_000, 1, 2, committed=6) == 300_000  # trained on: no more
    assert stopped_share(fixed, 600_000, 1, 2) == 300_000  # the oracle's cap
    assert stopped_last(2) == 2 + STOP_GRACE_SEGMENTS == 3
    # A rate card: its metered GPU time, within the stopped segments' share of the cap.
    card = spec({"kind": "rate_card", "rate_card": "sha256:" + "c" * 64, "max_amount": 600})
    assert stopped_share(card, 50, 1, 2) == 50  # metered below the share: as metered
    assert stopped_share(card, 600, 1, 2) == 300  # metered at the cap: 3 of 6 segments of it
