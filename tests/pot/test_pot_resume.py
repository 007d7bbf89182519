"""A long run whose provider is lost resumes on another from the last committed checkpoint:
the lost run's `prefix.json` and checkpoint files are what it uploaded, the resumed run
continues the same seed-derived data order and its proof chains to the prefix. The attacks:
a provider that resumes from a checkpoint the lost run did not commit (forged files, a
forged prefix, another data order) is refused."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pot_fixtures import (
    CONFIG,
    DATA_SEED,
    NONCE,
    SCHEDULE,
    SEED,
    context,
    new_trainer,
    replay,
    train_honest,
)

from pot import Manifest, ProofError, check_resumed, cli, harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.manifest import (
    PREFIX_NAME,
    optimizer_path,
    rng_path,
    weights_path,
)
from pot.recorder import ProofOfTraining
from pot.tensors import write_tensors

LOST_AFTER = 4  # the lost provider committed checkpoints 0..4, then its lease ended


def lost_run(job_dir: Path, segments: int = LOST_AFTER) -> Path:
    """A provider trains `segments` segments and is lost (no finish, no manifest); returns
    the dir of what it uploaded as it went: prefix.json and every checkpoint's files."""
    trainer = new_trainer(job_dir)
    pot_dir = job_dir / "pot"
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=SCHEDULE.steps_per_checkpoint, data_seed=DATA_SEED
    )
    sampler = SCHEDULE.sampler(DATA_SEED)
    recorder.start(trainer.state())
    for segment in range(1, segments + 1):
        harness.run_segment(
            trainer,
            sampler,
            SCHEDULE.segment_steps(segment),
            lambda _s, idx, loss: recorder.record_step(idx, loss),
        )
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits until the last checkpoint is on disk
    uploaded = job_dir / "uploaded"
    shutil.copytree(pot_dir, uploaded)
    return uploaded


def resume_run(job_dir: Path, prefix_dir: Path, at: int = LOST_AFTER) -> Manifest:
    ctx = context(job_dir)
    return harness.resume(MLPTrainer(ctx), ctx, job_dir / "pot", prefix_dir, at=at)


@pytest.fixture(scope="module")
def uploaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lost_run(tmp_path_factory.mktemp("lost"))


def test_the_recorder_keeps_the_committed_prefix_on_disk(uploaded: Path) -> None:
    prefix = Manifest.load(uploaded, name=PREFIX_NAME)
    assert prefix.segments == LOST_AFTER
    assert [leaf.step for leaf in prefix.leaves] == [SCHEDULE.leaf_step(i) for i in range(5)]
    assert not (uploaded / "manifest.json").exists()


def test_a_resumed_run_proves_the_same_schedule_as_one_uninterrupted_run(
    uploaded: Path, tmp_path: Path
) -> None:
    prefix = Manifest.load(uploaded, name=PREFIX_NAME)
    resumed = resume_run(tmp_path / "next", uploaded)
    check_resumed(resumed, prefix, LOST_AFTER)
    assert resumed.leaves[: LOST_AFTER + 1] == prefix.leaves
    assert resumed.segments == SCHEDULE.segments
    # The same seed-derived data order from the same state: bit for bit the honest proof.
    assert resumed.root == train_honest(tmp_path / "whole").root
    # The resumed proof alone replays its first resumed segment (checkpoint 4 was copied).
    report = replay(tmp_path / "next" / "pot", resumed, [LOST_AFTER + 1, SCHEDULE.segments])
    assert report.passed


def test_resuming_from_forged_checkpoint_files_is_refused(uploaded: Path, tmp_path: Path) -> None:
    forged = tmp_path / "forged"
    shutil.copytree(uploaded, forged)
    trainer = new_trainer(tmp_path)
    params = {name: np.array(a, copy=True) for name, a in trainer.state().params.items()}
    params["W1"] += 0.01  # weights the lost provider never committed
    write_tensors(weights_path(forged, LOST_AFTER), params)
    with pytest.raises(ProofError, match="weights file does not match"):
        resume_run(tmp_path / "next", forged)
    # Its optimizer or RNG state swapped for another checkpoint's: refused as well.
    shutil.copyfile(weights_path(uploaded, LOST_AFTER), weights_path(forged, LOST_AFTER))
    shutil.copyfile(optimizer_path(uploaded, 1), optimizer_path(forged, LOST_AFTER))
    shutil.copyfile(rng_path(uploaded, 1), rng_path(forged, LOST_AFTER))
    with pytest.raises(ProofError, match="optimizer/RNG"):
        resume_run(tmp_path / "again", forged)


def test_a_proof_resumed_from_a_forged_prefix_does_not_chain_to_the_committed_one(
    uploaded: Path, tmp_path: Path
) -> None:
    """The cheater rewrites the prefix itself (self-consistent files and leaves for a
    checkpoint of its own) and resumes from that: the resumed proof's leaf 4 is not the
    lost provider's committed one, so the check against the committed prefix refuses it."""
    committed = Manifest.load(uploaded, name=PREFIX_NAME)
    cheat_job = tmp_path / "cheat"
    trainer = new_trainer(cheat_job)
    recorder = ProofOfTraining(
        cheat_job / "pot", steps_per_checkpoint=SCHEDULE.steps_per_checkpoint, data_seed=DATA_SEED
    )
    recorder.start(trainer.state())
    # Skips the training of segments 1..4: only the checkpoint steps, with a nudge.
    for segment in range(1, LOST_AFTER + 1):
        trainer.params["W1"] += 1e-3
        for step in SCHEDULE.segment_steps(segment):
            recorder.record_step(SCHEDULE.sampler(DATA_SEED).indices(step), 1.0)
        recorder.commit(trainer.state())
    recorder.leaves  # noqa: B018 - waits for the writes
    resumed = resume_run(tmp_path / "next", cheat_job / "pot")
    with pytest.raises(ProofError, match="not the committed prefix's"):
        check_resumed(resumed, committed, LOST_AFTER)
    # Claiming to resume at another checkpoint than the one handed out is refused too.
    honest = resume_run(tmp_path / "honest", uploaded)
    check_resumed(honest, committed, LOST_AFTER)
    with pytest.raises(ProofError):
        check_resumed(replace(honest, data_seed=DATA_SEED + 1), committed, LOST_AFTER)
    with pytest.raises(ProofError, match="not in the prefix"):
        check_resumed(honest, committed, LOST_AFTER + 1)
    # The step index too: checkpoint LOST_AFTER is at the schedule's step for it, and a
    # resume claimed at another step (another schedule) is not the checkpoint handed out.
    at_step = SCHEDULE.leaf_step(LOST_AFTER)
    check_resumed(honest, committed, LOST_AFTER, step=at_step)
    with pytest.raises(ProofError, match=f"is at step {at_step}, not {at_step + 1}"):
        check_resumed(honest, committed, LOST_AFTER, step=at_step + 1)


def test_resuming_on_another_data_order_is_refused(uploaded: Path, tmp_path: Path) -> None:
    ctx = context(tmp_path, nonce=b"another claim nonce")
    with pytest.raises(ProofError, match="another data order"):
        harness.resume(MLPTrainer(ctx), ctx, tmp_path / "pot", uploaded, at=LOST_AFTER)


def test_the_recorder_refuses_a_state_that_is_not_the_committed_checkpoint(
    uploaded: Path, tmp_path: Path
) -> None:
    prefix = Manifest.load(uploaded, name=PREFIX_NAME)
    recorder = ProofOfTraining(
        tmp_path / "pot", steps_per_checkpoint=SCHEDULE.steps_per_checkpoint, data_seed=DATA_SEED
    )
    with pytest.raises(ProofError, match="not checkpoint 4"):
        recorder.resume(prefix, LOST_AFTER, new_trainer(tmp_path).state())


def test_the_harness_cli_resumes_a_lost_run(uploaded: Path, tmp_path: Path) -> None:
    """`python -m pot train --resume-from DIR --resume-at J`: what the worker runs for a
    claim that resumes; a forged prefix dir is refused with the proof exit code."""
    flags = [
        "train",
        "--job-dir",
        str(tmp_path / "next"),
        "--code-dir",
        str(tmp_path),
        "--trainer",
        "pot.examples.numpy_mlp:MLPTrainer",
        "--config",
        json.dumps(CONFIG),
        "--seed",
        str(SEED),
        "--nonce",
        NONCE.hex(),
        "--steps",
        str(SCHEDULE.total_steps),
        "--dataset-size",
        str(SCHEDULE.dataset_size),
        "--batch-size",
        str(SCHEDULE.batch_size),
        "--k",
        str(SCHEDULE.steps_per_checkpoint),
    ]
    assert cli.main([*flags, "--resume-from", str(uploaded)]) == cli.EXIT_USAGE
    assert cli.main([*flags, "--resume-from", str(uploaded), "--resume-at", "4"]) == 0
    resumed = Manifest.load(tmp_path / "next" / "pot")
    check_resumed(resumed, Manifest.load(uploaded, name=PREFIX_NAME), LOST_AFTER)
    assert resumed.root == train_honest(tmp_path / "whole").root

    forged = tmp_path / "forged"
    shutil.copytree(uploaded, forged)
    shutil.copyfile(weights_path(uploaded, 3), weights_path(forged, LOST_AFTER))
    flags[2] = str(tmp_path / "again")
    assert cli.main([*flags, "--resume-from", str(forged), "--resume-at", "4"]) == cli.EXIT_PROOF
