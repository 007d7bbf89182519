"""The schedule a spec declares, and the proofs that do not commit it: each cheat is caught by
`check_conformance` without running job code, and its honest twin passes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from pot_fixtures import DATA_SEED, SCHEDULE, forge, train_honest, with_leaves

from pot import Manifest, ProofOfTraining, ScheduleError, check_conformance, derive_schedule
from pot import conformance as kinds
from pot.schedule import MAX_SEGMENTS, Schedule
from pot.seeds import BatchSampler
from pot.trainer import TrainingState

BLANK = TrainingState(params={"w": np.zeros(3)})


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> Manifest:
    return train_honest(tmp_path_factory.mktemp("honest"))


def kind_of(manifest: Manifest, schedule: Schedule = SCHEDULE, seed: int = DATA_SEED) -> str | None:
    violation = check_conformance(manifest, schedule, seed)
    return None if violation is None else violation.kind


# --- deriving a schedule -----------------------------------------------------------------------


def test_steps_or_epochs_give_one_schedule() -> None:
    by_steps = derive_schedule(steps=520, dataset_size=512, batch_size=32, steps_per_checkpoint=50)
    assert by_steps == SCHEDULE
    assert (by_steps.segments, by_steps.steps_per_epoch) == (11, 16)
    by_epochs = derive_schedule(epochs=3, dataset_size=1000, batch_size=64, steps_per_checkpoint=10)
    # 15 full batches per epoch (the last partial batch is dropped).
    assert by_epochs.total_steps == 45 and by_epochs.segments == 5
    assert list(by_epochs.segment_steps(5)) == [41, 42, 43, 44, 45]
    assert [by_epochs.leaf_step(i) for i in range(6)] == [0, 10, 20, 30, 40, 45]


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"steps": 10, "epochs": 1}, "exactly one"),
        ({}, "exactly one"),
        ({"steps": 0}, "total_steps must be a positive"),
        ({"epochs": 1, "batch_size": 600}, "exceeds dataset_size"),
        ({"steps": 10, "batch_size": 0}, "batch_size must be a positive"),
        ({"steps": 10, "dataset_size": 2**29}, "exceeds"),
        ({"steps": MAX_SEGMENTS + 1, "steps_per_checkpoint": 1}, "raise steps_per_checkpoint"),
        ({"steps": 2**30, "steps_per_checkpoint": 2**20}, "draw more than"),
        ({"steps": True}, "positive integer"),
    ],
)
def test_schedules_no_one_could_train_or_check_are_refused(
    kwargs: dict[str, int], fragment: str
) -> None:
    base = {"dataset_size": 512, "batch_size": 32, "steps_per_checkpoint": 50}
    with pytest.raises(ScheduleError, match=fragment):
        derive_schedule(**{**base, **kwargs})


# --- the cheats, each with its honest twin -----------------------------------------------------


def test_the_honest_proof_follows_its_schedule(honest: Manifest) -> None:
    assert check_conformance(honest, SCHEDULE, DATA_SEED) is None
    # Its index commitments are exactly what the schedule recomputes from the seed.
    assert [leaf.data for leaf in honest.leaves[1:]] == list(SCHEDULE.index_commitments(DATA_SEED))


def test_zero_step_proof(tmp_path: Path) -> None:
    """Only the initial checkpoint: nothing trained, nothing for a spot check to find."""
    recorder = ProofOfTraining(tmp_path, steps_per_checkpoint=50, data_seed=DATA_SEED)
    recorder.start(BLANK)
    manifest = recorder.finish(BLANK)
    assert manifest.segments == 0
    violation = check_conformance(manifest, SCHEDULE, DATA_SEED)
    assert violation is not None and violation.kind == kinds.SEGMENT_COUNT
    assert "commits 0 segments" in violation.message and "has 11" in violation.message


def test_truncated_schedule(tmp_path: Path) -> None:
    """Five segments of eleven, honestly trained."""
    manifest = forge(tmp_path, steps=250)
    assert kind_of(manifest) == kinds.SEGMENT_COUNT
    # The twin: the same five segments are the whole schedule of a 250-step job.
    assert kind_of(manifest, replace(SCHEDULE, total_steps=250)) is None


def test_extra_segments(tmp_path: Path) -> None:
    """Segments padded on past the schedule (more steps billed than asked for)."""
    manifest = forge(tmp_path, steps=600)
    assert manifest.segments == 12
    assert kind_of(manifest) == kinds.SEGMENT_COUNT


def test_steps_out_of_order(honest: Manifest) -> None:
    """The right number of segments, but checkpoints not where the schedule puts them:
    two segments swapped, or a segment ending early."""
    leaves = list(honest.leaves)
    leaves[3], leaves[4] = leaves[4], leaves[3]
    assert kind_of(with_leaves(honest, leaves)) == kinds.STEP_ORDER
    early = list(honest.leaves)
    early[5] = replace(early[5], step=early[5].step - 1)
    violation = check_conformance(with_leaves(honest, early), SCHEDULE, DATA_SEED)
    assert violation is not None and violation.kind == kinds.STEP_ORDER
    assert "checkpoint 5 is at step 249" in violation.message


def test_wrong_data_order(tmp_path: Path) -> None:
    """Honest training, but on batches of the prover's choosing (another order)."""
    own = BatchSampler(DATA_SEED ^ 1, SCHEDULE.dataset_size, SCHEDULE.batch_size)
    manifest = forge(tmp_path, batches=own.indices)
    assert manifest.data_seed == DATA_SEED  # it claims the right seed...
    violation = check_conformance(manifest, SCHEDULE, DATA_SEED)
    assert violation is not None and violation.kind == kinds.DATA_ORDER  # ...but not its order
    assert "segment 1" in violation.message


def test_one_batch_swapped_is_enough(honest: Manifest, tmp_path: Path) -> None:
    sampler = BatchSampler(DATA_SEED, SCHEDULE.dataset_size, SCHEDULE.batch_size)

    def batches(step: int) -> np.ndarray:
        indices = sampler.indices(step)
        return indices[::-1].copy() if step == 333 else indices

    violation = check_conformance(forge(tmp_path, batches=batches), SCHEDULE, DATA_SEED)
    assert violation is not None and violation.kind == kinds.DATA_ORDER
    assert "segment 7" in violation.message


def test_wrong_data_seed_or_interval(honest: Manifest) -> None:
    assert kind_of(replace(honest, data_seed=DATA_SEED + 1)) == kinds.DATA_SEED
    assert kind_of(honest, seed=DATA_SEED + 1) == kinds.DATA_SEED
    assert kind_of(replace(honest, steps_per_checkpoint=25)) == kinds.CHECKPOINT_INTERVAL


def test_faked_segments_pass_conformance(tmp_path: Path) -> None:
    """Skipping the training of a segment but committing the right steps and batches is
    not visible here: that is what the random replays are for (test_pot_draws)."""
    assert kind_of(forge(tmp_path, faked={2, 5, 9})) is None
