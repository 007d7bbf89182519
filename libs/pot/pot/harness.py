"""The harness: trains a job's trainer with proof of training, and replays its segments.

Both directions go through `run_segment`: the steps of a segment, each on the data indices
the schedule and the data seed give it, in the trainer's `train_step`. Training commits a
checkpoint after every segment; a replay loads the committed checkpoint that opens a
segment, runs the same steps and compares what it reaches with the one that closes it. The
trainer never chooses its data, its step count or its checkpoints, and there is no replay
code of the job's own to disagree with its training code.

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
from pot.replay import ReplayReport, ReplayResult, compare, load_checkpoint
from pot.schedule import Schedule
from pot.seeds import BatchSampler
from pot.tensors import tensors_hash
from pot.trainer import TrainContext, Trainer

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


def train(trainer: Trainer, ctx: TrainContext, pot_dir: Path) -> Manifest:
    """Train the whole schedule from the trainer's initial state, committing a checkpoint
    after every segment into `pot_dir`; the manifest (its root is what the worker attests)."""
    schedule = ctx.schedule
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=ctx.data_seed
    )
    sampler = schedule.sampler(ctx.data_seed)

    def record(step: int, indices: np.ndarray, loss: float) -> None:
        recorder.record_step(indices, loss)

    recorder.start(trainer.state())
    for segment in range(1, schedule.segments + 1):
        run_segment(trainer, sampler, schedule.segment_steps(segment), record)
        recorder.commit(trainer.state())
    return recorder.finish(trainer.state())


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
    try:
        trainer.restore(state)
    except (ValueError, KeyError, TypeError) as exc:
        raise ProofError(f"checkpoint {at} does not load into the job's trainer: {exc}") from exc
    if tensors_hash(trainer.state().params) != prefix.leaves[at].weights:
        raise ProofError(
            f"checkpoint {at} does not load into the job's trainer: its weights after "
            "loading differ from the committed ones"
        )
    recorder = ProofOfTraining(
        pot_dir, steps_per_checkpoint=schedule.steps_per_checkpoint, data_seed=ctx.data_seed
    )
    for path in (weights_path, optimizer_path, rng_path):
        if prefix_dir.resolve() != pot_dir.resolve():
            shutil.copyfile(path(prefix_dir, at), path(pot_dir, at))
    recorder.resume(prefix, at, trainer.state())
    sampler = schedule.sampler(ctx.data_seed)

    def record(step: int, indices: np.ndarray, loss: float) -> None:
        recorder.record_step(indices, loss)

    for segment in range(at + 1, schedule.segments + 1):
        run_segment(trainer, sampler, schedule.segment_steps(segment), record)
        recorder.commit(trainer.state())
    return recorder.finish(trainer.state())


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
    check_structure(manifest, ctx.schedule, prefix=manifest_name == PREFIX_NAME)
    wanted = sorted(set(segments))
    if not wanted or wanted[0] < 1 or wanted[-1] > manifest.segments:
        raise ProofError(f"segments to replay must be within 1..{manifest.segments}: {segments}")
    initial = tensors_hash(trainer.state().params)
    sampler = ctx.schedule.sampler(ctx.data_seed)
    results: list[ReplayResult] = []
    for segment in wanted:
        start = load_checkpoint(pot_dir, manifest, segment - 1)
        end = load_checkpoint(pot_dir, manifest, segment)
        try:
            trainer.restore(start)
        except (ValueError, KeyError, TypeError) as exc:
            raise ProofError(
                f"checkpoint {segment - 1} does not load into the job's trainer: {exc}"
            ) from exc
        # A restore must be exact: replaying from anything else proves nothing.
        if tensors_hash(trainer.state().params) != manifest.leaves[segment - 1].weights:
            raise ProofError(
                f"checkpoint {segment - 1} does not load into the job's trainer: its weights "
                "after loading differ from the committed ones"
            )
        loss = run_segment(trainer, sampler, ctx.schedule.segment_steps(segment))
        results.append(compare(manifest, segment, trainer.state().params, start, end, loss))
    return ReplayReport(
        root=manifest.root,
        initial_weights_hash=initial,
        results=tuple(results),
        tolerance_ppm=tolerance_ppm,
    )
