"""A resumed lease's proof must keep the checkpoints it was handed.

The attack: the next provider of a lost long job "resumes" from a state the lost attempt
never committed (its own made-up history, or the handed leaves kept and training continued
from other weights). The oracle, told by the API where the lease resumed (checkpoint `at`
and the root of the lost attempt's leaves 0..`at`), refuses a proof whose leaves 0..`at`
are not those, and always replays the first segment the resumer trained.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from oracle_fixtures import make_world

from oracle.inputs.feed import FeedDataError, parse_job
from oracle.inputs.feed_values import ResumedFrom
from oracle.verification.proof_checks import ProofRejected, check_resumed_from
from oracle.verification.verify import Reason
from pot import harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.manifest import Manifest
from pot.schedule import Schedule
from pot.trainer import TrainContext

SCHEDULE = Schedule(total_steps=40, steps_per_checkpoint=10, dataset_size=128, batch_size=16)


def trained(job_dir: Path, seed: int) -> Manifest:
    ctx = TrainContext(
        mode="train",
        job_dir=job_dir,
        job_seed=seed,
        data_seed=5,
        schedule=SCHEDULE,
        config={"hidden": 4},
    )
    return harness.train(MLPTrainer(ctx), ctx, job_dir / "pot")


def handed(prefix: Manifest, at: int) -> ResumedFrom:
    root = Manifest(
        steps_per_checkpoint=prefix.steps_per_checkpoint,
        data_seed=prefix.data_seed,
        leaves=prefix.leaves[: at + 1],
    ).root
    return ResumedFrom(at=at, prefix_root=root)


def test_a_proof_that_keeps_the_handed_prefix_passes(tmp_path: Path) -> None:
    proof = trained(tmp_path / "a", seed=1)
    check_resumed_from(proof, handed(proof, 2))


def test_a_proof_resumed_from_a_checkpoint_nobody_committed_is_refused(tmp_path: Path) -> None:
    lost = trained(tmp_path / "lost", seed=1)
    # The resumer's own history (another initial state): its leaf 2 is not the handed one.
    forged = trained(tmp_path / "forged", seed=2)
    with pytest.raises(ProofRejected) as refused:
        check_resumed_from(forged, handed(lost, 2))
    assert refused.value.reason == Reason.POT_RESUME_MISMATCH
    assert "did not resume from the checkpoint it was handed" in refused.value.message


def test_a_resume_point_past_the_proof_proves_nothing(tmp_path: Path) -> None:
    proof = trained(tmp_path / "a", seed=1)
    with pytest.raises(ProofRejected, match="nothing after the resume point"):
        check_resumed_from(proof, handed(proof, 4))


def _feed(resume: Any) -> tuple[dict[str, Any], str]:
    world = make_world()
    job = world.feed.jobs[world.job_id]
    feed = {
        "job_id": world.job_id,
        "spec": job.spec.canonical_bytes().decode(),
        "status": "completed",
        "escrow": None,
        "lease": {
            "worker_key": "ab" * 32,
            "payout_address": "addr_test1xyz",
            "nonce": "00" * 16,
            "gpus": 1,
            "started_at": "2026-12-01T00:00:00+00:00",
            "completed_at": "2026-12-01T01:00:00+00:00",
            "attempt": 2,
            "gpu_models": None,
            "resume": resume,
        },
        "results": {},
    }
    return feed, world.job_id


def test_the_feed_carries_the_resume_point_and_refuses_a_malformed_one() -> None:
    feed, job_id = _feed({"at": 3, "prefix_root": "cd" * 32})
    lease = parse_job(feed, expected_job_id=job_id).lease
    assert lease is not None and lease.resumed == ResumedFrom(at=3, prefix_root="cd" * 32)
    feed, job_id = _feed(None)
    lease = parse_job(feed, expected_job_id=job_id).lease
    assert lease is not None and lease.resumed is None
    # An API that cannot read the prefix says so with a null root: never judged without it.
    for bad in ({"at": 3, "prefix_root": None}, {"at": -1, "prefix_root": "cd" * 32}, [3]):
        feed, job_id = _feed(bad)
        with pytest.raises(FeedDataError):
            parse_job(feed, expected_job_id=job_id)
