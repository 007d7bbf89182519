"""Spot checks: re-execute committed segments and compare with the next checkpoint.

The verifier (the oracle, or anyone with the job's image and proof directory) loads the
checkpoint that starts a segment, checks every file against the committed hashes, replays
the segment's steps on the committed data indices, and compares the result with the
checkpoint that ends it: bitwise hash equality on the same GPU model and image, otherwise
relative L2 distance under the job's tolerance.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worker.pot.indices import read_segment_indices
from worker.pot.manifest import (
    Manifest,
    ProofError,
    indices_path,
    optimizer_path,
    rng_path,
    state_hash,
    weights_path,
)
from worker.pot.recorder import Trainer, TrainingState
from worker.pot.seeds import select_spot_checks
from worker.pot.tensors import (
    TensorFormatError,
    decimal_string,
    l2_norm_of_difference,
    parse_decimal,
    read_tensors,
    relative_distance,
    tensors_hash,
)


@dataclass(frozen=True)
class ReplayResult:
    segment: int
    start_step: int
    end_step: int
    weights_hash: str  # of the replayed weights
    committed_weights_hash: str
    distance: float  # relative L2 distance to the committed checkpoint
    loss: str  # last loss seen in the replay
    committed_loss: str | None
    update_norm: float  # ||committed end - committed start||, recomputed from the files
    committed_update_norm: str | None

    @property
    def bitwise_match(self) -> bool:
        return self.weights_hash == self.committed_weights_hash

    def passes(self, tolerance_ppm: int = 0) -> bool:
        """Bitwise match, or (tolerance > 0) distance within tolerance_ppm / 1e6."""
        if self.bitwise_match:
            return True
        return tolerance_ppm > 0 and self.distance * 1_000_000 <= tolerance_ppm

    def norm_consistent(self, rel_tol: float = 1e-6) -> bool:
        """The committed update norm matches the checkpoints it claims to describe."""
        if self.committed_update_norm is None:
            return False
        claimed = float(parse_decimal(self.committed_update_norm))
        return math.isclose(claimed, self.update_norm, rel_tol=rel_tol, abs_tol=1e-12)

    def to_json(self) -> dict[str, object]:
        return {
            "segment": self.segment,
            "start_step": self.start_step,
            "end_step": self.end_step,
            "weights_hash": self.weights_hash,
            "committed_weights_hash": self.committed_weights_hash,
            "bitwise_match": self.bitwise_match,
            "distance": decimal_string(self.distance),
            "loss": self.loss,
            "committed_loss": self.committed_loss,
            "update_norm": decimal_string(self.update_norm),
            "committed_update_norm": self.committed_update_norm,
        }


def load_checkpoint(pot_dir: Path, manifest: Manifest, index: int) -> TrainingState:
    """Load checkpoint `index`, refusing files that differ from what leaf `index` commits."""
    if not 0 <= index < len(manifest.leaves):
        raise ProofError(f"checkpoint {index} does not exist (0..{len(manifest.leaves) - 1})")
    leaf = manifest.leaves[index]
    try:
        params, weights_digest = read_tensors(weights_path(pot_dir, index))
        optimizer, optim_digest = read_tensors(optimizer_path(pot_dir, index))
        rng_raw = rng_path(pot_dir, index).read_bytes()
    except (OSError, TensorFormatError) as exc:
        raise ProofError(f"checkpoint {index}: {exc}") from exc
    if weights_digest != leaf.weights:
        raise ProofError(f"checkpoint {index}: weights file does not match its commitment")
    if state_hash(optim_digest, rng_raw) != leaf.state:
        raise ProofError(f"checkpoint {index}: optimizer/RNG files do not match the commitment")
    try:
        rng = json.loads(rng_raw)
    except ValueError as exc:
        raise ProofError(f"checkpoint {index}: RNG file is not JSON") from exc
    return TrainingState(params=params, optimizer=optimizer, rng=rng)


def load_segment(pot_dir: Path, manifest: Manifest, segment: int) -> list[tuple[int, np.ndarray]]:
    """The committed (step, indices) list of `segment`, checked against its leaf."""
    if not 1 <= segment <= manifest.segments:
        raise ProofError(f"segment {segment} does not exist (1..{manifest.segments})")
    steps, digest = read_segment_indices(indices_path(pot_dir, segment))
    if digest != manifest.leaves[segment].data:
        raise ProofError(f"segment {segment}: data-index file does not match its commitment")
    start, end = manifest.leaves[segment - 1].step, manifest.leaves[segment].step
    if [s for s, _ in steps] != list(range(start + 1, end + 1)):
        raise ProofError(f"segment {segment}: steps are not {start + 1}..{end}")
    return steps


def replay_segment(
    pot_dir: Path,
    segment: int,
    trainer: Trainer,
    *,
    expected_root: str | None = None,
    manifest: Manifest | None = None,
    expected_indices: Callable[[int], np.ndarray] | None = None,
) -> ReplayResult:
    """Re-execute `segment` (1-based) from its starting checkpoint and compare.

    `expected_root` should be the attested root: the manifest on disk must match it.
    `expected_indices(step)`, when given, must reproduce the committed indices (it is the
    job's sampler seeded with the derived data seed), so a worker cannot choose its own data.
    Raises `ProofError` for missing or tampered files; a replay that merely disagrees is
    reported in the result (`passes`), not raised.
    """
    pot_dir = Path(pot_dir)
    if manifest is None:
        manifest = Manifest.load(pot_dir, expected_root=expected_root)
    elif expected_root is not None and manifest.root != expected_root:
        raise ProofError(f"manifest root {manifest.root} is not the attested root {expected_root}")
    steps = load_segment(pot_dir, manifest, segment)
    if expected_indices is not None:
        for step, indices in steps:
            if not np.array_equal(np.asarray(expected_indices(step), dtype=np.int64), indices):
                raise ProofError(f"step {step}: data indices do not follow the job's data seed")
    start_state = load_checkpoint(pot_dir, manifest, segment - 1)
    end_state = load_checkpoint(pot_dir, manifest, segment)

    trainer.restore(start_state)
    loss = math.nan
    for step, indices in steps:
        loss = trainer.train_step(step, indices)
    replayed = trainer.state().params

    leaf = manifest.leaves[segment]
    return ReplayResult(
        segment=segment,
        start_step=manifest.leaves[segment - 1].step,
        end_step=leaf.step,
        weights_hash=tensors_hash(replayed),
        committed_weights_hash=leaf.weights,
        distance=relative_distance(replayed, end_state.params),
        loss=decimal_string(loss),
        committed_loss=leaf.loss,
        update_norm=l2_norm_of_difference(end_state.params, start_state.params),
        committed_update_norm=leaf.update_norm,
    )


@dataclass(frozen=True)
class SpotCheckReport:
    root: str
    segments: tuple[int, ...]
    results: tuple[ReplayResult, ...]
    tolerance_ppm: int

    @property
    def passed(self) -> bool:
        return all(r.passes(self.tolerance_ppm) and r.norm_consistent() for r in self.results)

    def failures(self) -> list[ReplayResult]:
        return [
            r for r in self.results if not (r.passes(self.tolerance_ppm) and r.norm_consistent())
        ]


def spot_check(
    pot_dir: Path,
    trainer: Trainer,
    *,
    expected_root: str,
    seed: bytes,
    random_count: int,
    top: int = 2,
    tolerance_ppm: int = 0,
    expected_indices: Callable[[int], np.ndarray] | None = None,
    segments: Sequence[int] | None = None,
) -> SpotCheckReport:
    """Replay the top-`top` segments by committed update norm plus `random_count` random ones.

    `seed` must be chosen after the worker committed `expected_root` (see `select_spot_checks`).
    """
    manifest = Manifest.load(Path(pot_dir), expected_root=expected_root)
    chosen = (
        tuple(segments)
        if segments is not None
        else select_spot_checks(
            manifest.update_norms(), seed=seed, random_count=random_count, top=top
        )
    )
    results = tuple(
        replay_segment(pot_dir, s, trainer, manifest=manifest, expected_indices=expected_indices)
        for s in chosen
    )
    return SpotCheckReport(
        root=manifest.root, segments=chosen, results=results, tolerance_ppm=tolerance_ppm
    )
