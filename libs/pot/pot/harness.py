"""The harness: trains a job's trainer with proof of training, and replays its segments.

One code path in both directions: every segment is run by `_run_committed` (restore the
committed checkpoint that opens it, loaded from its files; check the restore is exact; run
its steps, each on the data indices the schedule and the data seed give it). Training
commits a checkpoint after every segment and opens the next one from it, read back from the
files it just wrote; a replay opens a segment from the provider's files and compares what it
reaches with the checkpoint that closes it. So a trainer sees the same calls, with the same
kind of values, whether it trains or replays: `state()` after it is built, then per segment
`restore`, `state`, the steps, `state`; its context carries no mode (`pot.trainer`). The
trainer never chooses its data, its step count or its checkpoints, and there is no replay
code of the job's own to disagree with its training code. (A trainer that cannot restore
its own checkpoints bit for bit fails on the provider, at the first segment, not on a
verifier.)

What the harness cannot hide from code in the same process is said in docs/protocol.md
("Verification"): the segments the process ran before, the files around it, the clock and
the machine. The verdict does not rest on the job's code being unable to tell.

The harness is the network's: the worker and verifiers run this library's copy, never one
a job image or repository ships (`pot.launch`).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from pot.manifest import (
    MANIFEST_NAME,
    PREFIX_NAME,
    Manifest,
    ProofError,
    optimizer_path,
    rng_path,
    weights_path,
)
from pot.recorder import ProofOfTraining
from pot.replay import ReplayReport, ReplayResult, compare, load_checkpoint, load_leaf
from pot.schedule import Schedule
from pot.seeds import BatchSampler
from pot.tensors import tensors_hash
from pot.trainer import Restorable, TrainContext, Trainer, TrainingState

StepHook = Callable[[int, np.ndarray, float], None]


def run_segment(
    trainer: Trainer, sampler: BatchSampler, steps: range, on_step: StepHook | None = None
) -> float:
    """Run `steps` (1-based) with the seed-derived indices of each; the last loss."""
    loss = math.nan
    for step in steps:
        indices = sampler.indices(step)
        loss = float(trainer.train_step(step, indices))
        if on_step is not None:
            on_step(step, indices, loss)
    return loss


def open_checkpoint(
    trainer: Restorable, state: TrainingState, committed_weights: str, index: int
) -> None:
    """Restore checkpoint `index` into the trainer and check the restore was exact (raises
    `ProofError`): running a segment from anything else proves nothing."""
    try:
        trainer.restore(state)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProofError(f"checkpoint {index} does not load into the job's trainer: {exc}") from exc
    if tensors_hash(trainer.state().params) != committed_weights:
        raise ProofError(
            f"checkpoint {index} does not load into the job's trainer: its weights after "
            "loading differ from the committed ones"
        )


def _run_committed(
    trainer: Trainer,
    sampler: BatchSampler,
    schedule: Schedule,
    segment: int,
    opening: TrainingState,
    opening_weights: str,
    on_step: StepHook | None = None,
) -> float:
    """Run `segment` from its opening checkpoint (loaded from its files): the one code path
    of training and replay."""
    open_checkpoint(trainer, opening, opening_weights, segment - 1)
    return run_segment(trainer, sampler, schedule.segment_steps(segment), on_step)


def _train_from(
    trainer: Trainer,
    ctx: TrainContext,
    recorder: ProofOfTraining,
    pot_dir: Path,
    first: int,
) -> Manifest:
    """Segments `first`.. of the schedule, each opened from the checkpoint the recorder
    committed before it (read back from its files), each committed after it."""
    schedule = ctx.schedule
    sampler = schedule.sampler(ctx.data_seed)

    def record(step: int, indices: np.ndarray, loss: float) -> None:
        recorder.record_step(indices, loss)

    for segment in range(first, schedule.segments + 1):
        leaf = recorder.leaves[segment - 1]  # waits for the checkpoint's files
        opening = load_leaf(pot_dir, leaf, segment - 1)
        _run_committed(trainer, sampler, schedule, segment, opening, leaf.weights, record)
        recorder.commit(trainer.state())
    return recorder.finish(trainer.state())


def train(trainer: Trainer, ctx: TrainContext, pot_dir: Path) -> Manifest:
    """Train the whole schedule from the trainer's initial state, committing a checkpoint
    after every segment into `pot_dir`; the manifest (its root is what the worker attests)."""
    pot_dir = Path(pot_dir)
    schedule = ctx.schedule
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=ctx.data_seed
    )
    recorder.start(trainer.state())
    return _train_from(trainer, ctx, recorder, pot_dir, 1)


def resume(
    trainer: Trainer, ctx: TrainContext, pot_dir: Path, prefix_dir: Path, *, at: int
) -> Manifest:
    """Continue a schedule another run committed up to checkpoint `at`, into `pot_dir`.

    `prefix_dir` holds what the lost run uploaded: its `prefix.json` (the committed
    leaves) and checkpoint `at`'s files. The checkpoint is loaded only if its files are the
    ones leaf `at` commits (a forged checkpoint raises `ProofError`), the trainer must
    restore it exactly, and segments `at`+1.. run on the prefix's seed-derived data order
    (`ctx.data_seed` must be the prefix's: the resumed run draws the batches the lost one
    would have). The manifest written keeps leaves 0..`at` as the prefix's, so it chains to
    it (`pot.manifest.check_resumed`); checkpoint `at`'s files are copied into `pot_dir` so
    segment `at`+1 can be replayed from this proof alone.
    """
    pot_dir, prefix_dir = Path(pot_dir), Path(prefix_dir)
    schedule = ctx.schedule
    prefix = Manifest.load(prefix_dir, name=PREFIX_NAME)
    if not 0 <= at < min(len(prefix.leaves), schedule.segments):
        raise ProofError(
            f"cannot resume at checkpoint {at}: the prefix commits 0..{prefix.segments}"
        )
    for i in range(at + 1):
        if prefix.leaves[i].step != schedule.leaf_step(i):
            raise ProofError(
                f"checkpoint {i} of the prefix is at step {prefix.leaves[i].step}, "
                f"not {schedule.leaf_step(i)}"
            )
    if prefix.steps_per_checkpoint != schedule.steps_per_checkpoint:
        raise ProofError("the prefix has another checkpoint interval than the schedule")
    if prefix.data_seed != ctx.data_seed:
        raise ProofError("the prefix was trained on another data order (data seed)")
    state = load_checkpoint(prefix_dir, prefix, at)
    # The checkpoint must load into the job's trainer before anything is recorded.
    open_checkpoint(trainer, state, prefix.leaves[at].weights, at)
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=ctx.data_seed
    )
    for path in (weights_path, optimizer_path, rng_path):
        if prefix_dir.resolve() != pot_dir.resolve():
            shutil.copyfile(path(prefix_dir, at), path(pot_dir, at))
    recorder.resume(prefix, at, trainer.state())
    return _train_from(trainer, ctx, recorder, pot_dir, at + 1)


def check_structure(manifest: Manifest, schedule: Schedule, *, prefix: bool = False) -> None:
    """The manifest has the schedule's segments (at least one of them, from the first, for a
    committed `prefix`), each ending at its step (raises `ProofError`): a replay runs the
    schedule's steps, never the manifest's."""
    if prefix:
        if not 1 <= manifest.segments <= schedule.segments:
            raise ProofError(
                f"the prefix commits {manifest.segments} segments; the schedule has "
                f"{schedule.segments}"
            )
    elif manifest.segments != schedule.segments:
        raise ProofError(
            f"the manifest commits {manifest.segments} segments; the schedule has "
            f"{schedule.segments}"
        )
    for i, leaf in enumerate(manifest.leaves):
        if leaf.step != schedule.leaf_step(i):
            raise ProofError(f"checkpoint {i} is at step {leaf.step}, not {schedule.leaf_step(i)}")


def replay(
    trainer: Trainer,
    ctx: TrainContext,
    pot_dir: Path,
    *,
    root: str,
    segments: Sequence[int],
    tolerance_ppm: int = 0,
    manifest_name: str = MANIFEST_NAME,
    partial: bool = False,
) -> ReplayReport:
    """Re-run `segments` (1-based) from their committed opening checkpoints.

    `manifest_name` is `PREFIX_NAME` to replay from the committed prefix of a run that is
    still training (the early replay of its first segment): the prefix may commit fewer
    segments than the schedule, never others.

    `root` is the attested root: the manifest in `pot_dir` must have it. Raises `ProofError`
    for a proof that cannot be replayed as committed (missing or tampered files, a
    checkpoint the job's trainer cannot load); a replay that merely disagrees is reported
    (`ReplayReport.failures`), not raised.
    """
    pot_dir = Path(pot_dir)
    manifest = Manifest.load(pot_dir, expected_root=root, name=manifest_name)
    # `partial`: the proof of a run stopped for its job's fault commits the schedule's first
    # segments only (the verifier's oracle accepts it for such a lease alone).
    check_structure(manifest, ctx.schedule, prefix=partial or manifest_name == PREFIX_NAME)
    wanted = sorted(set(segments))
    if not wanted or wanted[0] < 1 or wanted[-1] > manifest.segments:
        raise ProofError(f"segments to replay must be within 1..{manifest.segments}: {segments}")
    initial = tensors_hash(trainer.state().params)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    results: list[ReplayResult] = []
    for segment in wanted:
        start = load_checkpoint(pot_dir, manifest, segment - 1)
        end = load_checkpoint(pot_dir, manifest, segment)
        opening = manifest.leaves[segment - 1].weights
        loss = _run_committed(trainer, sampler, ctx.schedule, segment, start, opening)
        results.append(compare(manifest, segment, trainer.state().params, start, end, loss))
    return ReplayReport(
        root=manifest.root,
        initial_weights_hash=initial,
        results=tuple(results),
        tolerance_ppm=tolerance_ppm,
    )
