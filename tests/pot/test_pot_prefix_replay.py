"""The early replay of a run still training (`python -m pot replay --prefix`): the first
segment replays from the committed prefix (`prefix.json`), which commits fewer segments
than the schedule; a prefix that commits more, none, or checkpoints off the schedule's
steps is refused, and a full replay still refuses a manifest that is only a prefix."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pot_fixtures import SCHEDULE, context, train_honest, with_leaves

from pot import Manifest, ProofError, harness
from pot.examples.numpy_mlp import MLPTrainer
from pot.manifest import PREFIX_NAME, optimizer_path, rng_path, weights_path


def _prefix_dir(tmp_path: Path, segments: int) -> tuple[Path, Manifest]:
    """What a run still training has uploaded: checkpoints 0..`segments` and its prefix."""
    full = train_honest(tmp_path / "run")
    pot_dir = tmp_path / "early" / "pot"
    pot_dir.mkdir(parents=True)
    for i in range(segments + 1):
        for path in (weights_path, optimizer_path, rng_path):
            shutil.copy(path(tmp_path / "run" / "pot", i), pot_dir)
    prefix = with_leaves(full, full.leaves[: segments + 1])
    prefix.save(pot_dir, name=PREFIX_NAME)
    return pot_dir, Manifest.load(pot_dir, name=PREFIX_NAME)


def _replay(pot_dir: Path, root: str, **kwargs: object) -> harness.ReplayReport:
    ctx = context(pot_dir.parent, mode="replay")
    return harness.replay(
        MLPTrainer(ctx),
        ctx,
        pot_dir,
        root=root,
        segments=[1],
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_first_segment_replays_from_a_committed_prefix(tmp_path: Path) -> None:
    pot_dir, prefix = _prefix_dir(tmp_path, 1)
    assert prefix.segments == 1 < SCHEDULE.segments
    report = _replay(pot_dir, prefix.root, manifest_name=PREFIX_NAME)
    assert report.passed and report.results[0].bitwise_match
    assert report.initial_weights_hash == prefix.leaves[0].weights
    # As a whole proof it is refused: it does not commit the schedule.
    prefix.save(pot_dir)
    with pytest.raises(ProofError, match="the schedule has 11"):
        _replay(pot_dir, prefix.root)


def test_a_prefix_off_the_schedule_is_refused(tmp_path: Path) -> None:
    pot_dir, prefix = _prefix_dir(tmp_path, 2)
    moved = prefix.leaves[1].__class__(**{**prefix.leaves[1].__dict__, "step": 49})
    shifted = with_leaves(prefix, (prefix.leaves[0], moved, prefix.leaves[2]))
    shifted.save(pot_dir, name=PREFIX_NAME)
    with pytest.raises(ProofError, match="not 50"):
        _replay(pot_dir, shifted.root, manifest_name=PREFIX_NAME)
    empty = with_leaves(prefix, prefix.leaves[:1])
    empty.save(pot_dir, name=PREFIX_NAME)
    with pytest.raises(ProofError, match="prefix commits 0 segments"):
        _replay(pot_dir, empty.root, manifest_name=PREFIX_NAME)
